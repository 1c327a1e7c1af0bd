"""The two storage backends the tests run on: a SQLite file, and a throwaway PostgreSQL.

PostgreSQL comes from $RL_DIGEST_TEST_PG_URL when set (`.ci/run` starts a server and sets
it), else from a cluster of our own made with initdb/pg_ctl where those are installed (as
the unprivileged `postgres` user when we are root). When neither works, the PostgreSQL
cases skip and say why; SQLite always runs.

Both servers trust every role on 127.0.0.1 but the members of PASSWORD_GROUP, who must give
their password (scram-sha-256), so that the password cases meet a server that checks one.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

URL_ENV = "RL_DIGEST_TEST_PG_URL"
PASSWORD_GROUP = "rl_digest_password"
PASSWORD_RULE = f"host all +{PASSWORD_GROUP} 127.0.0.1/32 scram-sha-256\n"  # .ci/run writes it too


class Postgres:
    """A server the tests may create and drop databases on (one database per test)."""

    def __init__(self, admin_url: str, cluster: Path | None = None, user: str | None = None,
                 pg_ctl: str = "pg_ctl"):
        self.admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
        self.cluster, self.user, self.pg_ctl = cluster, user, pg_ctl

    def create_database(self) -> str:
        name = f"rl_digest_test_{uuid.uuid4().hex[:12]}"
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        return self.admin.url.set(database=name).render_as_string(hide_password=False)

    def password_database(self) -> tuple[str, str]:
        """A database owned by a new role that must give its password: the URL without it,
        and the password. Skips where the server lets that role in without one."""
        role, password = f"rl_pw_{uuid.uuid4().hex[:12]}", uuid.uuid4().hex
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f"DO $$ BEGIN CREATE ROLE {PASSWORD_GROUP}; "
                                 "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
            conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN PASSWORD '{password}' IN ROLE {PASSWORD_GROUP}")
            conn.exec_driver_sql(f'CREATE DATABASE "{role}" OWNER {role}')
        url = self.admin.url.set(username=role, password=None, database=role)
        try:
            sa.create_engine(url, poolclass=sa.NullPool).connect().close()
        except sa.exc.OperationalError:
            return url.render_as_string(hide_password=False), password
        self.drop_database(url.render_as_string(hide_password=False))
        pytest.skip(f"the server lets {role} in without a password (no {PASSWORD_RULE.strip()!r} "
                    "in its pg_hba.conf)")

    def drop_database(self, url: str) -> None:
        """The database, and the role password_database made for it."""
        name = sa.engine.make_url(url).database
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            if name.startswith("rl_pw_"):
                conn.exec_driver_sql(f'DROP ROLE IF EXISTS "{name}"')

    def stop(self) -> None:
        self.admin.dispose()
        if self.cluster is not None:
            _as(self.user, self.pg_ctl, "-D", str(self.cluster / "data"), "-m", "immediate", "stop")
            shutil.rmtree(self.cluster, ignore_errors=True)


def start_postgres() -> Postgres | str:
    """A usable server, or the reason there is none."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install '.[postgres]')"
    if os.environ.get(URL_ENV):
        server = Postgres(os.environ[URL_ENV])
        try:
            server.admin.connect().close()
        except sa.exc.OperationalError as exc:
            return f"${URL_ENV} does not answer: {' '.join(str(exc.orig).split())}"
        return server
    return _own_cluster()


def _own_cluster() -> Postgres | str:
    binaries = _binaries()
    if binaries is None:
        return "no initdb/pg_ctl here (apt-get install postgresql, or set $" + URL_ENV + ")"
    user = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        try:
            user = pwd.getpwnam("postgres").pw_name
        except KeyError:
            return "running as root and there is no 'postgres' user to run a server as"
    folder = Path(tempfile.mkdtemp(prefix="rl-digest-pg-"))
    if user:
        shutil.chown(folder, user)
    port = free_port()
    steps = [
        (f"{binaries}/initdb", "-D", str(folder / "data"), "-U", "rl", "--auth=trust", "-E", "UTF8",
         "--no-sync", "--no-instructions"),
        (f"{binaries}/pg_ctl", "-D", str(folder / "data"), "-l", str(folder / "log"), "-w", "-t", "60", "-o",
         f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off "
         f"-c max_connections=200", "start"),
    ]
    for step in steps:
        done = _as(user, *step)
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            return f"{Path(step[0]).name} failed: {' '.join((done.stderr or done.stdout).split())[:300]}"
        if step is steps[0]:  # the first matching line wins: the password rule before `trust`
            rules = folder / "data" / "pg_hba.conf"
            rules.write_text(PASSWORD_RULE + rules.read_text(encoding="utf-8"), encoding="utf-8")
    return Postgres(f"postgresql+psycopg://rl@127.0.0.1:{port}/postgres", folder, user,
                    f"{binaries}/pg_ctl")


def _binaries() -> str | None:
    if shutil.which("initdb") and shutil.which("pg_ctl"):
        return str(Path(shutil.which("pg_ctl")).parent)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return str(Path(found[-1]).parent) if found else None


def _as(user: str | None, *command: str) -> subprocess.CompletedProcess:
    prefix = ["runuser", "-u", user, "--"] if user else []
    return subprocess.run([*prefix, *command], capture_output=True, text=True, check=False,
                          timeout=120, cwd="/")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rows(url: str, sql: str, **params) -> list[dict]:
    """What a user would see with sqlite3 or psql: the rows of a query on either backend."""
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]
    finally:
        engine.dispose()


def execute(url: str, sql: str, **params) -> None:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(sql), params)
    finally:
        engine.dispose()


def integrity(url: str) -> str:
    """"ok" when the database is sound: SQLite's integrity_check; on PostgreSQL (which
    checks itself) that no session still holds rl-digest's advisory lock."""
    if url.startswith("sqlite"):
        return rows(url, "PRAGMA integrity_check")[0]["integrity_check"]
    held = rows(url, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND database = "
                     "(SELECT oid FROM pg_database WHERE datname = current_database())")
    return "ok" if not held else f"advisory lock still held by {[r['pid'] for r in held]}"
