"""arXiv's 2026 throttling: 'Rate exceeded.' as a 200 text body, 429 without Retry-After,
and an Atom page without a result count are retried, never read as 'no papers'."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.config import load
from pipeline.errors import SourceError
from pipeline.models import Paper
from pipeline.sources.arxiv_api import fetch_ids, search_window
from pipeline.sources.arxiv_rss import fetch_feed
from pipeline.sources.http import Fetcher
from pipeline.store import Store
from tests.helpers import write_config
from tests.servers.arxiv_server import NO_TOTAL, RATE_EXCEEDED, THROTTLED, ArxivServer

DAY = datetime(2026, 11, 18, 12, tzinfo=UTC)
CATS = ["cs.LG"]


def paper(n: int) -> Paper:
    return Paper(id=f"2611.{n:05d}", title=f"GRPO for language models, part {n}",
                 abstract="We train a large language model with reinforcement learning.",
                 authors=("Ada Lovelace",), categories=("cs.LG",), submitted=DAY, updated=DAY)


def fetcher(retries: int = 2) -> Fetcher:
    return Fetcher(0, 5, retries, "rl-digest-tests/0.1", backoff_seconds=0.01)


@pytest.mark.parametrize("fault", [RATE_EXCEEDED, THROTTLED], ids=["200-text", "429-no-retry-after"])
def test_throttled_api_page_is_retried_and_the_papers_arrive(fault):
    with ArxivServer([paper(1), paper(2)]) as server:
        server.script("/api/query", fault, fault)
        found, stats = search_window(fetcher(), server.api_url, CATS, ["GRPO"],
                                     DAY - timedelta(days=1), DAY + timedelta(days=1), 10)
    assert [p.id for p in found] == ["2611.00001", "2611.00002"]
    assert stats.requests == 3


def test_rate_exceeded_body_on_the_feed_is_retried_not_an_empty_feed():
    with ArxivServer([paper(1)]) as server:
        server.script("/rss/", RATE_EXCEEDED)
        feed = fetch_feed(fetcher(), server.rss_url(CATS))
    assert [p.id for p in feed.papers] == ["2611.00001"]


def test_rate_exceeded_every_time_is_a_source_error_naming_the_url():
    with ArxivServer([paper(1)]) as server:
        server.script("/api/query", *[RATE_EXCEEDED] * 3)
        with pytest.raises(SourceError) as caught:
            fetch_ids(fetcher(retries=2), server.api_url, ["2611.00001"])
    assert str(caught.value).endswith("arXiv answered 'Rate exceeded.' after 2 retries")
    assert server.api_url in str(caught.value)


def test_a_page_without_a_result_count_is_retried_then_fails():
    with ArxivServer([paper(1)]) as server:
        server.script("/api/query", NO_TOTAL)
        assert [p.id for p in fetch_ids(fetcher(), server.api_url, ["2611.00001"])] == ["2611.00001"]
        server.script("/api/query", *[NO_TOTAL] * 3)
        with pytest.raises(SourceError) as caught:
            fetch_ids(fetcher(retries=2), server.api_url, ["2611.00001"])
    assert "without opensearch:totalResults after 2 retries" in str(caught.value)


def test_the_watermark_never_moves_on_a_page_without_a_result_count(tmp_path, cli):
    with ArxivServer([paper(1)]) as server:
        config = write_config(tmp_path, {"sources": {
            "arxiv": {"api_url": server.api_url, "categories": CATS, "retries": 1},
            "rss": {"enabled": False}, "oai": {"enabled": False}}, "seeds": {"paths": []}},
            seeds=False)
        server.script("/api/query", NO_TOTAL, NO_TOTAL)
        failed = cli("--config", str(config), "collect", "--as-of", "2026-11-19T00:00:00+00:00",
                     check=3)
        assert "without opensearch:totalResults" in failed.stderr
        assert Store.open(load(config).storage.url).watermark() is None
        again = cli("--config", str(config), "collect", "--as-of", "2026-11-19T00:00:00+00:00")
    assert "new 1" in again.stdout
    assert Store.open(load(config).storage.url).watermark() == datetime(2026, 11, 19, tzinfo=UTC)


@pytest.mark.slow  # make test's margin under 5 minutes: it runs in make test-slow (CI)
def test_two_commands_one_after_the_other_keep_the_pace_between_them(tmp_path, cli):
    """arXiv counts a machine's requests: a `collect` then at once a `run` (or `doctor`
    during a run) must not put their requests closer than delay_seconds."""
    with ArxivServer([paper(1)]) as server:
        config = write_config(tmp_path, {"sources": {
            "arxiv": {"api_url": server.api_url, "categories": CATS, "retries": 1, "delay_seconds": 1.5},
            "rss": {"urls": [server.rss_url(CATS)]}, "oai": {"enabled": False}},
            "seeds": {"paths": []}}, seeds=False)
        cli("--config", str(config), "collect", "--as-of", "2026-11-19T00:00:00+00:00")
        first = len(server.requests)
        cli("--config", str(config), "collect", "--as-of", "2026-11-19T00:00:00+00:00")
        starts = [r.started for r in server.requests]
    assert first >= 1 and len(starts) > first
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert min(gaps) >= 1.4, gaps  # across the two processes too
    assert (tmp_path / "state" / "arxiv-pace").exists()
