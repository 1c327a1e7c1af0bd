"""Opening the database behind storage.url (or `store copy`'s target): SQLite with WAL and a
busy timeout, or PostgreSQL through psycopg with a lock timeout and keepalives.

Apart from the store's tables and queries because it is about the engine alone: which
URLs are taken, the file's permissions, and every failure of the database itself as one
line naming the file or the URL (password hidden) with what to check.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from pipeline.config import sqlite_file
from pipeline.deliver import files
from pipeline.errors import ConfigError, DigestError, LockedError
from pipeline.models import collapse

STORAGE = ("storage.url", "storage.password_env")  # what errors call a store's URL and password


def backend(url: str, keys: tuple[str, str] = STORAGE) -> str:
    """sqlite or postgresql: the two databases the store is tested on. `keys`: what the
    URL and its password's variable are called where the user gave them."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        raise ConfigError(f"{keys[0]}: not a database URL: {url!r}") from None
    name = parsed.get_backend_name()
    if name not in ("sqlite", "postgresql"):
        raise ConfigError(f"{keys[0]}: {name}: not supported (use sqlite:/// or postgresql+psycopg://)")
    if name == "sqlite" and (parsed.host or parsed.port or parsed.username):  # sqlite://state/x.db
        beside = ", beside the config" if keys == STORAGE else ""
        raise ConfigError(f"{keys[0]}: {url!r}: a SQLite URL has three slashes before a path "
                          f"(sqlite:///state/digest.sqlite3{beside}) and four before an "
                          "absolute one (sqlite:////var/lib/rl-digest/digest.sqlite3)")
    return name


# Probes of an idle session, and the same bound on data the peer never acknowledges: a machine
# that drops off while the server's reply to it is in flight is not idle, and TCP would
# retransmit to it for some 15 minutes (tcp_retries2) before the session, and its lock, went.
KEEPALIVE = ("-c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=6 "
             "-c tcp_user_timeout=90000")


def connect(url: str, busy_timeout: float = 30, keys: tuple[str, str] = STORAGE,
            **engine_options: Any) -> Engine:
    """An engine for storage.url: SQLite (WAL, busy timeout) or PostgreSQL through psycopg.

    A missing driver or an unknown scheme is a config error naming the scheme; failures of
    the database itself become one line naming the file or the URL (password hidden).
    `keys`: as for `backend` (`store copy`'s target is not storage.url)."""
    kind = backend(url, keys)
    parsed = sa.engine.make_url(url)
    if parsed.drivername == "postgresql":  # the driver that [postgres] installs, not psycopg2
        parsed = parsed.set(drivername="postgresql+psycopg")
    path = sqlite_file(url)
    if path is not None:
        _private(path, tighten=keys == STORAGE)  # a copy's target: only once the copy is in (store_copy)
        # the file as named, as the lock beside it is: a URL would end the path at a '?' in
        # a folder's name and read '%20' as a space, opening a database somewhere else
        parsed = sa.engine.URL.create("sqlite", database=str(path))
    options: dict[str, Any] = (
        {"connect_args": {"timeout": busy_timeout}} if kind == "sqlite" else
        # PostgreSQL: a lock held by another session is waited for as long as SQLite's busy
        # timeout, then fails (exit 75) rather than hanging a cron run. The server probes an
        # idle session (KEEPALIVE), so the run lock of a machine that died or dropped off the
        # network is let go of within a minute or two, not after the system's 2 h 11 min.
        {"connect_args": {"connect_timeout": max(1, int(busy_timeout)),
                          "options": f"-c lock_timeout={max(1, int(busy_timeout * 1000))} {KEEPALIVE}"},
         "pool_pre_ping": True})
    try:
        engine = sa.create_engine(parsed, json_serializer=_json_dumps, **options, **engine_options)
    except ImportError as exc:
        other = "" if parsed.drivername == "postgresql+psycopg" else " and use postgresql+psycopg://"
        raise ConfigError(
            f"{keys[0]}: {parsed.drivername}:// needs a driver that is not installed ({exc})",
            f"pip install 'rl-digest[postgres]'{other}") from None
    if kind == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas(busy_timeout))
    else:  # before SQLAlchemy's own first queries, which fail on SQL_ASCII's bytes
        sa.event.listen(engine, "first_connect", _utf8_only(where(engine)), insert=True)
    sa.event.listen(engine, "handle_error", _one_line_errors(where(engine), busy_timeout,
                                                             engine.url.password is not None, keys))
    return engine


def where(engine: Engine) -> str:
    """The SQLite file, or the server URL without its password: as storage.url reads."""
    if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        return str(engine.url.database)
    return engine.url._replace(password=None).render_as_string(hide_password=False)


def one_line(error: BaseException) -> str:
    return collapse(str(error))


