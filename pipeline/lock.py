"""One process at a time per database: cron runs and schedulers never overlap, even on
two machines sharing one PostgreSQL database."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import filelock

from pipeline.config import Config, sqlite_file
from pipeline.deliver import files
from pipeline.errors import ConfigError, DigestError, LockedError

if TYPE_CHECKING:  # the healthcheck reads lock_path and alive: no SQLAlchemy for it (heartbeat.py)
    from pipeline import store

log = logging.getLogger(__name__)

RUN_LOCK = 0x726C6467  # "rldg": the PostgreSQL advisory lock key of a run


def lock_path(config: Config) -> Path:
    """In lock.dir when set (a service whose config folder is read-only); else next to the
    SQLite file, or for a server database in the config's state/ folder."""
    db = sqlite_file(config.storage.url)
    name = db.name + ".lock" if db is not None else "rl-digest.lock"
    if config.lock.dir is not None:
        return config.lock.dir / name
    if db is not None:
        return db.with_name(name)
    root = config.path.parent if config.path else Path.cwd()
    return root / "state" / name


@contextmanager
def held(config: Config) -> Iterator[None]:
    """Hold the run lock: a PostgreSQL advisory lock when the store is PostgreSQL; else a
    lock file, with who holds it (pid, start) written beside it for the next run."""
    from pipeline import store_connect

    if store_connect.backend(config.storage.url) == "postgresql":
        with _advisory(config):
            yield
        return
    path = lock_path(config)
    lock = _take(path, "run lock", lambda: _locked(path, config))
    holder = _holder_path(path)
    try:
        holder.write_text(f"{os.getpid()} {datetime.now(UTC).isoformat(timespec='seconds')}\n",
                          encoding="utf-8")
    except OSError:
        pass  # only a nicer message for the next run; the lock itself holds
    try:
        yield
    finally:
        holder.unlink(missing_ok=True)
        lock.release()


def is_held(config: Config, db: store.Store) -> bool:
    """Whether a live process holds the run lock, found without taking it (taking it, even
    for a moment, could turn a run that starts then away with exit 75): the server's list
    of advisory locks, or the pid the holder wrote beside the lock file."""
    import sqlalchemy as sa

    if db.engine.dialect.name == "postgresql":  # this database's lock, not another install's
        held_now = sa.text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                           "AND classid = 0 AND objid = :key AND objsubid = 1 AND database = "
                           "(SELECT oid FROM pg_database WHERE datname = current_database())")
        with db.engine.connect() as conn:
            return bool(conn.execute(held_now, {"key": RUN_LOCK}).scalar())
    try:
        pid = int(_holder_path(lock_path(config)).read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return False  # no holder written
    return alive(pid)


def alive(pid: int) -> bool:
    """Whether a process with this pid runs on this machine."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # alive, as another user
    except (OSError, OverflowError):
        return False
    return True


def scheduler_path(config: Config) -> Path:
    return lock_path(config).with_name("scheduler.lock")


@contextmanager
def one_scheduler(config: Config) -> Iterator[None]:
    """One `rl-digest schedule` per state folder, held for the process's life: a second
    would fire every job twice and write over the first one's heartbeat. (Schedulers on
    two machines sharing PostgreSQL have folders of their own; the run lock keeps them
    apart.)"""
    path = scheduler_path(config)
    lock = _take(path, "scheduler lock", lambda: LockedError(
        f"another scheduler runs on this state folder: it holds {_short(path, config)}",
        "`rl-digest status` names its pid; stop it before starting this one"))
    try:
        yield
    finally:
        lock.release()


def _take(path: Path, what: str, taken: Callable[[], LockedError]) -> filelock.BaseFileLock:
    """A lock file taken at once, or the error `taken` gives when another process holds it."""
    lock = filelock.FileLock(str(path), mode=0o600)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock.acquire(timeout=0)
    except filelock.Timeout:
        raise taken() from None
    except OSError as exc:  # a folder this user cannot write, as outputs.dir's: the config's to change
        raise ConfigError(f"{path}: cannot take the {what}: {exc.strerror or exc}",
                          files.not_yours(path) or "set lock.dir to a folder this user can write") from None
    return lock


def _locked(path: Path, config: Config) -> LockedError:
    """Exit 75 naming the holder; loudly when it has held the lock past lock.stale_hours."""
    where = _short(path, config)
    try:
        pid, started_text = _holder_path(path).read_text(encoding="utf-8").split()
        started = datetime.fromisoformat(started_text)
    except (OSError, ValueError):
        return LockedError(f"another rl-digest run holds {where}")
    hours = (datetime.now(UTC) - started).total_seconds() / 3600
    who = f"pid {pid}, started {started:%Y-%m-%d %H:%M} UTC"
    if hours < config.lock.stale_hours:
        return LockedError(f"another rl-digest run holds {where} ({who})")
    return LockedError(f"STALE LOCK: another rl-digest run ({who}) has held {where} for {hours:.1f} h, "
                       f"past lock.stale_hours ({config.lock.stale_hours:g})",
                       f"it may be hung: check pid {pid} and stop it; the lock frees itself when it ends")


def _holder_path(path: Path) -> Path:
    return path.with_name(path.name + ".holder")


_CHECKS: list[Callable[[], None]] = []  # while this process holds an advisory lock: its check


def still_held() -> None:
    """Before what must happen once (saving a digest): the advisory lock is its session's,
    and a database restart ends the session unseen. Taken again if it is free, else
    LockedError (exit 75) and this run stops. The lock file needs no check: only the
    process lets go of it."""
    for check in list(_CHECKS):
        check()


@contextmanager
def _advisory(config: Config) -> Iterator[None]:
    """pg_try_advisory_lock on a connection of its own, held for the run. The lock is the
    session's: closing the connection lets go of it, and so does the server when the
    process dies, however it dies, so a killed run never leaves it behind."""
    import sqlalchemy as sa

    from pipeline import store_connect

    engine = store_connect.connect(config.database_url(), config.storage.busy_timeout_seconds,
                                   poolclass=sa.NullPool)
    held: list[sa.Connection] = []

    def take() -> None:
        conn = engine.connect()
        held.append(conn)
        got = conn.execute(sa.select(sa.func.pg_try_advisory_lock(RUN_LOCK))).scalar()
        conn.commit()  # no transaction stays open for the length of the run
        if not got:
            raise LockedError(f"another rl-digest run holds the lock on {store_connect.where(engine)}")

    def check() -> None:
        try:
            held[-1].execute(sa.select(1)).scalar()
            held[-1].commit()
            return
        except (sa.exc.DBAPIError, DigestError):  # the session is gone, and the lock with it
            log.warning("the run lock on %s was lost (the database server restarted?); taking it again",
                        store_connect.where(engine))
        try:
            take()
        except LockedError:
            raise LockedError(f"the run lock on {store_connect.where(engine)} was lost (the database server "
                              "restarted?) and another run holds it now: this run stops before "
                              "publishing") from None

    try:
        take()
        _CHECKS.append(check)
        try:
            yield
        finally:
            _CHECKS.remove(check)
    finally:
        for conn in held:
            conn.close()
        engine.dispose()


def _short(path: Path, config: Config) -> str:
    """state/digest.sqlite3.lock when it sits beside the config, else the full path."""
    root = config.path.parent if config.path else Path.cwd()
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
