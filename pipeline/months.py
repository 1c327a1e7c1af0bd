"""The reading list's months as the last build left them, so a weekly run renders only
the months that changed.

A month's fingerprint hashes what its entries are made of (the stored rows read as text,
their seed entries, what else the pages show of them) and what every page depends on
(the code, pylatexenc's version, the templates, the settings). A month whose fingerprint is the last build's
is replayed instead of rendered: its small pieces (table rows, one-line entries, search
records) from its file under `.rl-digest-cache/`, its full entries and export records as
byte ranges of the pages and exports the last build wrote. Those files and the pieces
must be as that build left them (size and modification time), else every month is
rendered again; the ledger is removed when a build starts and written when it ends, so a
build that fails halfway leaves none and the next one renders everything.

A build that renders many entries (the first one, or after an upgrade or a template
change) uses a second core: a `Helper` process renders the older months into a folder of
its own under `.rl-digest-cache/`, and the build replays them from there (`Ledger.adopt`)
as it would replay a last build's months.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pylatexenc  # its version (its tables are imported on first use)

from pipeline.config import bundled
from pipeline.deliver.files import move_if_changed, write_atomic
from pipeline.errors import DigestError

FOLDER = ".rl-digest-cache"  # under outputs.dir: not part of the site, not published
LEDGER = "months.json"
FORMAT = 2  # of the ledger and piece files
HELPER = "helper"  # under FOLDER: the helper process's outputs.dir


def inputs(parts: Iterable[object], templates: Path | None) -> str:
    """What every page depends on besides its entries: the code that renders them, the
    libraries that write their text (pylatexenc: TeX in a title read as text, BibTeX's
    special characters), the built-in and the user's templates, and `parts` (the settings
    each writer names)."""
    digest = hashlib.blake2b(repr((FORMAT, pylatexenc.__version__, *parts)).encode(), digest_size=16)
    for folder in (Path(__file__).parent, bundled("templates"), *([templates] if templates else [])):
        for path in sorted(folder.rglob("*")) if folder.is_dir() else ():
            if path.is_file() and path.suffix != ".pyc":
                digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class Fingerprints:
    """Each month's fingerprint and entry count, fed one entry's makings at a time."""

    def __init__(self) -> None:
        self.hashes: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def add(self, month: str, stored: bytes, *makings: object) -> None:
        """An entry of `month`: `stored` (its stored row) and what else it is made of."""
        digest = self.hashes.get(month)
        if digest is None:
            digest = self.hashes[month] = hashlib.blake2b(digest_size=16)
        digest.update(stored + b"\x00" + repr(makings).encode() + b"\x00")
        self.counts[month] = self.counts.get(month, 0) + 1

    def of(self) -> dict[str, str]:
        return {month: digest.hexdigest() for month, digest in self.hashes.items()}


class Ledger:
    """The last build's months (fingerprint, byte ranges) and the files the ranges point into."""

    def __init__(self, out: Path, key: str):
        self.out, self.folder, self.key = out, out / FOLDER, key
        self.months: dict[str, dict[str, Any]] = {}  # this build's, saved by `save`
        self.last = self._load()
        self._open: dict[str, int] = {}
        self.source: Path | None = None  # the helper's outputs.dir, once adopted

    def adopt(self, source: Path) -> None:
        """Replay from the build a helper left in `source` (its own outputs.dir), not from
        the last build here: its months' pieces are moved into this cache, and names of
        files under outputs.dir are read from their copies under `source`."""
        self.last, self.source = json.loads((source / FOLDER / LEDGER).read_text(encoding="utf-8")), source
        for month in self.last["months"]:
            os.replace(source / FOLDER / _name(month), self.folder / _name(month))

    def _from(self, name: str | Path) -> Path:
        """Where the build being replayed left the file this build calls `name`."""
        path = Path(name)
        return self.source / path.relative_to(self.out) if self.source else path

    def place(self, path: Path) -> bool:
        """A replayed month's file (its Markdown file, its web page), kept as the build being
        replayed wrote it: a helper's copy is moved into place. True when its bytes changed."""
        return move_if_changed(self._from(path), path) if self.source else False

    def _load(self) -> dict[str, Any]:
        """The last build's ledger if its inputs are this build's and its files are as it
        left them; it is removed either way (a build that fails halfway leaves none)."""
        path = self.folder / LEDGER
        try:
            last = json.loads(path.read_text(encoding="utf-8"))
            path.unlink()
        except (OSError, ValueError):
            return {}
        if not isinstance(last, dict) or last.get("key") != self.key:
            return {}
        for name, (size, mtime) in last.get("files", {}).items():
            try:
                stat = os.stat(name)
            except OSError:
                return {}
            if (stat.st_size, stat.st_mtime_ns) != (size, mtime):
                return {}
        return last

    def reusable(self, fingerprints: dict[str, str]) -> set[str]:
        """The months whose fingerprint is the last build's."""
        old = self.last.get("months", {})
        return {month for month, fp in fingerprints.items() if month and old.get(month, {}).get("fp") == fp}

    def ranges(self, month: str) -> list[Any]:
        return self.last["months"][month]["ranges"]

    def notes(self) -> list[Any]:
        return self.last["notes"]

    def pieces(self, month: str) -> list[Any]:
        return json.loads((self.folder / _name(month)).read_text(encoding="utf-8"))

    def read(self, name: str, start: int, end: int) -> bytes:
        """Bytes of a file the last build wrote, opened before this build replaces it."""
        fd = self._open.get(name)
        if fd is None:
            fd = self._open[name] = os.open(self._from(name), os.O_RDONLY)
        return os.pread(fd, end - start, start)

    def keep(self, month: str, fingerprint: str, ranges: list[Any], pieces: list[Any] | None) -> None:
        """This build's record of a month; `pieces` when it was rendered (else they are kept).
        A month met twice (entries out of the list's order) is never replayed."""
        self.months[month] = {"fp": "" if month in self.months else fingerprint, "ranges": ranges}
        if pieces is not None:
            write_atomic(self.folder / _name(month), json.dumps(pieces, ensure_ascii=False))

    def save(self, sinks: Sequence[Any]) -> None:
        """Write the ledger once every sink's files are in place; drop the pieces of months gone."""
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()
        for path in self.folder.glob("*.json"):
            if path.name != LEDGER and path.stem not in {_stem(m) for m in self.months}:
                path.unlink(missing_ok=True)
        pieces = [self.folder / _name(month) for month in self.months]
        stats = {str(path): [path.stat().st_size, path.stat().st_mtime_ns]
                 for path in [*pieces, *(path for sink in sinks for path in sink.sources())]}
        notes = [sink.note() for sink in sinks]
        write_atomic(self.folder / LEDGER, json.dumps(
            {"key": self.key, "files": stats, "notes": notes, "months": self.months}, ensure_ascii=False))


