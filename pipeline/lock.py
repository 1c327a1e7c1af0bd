"""One process at a time per state folder: cron runs and the scheduler never overlap."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock

from pipeline.config import Config, sqlite_file
from pipeline.errors import DigestError, LockedError


def lock_path(config: Config) -> Path:
    """Next to the SQLite file; for a server database, in the config's state/ folder."""
    db = sqlite_file(config.storage.url)
    if db is not None:
        return db.with_name(db.name + ".lock")
    root = config.path.parent if config.path else Path.cwd()
    return root / "state" / "rl-digest.lock"


@contextmanager
def held(config: Config) -> Iterator[Path]:
    path = lock_path(config)
    lock = filelock.FileLock(str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=0)
    except filelock.Timeout:
        raise LockedError(f"another rl-digest run holds {_short(path, config)}") from None
    except OSError as exc:
        raise DigestError(f"{path}: cannot take the run lock: {exc.strerror or exc}") from None
    try:
        yield path
    finally:
        lock.release()


def _short(path: Path, config: Config) -> str:
    """state/digest.sqlite3.lock when it sits beside the config, else the full path."""
    root = config.path.parent if config.path else Path.cwd()
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
