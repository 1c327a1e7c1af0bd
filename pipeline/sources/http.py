"""One polite HTTP client shared by every arXiv source: pacing, timeouts, retries, limits.

arXiv asks for one request every three seconds from a client; the API and the
RSS feed count against the same allowance, so both go through one Fetcher, and the
Fetchers of this machine's processes share the last request's time (`pace_file`).
Every request ends: `timeout_seconds` bounds each wait on the socket and
`deadline_seconds` the whole request (connect, the headers and the full body, however
slowly they trickle in). The body is read in pieces and decompressed as it comes, so a
response over `max_bytes` (a runaway page, a gzip bomb) fails without being held.
"""

from __future__ import annotations

import contextvars
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import urllib3
from filelock import FileLock
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from pipeline import logs
from pipeline.errors import SourceError
from pipeline.retry import backoff, retry_after
from pipeline.stopping import checkpoint, pause

_PIECE = 2**16  # bytes asked for per read; decompression is bounded to as much
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
        """The body in the charset its Content-Type names, else UTF-8 (requests would guess
        ISO-8859-1 without one: mojibake)."""
        named = re.search(r"charset=[\"']?([\w.:-]+)", self.content_type, re.IGNORECASE)
        try:
            return self.body.decode(named.group(1) if named else "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            return self.body.decode("utf-8", errors="replace")


class _Retryable(Exception):
    """A failure worth another try: network trouble, 429, 5xx, or a caller's check."""

    def __init__(self, cause: str, retry_after: float | None = None):
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after


SHOWN_VALUE = 60  # characters of one query parameter an error line shows


def shown(url: str) -> str:
    """A URL as an error line names it: a long query value is cut (an API search for the
    seeds' titles runs to 1,000 characters), so the line stays one to read and still names
    the address the config holds and the page (`start=`) it asked for. A query value the
    config's URL holds is *** first (logs.hide): cut, it would no longer be found and masked."""
    base, mark, query = logs.redact(url).partition("?")
    return base + mark + "&".join(_cut(part) for part in query.split("&")) if query else url


def _cut(part: str) -> str:
    if len(part) <= SHOWN_VALUE:
        return part
    return re.sub(r"%[0-9A-Fa-f]?$", "", part[:SHOWN_VALUE]) + "…"  # no half escape


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
        deadline_seconds: float = 300.0,
        max_bytes: int = 50 * 2**20,
        pace_file: Path | None = None,
    ):
        self.delay_seconds = delay_seconds
        self.timeout_seconds = timeout_seconds
        self.retries = retries
        self.user_agent = user_agent
        self.backoff_seconds = backoff_seconds
        self.max_wait_seconds = max_wait_seconds
        self.deadline_seconds = deadline_seconds
        self.max_bytes = max_bytes
        self.requests = 0
        self._session = session or requests.Session()
        self._session.mount("http://", _DeadlineAdapter())
        self._session.mount("https://", _DeadlineAdapter())
        self._lock = threading.Lock()
        self._last_start = 0.0  # time.time() of this Fetcher's last request
        self.pace_file = pace_file

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
                    asked = problem.retry_after
                    if asked is not None and asked > self.max_wait_seconds:  # a later run's turn
                        raise SourceError(f"{shown(url)}: {problem.cause}, asking to wait {asked:.0f} s "
                                          f"(more than {self.max_wait_seconds:g} s)") from None
                    if attempt < self.retries:
                        pause(backoff(attempt, self.backoff_seconds, self.max_wait_seconds,
                                      problem.retry_after))
            if not self.retries:
                raise SourceError(f"{shown(url)}: {last.cause}")
            retries = "1 retry" if self.retries == 1 else f"{self.retries} retries"
            raise SourceError(f"{shown(url)}: {last.cause} after {retries}")

    def _get_once(self, url: str, retry_when: Callable[[Fetched], str | None] | None) -> Fetched:
        checkpoint()
        self._wait_turn()
        self.requests += 1
        deadline = time.monotonic() + self.deadline_seconds
        wait = min(self.timeout_seconds, self.deadline_seconds)
        token = _DEADLINE.set(deadline)
        try:
            response = self._session.get(
                url, timeout=wait, stream=True, headers={"User-Agent": self.user_agent}
            )
        except (requests.ConnectionError, requests.Timeout,
                requests.exceptions.ChunkedEncodingError) as exc:
            if time.monotonic() >= deadline:  # the watchdog cut a reply trickling its headers
                raise _Retryable(f"the answer took longer than {self.deadline_seconds:g} s") from None
            if isinstance(exc, requests.Timeout):
                raise _Retryable(f"no answer within {wait:g} s") from None
            raise _Retryable(f"connection failed ({_reason(exc)})") from None
        except requests.RequestException as exc:
            raise SourceError(f"{shown(url)}: {exc}") from None
        finally:
            _DEADLINE.reset(token)
        with response:
            status = response.status_code
            if status == 429 or status >= 500:
                raise _Retryable(f"HTTP {status}", retry_after(response.headers))
            if not 200 <= status < 300:
                raise SourceError(f"{shown(url)}: HTTP {status}")
            body = self._body(response, url, deadline)
        fetched = Fetched(url, status, response.headers.get("Content-Type", ""), body)
        if _rate_exceeded(fetched.body):
            raise _Retryable("arXiv answered 'Rate exceeded.'")
        reason = retry_when(fetched) if retry_when else None
        if reason:
            raise _Retryable(reason)
        return fetched

    def _body(self, response: requests.Response, url: str, deadline: float) -> bytes:
        """The decompressed body, read as it arrives, within the deadline and max_bytes.

        read1 returns whatever one read from the socket gave, so the clock is checked
        between pieces even when a server sends one byte a second; decompression is
        bounded per piece, so a gzip bomb never expands in memory.
        """
        body = bytearray()
        try:
            while piece := response.raw.read1(_PIECE, decode_content=True):
                body += piece
                if len(body) > self.max_bytes:
                    raise SourceError(
                        f"{shown(url)}: the response is larger than {self.max_bytes / 2**20:g} MB "
                        "(after decompression)",
                        "raise sources.max_response_mb if this source really sends that much")
                if time.monotonic() > deadline:
                    raise _Retryable(f"the answer took longer than {self.deadline_seconds:g} s")
                checkpoint()
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            if isinstance(exc, TimeoutError | urllib3.exceptions.TimeoutError):
                raise _Retryable(f"the answer stalled for {self.timeout_seconds:g} s") from None
            raise _Retryable(f"connection failed while reading ({_reason(exc)})") from None
        return bytes(body)

    def _wait_turn(self) -> None:
        """Sleep until delay_seconds have passed since the last request started: this
        Fetcher's, or another process's on this machine (a `collect` then a `run`, `doctor`
        during a run): arXiv counts a machine's requests, not a process's. A clock set back
        never makes the wait longer than delay_seconds."""
        with self._shared():
            last = max(self._last_start, self._read_pace())
            remaining = min(last + self.delay_seconds - time.time(), self.delay_seconds)
            if remaining > 0:
                pause(remaining)
            self._last_start = time.time()
            if self.pace_file is not None:
                try:
                    self.pace_file.write_text(repr(self._last_start), encoding="ascii")
                except OSError:
                    pass  # a folder that is not writable: this process still paces itself

    @contextmanager
    def _shared(self) -> Iterator[None]:
        """The pace file's lock, while a process reads, waits its turn and writes it; none
        in a folder this user cannot write (doctor run as another user than the runs')."""
        lock = None
        if self.pace_file is not None and self.pace_file.parent.is_dir():
            lock = FileLock(str(self.pace_file) + ".lock")
            try:
                lock.acquire()
            except OSError:  # as for the pace file: this process still paces itself
                lock = None
        try:
            yield
        finally:
            if lock is not None:
                lock.release()

    def _read_pace(self) -> float:
        try:
            return float(self.pace_file.read_text(encoding="ascii")) if self.pace_file else 0.0
        except (OSError, ValueError):
            return 0.0


