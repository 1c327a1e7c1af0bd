"""Atomic file writes: a reader never sees half a digest, a failed write keeps the old file.

Published files get the modes of any other new file (0644 under the usual umask 022),
so a web server can read them.
"""

from __future__ import annotations

import filecmp
import glob
import io
import os
import pwd
import re
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from pipeline.errors import DigestError


def write_atomic(path: Path, text: str) -> Path:
    """Write to a temporary file in the same folder, fsync, then rename over `path`."""
    with atomic(path) as handle:
        handle.write(text)
    return path


@contextmanager
def atomic(path: Path) -> Iterator[TextIO]:
    """A text handle on a temporary file beside `path` that replaces `path` (fsynced) when
    the block ends, and is removed if it fails: for output written piece by piece."""
    with _draft(path) as (handle, _):
        yield handle


@contextmanager
def streamed_if_changed(path: Path, changed: list[Path]) -> Iterator[TextIO]:
    """write_if_changed for a file written piece by piece (a page of 10,000 papers): the
    draft beside `path` replaces it only when its bytes differ, and then `path` joins
    `changed`; else the draft goes (never copied: an export can be 200 MB)."""
    with _draft(path) as (handle, same):
        yield handle
        same.append(True)
    if not same:
        changed.append(path)


@contextmanager
def _draft(path: Path) -> Iterator[tuple[TextIO, list[bool]]]:
    """(handle on a temporary file beside `path`, a list): when the block ends the file
    replaces `path` (fsynced), unless the list holds True and the file's bytes are
    `path`'s (then it goes, and the list stays True); on failure it goes.

    What is there and is no regular file (`-o /dev/null`, `/dev/stdout`, a FIFO) is written
    to, not replaced: the rename put a regular file in /dev/null's place. A link to a file
    stays a link: its file is replaced."""
    tmp_name, block = None, False
    try:
        if path.exists() and not path.is_file():
            with _text(_Named(path, "w", str(path))) as stream:
                block = True
                yield stream, []
            return
        path = path.resolve() if path.is_symlink() else path
        path.parent.mkdir(parents=True, exist_ok=True)
        clear_killed_writes(path.parent, path.name)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp",
                                        dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide published files
        skip: list[bool] = []
        with _text(_Named(fd, "w", str(path))) as handle:
            block = True
            yield handle, skip
            block = False
            handle.flush()
            if skip and path.is_file() and filecmp.cmp(tmp_name, path, shallow=False):
                return
            skip.clear()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
        tmp_name = None
        _fsync_dir(path.parent)
    except OSError as exc:  # the draft is made in, and renamed within, the folder: its owner says why
        if block:  # the writer's own failure (a spool in TMPDIR), not this file's: its writes name it
            raise
        raise DigestError(f"{path}: cannot write: {exc.strerror or exc}",
                          not_yours(path.parent) if isinstance(exc, PermissionError) else None) from None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


@contextmanager
def onto_stdout() -> Iterator[None]:
    """Writes to stdout in the block: one that fails (stdout a file on a full disk, as in
    `export > refs.bib` or cron's `>> run.log`) is one line naming that file, as a failed
    write_atomic is. A reader that closed a pipe (BrokenPipeError) is the CLI's to end quietly."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        try:
            where = f"{os.readlink(f'/proc/self/fd/{sys.stdout.fileno()}')} (stdout)"
        except (OSError, ValueError):  # no /proc, or no real stdout
            where = "stdout"
        raise DigestError(f"{where}: cannot write: {exc.strerror or exc}") from None


class _Named(io.FileIO):
    """A file whose failed writes name `what`: a block that writes two files (an export and
    a spool in TMPDIR) must not blame one for the other's full disk."""

    def __init__(self, file: int | Path, mode: str, what: str, hint: str | None = None):
        super().__init__(file, mode)
        self.what, self.hint = what, hint

    def write(self, data: Any, /) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            raise DigestError(f"{self.what}: cannot write: {exc.strerror or exc}", self.hint) from None


def _text(raw: _Named) -> TextIO:
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", newline="\n")


def spool(path: Path) -> BinaryIO:
    """A spool file of a build (read and written, in a spool_folder): a write that fails
    names TMPDIR, where it is."""
    return io.BufferedRandom(_Named(path, "w+", str(path.parent.parent),
                                    "the run keeps its spool files there: free space, or set TMPDIR"))