def _stem(month: str) -> str:
    return month or "undated"


def _name(month: str) -> str:
    return f"{_stem(month)}.json"


def order(months: Iterable[str]) -> list[str]:
    """Newest month first, undated ("") last: the reading list's order."""
    return sorted(months, reverse=True)


def merged(fresh: Iterable[tuple[str, Iterator[Any]]], replayed: Iterable[str]
           ) -> Iterator[tuple[str, Iterator[Any] | None]]:
    """The months in the list's order: (month, its entries) for those rendered, (month,
    None) for those replayed."""
    pending = order(replayed)
    for month, group in fresh:
        while pending and pending[0] > month:
            yield pending.pop(0), None
        yield month, group
    yield from ((month, None) for month in pending)


class Helper:
    """A second process that renders some months into a folder of its own while this one
    renders the rest (a forked copy of this one: no pickling, nothing imported again).
    Use as a context manager: a helper still running when the block ends is stopped.

    The scheduler forks it from a pool's thread, and Python 3.12 warns of any fork of a
    process with threads (a DeprecationWarning): the child keeps for good any lock another
    thread held at that instant. The fork stays because the helper takes none of them: the
    scheduler's other threads wait while a publish runs (its other jobs find the run lock
    held and end, the heartbeat writes its file), the helper opens its own connections,
    logs nothing and ends with os._exit, and CPython resets the locks it owns (the GIL, the
    import lock, logging's). What is left is a C library's lock (SQLite's, a stream's) held
    outside the GIL at that very instant by a collect or outbox fire that found the run
    lock held (a millisecond or so a fire). A forkserver or spawned helper starts 0.6 to
    1.3 s later (its imports, the store opened again, each sink rebuilt): a 10,000-entry
    first build took 5.0 s, not 4.1 s forked and 5.4 s with no helper. "fork" is named, so
    Python 3.14's new default (forkserver) changes nothing here."""

    def __init__(self, out: Path, work: Callable[[Path], None]):
        """`work(folder)` builds the helper's months with `folder` as its outputs.dir."""
        self.folder = out / FOLDER / HELPER
        shutil.rmtree(self.folder, ignore_errors=True)  # a killed build's
        self.folder.mkdir(parents=True)
        context = multiprocessing.get_context("fork")
        self._result, sender = context.Pipe(duplex=False)
        self.process = context.Process(target=_help, args=(work, self.folder, sender, os.getpid()),
                                       daemon=True)
        self.process.start()
        sender.close()

    def __enter__(self) -> Helper:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        shutil.rmtree(self.folder, ignore_errors=True)

    def join(self) -> Path:
        """Wait for the helper; the folder it built, or a DigestError saying why it failed."""
        try:
            failed = self._result.recv()
        except EOFError:  # it died without a word (killed, out of memory)
            failed = None
        self.process.join()
        if failed or self.process.exitcode:
            why = failed or f"it ended with exit status {self.process.exitcode}"
            raise DigestError(f"the second process rendering the older months failed: {why}")
        return self.folder

    @staticmethod
    def usable() -> bool:
        """A second core to run on, and fork to start it."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return cores > 1 and "fork" in multiprocessing.get_all_start_methods()


def _help(work: Callable[[Path], None], folder: Path, sender: Any, parent: int) -> None:
    """The helper process: do the work, send None or the one line that says what failed,
    and end at once. The exit hooks a forked copy holds are its parent's: a thread pool's
    (the scheduler runs each publish on one) joined the pool's threads, the very one this
    process was forked from among them, and the helper ended with status 1, its work done."""
    _end_with(parent)
    for kind in (signal.SIGTERM, signal.SIGINT):  # a stop of the process group is the parent's to
        signal.signal(kind, signal.SIG_IGN)  # handle (once, not twice); its death ends this one
    code = 0
    try:
        work(folder)
        sender.send(None)
    except BaseException as exc:  # every failure goes back to the parent as one line
        sender.send(" ".join(str(exc).split()) or type(exc).__name__)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _end_with(parent: int) -> None:
    """The helper is killed when its parent dies (Linux's parent-death signal): a run killed
    with kill -9 left it rendering on, for minutes on a large list, holding the run lock it
    inherited (a PostgreSQL session: the next command was refused with exit 75 while the
    holder was dead) and writing into the folder the next build's helper uses. Elsewhere
    (no prctl) it still ends when its work does."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)
