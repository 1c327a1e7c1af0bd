"""Logs as cron, systemd and Docker keep them: timestamped lines, no HTTP chatter, one line
for an LLM that is down instead of a retry chain per paper."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import threading

import pytest

from tests.helpers import DAY, KEY, cli_command, cli_env, full_config, rl_paper
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer, error

STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} (DEBUG|INFO|WARNING|ERROR) [\w.]+: ")


def test_logs_off_a_terminal_are_timestamped_lines_without_http_requests(tmp_path, cli):
    with ArxivServer([rl_paper(i, DAY) for i in range(3)]) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm)
        result = cli("--config", str(config), "-v", "run", "--as-of", "2026-11-02",
                     env={"OPENAI_API_KEY": KEY})
        assert llm.requests  # the LLM was called, so its HTTP client had lines to log
    lines = result.stderr.splitlines()
    assert any("pipeline.enrich" in line for line in lines)
    assert [line for line in lines if not STAMPED.match(line)] == []
    assert "HTTP Request" not in result.stderr and "httpx" not in result.stderr
    assert "\x1b[" not in result.stderr  # no terminal colours or bars in a log file


def test_minus_vv_shows_the_http_client_lines(tmp_path, cli):
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm)
        result = cli("--config", str(config), "-vv", "run", "--as-of", "2026-11-02",
                     env={"OPENAI_API_KEY": KEY})
    assert re.search(r"DEBUG|INFO", result.stderr)
    assert "httpx2: HTTP Request: POST" in result.stderr


def test_an_llm_that_is_down_costs_one_line_not_a_retry_chain_per_paper(tmp_path, cli):
    with ArxivServer([rl_paper(i, DAY) for i in range(12)]) as arxiv, OpenAIServer() as llm:
        llm.script = lambda request: error(500)
        config = full_config(tmp_path, arxiv, llm,
                             enrich={"provider": "openai", "base_url": llm.url, "retries": 0,
                                     "concurrency": 1, "failure_limit": 3})
        result = cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        assert len(llm.requests) == 3
    assert "summarised 0" in result.stdout and "3 failed" in result.stdout
    assert result.stderr.count("skipping it for the rest of this run") == 1
    assert len(result.stderr.splitlines()) < 15
    assert (tmp_path / "out" / "digests" / "2026-11-02.md").exists()  # the digest still went out


@pytest.mark.slow  # make test's margin under 5 minutes: it runs in make test-slow (CI)
def test_progress_bars_are_drawn_on_a_terminal_only(tmp_path, cli):
    with ArxivServer([rl_paper(i, DAY) for i in range(3)]) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm)
        piped = cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        code, drawn = _on_a_terminal("--config", str(config), "run", "--as-of", "2026-11-09",
                                     env={"OPENAI_API_KEY": KEY, "TERM": "xterm"})
    assert code == 0
    assert "fetching from arXiv" in drawn and "requests" in drawn
    assert "fetching from arXiv" not in piped.stderr


def _on_a_terminal(*args: str, env: dict) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal; its exit code and what it drew there."""
    main, terminal = pty.openpty()
    drawn = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        done = subprocess.run([*cli_command(), *args], stdout=subprocess.PIPE, stderr=terminal,
                              env=cli_env(env), cwd="/", timeout=120)
    finally:
        os.close(terminal)
        reader.join(10)
        os.close(main)
    return done.returncode, drawn.decode("utf-8", "replace")
