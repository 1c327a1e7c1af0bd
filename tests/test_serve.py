"""`rl-digest serve` as a browser and an attacker meet it: the site works in Chromium under
its Content-Security-Policy; every answer carries security headers; no redirect names the
Host a client sent; a token page's 405 names the methods it takes."""

from __future__ import annotations

import http.client
import re
import resource
import socket
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import uvicorn

from pipeline import serve
from pipeline.links import Links
from tests.helpers import DAY, chromium, full_config, rl_paper, start_warm_cli, write_config
from tests.processes import wait_for
from tests.servers.arxiv_server import ArxivServer
from tests.servers.smtp_server import free_port
from tests.test_site import two_weeks


def ask(port: int, method: str, path: str, host: str = "127.0.0.1") -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path, headers={"Host": host})
    answer = connection.getresponse()
    answer.read()
    connection.close()
    return answer


def _up(port: int) -> bool:
    try:
        return ask(port, "GET", "/u/x").status == 403
    except OSError:
        return False


def test_the_served_site_is_locked_down_and_still_works_in_chromium(tmp_path, cli):
    folder = two_weeks(tmp_path, cli)
    port = free_port()
    server = start_warm_cli("--config", str(tmp_path / "config.yaml"), "serve", "--host", "127.0.0.1",
                            "--port", str(port))
    try:
        wait_for(lambda: _up(port), timeout=60, what="serve to listen", proc=server)
        page, token = ask(port, "GET", "/"), ask(port, "GET", "/u/x")
        moved = ask(port, "GET", "/papers", host="evil.example")
        slash = ask(port, "GET", "/u/x/", host="evil.example")
        options, put = ask(port, "OPTIONS", "/u/x"), ask(port, "PUT", "/f/x")
        shown = chromium(tmp_path, "--virtual-time-budget=3000", "--dump-dom",
                         f"http://127.0.0.1:{port}/papers/index.html?q=variant+2")
    finally:
        server.terminate()
        server.wait(timeout=10)
    for answer in (page, token, moved, options):
        assert "frame-ancestors 'none'" in answer.getheader("Content-Security-Policy")
        assert answer.getheader("X-Content-Type-Options") == "nosniff"
        assert answer.getheader("Referrer-Policy") == "no-referrer"
    assert page.status == 200 and page.getheader("Cache-Control") is None  # the site may be cached
    assert token.status == 403 and token.getheader("Cache-Control") == "no-store"  # a reader's page never
    assert token.getheader("X-Robots-Tag") == "noindex"
    assert moved.status == 307 and moved.getheader("Location") == "papers/"  # relative: not evil.example
    assert slash.status == 404 and slash.getheader("Location") is None
    assert options.status == put.status == 405 and options.getheader("Allow") == "GET, HEAD, POST"
    # The search runs under the policy: its scripts are the site's own, no inline handler.
    assert shown.returncode == 0, shown.stderr
    listed = re.search(r'<ol class="results" id="results"[^>]*>(.*?)</ol>', shown.stdout, re.S)
    assert listed and "#p-arxiv-2611.00002" in listed.group(1)
    assert "Content Security Policy" not in shown.stderr
    assert (folder / "papers" / "index.html").read_text("utf-8").count("onsubmit") == 0


def test_serve_started_before_the_first_run_serves_the_site_once_a_run_writes_it(tmp_path, cli):
    """serve and the scheduler started together (compose, systemd): the site appears without
    a restart, and until then / says why there is none (it was a bare 404 for the server's life)."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = full_config(tmp_path, arxiv)
        port = free_port()
        server = start_warm_cli("--config", str(config), "serve", "--host", "127.0.0.1", "--port", str(port))
        try:
            wait_for(lambda: _up(port), timeout=60, what="serve to listen", proc=server)
            before = _page(port, "/")
            cli("--config", str(config), "run", "--as-of", "2026-11-02")
            after, index = ask(port, "HEAD", "/index.html"), _page(port, "/")
        finally:
            server.terminate()
            server.wait(timeout=10)
    assert before[0] == 404 and "not built yet" in before[1] and "rl-digest run" in before[1]
    assert after.status == 200
    assert index == (200, (tmp_path / "out" / "site" / "index.html").read_text("utf-8"))


def _page(port: int, path: str, timeout: float = 10, method: str = "GET") -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    connection.request(method, path)
    answer = connection.getresponse()
    found = answer.status, answer.read().decode("utf-8")
    connection.close()
    return found


def test_the_not_found_pages_home_link_stays_under_the_proxys_path(tmp_path):
    """Behind a proxy serving it under /rl/, the 404 page's home link climbs as many folders as
    the browser sees: ..%2f is no folder to it (counted in the decoded path, it left /rl/)."""
    with ArxivServer([]) as arxiv:
        config = full_config(tmp_path, arxiv)
    (tmp_path / "out" / "site").mkdir(parents=True)
    port = free_port()
    server = start_warm_cli("--config", str(config), "serve", "--host", "127.0.0.1", "--port", str(port))
    try:
        wait_for(lambda: _up(port), timeout=60, what="serve to listen", proc=server)
        homes = {path: re.findall(r'<a href="([^"]*)">', _page(port, path)[1])
                 for path in ("/digests/..%2f..%2fx", "/digests/nope.html", "/a%2Fb", "/nope")}
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert homes == {"/digests/..%2f..%2fx": ["../"], "/digests/nope.html": ["../"], "/a%2Fb": ["./"],
                     "/nope": ["./"]}


def test_a_client_that_sends_its_headers_slowly_is_cut_off(monkeypatch):
    """Slowloris: uvicorn waited forever for a request's headers, so 1,100 connections each
    sending 'GET / HTTP/1.1' and no more (one client) held all 1,024 files a systemd service
    may open, and serve answered nobody. Each connection now has HEADER_SECONDS for them, at
    its start and between requests; a client that sends them in time is served as before."""
    monkeypatch.setattr(serve, "HEADER_SECONDS", 0.2)

    async def hello(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(hello, port=port, http=serve.Timed, log_level="warning"))
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=10, what="uvicorn to listen")
        idle, slow, second = (socket.create_connection(("127.0.0.1", port), timeout=3) for _ in range(3))
        slow.sendall(b"GET / HTTP/1.1\r\n")
        second.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        first_answer = b""
        while not first_answer.endswith(b"ok"):
            first_answer += second.recv(1000)
        second.sendall(b"GET / HTTP/1.1\r\n")  # the next request, begun and never ended
        started = time.monotonic()
        for _ in range(10):  # a header line every 0.05 s: never done
            time.sleep(0.05)
            try:
                slow.sendall(b"X-Slow: 1\r\n")
            except OSError:
                break
        cut = [sock.recv(1000) for sock in (idle, slow, second)], time.monotonic() - started
        # in time, in pieces: served, twice on one connection
        patient = socket.create_connection(("127.0.0.1", port), timeout=3)
        patient.sendall(b"GET / HTTP/1.1\r\n")
        time.sleep(0.05)
        patient.sendall(b"Host: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
        both = b""
        while both.count(b"ok") < 2:
            both += patient.recv(1000)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert first_answer.startswith(b"HTTP/1.1 200")
    assert cut[0] == [b"", b"", b""] and cut[1] < 1  # closed: each had 0.2 s
    assert both.count(b"HTTP/1.1 200") == 2


def test_serve_may_open_as_many_files_as_the_hard_limit_allows():
    """systemd's 1,024 open files (soft; 524,288 hard) were all a flood of connections had to
    fill before serve answered no one: it raises the soft limit to the hard one."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, before[1]))
    try:
        serve.more_files()
        raised = resource.getrlimit(resource.RLIMIT_NOFILE)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)
    assert raised == (before[1], before[1]) if before[1] != resource.RLIM_INFINITY else raised[0] > 64


