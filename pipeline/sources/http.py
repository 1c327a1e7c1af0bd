"""One polite HTTP client shared by every arXiv source: pacing, timeouts, retries.

arXiv asks for one request every three seconds from a client; the API and the
RSS feed count against the same allowance, so both go through one Fetcher.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests

from pipeline.errors import SourceError
from pipeline.stopping import checkpoint, pause

_ERRNO = re.compile(r"\[Errno -?\d+\][^'\")]*")


@dataclass(frozen=True)
class Fetched:
    """A successful (2xx) answer, body kept as bytes so parsers see the real encoding."""

    url: str
    status: int
    content_type: str
    body: bytes

    @property
    def text(self) -> str:
        """The body as UTF-8; requests would guess ISO-8859-1 without a charset (mojibake)."""
        return self.body.decode("utf-8", errors="replace")


class _Retryable(Exception):
    """A failure worth another try: network trouble, 429, 5xx, or a caller's check."""

    def __init__(self, cause: str, retry_after: float | None = None):
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after


class Fetcher:
    """GETs one URL at a time, spaced by delay_seconds, retrying what may pass.

    `requests` counts every request sent, retries included, for the run report.
    """

    def __init__(
        self,
        delay_seconds: float,
        timeout_seconds: float,
        retries: int,
        user_agent: str,
        session: requests.Session | None = None,
        *,
        backoff_seconds: float = 1.0,
        max_wait_seconds: float = 120.0,
    ):
        self.delay_seconds = delay_seconds
        self.timeout_seconds = timeout_seconds
        self.retries = retries
        self.user_agent = user_agent
        self.backoff_seconds = backoff_seconds
        self.max_wait_seconds = max_wait_seconds
        self.requests = 0
        self._session = session or requests.Session()
        self._lock = threading.Lock()
        self._last_start: float | None = None

    def get(self, url: str, retry_when: Callable[[Fetched], str | None] | None = None) -> Fetched:
        """Fetch url or raise SourceError naming it and the last cause.

        `retry_when` lets a caller treat a 200 answer as transient (it returns
        the reason); it may also raise SourceError to fail at once.
        """
        with self._lock:
            for attempt in range(self.retries + 1):
                try:
                    return self._get_once(url, retry_when)
                except _Retryable as problem:
                    last = problem
                    if attempt < self.retries:
                        pause(self._backoff(attempt, problem.retry_after))
            retries = "1 retry" if self.retries == 1 else f"{self.retries} retries"
            raise SourceError(f"{url}: {last.cause} after {retries}")

    def _get_once(self, url: str, retry_when: Callable[[Fetched], str | None] | None) -> Fetched:
        checkpoint()
        self._wait_turn()
        self.requests += 1
        try:
            response = self._session.get(
                url, timeout=self.timeout_seconds, headers={"User-Agent": self.user_agent}
            )
        except requests.Timeout:
            raise _Retryable(f"no answer within {self.timeout_seconds:g} s") from None
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            raise _Retryable(f"connection failed ({_reason(exc)})") from None
        except requests.RequestException as exc:
            raise SourceError(f"{url}: {exc}") from None
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retryable(f"HTTP {status}", _retry_after(response))
        if not 200 <= status < 300:
            raise SourceError(f"{url}: HTTP {status}")
        fetched = Fetched(url, status, response.headers.get("Content-Type", ""), response.content)
        reason = retry_when(fetched) if retry_when else None
        if reason:
            raise _Retryable(reason)
        return fetched

    def _wait_turn(self) -> None:
        """Sleep until delay_seconds have passed since the previous request started."""
        if self._last_start is not None:
            remaining = self._last_start + self.delay_seconds - time.monotonic()
            if remaining > 0:
                pause(remaining)
        self._last_start = time.monotonic()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff, or longer if the server asked; never past max_wait_seconds."""
        wait = max(self.backoff_seconds * 2**attempt, retry_after or 0.0)
        return min(wait, self.max_wait_seconds)


def looks_like_html(body: bytes, content_type: str = "") -> bool:
    """An HTML page where a feed was expected: proxies and outages serve them with 200."""
    head = body.lstrip()[:200].lower()
    return "html" in content_type.lower() or head.startswith((b"<!doctype html", b"<html"))


def _retry_after(response: requests.Response) -> float | None:
    """Retry-After in its seconds form; the rare HTTP-date form falls back to backoff."""
    value = response.headers.get("Retry-After", "").strip()
    return float(value) if value.isdigit() else None


def _reason(exc: Exception) -> str:
    """The useful tail of a requests error ('[Errno 111] Connection refused')."""
    match = _ERRNO.search(str(exc))
    return match.group(0).strip() if match else type(exc).__name__
