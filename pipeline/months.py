"""The reading list's months as the last build left them, so a weekly run renders only
the months that changed.

A month's fingerprint hashes what its entries are made of (the stored rows read as text,
their seed entries, what else the pages show of them) and what every page depends on
(the code, the templates, the settings). A month whose fingerprint is the last build's
is replayed instead of rendered: its small pieces (table rows, one-line entries, search
records) from its file under `.rl-digest-cache/`, its full entries and export records as
byte ranges of the pages and exports the last build wrote. Those files and the pieces
must be as that build left them (size and modification time), else every month is
rendered again; the ledger is removed when a build starts and written when it ends, so a
build that fails halfway leaves none and the next one renders everything.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pipeline.config import bundled
from pipeline.deliver.files import write_atomic

FOLDER = ".rl-digest-cache"  # under outputs.dir: not part of the site, not published
LEDGER = "months.json"
FORMAT = 2  # of the ledger and piece files


def inputs(parts: Iterable[object], templates: Path | None) -> str:
    """What every page depends on besides its entries: the code that renders them, the
    built-in and the user's templates, and `parts` (the settings each writer names)."""
    digest = hashlib.blake2b(repr((FORMAT, *parts)).encode(), digest_size=16)
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
        self.folder, self.key = out / FOLDER, key
        self.months: dict[str, dict] = {}  # this build's, saved by `save`
        self.last = self._load()
        self._open: dict[str, int] = {}

    def _load(self) -> dict:
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
            fd = self._open[name] = os.open(name, os.O_RDONLY)
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


def merged(fresh: Iterable[tuple[str, Iterator]], replayed: Iterable[str]
           ) -> Iterator[tuple[str, Iterator | None]]:
    """The months in the list's order: (month, its entries) for those rendered, (month,
    None) for those replayed."""
    pending = order(replayed)
    for month, group in fresh:
        while pending and pending[0] > month:
            yield pending.pop(0), None
        yield month, group
    yield from ((month, None) for month in pending)