def test_votes_waiting_on_a_database_a_run_holds_leave_the_site_answering(tmp_path):
    """A run holding the database (SQLite's write lock) and 41 POSTs of the web edition's 👍
    link, which every public page carries: each took one of the pool's 40 threads while it
    waited, and / and every token page went unanswered until the run let go (up to the busy
    timeout, 30 s, and again with the next 41). They now wait without a thread."""
    with ArxivServer([]) as arxiv:
        config = full_config(tmp_path, arxiv)
    (tmp_path / "out" / "site").mkdir(parents=True)
    (tmp_path / "out" / "site" / "index.html").write_text("home", encoding="utf-8")
    secret = "a-long-test-secret-for-signing-links"
    port = free_port()
    vote = "/f/" + Links(f"http://127.0.0.1:{port}/", secret).on_the_web("up", "arxiv:2611.00001").rsplit("/", 1)[1]
    server = start_warm_cli("--config", str(config), "serve", "--host", "127.0.0.1", "--port", str(port),
                            env={"RL_DIGEST_SECRET": secret})
    try:
        wait_for(lambda: _up(port), timeout=60, what="serve to listen", proc=server)
        run = sqlite3.connect(tmp_path / "state" / "digest.sqlite3", isolation_level=None)
        run.execute("BEGIN IMMEDIATE")
        with ThreadPoolExecutor(41) as pool:
            votes = [pool.submit(ask, port, "POST", vote) for _ in range(41)]
            time.sleep(0.1)
            started = time.monotonic()
            try:
                home, refused = _page(port, "/", timeout=3), ask(port, "GET", "/u/x")
            finally:
                waited = time.monotonic() - started
                run.execute("ROLLBACK")
                run.close()
            voted = [v.result().status for v in votes]
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert home == (200, "home") and refused.status == 403 and waited < 1
    assert voted == [200] * 41  # each recorded once the run let go


def test_a_vote_the_database_cannot_take_asks_to_try_later_and_logs_one_line(tmp_path):
    """A database that cannot take a write (a full or read-only disk; here a lock held past
    storage.busy_timeout_seconds, which fails the same way): the reader got a bare 'Internal
    Server Error' and the log a traceback of 40 lines, for each click."""
    config = write_config(tmp_path, {"storage": {"busy_timeout_seconds": 0.1}}, seeds=False)
    secret, port, log = "a-long-test-secret-for-signing-links", free_port(), tmp_path / "serve.log"
    vote = "/f/" + Links(f"http://127.0.0.1:{port}/", secret).on_the_web("up", "arxiv:2611.00001").rsplit("/", 1)[1]
    server = start_warm_cli("--config", str(config), "serve", "--host", "127.0.0.1", "--port", str(port),
                            env={"RL_DIGEST_SECRET": secret}, stderr=log)
    try:
        wait_for(lambda: _up(port), timeout=60, what="serve to listen", proc=server)
        run = sqlite3.connect(tmp_path / "state" / "digest.sqlite3", isolation_level=None)
        run.execute("BEGIN IMMEDIATE")
        try:
            refused = _page(port, vote, method="POST")
        finally:
            run.execute("ROLLBACK")
            run.close()
        taken = _page(port, vote, method="POST")
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert refused[0] == 503 and "please follow the link again later" in refused[1]
    assert taken[0] == 200 and "your feedback is recorded" in taken[1]
    lines = [line for line in log.read_text(encoding="utf-8").splitlines() if " ERROR " in line or "Traceback" in line]
    assert len(lines) == 1 and lines[0].endswith(
        f" ERROR pipeline.serve: POST /f/…: {tmp_path / 'state' / 'digest.sqlite3'}: the database is "
        "locked by another process (waited 0.1 s)"), lines
