"""Retry timing, one place for every client that retries (arXiv, the LLM, the outbox).

Exponential backoff, stretched when a server asks for longer with Retry-After, never
past a cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


def backoff(attempt: int, base: float, cap: float, asked: float | None = None) -> float:
    """Seconds to wait before try number attempt + 2 (attempt counts from 0):
    base x 2^attempt, or what the server asked if longer; never more than cap."""
    return min(max(base * 2 ** max(attempt, 0), asked or 0.0), cap)


def retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """The wait a server asked for, in seconds: `retry-after-ms` (OpenAI-style), or
    `Retry-After` as seconds or as an HTTP date; None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)
