"""The shared Fetcher against a local server: pacing, retries, timeouts, one-line errors."""

from __future__ import annotations

import socket
import threading
from itertools import pairwise

import pytest

from pipeline.errors import SourceError
from pipeline.sources.http import Fetcher
from tests.servers.arxiv_server import ArxivServer, hang, http_error, raw

UA = "rl-digest-tests/0.1 (mailto:tests@example.org)"


def fetcher(**options) -> Fetcher:
    defaults = {"delay_seconds": 0, "timeout_seconds": 5, "retries": 3, "backoff_seconds": 0.01}
    return Fetcher(user_agent=UA, **(defaults | options))


def gaps(server: ArxivServer) -> list[float]:
    starts = [request.started for request in server.requests]
    return [later - earlier for earlier, later in pairwise(starts)]


@pytest.fixture
def server():
    with ArxivServer() as running:
        yield running


def test_two_503s_then_success_is_retried_and_counted(server):
    server.script("/rss/", http_error(503), http_error(503))
    client = fetcher()

    page = client.get(server.rss_url(["cs.LG"]))

    assert page.status == 200
    assert client.requests == 3 == len(server.requests)


def test_503_after_the_last_retry_is_one_line_naming_the_url(server):
    server.script("/rss/", *[http_error(503)] * 4)
    url = server.rss_url(["cs.LG"])

    with pytest.raises(SourceError) as caught:
        fetcher(retries=3).get(url)

    assert str(caught.value) == f"{url}: HTTP 503 after 3 retries"
    assert caught.value.exit_code == 3
    assert len(server.requests) == 4


def test_429_waits_as_long_as_retry_after_says(server):
    server.script("/rss/", http_error(429, retry_after=1))

    fetcher().get(server.rss_url(["cs.LG"]))

    assert len(server.requests) == 2
    assert gaps(server)[0] >= 0.95


def test_a_retry_after_longer_than_the_cap_fails_at_once_naming_the_wait(server):
    server.script("/rss/", http_error(429, retry_after=3600))
    url = server.rss_url(["cs.LG"])

    with pytest.raises(SourceError) as caught:
        fetcher(max_wait_seconds=120).get(url)

    assert str(caught.value) == f"{url}: HTTP 429, asking to wait 3600 s (more than 120 s)"
    assert len(server.requests) == 1  # no wait, no retry: the next run reads the window again


def test_other_4xx_fails_at_once(server):
    server.script("/rss/", http_error(404))
    url = server.rss_url(["cs.LG"])

    with pytest.raises(SourceError, match="HTTP 404$"):
        fetcher().get(url)

    assert len(server.requests) == 1


def test_hang_past_timeout_is_retried_then_names_the_url(server):
    server.script("/api/", hang(1.5), hang(1.5))
    url = server.api_url + "?search_query=cat:cs.LG"

    with pytest.raises(SourceError) as caught:
        fetcher(timeout_seconds=0.2, retries=1).get(url)

    assert str(caught.value) == f"{url}: no answer within 0.2 s after 1 retry"
    assert len(server.requests) == 2


def test_one_hang_then_an_answer_succeeds(server):
    server.script("/rss/", hang(1.5))

    page = fetcher(timeout_seconds=0.2).get(server.rss_url(["cs.LG"]))

    assert page.status == 200 and len(server.requests) == 2


def test_refused_connection_is_retried_then_names_the_url():
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/rss/cs.LG"
    client = fetcher(retries=1)

    with pytest.raises(
        SourceError, match=r"^http://127\.0\.0\.1:\d+/rss/cs\.LG: connection failed"
    ):
        client.get(url)

    assert client.requests == 2


def test_request_starts_are_spaced_by_delay_even_across_threads(server):
    client = fetcher(delay_seconds=0.2)
    url = server.rss_url(["cs.LG"])
    threads = [threading.Thread(target=client.get, args=(url,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(server.requests) == 3
    arrivals = sorted(request.started for request in server.requests)
    # without the spacing all three arrive within milliseconds; a server thread scheduled
    # late on a busy machine shortens one gap by some tens of ms, never to nothing
    assert all(later - earlier >= 0.12 for earlier, later in pairwise(arrivals)), arrivals


def test_sends_our_user_agent(server):
    fetcher().get(server.rss_url(["cs.LG"]))

    assert server.requests[0].headers["User-Agent"] == UA


def test_body_text_is_utf8_even_without_a_charset(server):
    server.script("/rss/", raw("Dirk Wübben, ω-Test, 强化学习".encode(), "text/xml"))

    page = fetcher().get(server.rss_url(["cs.LG"]))

    assert page.content_type == "text/xml"
    assert page.text == "Dirk Wübben, ω-Test, 强化学习"
