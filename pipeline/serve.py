"""`rl-digest serve`: the web edition (out/site/, once a run has written it) and the reader links.

Starlette answers, uvicorn serves. `/u/TOKEN`: GET shows a confirmation with a button,
POST (RFC 8058 one-click, as mail clients send it) unsubscribes at once; both pages then
offer `/r/TOKEN` to subscribe again; an unsubscribe link refused says the footer's other way
out, a reply "unsubscribe" to `email.from`. `/f/TOKEN`: a reader's 👍 or 👎 on a paper; GET asks
(a mail scanner that opens every link must not vote), POST records and thanks, and the thanks
page's button posts the same token with `?undo=1`, which takes that reader's verdict on the
paper back (any 👍/👎 link already mailed can); a reader taken off the list is refused (their
verdicts given before stay). A token
that does not check out gets 403 and changes nothing (pipeline/links.py). Writes are one
at a time (a lock), so two clicks never lose one. Every answer carries security headers,
and no redirect names the Host header a client sent (`Secured`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import socket
from collections.abc import Callable
from email.utils import parseaddr
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from pipeline import readers, render, store_readers, store_seeds, templating
from pipeline.config import Config
from pipeline.errors import ConfigError, DigestError
from pipeline.extract import readable
from pipeline.links import WEB, Claim, Links
from pipeline.models import seed_key
from pipeline.store import Store

log = logging.getLogger(__name__)

READER_PATHS = ("/u/", "/r/", "/f/")  # the token pages: they name a reader's address
READER_METHODS = "GET, HEAD, POST"
HEADERS = {  # the site loads only its own scripts; the inline style of the trend chart's swatches
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                               "object-src 'none'; base-uri 'none'; form-action 'self'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
PRIVATE = {"Cache-Control": "no-store", "X-Robots-Tag": "noindex"}
HEADER_SECONDS = 20.0  # a request's headers arrive within this, or its connection is closed


class Secured:
    """Security headers on every answer (no-store and noindex on the token pages); the
    methods a token page takes in its 405; a redirect (a folder to its slash) relative, so
    it never names the Host header a client sent (a cache behind a proxy could keep it)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        private = scope["path"].startswith(READER_PATHS)
        if private and scope["method"] not in READER_METHODS.split(", "):
            answer = Response(status_code=405, headers={"Allow": READER_METHODS})
            return await answer(scope, receive, self._sending(send, scope, private))
        await self.app(scope, receive, self._sending(send, scope, private))

    @staticmethod
    def _sending(send: Send, scope: Scope, private: bool) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.update(HEADERS | (PRIVATE if private else {}))
                if "location" in headers:  # only StaticFiles redirects: a folder to its slash
                    query = scope["query_string"].decode("latin-1")
                    folder = scope["path"].rsplit("/", 1)[-1]
                    headers["location"] = f"{folder}/?{query}" if query else f"{folder}/"
            await send(message)
        return sending


def app(config: Config, store: Store, links: Links) -> Starlette:
    pages = Pages(config, store, links)
    routes: list[BaseRoute] = [Route("/u/{token}", pages.subscription, methods=["GET", "POST"]),
              Route("/r/{token}", pages.subscription, methods=["GET", "POST"]),
              Route("/f/{token}", pages.feedback, methods=["GET", "POST"])]
    routes.append(Mount("/", pages.web_edition))
    found = Starlette(routes=routes, middleware=[Middleware(Secured)],
                      exception_handlers={404: pages.not_found, DigestError: pages.unavailable})
    found.router.redirect_slashes = False  # `/u/TOKEN/` is not found, not sent to the Host a client names
    return found