def _json_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _one_line_errors(place: str, busy_timeout: float, password_given: bool,
                     keys: tuple[str, str] = STORAGE) -> Any:
    """The database's environmental failures (a lock held elsewhere, a damaged file, a full or
    read-only disk, a server that is down) as one line naming the file or URL, not a
    traceback. A constraint or programming error is a bug and stays as it is."""
    def handle(context: Any) -> None:
        if context.is_pre_ping:  # a connection the server ended (a restart): the pool opens a new one
            return
        if not isinstance(context.sqlalchemy_exception, sa.exc.OperationalError | sa.exc.DatabaseError) \
                or isinstance(context.sqlalchemy_exception, sa.exc.IntegrityError | sa.exc.ProgrammingError
                              | sa.exc.InterfaceError | sa.exc.NotSupportedError):
            return
        words = one_line(context.original_exception)
        if context.dialect is not None and context.dialect.name == "postgresql":
            if "lock timeout" in words:
                raise LockedError(f"{place}: a table is locked by another session "
                                  f"(waited {busy_timeout:g} s)") from None
            refused = _refused(words, password_given, keys)
            if refused:  # restarting cannot fix these: exit 2, so systemd does not loop
                raise ConfigError(f"{place}: {words}", refused) from None
            code = getattr(context.original_exception, "sqlstate", None) or ""
            why = _PG_HINTS.get(code, "is the server up, and {url} right?")
            raise DigestError(f"{place}: {words}", why.format(url=keys[0])) from None
        if "locked" in words or "busy" in words:
            raise LockedError(f"{place}: the database is locked by another process "
                              f"(waited {busy_timeout:g} s)") from None
        if "malformed" in words or "not a database" in words:
            raise DigestError(f"{place}: not a usable database: {words}",
                              "restore it from a backup, or move it aside to start afresh" if keys == STORAGE
                              else f"{keys[0]} is not an empty database: name a new SQLite file or "
                              "an empty PostgreSQL database") from None
        hint: str | None = "is the disk full?" if "disk" in words else None
        if "readonly" in words or "unable to open" in words:  # the file, or its folder for the WAL
            hint = files.cannot_write(Path(place)) or "can this user write the state folder?"
        raise DigestError(f"{place}: {words}", hint) from None
    return handle


_PG_HINTS = {  # by SQLSTATE: what an operator checks when the server is up but says no
    "25006": "the database is read-only (default_transaction_read_only, or a standby): "
             "point {url} at the writable primary",
    "53100": "is the server's disk full?",
    "53200": "the server is out of memory",
    "53300": "the server has no connection left (max_connections)",
}


def _refused(words: str, password_given: bool, keys: tuple[str, str] = STORAGE) -> str | None:
    """What to change when PostgreSQL turns the URL's role or password away, else None.
    `password_given`: storage.password_env (keys[1]) supplied one (else libpq found its own, if any)."""
    url, password = keys
    if "no password supplied" in words:
        return (f"the server asks for a password: put it in an environment variable and set "
                f"{password} to its name")
    if "password authentication failed" in words:
        return (f"check the password in the environment variable that {password} names"
                if password_given else
                f"check the password libpq found (PGPASSWORD, ~/.pgpass), or set {password}")
    if re.search(r'(role|database) ".*" does not exist', words):
        return f"{url} names a role or database the server does not have"
    return None


def _utf8_only(place: str) -> Any:
    """A PostgreSQL database in another encoding cannot keep the digests' Chinese: `createdb`
    on a cluster made under LANG=C gives SQL_ASCII (where psycopg reads text as bytes and
    the first query failed with a TypeError), under a Latin-1 locale LATIN1 (where a run
    failed at its first Chinese word). Refused in one line when the engine first connects."""
    def first_connect(dbapi_conn: Any, _record: Any) -> None:
        info = getattr(dbapi_conn, "info", None)  # psycopg's and psycopg2's; another driver's: unchecked
        found = info.parameter_status("server_encoding") if info is not None else "UTF8"
        if found != "UTF8":
            raise ConfigError(f"{place}: the database's encoding is {found}, not UTF8, and rl-digest "
                              "keeps Chinese text",
                              "create it with createdb --encoding UTF8 --template template0")
    return first_connect


def _sqlite_pragmas(busy_timeout: float) -> Any:
    def connect(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        _switch_to_wal(cursor, busy_timeout)
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()
    return connect


def _switch_to_wal(cursor: Any, busy_timeout: float) -> None:
    """PRAGMA journal_mode=WAL fails at once, without the busy handler, while another
    connection holds a lock on a file still in rollback mode (a second process opening a
    database the first is creating); try again until the busy timeout, as a lock would."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def _private(path: Path, tighten: bool = True) -> None:
    """The database holds reader addresses: the file 0600 (SQLite gives its WAL the same),
    its folder 0700 when we make it. A folder that was there is left as it is: it may be
    the operator's, shared with out/ that a web server reads. `tighten`: a file that was
    there is made 0600 too (private)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise DigestError(f"{path.parent}: cannot create state folder: {exc.strerror}") from None
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return
    except FileExistsError:
        if not os.access(path, os.R_OK):  # SQLite would say 'unable to open database file'
            raise ConfigError(f"{path}: cannot open the database: Permission denied",
                              files.not_yours(path)) from None
    except PermissionError as exc:  # a folder this user cannot enter or write: it may be there
        raise ConfigError(f"{path}: cannot open or create the database: {exc.strerror}",
                          files.not_yours(path)) from None
    except OSError as exc:
        raise DigestError(f"{path}: cannot create the database: {exc.strerror}") from None
    if tighten:
        private(path)


def private(path: Path) -> None:
    """An existing database file 0600, if it is looser (made by an older version, or by hand)."""
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
    except OSError:
        pass  # not ours to change; SQLite says what it cannot do
