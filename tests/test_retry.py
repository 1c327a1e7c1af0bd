"""Retry timing shared by the arXiv fetcher, the LLM client and the outbox."""

from __future__ import annotations

from datetime import UTC, datetime

from pipeline.retry import backoff, retry_after

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_backoff_doubles_is_stretched_by_the_server_and_capped():
    assert [backoff(n, 1.0, 60.0) for n in range(4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff(0, 1.0, 60.0, asked=30.0) == 30.0
    assert backoff(10, 1.0, 60.0) == 60.0
    assert backoff(0, 1.0, 60.0, asked=600.0) == 60.0


def test_retry_after_reads_seconds_milliseconds_and_an_http_date():
    assert retry_after({"retry-after": "7"}) == 7.0
    assert retry_after({"retry-after": " 1.5 "}) == 1.5
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "Mon, 30 Nov 2026 12:00:30 GMT"}, now=NOW) == 30.0
    assert retry_after({"retry-after": "Mon, 30 Nov 2026 11:00:00 GMT"}, now=NOW) == 0.0


def test_no_or_an_unreadable_retry_after_is_none():
    assert retry_after({}) is None
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({"retry-after-ms": "x"}) is None
