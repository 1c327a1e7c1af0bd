"""`rl-digest store copy`: the whole store into another database, SQLite or PostgreSQL, in
either direction: moving to a server, moving machines, or a SQLite file as a backup.

The target gets the schema from store_schema.make_current and every table's rows, in foreign-key
order, a batch at a time, all in one transaction there: a copy that fails leaves nothing.
A target that holds rl-digest data is refused; nothing is ever merged or overwritten.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import sqlalchemy as sa
import yaml
from sqlalchemy.engine import Connection, Engine

from pipeline import stopping, store, store_connect, store_schema
from pipeline.config import sqlite_file, url_credentials
from pipeline.errors import ConfigError, DigestError

KEYS = ("TARGET_URL", "--password-env")  # what errors about the target call its URL and password
BATCH = 200  # rows read and written at a time: memory stays flat on a store of years
# Every table but the schema's own record: the target's says it was made at this version.
TABLES = [table for table in store_schema.meta.sorted_tables if table is not store_schema.schema_migrations]


def target_url(url: str, password_env: str | None) -> str:
    """TARGET_URL as storage.url is read: no password written in it (from --password-env's
    variable instead), a scheme the store supports. Bad input is a ConfigError (exit 2)."""
    if url_credentials(url):  # said without the URL: it holds the password
        raise ConfigError("TARGET_URL: holds a password; secrets are not taken on the command line",
                          "take it out of the URL, put it in an environment variable and give its "
                          "name with --password-env")
    kind = store_connect.backend(url, KEYS)
    if kind == "sqlite" and sqlite_file(url) is None:
        raise ConfigError(f"TARGET_URL: {url!r} is a database in memory, gone when the copy ends",
                          "name a file: sqlite:///path/digest.sqlite3")
    if not password_env:
        return url
    if kind == "sqlite":
        raise ConfigError("--password-env: a SQLite file takes no password")
    password = os.environ.get(password_env)
    if password is None:
        raise ConfigError(f"--password-env: the environment variable {password_env} is not set",
                          f"export {password_env} with the target database's password")
    return sa.engine.make_url(url).set(password=password).render_as_string(hide_password=False)


def open_target(url: str, busy_timeout: float) -> Engine:
    """An engine for the target (target_url's), its errors naming TARGET_URL; a SQLite file
    by its absolute path, which is what storage.url then names."""
    path = sqlite_file(url)
    return store_connect.connect(f"sqlite:///{Path(path).absolute()}" if path else url, busy_timeout, KEYS)


def pasted(target: Engine, url: str) -> str:
    """The storage.url value that names the copy, as a YAML scalar for the config: a SQLite
    file by its path as written (storage.url reads no %-escapes: SQLAlchemy's 'week %231'
    named another file), quoted where a '#' or ': ' would cut it short."""
    value = f"sqlite:///{store_connect.where(target)}" if target.dialect.name == "sqlite" else url
    try:
        if yaml.safe_load(f"url: {value}") == {"url": value}:
            return value
    except yaml.YAMLError:
        pass
    return json.dumps(value, ensure_ascii=False)  # a double-quoted YAML string


def copy(source: store.Store, target: Engine) -> list[tuple[str, int]]:
    """Every table of `source` (at the current schema; the caller holds its run lock) into
    `target`, from one snapshot of the source: (table, rows) in the order copied, each
    count the same on both sides."""
    place = store_connect.where(target)
    with source.engine.connect() as read, target.connect() as write:
        _snapshot(read)
        store_schema.make_current(write)  # the schema, under the migration lock, in the copy's transaction
        used = next((table.name for table in TABLES if write.execute(
            sa.select(sa.literal(1)).select_from(table).limit(1)).first()), None)
        if used is not None:
            raise ConfigError(f"{place}: holds rl-digest data already (its {used} table has rows); "
                              "store copy never merges or overwrites",
                              "name a new SQLite file or an empty PostgreSQL database")
        try:
            for table in TABLES:
                _copy_table(read, write, table)
            copied = [(table.name, _same_count(read, write, table, place)) for table in TABLES]
            write.commit()
        except DigestError as exc:  # the target gone, a full disk: the transaction goes with it
            raise type(exc)(f"{exc.message}; the copy was rolled back: {place} holds no rl-digest "
                            "data", exc.hint) from None
    path = sqlite_file(str(target.url))
    if path is not None:  # it holds reader addresses now; left as it was until then
        store_connect.private(path)
    return copied


def _snapshot(conn: Connection) -> None:
    """Read the whole source as of one moment: `serve` may record an unsubscribe meanwhile
    (it takes no run lock), and a table copied later must not hold what an earlier one lacks."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN")  # a read transaction: one WAL snapshot for every table
    else:
        conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)


def _copy_table(read: Connection, write: Connection, table: sa.Table) -> None:
    """`table`'s rows, by primary key, BATCH at a time; on PostgreSQL its identity then goes
    past the copied ids."""
    query = sa.select(table).order_by(*table.primary_key.columns)
    for batch in read.execute(query, execution_options={"yield_per": BATCH}).mappings().partitions():
        write.execute(table.insert(), [dict(row) for row in batch])
        stopping.checkpoint()  # Ctrl-C or SIGTERM: the transaction is rolled back
    if write.dialect.name == "postgresql":
        store_schema.restart_identity(write, table)


def _same_count(read: Connection, write: Connection, table: sa.Table, place: str) -> int:
    """How many rows `table` holds on both sides, or DigestError naming the table."""
    count = sa.select(sa.func.count()).select_from(table)
    rows, held = read.execute(count).scalar_one(), write.execute(count).scalar_one()
    if held != rows:
        raise DigestError(f"{place}: {table.name}: {held} rows after the copy of {rows}")
    return rows
