"""Shared fixtures: every test gets its own state folder and config; the CLI runs for real."""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests import backends, helpers
from tests.helpers import run_cli

MEMORY = Path("/dev/shm")


def pytest_configure(config):
    """One whole suite at a time on a machine: the suite's timing tests (deadlines, retry
    spacing) read wrong when several suites share the cores, so a second suite waits for
    the first (the controller holds the lock; xdist's workers run under it)."""
    _tmp_path_in_memory(config)
    if hasattr(config, "workerinput") or config.getoption("-k") or config.args != config.getini("testpaths"):
        return  # a worker, or a few chosen tests: no wait
    lock = Path(tempfile.gettempdir()) / f"rl-digest-suite-{os.getuid()}.lock"
    config._suite_lock = handle = lock.open("w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("waiting for another rl-digest test suite on this machine to finish", file=sys.stderr)
        fcntl.flock(handle, fcntl.LOCK_EX)


def _tmp_path_in_memory(config) -> None:
    """tmp_path under /dev/shm where it is a tmpfs that may run programs (git hooks) and
    has room: the CLI fsyncs each file it writes and its folder (deliver/files.py), SQLite
    each commit, and on a VM's disk each fsync waits several ms (about 1,900 in
    test_entries_cli.py alone); in memory none waits, and the files and their bytes are
    the same. --basetemp or $PYTEST_DEBUG_TEMPROOT choose another place; xdist's workers
    get theirs from the controller."""
    if hasattr(config, "workerinput") or config.option.basetemp or os.environ.get("PYTEST_DEBUG_TEMPROOT"):
        return
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
        room = shutil.disk_usage(MEMORY).free
    except OSError:
        return
    usable = any(fields[1] == str(MEMORY) and fields[2] == "tmpfs" and "noexec" not in fields[3].split(",")
                 for fields in (line.split() for line in mounts) if len(fields) > 3)
    if usable and room >= 2 * 2**30 and os.access(MEMORY, os.W_OK | os.X_OK):
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(MEMORY)


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="run the slow reliability suite")


def pytest_collection_modifyitems(config, items):
    """The tests of an xdist_group first, a group together (module fixtures built once: see
    test_site_papers.py): `make test`'s xdist hands the first worker the first eighth of the
    tests as one batch, so they all run there. (--dist loadgroup would, but with pytest 9.2
    xdist 3.8 ignores the mark: pytest-xdist#1386.) Then skip the slow ones unless asked, and the
    PostgreSQL case of a test marked slow_on_postgresql."""
    groups = {item: mark.args[0] for item in items if (mark := item.get_closest_marker("xdist_group"))}
    order = {name: n for n, name in enumerate(dict.fromkeys(groups.values()))}
    items.sort(key=lambda item: order[groups[item]] if item in groups else len(order))
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with make test-slow")
    for item in items:
        on = getattr(item, "callspec", None)
        if "slow" in item.keywords or ("slow_on_postgresql" in item.keywords and on is not None
                                       and on.params.get("db_url") == "postgresql"):
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _cli_tmp(tmp_path_factory):
    """The CLI's temporary files (the reading list's and the web pages' spools, Jinja's
    compiled templates) go under this session's folder: a run a test kills with SIGKILL left
    its spools in /tmp for good; here pytest removes them with its old folders."""
    helpers.CLI_TMP = tmp_path_factory.mktemp("cli-tmp", numbered=False)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No test reads the developer's config or keys, or writes outside tmp_path."""
    for name in ("RL_DIGEST_CONFIG", "OPENAI_API_KEY", "SMTP_USERNAME", "SMTP_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def postgres():
    """One throwaway PostgreSQL server for the session, or the reason there is none."""
    server = backends.start_postgres()
    yield server
    if not isinstance(server, str):
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """The store's URL on each backend: a SQLite file in tmp_path, or a fresh PostgreSQL
    database (skipped, saying why, where no server can start: then SQLite alone runs)."""
    if request.param == "sqlite":
        (tmp_path / "state").mkdir(exist_ok=True)
        yield f"sqlite:///{tmp_path}/state/digest.sqlite3"
        return
    server = request.getfixturevalue("postgres")
    if isinstance(server, str):
        pytest.skip(f"PostgreSQL: {server}; these cases ran on SQLite only")
    url = server.create_database()
    yield url
    server.drop_database(url)


@pytest.fixture
def pg_password(request):
    """A PostgreSQL database whose role must give a password: (URL without it, password)."""
    server = request.getfixturevalue("postgres")
    if isinstance(server, str):
        pytest.skip(f"PostgreSQL: {server}")
    url, password = server.password_database()
    yield url, password
    server.drop_database(url)
