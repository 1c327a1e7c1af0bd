"""Shared fixtures: every test gets its own state folder and config; the CLI runs for real."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from tests import backends

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
# `make test` installs the package (pip install ., not editable) and sets this, so the CLI
# tests run the installed `rl-digest` with its bundled templates; a developer's plain
# `pytest` runs the source tree instead, never a stale install.
INSTALLED = Path(sys.executable).with_name("rl-digest")
USE_INSTALLED = os.environ.get("RL_DIGEST_TEST_INSTALLED") == "1" and INSTALLED.exists()


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="run the slow reliability suite")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with make test-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No test reads the developer's config or keys, or writes outside tmp_path."""
    for name in ("RL_DIGEST_CONFIG", "OPENAI_API_KEY", "SMTP_USERNAME", "SMTP_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def shared_file(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not here (../shared is optional)")
    return path


def write_config(folder: Path, overrides: dict | None = None, seeds: bool = True) -> Path:
    """A config in `folder` whose state and outputs stay there; offline-safe defaults."""
    data = {
        "sources": {"arxiv": {"delay_seconds": 0, "retries": 1, "timeout_seconds": 5},
                    "rss": {"poll_minutes": 0}, "oai": {"enabled": False}},
        "enrich": {"provider": "none"},
        "seeds": {"paths": ["seeds"], "builtin": False},
    }
    if seeds:
        shutil.copytree(ROOT / "seeds", folder / "seeds", dirs_exist_ok=True)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(_merge(data, overrides or {}), allow_unicode=True), encoding="utf-8")
    return path


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def cli_command() -> list[str]:
    """The installed console script when `make test` installed it, else the module."""
    return [str(INSTALLED)] if USE_INSTALLED else [sys.executable, "-m", "pipeline"]


def run_cli(*args: str, cwd: Path | str = "/", env: dict | None = None, timeout: float = 120,
            check: int | None = 0) -> subprocess.CompletedProcess:
    """Run the real `rl-digest` as a user would (from / by default, like cron).

    The command runs in a fork of a process that has imported the CLI already
    (tests/zygote.py), which saves about 1.5 s a call; RL_DIGEST_TEST_FRESH=1, or an
    environment that changes how Python starts, runs a fresh process instead.
    """
    full_env = cli_env(env)
    if FRESH or any(full_env.get(k) != v for k, v in _python_vars(cli_env()).items()) \
            or _python_vars(full_env).keys() - _python_vars(cli_env()).keys():
        result = subprocess.run([*cli_command(), *args], cwd=cwd, env=full_env, capture_output=True,
                                text=True, timeout=timeout)
    else:
        result = _warm().run(list(args), str(cwd), full_env, timeout)
    return _checked(result, check)


FRESH = os.environ.get("RL_DIGEST_TEST_FRESH") == "1"


def _python_vars(env: dict) -> dict:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


class _Warm:
    """The client side of tests/zygote.py: one warm CLI per test process."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="rl-digest-zygote-")
        self.socket = os.path.join(self.folder, "socket")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("zygote.py")), self.socket],
            cwd="/", env=cli_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if self.process.stdout.readline() != b"ready\n":
            raise RuntimeError("tests/zygote.py did not start: run with RL_DIGEST_TEST_FRESH=1 to see why")

    def run(self, args: list[str], cwd: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory() as folder, \
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            out.touch()
            err.touch()
            conn.connect(self.socket)
            conn.sendall(json.dumps({"args": args, "cwd": cwd, "env": env, "umask": _umask(),
                                     "stdout": str(out), "stderr": str(err)}).encode() + b"\n")
            conn.settimeout(timeout)
            replies = conn.makefile("rb")
            pid = int(replies.readline().split()[1])
            try:
                line = replies.readline()
                replies.read()  # the end: the process has exited
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(["rl-digest", *args], timeout) from None
            status = int(line.split()[1]) if line.startswith(b"exit ") else -signal.SIGKILL
            return subprocess.CompletedProcess(["rl-digest", *args], status,
                                               out.read_text(errors="replace"),
                                               err.read_text(errors="replace"))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_WARM: list[_Warm] = []


def _warm() -> _Warm:
    if not _WARM:
        _WARM.append(_Warm())
        atexit.register(_WARM[0].close)
    return _WARM[0]


def cli_env(env: dict | None = None) -> dict:
    """The environment the CLI runs with: the test's, minus RL_DIGEST_*, plus `env`."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RL_DIGEST")}
    if not USE_INSTALLED:
        full_env["PYTHONPATH"] = str(ROOT)
    full_env.update(env or {})
    return full_env


# The peak is read in a small go-between: a child forked from a large pytest process would
# count the parent's pages in its own ru_maxrss (Linux keeps the high-water mark across exec).
_MEASURE = ("import resource, subprocess, sys\n"
            "code = subprocess.call(sys.argv[2:])\n"
            "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
            "sys.exit(code)\n")


def run_cli_measured(*args: str, timeout: float = 120,
                     check: int | None = 0) -> tuple[subprocess.CompletedProcess, int]:
    """run_cli, plus the peak resident memory of that one process in bytes (ru_maxrss)."""
    with tempfile.TemporaryDirectory() as folder:
        peak_file = os.path.join(folder, "peak")
        result = subprocess.run([sys.executable, "-c", _MEASURE, peak_file, *cli_command(), *args],
                                cwd="/", env=cli_env(), capture_output=True, text=True, timeout=timeout)
        with open(peak_file) as peak:
            kilobytes = int(peak.read())
    return _checked(result, check), kilobytes * 1024  # Linux counts kilobytes


def _checked(result: subprocess.CompletedProcess, check: int | None) -> subprocess.CompletedProcess:
    if check is not None and result.returncode != check:
        raise AssertionError(
            f"exit {result.returncode} (wanted {check})\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


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
