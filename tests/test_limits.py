"""Requests that end and responses that fit: deadlines and size caps through the real CLI."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from tests.helpers import CATS, DAY, config_for, full_config, rl_paper, run_cli_measured, write_config
from tests.servers.arxiv_server import ArxivServer, gzip_bomb, huge, trickle, trickle_headers
from tests.servers.openai_server import OpenAIServer
from tests.servers.openai_server import trickle as trickle_reply
from tests.servers.openai_server import trickle_headers as trickle_reply_headers

AS_OF = "2026-10-22T00:00:00+00:00"
PEAK_LIMIT = 300 * 2**20


def limited_config(tmp_path, server: ArxivServer, arxiv: dict | None = None, **sources):
    return write_config(tmp_path, {"sources": {
        "arxiv": {"api_url": server.api_url, "categories": CATS, "retries": 0, "overlap_hours": 0,
                  **(arxiv or {})},
        "rss": {"urls": [server.rss_url(CATS)]}, **sources}, "seeds": {"paths": []}}, seeds=False)


@pytest.mark.slow  # make test-slow: a long scenario beside faster ones on the same path
def test_a_trickling_feed_ends_at_the_deadline_with_exit_3_and_frees_the_lock(tmp_path, cli):
    with ArxivServer([rl_paper(1, datetime(2026, 10, 21, tzinfo=UTC))]) as server:
        config = limited_config(tmp_path, server, arxiv={"timeout_seconds": 5, "deadline_seconds": 2})
        server.script("/rss/", trickle(0.2))
        began = time.monotonic()
        failed = cli("--config", str(config), "collect", "--as-of", AS_OF, check=3)
        took = time.monotonic() - began

        assert took < 60  # the trickle never ends by itself
        assert failed.stderr.strip().count("\n") == 0
        assert server.rss_url(CATS[:1]) in failed.stderr  # the first of the per-category feeds
        assert "longer than 2 s" in failed.stderr
        again = cli("--config", str(config), "collect", "--as-of", AS_OF)  # not 75: lock is free
    assert "new 1" in again.stdout


def test_headers_trickling_in_end_at_the_deadline_too(tmp_path, cli):
    with ArxivServer([rl_paper(1, datetime(2026, 10, 21, tzinfo=UTC))]) as server:
        config = limited_config(tmp_path, server, arxiv={"timeout_seconds": 5, "deadline_seconds": 2})
        server.script("/api/query", trickle_headers(0.2))
        began = time.monotonic()
        failed = cli("--config", str(config), "collect", "--as-of", AS_OF, check=3)
        took = time.monotonic() - began

    assert took < 30  # every read gets a byte within timeout_seconds: only the deadline ends it
    assert failed.stderr.strip().count("\n") == 0
    assert server.api_url in failed.stderr and "longer than 2 s" in failed.stderr


@pytest.mark.slow
def test_a_200_mb_api_page_is_a_source_failure_within_300_mb(tmp_path):
    with ArxivServer() as server:
        config = config_for(tmp_path, server, rss=False)
        server.script("/api/query", huge(200))
        failed, peak = run_cli_measured("--config", str(config), "collect", "--as-of", AS_OF,
                                        check=3)

    assert "larger than 50 MB (after decompression)" in failed.stderr
    assert server.api_url in failed.stderr
    assert peak < PEAK_LIMIT, f"peak memory {peak / 2**20:.0f} MB"


def test_a_gzip_bomb_feed_is_a_source_failure_within_300_mb(tmp_path):
    with ArxivServer() as server:
        config = limited_config(tmp_path, server, max_response_mb=20)
        server.script("/rss/", gzip_bomb(512))
        failed, peak = run_cli_measured("--config", str(config), "collect", "--as-of", AS_OF,
                                        check=3)

    assert "larger than 20 MB (after decompression)" in failed.stderr
    assert "sources.max_response_mb" in failed.stderr
    assert peak < PEAK_LIMIT, f"peak memory {peak / 2**20:.0f} MB"


@pytest.mark.parametrize(("reply", "how"), [
    (trickle_reply(0.2), "the reply was still arriving"),  # the body, a byte at a time
    (trickle_reply_headers(0.2), ""),  # the headers: every read gets a byte in time
], ids=["body", "headers"])
@pytest.mark.slow
def test_a_trickling_llm_reply_ends_at_the_per_paper_deadline_and_falls_back(tmp_path, cli, reply, how):
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, OpenAIServer() as llm:
        llm.queue(reply)
        config = full_config(tmp_path, arxiv, llm)
        config.write_text(config.read_text(encoding="utf-8").replace(
            "deadline_seconds: 10", "deadline_seconds: 2"), encoding="utf-8")
        began = time.monotonic()
        result = cli("--config", str(config), "run", "--as-of", "2026-11-02",
                     env={"OPENAI_API_KEY": "sk-test"})
        took = time.monotonic() - began

    assert took < 60  # the reply alone would take minutes at 5 bytes a second, or never end
    assert f"deadline of 2 s passed (deadline passed while {how}" in result.stderr
    assert "1 failed" in result.stdout  # the summary fell back; the featured reading did not
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert "English summary of GRPO variant 1" not in digest  # the stand-in's summary never came
    assert "finds a core problem" in digest  # the next call, the featured reading, came in time


@pytest.mark.slow  # make test's margin under 5 minutes: it runs in make test-slow (CI)
def test_summaries_that_never_came_are_read_again_at_most_enrich_max_papers_a_run(tmp_path, cli):
    """enrich.max_papers below a week's papers: the published papers left without a summary
    are asked for after the week's, newest first, and a run reads the newest max_papers of
    them, as many as it could summarise; every one was read every week (here 3 more a
    week: 24 waiting in the eighth), and in a quiet week the newest are still summarised."""
    start = datetime(2026, 9, 7, tzinfo=UTC)
    with ArxivServer([]) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm, digest={"featured": 0, "max_papers": 30})
        data = yaml.safe_load(config.read_text())
        data["enrich"]["max_papers"] = 2
        config.write_text(yaml.safe_dump(data))
        waiting = []
        for week in range(8):
            as_of = start + timedelta(days=7 * week)
            for k in range(5):
                arxiv.add(rl_paper(week * 10 + k + 1, as_of - timedelta(days=3, hours=k)))
            ran = cli("--config", str(config), "run", "--as-of", as_of.date().isoformat(),
                      env={"OPENAI_API_KEY": "k"})
            said = re.findall(r"summaries: (\d+) wait for the next run", ran.stderr)
            assert len(said) <= 1  # one line a run, the week's batch and the late one together
            waiting.append(sum(map(int, said)))
        quiet = cli("--config", str(config), "run", "--as-of", (start + timedelta(days=56)).date().isoformat(),
                    env={"OPENAI_API_KEY": "k"})
    assert waiting == [3] + [5] * 7  # the week's 5 and the 2 newest of those still without one
    assert "summarised 2 (0 cached)" in quiet.stdout and "wait for the next run" not in quiet.stderr
