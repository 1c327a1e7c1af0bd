"""Helpers for tests that start the real CLI in the background and watch it: kill -9 in the
middle of a send, schedulers that race, the SMTP stand-in telling when it stalls."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.helpers import CATS, ROOT, cli_command, cli_env, rl_paper, start_warm_cli, write_config
from tests.servers import smtp_server
from tests.servers.arxiv_server import ArxivServer
from tests.servers.smtp_server import SmtpServer

READERS = ["ada@example.org", "alan@example.org"]


def config_with(tmp_path: Path, arxiv: ArxivServer | None = None, smtp_port: int | None = None,
                recipients: list[str] = READERS, email_timeout: float = 30, **extra) -> Path:
    """A config for whole runs against the local stand-ins (no seeds, no LLM by default)."""
    overrides: dict = {"seeds": {"paths": []}}
    if arxiv is not None:
        overrides["sources"] = {
            "arxiv": {"api_url": arxiv.api_url, "categories": CATS, "page_size": 50,
                      "overlap_hours": 0, "retries": 0},
            "rss": {"urls": [arxiv.rss_url(CATS)]}}
    if smtp_port is not None:
        overrides["email"] = {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": smtp_port,
                              "security": "none", "timeout_seconds": email_timeout,
                              "to": list(recipients)}
    for key, value in extra.items():
        overrides[key] = {**overrides.get(key, {}), **value} if isinstance(value, dict) else value
    return write_config(tmp_path, overrides, seeds=False)


def start_cli(*args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    """The real CLI in the background, to be killed; its output is dropped (an unread pipe
    could block it) unless `popen` sends it to a file."""
    return subprocess.Popen([*cli_command(), *args], cwd="/", env=cli_env(env),
                            **{"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, **popen})


@contextmanager
def lock_holder(config: Path) -> Iterator[subprocess.Popen]:
    """Another process holding `config`'s run lock for the block (a test may kill it sooner)."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from pipeline import config, lock;"
         "ctx = lock.held(config.load(Path(sys.argv[1]))); ctx.__enter__(); print('held', flush=True);"
         "time.sleep(120)", str(config)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()


def wait_for(predicate: Callable[[], object], timeout: float = 20, what: str = "condition",
             proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}")
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def kill9(proc: subprocess.Popen) -> None:
    assert try_kill9(proc), f"it had ended already (exit {proc.returncode})"


def try_kill9(proc: subprocess.Popen) -> bool:
    """kill -9; False when the process had ended by itself first."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    return proc.returncode == -signal.SIGKILL


def db_rows(tmp_path: Path, sql: str, *params) -> list[dict]:
    conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def copies(smtp: SmtpServer) -> dict[str, int]:
    counts: dict[str, int] = {}
    for address in smtp.recipients:
        counts[address] = counts.get(address, 0) + 1
    return counts


class _WatchedHandler(smtp_server._Handler):
    async def _stall(self, command: str) -> None:
        if self.server.stall_at == command and self.server.stall_seconds > 0:
            self.server.stalling.set()
        await super()._stall(command)


class WatchedSmtp(SmtpServer):
    """The SMTP stand-in, telling (`stalling`) when it has begun to stall a command."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.stalling = threading.Event()

    def start(self):
        super().start()
        self._controller.handler = _WatchedHandler(self)  # used for each new connection
        return self


def stderr_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


READY = "next publish:"  # logged once the signal handlers are in place


class Scheduler:
    """One `rl-digest schedule` process (or another command, as `args`), its stdout and
    stderr in a log file; started in a fork of the warm CLI (start_warm_cli: about 1.2 s of
    imports less), which runs the CLI's main and its signal handlers as a fresh one does."""

    def __init__(self, config: Path, log_path: Path, args: tuple[str, ...] = ("schedule",)):
        self.log_path = log_path
        self.proc = start_warm_cli("--config", str(config), *args, log=log_path)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8")

    def wait_for(self, what: str, check, timeout: float = 20) -> float:
        """Poll check() until true; fail naming `what`, with the log, if it never is."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if check():
                return time.monotonic() - start
            if self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode} before {what}:\n{self.log()}")
            time.sleep(0.05)
        raise AssertionError(f"no {what} within {timeout} s:\n{self.log()}")

    def ready(self) -> None:
        self.wait_for("start-up", lambda: READY in self.log())

    def terminate(self, timeout: float = 15, again_when: str | None = None,
                  release: tuple[str, threading.Event] | None = None) -> tuple[int, float]:
        """SIGTERM (and a second one once the log shows `again_when`, as an impatient
        operator would); the exit code and how long the process took to go. `release`: (a
        log line, the Event that keeps the step busy: a hung page's), set once the log shows
        that line after the last SIGTERM, so the step ends then, not after a fixed wait."""
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        if again_when:
            self.wait_for(again_when, lambda: again_when in self.log(), timeout)
            self.proc.send_signal(signal.SIGTERM)
        if release is not None:
            line, event = release
            self.wait_for(line, lambda: line in self.log(), timeout)
            event.set()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {timeout} s after SIGTERM:\n{self.log()}") from None
        return code, time.monotonic() - start

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def papers_now(count: int = 3):
    yesterday = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    return [rl_paper(i, yesterday) for i in range(count)]


def scheduler_config(tmp_path: Path, arxiv: ArxivServer, **schedule: object) -> Path:
    return write_config(tmp_path, {
        "sources": {"arxiv": {"api_url": arxiv.api_url, "categories": CATS, "page_size": 50,
                              "overlap_hours": 0, "retries": 1},
                    "rss": {"urls": [arxiv.rss_url(CATS)]}},
        "seeds": {"paths": []},
        # a start that is not due to publish would collect first after the day's collect fire
        # (at 14:00 on weekdays by default): these tests start at any time of day
        "schedule": {"collect_cron": "59 23 31 12 *", **schedule},
    }, seeds=False)


def query(tmp_path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3", timeout=10)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def publish_runs(tmp_path: Path) -> list[tuple[str, str | None]]:
    if not (tmp_path / "state" / "digest.sqlite3").exists():
        return []
    return query(tmp_path, "SELECT status, error FROM runs WHERE kind = 'publish' ORDER BY id")


def published(tmp_path: Path) -> bool:
    return ("ok", None) in publish_runs(tmp_path)


HELD = "publish: skipped this fire: another rl-digest run holds"


DONE = ("no publish is due", "a publish already succeeded since the last fire")


def one_publishes(both: list[Scheduler], published) -> tuple[list[int], list[str]]:
    """Two schedulers started together: wait for a publish and for the other's skip (it found
    the lock held, or started late enough to find the publish done); stop both with SIGTERM.
    Their exit codes and logs."""
    for scheduler in both:
        scheduler.ready()
    both[0].wait_for("publish", published, timeout=60)
    both[0].wait_for("the other's skip", lambda: any(
        HELD in s.log() or any(d in s.log() for d in DONE) for s in both))
    codes = [s.terminate()[0] for s in both]
    return codes, [s.log() for s in both]