_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)


class _Watchdog:
    """Cuts the connection when the request's deadline passes while the headers arrive.

    urllib3's read timeout bounds each wait on the socket, so a server sending one header
    byte a second would hold a request forever; shutting the socket down ends the read.
    (The body is read in pieces with the clock checked between them: see Fetcher._body.)
    """

    sock: socket.socket | None

    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        deadline = _DEADLINE.get()
        if deadline is None:
            return super().getresponse(*args, **kwargs)  # type: ignore[misc]
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._cut)
        timer.daemon = True
        timer.start()
        try:
            response = super().getresponse(*args, **kwargs)  # type: ignore[misc]
        finally:
            timer.cancel()
        if time.monotonic() >= deadline:  # cut off: what arrived is not the whole header
            response.close()
            raise TimeoutError("the deadline passed while the headers arrived")
        return response

    def _cut(self) -> None:
        try:
            if self.sock is not None:
                self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _HTTPConnection(_Watchdog, HTTPConnection):
    pass


class _HTTPSConnection(_Watchdog, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class _DeadlineAdapter(HTTPAdapter):
    """requests' adapter with connections that honour the Fetcher's deadline."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


def looks_like_html(body: bytes, content_type: str = "") -> bool:
    """An HTML page where a feed was expected: proxies and outages serve them with 200."""
    head = body.lstrip()[:200].lower()
    return "html" in content_type.lower() or head.startswith((b"<!doctype html", b"<html"))


def _rate_exceeded(body: bytes) -> bool:
    """arXiv's 2026 throttle can answer HTTP 200 with this plain text: never a page of results."""
    return body.lstrip()[:40].lower().startswith(b"rate exceeded")


def _reason(exc: Exception) -> str:
    """The useful tail of a requests error ('[Errno 111] Connection refused')."""
    match = _ERRNO.search(str(exc))
    return match.group(0).strip() if match else type(exc).__name__