def unwritable(folder: Path, key: str, target: str = "a folder") -> str | None:
    """Why no file can be written in `folder`, the config's `key` (or the folder made, where
    it is not yet): one line naming both, and what to set `key` to; None when one can. An
    unnamed file is made and dropped in it (or the nearest folder above it there is), so a
    read-only mount, a file in the way, permissions or an immutable folder answer as a run's
    first write would."""
    folder = there = folder.absolute()
    try:
        there = next(p for p in (folder, *folder.parents) if p.exists())
        if not there.is_dir():
            why = f"{'' if there == folder else f'{there} '}is a file, not a folder"
        else:
            with tempfile.TemporaryFile(dir=there):
                return None
    except OSError as exc:
        why = f"cannot write{'' if there == folder else f' in {there} to make it'}: {exc.strerror or exc}"
        if there == folder and isinstance(exc, PermissionError) and (theirs := not_yours(folder)):
            return f"{key}: {folder}: {why}; {theirs}"
    return f"{key}: {folder}: {why}; set {key} to {target} this user can write"


def cannot_write(path: Path) -> str | None:
    """Why this user cannot write the file `path`, or make a file beside it (where SQLite
    keeps a database's WAL files): a read-only mount, permissions, an immutable folder; None
    when it can do both. The file is never opened: closing a second descriptor of a database
    would drop the locks SQLite holds on it in this process."""
    try:
        if os.statvfs(path if path.exists() else path.parent).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
        if path.exists() and not os.access(path, os.W_OK):
            theirs = not_yours(path)
            return f"this user cannot write it{f'; {theirs}' if theirs else ''}"
        tempfile.TemporaryFile(dir=path.parent).close()
    except OSError as exc:
        theirs = not_yours(path.parent) if isinstance(exc, PermissionError) else None
        return f"no file can be made in {path.parent}: {exc.strerror}{f'; {theirs}' if theirs else ''}"
    return None


def not_yours(path: Path) -> str | None:
    """When `path`, else its folder (where this user cannot see `path`), belongs to another
    user (state/ made by a first run under sudo, then cron runs as yourself; a lock file
    another user made): whose it is, for an error's hint; None when it is this user's, or
    neither can be seen."""
    there = next((p for p in (path, path.parent) if _owner(p) is not None), None)
    uid = None if there is None else _owner(there)
    if uid is None or uid == os.geteuid():
        return None
    me, owner = _user(os.geteuid()), _user(uid)
    made = " (made by a run under sudo?)" if uid == 0 else ""
    return (f"{'it' if there == path and not there.is_dir() else there} belongs to {owner}{made}, "
            f"and this runs as {me}: "
            f"chown it to {me}, or run as {owner}")


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:  # not there, or in a folder this user cannot enter
        return None


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def write_if_changed(path: Path, text: str) -> bool:
    """Write `path` only when its text differs from what is on disk (a weekly run then
    rewrites only the pages that changed, and their dates say so); True when it wrote."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    write_atomic(path, text)
    return True


def move_if_changed(source: Path, path: Path) -> bool:
    """Put `source` (a finished file on the same file system) in place of `path` unless
    their bytes are the same (then `source` just goes); True when `path` changed."""
    if path.is_file() and filecmp.cmp(source, path, shallow=False):
        source.unlink()
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, path)
    _fsync_dir(path.parent)
    return True


def clear_killed_writes(folder: Path, name: str | None = None) -> None:
    """Remove half-written copies of `name` (None: of any file) in `folder` whose writer is
    gone (a kill -9 during fsync).

    The writer's pid is in the name (.NAME.PID.XXXXXXXX.tmp), so a live writer's file (a
    second scheduler writing its heartbeat at the same moment) is left alone.
    """
    for stale in folder.glob(f".{glob.escape(name) if name else '*'}.*.tmp"):
        pid = stale.name.rsplit(".", 3)[1]
        if pid.isdigit() and not _alive(int(pid)):
            stale.unlink(missing_ok=True)


def spool_folder(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A folder in TMPDIR for a build's spools, named PREFIX + HOST.PID.XXXXXXXX; first the
    folders of PREFIX that a process of this machine left when it was killed (kill -9, so it
    could not remove them) go: this user's, their pid gone. Another machine's or container's
    (another host name in it) and a live process's are left alone."""
    host = socket.gethostname()
    for stale in Path(tempfile.gettempdir()).glob(f"{glob.escape(prefix + host)}.*"):
        pid = re.fullmatch(r"(\d+)\.\w+", stale.name[len(prefix + host) + 1:])
        try:
            if pid and not _alive(int(pid[1])) and not stale.is_symlink() and stale.is_dir() \
                    and stale.stat().st_uid == os.getuid():
                shutil.rmtree(stale, ignore_errors=True)
        except OSError:
            pass  # gone meanwhile, or not ours to read
    return tempfile.TemporaryDirectory(prefix=f"{prefix}{host}.{os.getpid()}.")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _umask() -> int:
    """The process umask (reading it means setting it; set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (POSIX); harmless where unsupported."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