class Pages:
    """What `app` answers: the reader links' pages, the web edition, and the error pages."""

    def __init__(self, config: Config, store: Store, links: Links):
        self.config, self.store, self.links = config, store, links
        self.settings = render.Settings.of(config)
        self.known = render.common(self.settings)
        self.site = Path(config.outputs.dir) / "site"  # looked for at each request: a run may write it later
        # where a reply "unsubscribe" goes (with email off, nothing is mailed to unsubscribe from)
        self.sender = parseaddr(config.email.from_)[1] or None if config.email.enabled else None
        # One write at a time, so two clicks never lose one, waited for without a thread: 40 POSTs
        # queued behind a database a run held took every thread of the pool, and the site and
        # every page stopped answering until the run let go.
        self.writing = asyncio.Lock()
        self.files = StaticFiles(directory=self.site, html=True, check_dir=False)

    def answer(self, request: Request, name: str, status: int = 200, *, address: str | None = None,
               **more: object) -> HTMLResponse:
        """A small page in the reader's own languages, naming who and what it is about. Its
        links are relative, so they work behind a proxy that serves it under a path: counted
        in the path as sent, which the browser resolves them against (%2F is no folder to it)."""
        sent = request.scope.get("raw_path") or request.url.path.encode()
        home = "../" * (sent.count(b"/") - 1) or "./"
        context = {**self.known, "page": name, "action": None, "other": None, "verdict": None, "reply": None,
                   "paper": None, "address": address, "home": home if self.site.is_dir() else None, **more}
        languages = self.settings.languages
        if address:
            languages = next((tuple(r.languages) for r in self.config.readers()
                              if r.address.lower() == address.lower() and r.languages), languages)
        page = templating.html_env(self.settings.templates, languages).get_template("serve/page.html.j2")
        return HTMLResponse(page.render(**context), status_code=status)

    def title_of(self, key: str) -> str | None:
        """The paper a verdict is about, by name: a stored paper, or a seed entry."""
        if key.startswith("arxiv:"):
            found = self.store.papers([key.removeprefix("arxiv:")])
            return readable(found[0].title) if found else None
        return next((readable(s.title) for s in store_seeds.all_seeds(self.store)
                     if seed_key(s.title) == key), None)

    def reader_of(self, token: str, actions: tuple[str, ...]) -> tuple[str, Claim] | None:
        """The reader's address and what the token says, when it checks out."""
        claim = self.links.check(token)
        if claim is None or claim.action not in actions:
            return None
        addresses = [r.address for r in self.config.readers()] + list(store_readers.known(self.store))
        address = self.links.reader(claim, addresses)
        return (address, claim) if address else None

    async def subscription(self, request: Request) -> HTMLResponse:
        token = request.path_params["token"]
        action = "unsubscribe" if request.url.path.startswith("/u/") else "resubscribe"
        found = await run_in_threadpool(self.reader_of, token, (action,))
        if found is None:  # a link refused is no dead end: the footer's other way out
            return self.answer(request, "refused", 403,
                               reply=self.sender if action == "unsubscribe" else None)
        address, _ = found
        if request.method != "POST":  # GET, and the HEAD link checkers send: ask, change nothing
            return self.answer(request, f"confirm_{action}", address=address, action=token)
        async with self.writing:
            await run_in_threadpool(store_readers.set_reader_status, self.store, address, readers.UNSUBSCRIBED
                                    if action == "unsubscribe" else readers.ACTIVE)
        if action == "unsubscribe":
            return self.answer(request, "unsubscribed", address=address,
                               other=self.links.url("resubscribe", address))
        return self.answer(request, "resubscribed", address=address)

    async def feedback(self, request: Request) -> HTMLResponse:
        config = self.config
        found = await run_in_threadpool(self.reader_of, request.path_params["token"], tuple(readers.VERDICTS))
        # taken off the list, their old emails' links teach no more (a line with a typo is no
        # removal: while one names no reader, as delivery has it, nobody is taken off)
        removed = found is not None and found[0] != WEB and not config.recipient_problems() and \
            found[0].lower() not in {r.address.lower() for r in config.readers()}
        if found is None or not found[1].paper or removed:
            return self.answer(request, "refused", 403)
        address, claim = found
        paper = await run_in_threadpool(self.title_of, claim.paper)
        reader = None if address == WEB else address
        if request.method != "POST":
            return self.answer(request, "confirm_feedback", address=reader,
                               action=request.path_params["token"], verdict=claim.action, paper=paper)
        undo = request.query_params.get("undo") == "1"
        async with self.writing:
            await run_in_threadpool(readers.record_verdict, self.store, address, claim.paper,
                                    None if undo else claim.action)
        if undo:
            return self.answer(request, "undone", address=reader, paper=paper)
        return self.answer(request, "thanks", address=reader, verdict=claim.action, paper=paper,
                           action=request.path_params["token"])

    async def not_found(self, request: Request, exc: Exception) -> HTMLResponse:
        return self.answer(request, "not_found" if self.site.is_dir() else "no_site", 404)

    async def unavailable(self, request: Request, exc: Exception) -> HTMLResponse:
        """The database failed (a full or read-only disk, a lock held past the busy timeout):
        one log line naming it, not a traceback, and a page asking the reader to try again
        later, not a bare 500. The token stays out of the log: it is the reader's to use."""
        log.error("%s %s…: %s", request.method, request.url.path[:3], exc,
                  exc_info=exc if log.isEnabledFor(logging.DEBUG) else None)
        return self.answer(request, "unavailable", 503)

    async def web_edition(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.site.is_dir():  # no run has written it yet
            raise HTTPException(404)
        await self.files(scope, receive, send)


class Timed(H11Protocol):
    """uvicorn's HTTP/1.1, but a request's headers must all arrive within HEADER_SECONDS of
    the connection (or of the answer before, or of the first byte of a body we do not read):
    uvicorn waits for them forever, so a few hundred clients sending them a byte at a time
    (slowloris) held every connection the process may open and the server answered no one."""

    deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._waiting()

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        if cycle is None or cycle.response_complete:  # between requests: bytes of the next one
            self._waiting()
        super().data_received(data)
        if self.cycle is not cycle and self.deadline:  # a new request's headers are all in
            self.deadline.cancel()
            self.deadline = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.deadline:
            self.deadline.cancel()
        super().connection_lost(exc)

    def _waiting(self) -> None:
        if self.deadline is None:
            self.deadline = self.loop.call_later(HEADER_SECONDS, self.transport.close)


def more_files() -> None:
    """Open files up to the hard limit: systemd and Docker give a process 1,024, which a
    flood of connections fills (each held HEADER_SECONDS at most) and then serve answers no
    one; the hard limit is most often 524,288."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):  # a kernel's own ceiling (nr_open) below an unlimited hard limit
            pass


def run(config: Config, store: Store, links: Links, host: str, port: int,
        listening: Callable[[], None] = lambda: None) -> None:
    """Listen first, so a port another server holds is one line of ours, not uvicorn's;
    then `listening` (the command says where it serves)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]  # "::" is IPv6
    except socket.gaierror as exc:
        raise ConfigError(f"serve: --host {host}: {exc.strerror}",
                          "an address of this machine, or a name it resolves") from None
    try:
        sock = socket.create_server((host, port), family=family)
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)  # create_server adds the address again
        if exc.errno == errno.EADDRNOTAVAIL:  # not an address of this machine: no port would do
            raise ConfigError(f"serve: --host {host}: {why}", "an address of this machine, or a name it "
                              "resolves") from None
        raise DigestError(f"serve: cannot listen on {host}:{port}: {why}",
                          "another server may hold the port: stop it, or pass --port") from None
    server = uvicorn.Server(uvicorn.Config(app(config, store, links), log_level="warning", http=Timed,
                                           access_log=False))  # an access log would keep every token
    more_files()
    with sock:
        listening()
        server.run(sockets=[sock])
