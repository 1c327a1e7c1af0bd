"""`rl-digest serve`: the web edition (out/site/, when it exists) and the reader links.

Starlette answers, uvicorn serves. `/u/TOKEN`: GET shows a confirmation with a button,
POST (RFC 8058 one-click, as mail clients send it) unsubscribes at once; both pages then
offer `/r/TOKEN` to subscribe again. `/f/TOKEN`: a reader's 👍 or 👎 on a paper; GET asks
(a mail scanner that opens every link must not vote), POST records and thanks. A token
that does not check out gets 403 and changes nothing (pipeline/links.py). Writes are one
at a time (a lock), so two clicks never lose one.
"""

from __future__ import annotations

import threading
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from pipeline import readers, render
from pipeline.config import Config
from pipeline.links import Claim, Links
from pipeline.store import Store

_WRITE = threading.Lock()


def app(config: Config, store: Store, links: Links) -> Starlette:
    settings = render.Settings.of(config)
    page = render.html_env(settings.templates).get_template("serve/page.html.j2")
    known = render.common(settings)

    def answer(name: str, status: int = 200, **more: object) -> HTMLResponse:
        context = {**known, "page": name, "action": None, "other": None, "verdict": None, **more}
        return HTMLResponse(page.render(**context), status_code=status)

    def reader_of(token: str, actions: tuple[str, ...]) -> tuple[str, Claim] | None:
        """The reader's address and what the token says, when it checks out."""
        claim = links.check(token)
        if claim is None or claim.action not in actions:
            return None
        addresses = [r.address for r in config.readers()] + list(store.readers())
        address = links.reader(claim, addresses)
        return (address, claim) if address else None

    def subscription(request: Request) -> HTMLResponse:
        token = request.path_params["token"]
        action = "unsubscribe" if request.url.path.startswith("/u/") else "resubscribe"
        found = reader_of(token, (action,))
        if found is None:
            return answer("refused", 403)
        address, _ = found
        if request.method == "GET":
            return answer(f"confirm_{action}", action=str(request.url))
        with _WRITE:
            store.set_reader_status(address, readers.UNSUBSCRIBED if action == "unsubscribe"
                                    else readers.ACTIVE)
        if action == "unsubscribe":
            return answer("unsubscribed", other=links.url("resubscribe", address))
        return answer("resubscribed")

    def feedback(request: Request) -> HTMLResponse:
        found = reader_of(request.path_params["token"], tuple(readers.VERDICTS))
        if found is None or not found[1].paper:
            return answer("refused", 403)
        address, claim = found
        if request.method == "GET":
            return answer("confirm_feedback", action=str(request.url), verdict=claim.action)
        with _WRITE:
            readers.record_verdict(store, address, claim.paper, claim.action)
        return answer("thanks", verdict=claim.action)

    routes: list[BaseRoute] = [Route("/u/{token}", subscription, methods=["GET", "POST"]),
              Route("/r/{token}", subscription, methods=["GET", "POST"]),
              Route("/f/{token}", feedback, methods=["GET", "POST"])]
    site = Path(config.outputs.dir) / "site"
    if site.is_dir():
        routes.append(Mount("/", StaticFiles(directory=site, html=True)))
    return Starlette(routes=routes)


def run(config: Config, store: Store, links: Links, host: str, port: int) -> None:
    uvicorn.run(app(config, store, links), host=host, port=port, log_level="warning",
                access_log=False)  # an access log would keep every token
