"""Delivery through the real CLI: a crash mid-send, git publishing, --dry-run and --no-email,
and a 550 for one reader. Every run is the real `rl-digest` process against local servers.

The outbox is AT MOST ONCE (pipeline/deliver/email.py): a row becomes `sending` when the
server has answered DATA with 354, right before the body goes out, and `sent` after the
250. A process killed between the two leaves `sending`; the next run cannot know whether
the server queued the message, so it marks the row `failed` ("not resent (at-most-once)")
and never sends it again. A reader may therefore miss one digest in that window (a few
milliseconds per message), but no reader ever gets a digest twice. A process killed
before the 354 leaves the row `pending`, and the next run sends it once.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import cli_command, cli_env, write_config
from tests.servers import smtp_server
from tests.servers.arxiv_server import ArxivServer
from tests.servers.smtp_server import SmtpServer
from tests.test_collect import CATS, rl_paper

DAY = datetime(2026, 10, 29, 12, tzinfo=UTC)
AS_OF = "2026-11-02"
READERS = ["ada@example.org", "alan@example.org"]


# --- helpers shared with tests/test_reliability.py ------------------------------------------

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
    could block it)."""
    return subprocess.Popen([*cli_command(), *args], cwd="/", env=cli_env(env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen)


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
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, f"it had ended already (exit {proc.returncode})"


def db_rows(tmp_path: Path, sql: str, *params) -> list[dict]:
    conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def outbox(tmp_path: Path) -> dict[str, dict]:
    return {r["recipient"]: r for r in db_rows(tmp_path, "SELECT * FROM deliveries ORDER BY id")}


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


# --- A crash between send and mark ---------------------------------------------------------

def test_kill_after_the_body_went_out_never_sends_that_reader_twice(tmp_path, cli):
    """kill -9 while the server holds the message but has not yet answered 250.

    At-most-once: the row is `sending` at the kill; the next run marks it `failed` with
    the Message-ID to look up and does not resend it. The server has exactly one copy
    (it accepted the message in the end); the other reader, never attempted, is sent once.
    """
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            SmtpServer(stall_at="DATA", stall_seconds=30) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        proc = start_cli("--config", str(config), "run", "--as-of", AS_OF)
        try:
            wait_for(lambda: smtp.messages, what="the first message to arrive", proc=proc)
            kill9(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        rows = outbox(tmp_path)
        assert rows["ada@example.org"]["status"] == "sending"
        assert rows["ada@example.org"]["message_id"]
        assert rows["alan@example.org"]["status"] == "pending"
        smtp.stall_seconds = 0  # the server is well again
        again = cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        sent = cli("--config", str(config), "send")  # nothing is left to send, ever
        delivered = copies(smtp)
    assert delivered == {"ada@example.org": 1, "alan@example.org": 1}
    rows = outbox(tmp_path)
    assert rows["ada@example.org"]["status"] == "failed"
    assert "at-most-once" in rows["ada@example.org"]["last_error"]
    assert rows["ada@example.org"]["message_id"] in rows["ada@example.org"]["last_error"]
    assert rows["alan@example.org"]["status"] == "sent"
    assert "sent to 1" in again.stdout
    lines = stderr_lines(again)
    assert lines[-1].startswith("rl-digest: ada@example.org (digest 2026-11-02): interrupted")
    assert "Traceback" not in again.stderr
    assert "sent 0, pending 0, failed 0" in sent.stdout


def test_kill_before_the_body_went_out_sends_it_once_next_run(tmp_path, cli):
    """kill -9 while the server stalls its answer to RCPT TO: nothing left, the row stays
    `pending`, and the next run sends it exactly once."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            WatchedSmtp(stall_at="RCPT", stall_seconds=30) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        proc = start_cli("--config", str(config), "run", "--as-of", AS_OF)
        try:
            wait_for(smtp.stalling.is_set, what="RCPT TO", proc=proc)
            kill9(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert {r["status"] for r in outbox(tmp_path).values()} == {"pending"}
        assert smtp.messages == []
        smtp.stall_seconds = 0
        again = cli("--config", str(config), "run", "--as-of", AS_OF)
        delivered = copies(smtp)
    assert "sent to 2" in again.stdout
    assert delivered == {"ada@example.org": 1, "alan@example.org": 1}
    assert {r["status"] for r in outbox(tmp_path).values()} == {"sent"}


# --- a 550 for one reader -------------------------------------------------------------------

def test_a_550_fails_that_reader_with_the_servers_words_and_the_others_get_it(tmp_path, cli):
    words = "550 5.1.1 <alan@example.org>: Recipient address rejected: User unknown"
    readers = ["ada@example.org", "alan@example.org", "grace@example.org"]
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            SmtpServer(reject={"alan@example.org": words}) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=readers)
        result = cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        status = cli("--config", str(config), "status")
        delivered = copies(smtp)
    assert delivered == {"ada@example.org": 1, "grace@example.org": 1}
    assert "sent to 2" in result.stdout
    lines = stderr_lines(result)
    assert "Traceback" not in result.stderr
    assert lines[-1].startswith(f"rl-digest: alan@example.org (digest {AS_OF}): {words} (RCPT TO)")
    assert f"{AS_OF} alan@example.org: failed after 1 attempts — {words} (RCPT TO)" in status.stdout
    assert "outbox: 0 pending, 1 failed" in status.stdout
    rows = outbox(tmp_path)
    assert rows["alan@example.org"]["status"] == "failed"  # a 5xx is final: never retried
    assert rows["alan@example.org"]["next_attempt"] is None


# --- --dry-run and --no-email ---------------------------------------------------------------

def test_dry_run_prints_the_digest_and_writes_records_and_sends_nothing(tmp_path, cli):
    with ArxivServer([rl_paper(1, DAY), rl_paper(2, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        dry = cli("--config", str(config), "run", "--as-of", AS_OF, "--dry-run")
        assert smtp.messages == []
        assert not (tmp_path / "out").exists()
        assert db_rows(tmp_path, "SELECT id FROM digests") == []
        assert db_rows(tmp_path, "SELECT id FROM deliveries") == []
        assert db_rows(tmp_path, "SELECT id FROM runs WHERE kind = 'publish'") == []
        real = cli("--config", str(config), "run", "--as-of", AS_OF)
        delivered = copies(smtp)
    assert dry.stdout.startswith("# ")
    for n in (1, 2):
        assert f"https://arxiv.org/abs/2611.{n:05d}" in dry.stdout
    assert dry.stderr.splitlines()[-1].startswith(f"{AS_OF}: fetched 2, relevant 2")
    # The dry run lost nothing: the real run publishes the same papers and mails them once.
    digest = (tmp_path / "out" / "digests" / f"{AS_OF}.md").read_text(encoding="utf-8")
    assert all(f"https://arxiv.org/abs/2611.{n:05d}" in digest for n in (1, 2))
    assert "sent to 2" in real.stdout
    assert delivered == {"ada@example.org": 1, "alan@example.org": 1}


def test_no_email_writes_files_and_that_digest_is_never_mailed_later(tmp_path, cli):
    """--no-email is a decision about that digest: no outbox rows are made, so neither a
    later `send` (nothing queued) nor a re-run of the same week mails it; a user who only
    wants a look uses --dry-run. The next week's digest is mailed as usual."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        quiet = cli("--config", str(config), "run", "--as-of", AS_OF, "--no-email")
        assert (tmp_path / "out" / "digests" / f"{AS_OF}.md").exists()
        assert (tmp_path / "out" / "READING_LIST.md").exists()
        assert [r["id"] for r in db_rows(tmp_path, "SELECT id FROM digests")] == [AS_OF]
        assert db_rows(tmp_path, "SELECT id FROM deliveries") == []
        rerun = cli("--config", str(config), "run", "--as-of", AS_OF)
        assert smtp.messages == []
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        week = cli("--config", str(config), "run", "--as-of", "2026-11-09")
        delivered = [(m.rcpt_tos[0], str(m.message["Subject"])) for m in smtp.messages]
    assert "sent to 0" in quiet.stdout
    assert "sent to 0" in rerun.stdout and "sent to 2" in week.stdout
    assert sorted(r for r, _ in delivered) == READERS
    assert all("2026-11-09" in subject for _, subject in delivered)


# --- git publishing through the CLI ---------------------------------------------------------

@pytest.fixture
def git_env(tmp_path: Path) -> dict:
    """No global or system git config (no identity), as on a fresh server."""
    return {"HOME": str(tmp_path / "home"), "GIT_CONFIG_GLOBAL": str(tmp_path / "no-gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1"}


def git(*args: str, env: dict) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **env}).stdout.strip()


def remote_commits(remote: Path, env: dict) -> list[str]:
    try:
        return git("--git-dir", str(remote), "log", "--format=%H %s", "main", env=env).splitlines()
    except subprocess.CalledProcessError:
        return []


def test_git_publishing_commits_pushes_skips_an_empty_week_and_retries_a_rejected_push(
        tmp_path, cli, git_env):
    remote, checkout = tmp_path / "remote.git", tmp_path / "checkout"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(remote), env=git_env)
    git("clone", "--quiet", str(remote), str(checkout), env=git_env)
    gitcfg = {"repo": str(checkout), "branch": "main", "path": "reading", "push": True,
              "message": "Update RL reading list"}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, outputs={"git": gitcfg})
        first = cli("--config", str(config), "run", "--as-of", AS_OF, env=git_env)
        log1 = remote_commits(remote, git_env)
        files = git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main",
                    env=git_env).splitlines()
        listed = git("--git-dir", str(remote), "show", "main:reading/READING_LIST.md", env=git_env)
        written = (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")

        empty = cli("--config", str(config), "run", "--as-of", "2026-11-09", env=git_env)
        log2 = remote_commits(remote, git_env)
        moved = git("-C", str(checkout), "diff", "--stat", "HEAD~1", env=git_env) \
            if len(log2) > 1 else ""

        marker = tmp_path / "rejected-once"
        hook = remote / "hooks" / "pre-receive"
        hook.write_text(f'#!/bin/sh\nif [ ! -e "{marker}" ]; then\n  touch "{marker}"\n'
                        '  echo "push refused once for the test" >&2\n  exit 1\nfi\nexit 0\n')
        hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        arxiv.add(rl_paper(2, datetime(2026, 11, 12, 12, tzinfo=UTC)))
        rejected = cli("--config", str(config), "-q", "run", "--as-of", "2026-11-16", env=git_env,
                       check=1)
        log3 = remote_commits(remote, git_env)
        retried = cli("--config", str(config), "run", "--as-of", "2026-11-16", env=git_env)
        log4 = remote_commits(remote, git_env)
        latest = git("--git-dir", str(remote), "show", "main:reading/READING_LIST.md", env=git_env)
    outputs = first.stderr + empty.stderr + rejected.stderr + retried.stderr
    assert "Traceback" not in outputs
    assert [c.split(" ", 1)[1] for c in log1] == ["Update RL reading list"]
    assert {"reading/READING_LIST.md", f"reading/digests/{AS_OF}.md", f"reading/digests/{AS_OF}.html",
            f"reading/digests/{AS_OF}.txt", "reading/feed.xml"} <= set(files)
    assert listed == written.strip() and "2611.00001" in listed
    # A week with nothing new: the same bytes, so no commit (and no push).
    assert "relevant 0" in empty.stdout
    assert log2 == log1, f"a commit for a week with nothing new:\n{moved}"
    # A rejected push: exit 1, one line naming the checkout and git's words; kept locally.
    lines = stderr_lines(rejected)
    assert len(lines) == 1, rejected.stderr
    assert str(checkout) in lines[0] and "pre-receive hook declined" in lines[0]
    assert "push refused once for the test" in lines[0]
    assert log3 == log1
    assert (tmp_path / "out" / "digests" / "2026-11-16.md").exists()  # the rest was published
    # The next run (nothing new) pushes the commit it kept.
    assert len(log4) == 2 and "2611.00002" in latest
