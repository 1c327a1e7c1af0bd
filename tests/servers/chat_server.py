"""A local receiver for the chat channels: Slack, Feishu, DingTalk, Telegram or a JSON webhook.

    with ChatServer("feishu", secret="s3cret") as server:
        server.queue((500, {}), (429, {"Retry-After": "1"}))   # the next answers, then 200
        server.hold_after = 1   # the second POST on waits (`holding` set) until `release` is set
        ... server.url, server.posts (accepted), server.requests (every POST, with its time),
        server.reads (the paths of GETs: Telegram's getMe), server.pages (GETs answered 200)

It answers as each platform's documentation says: Slack `ok`, Feishu `{"code": 0}`,
DingTalk `{"errcode": 0}`, Telegram `{"ok": true, "result": ...}` on
`/bot<TOKEN>/sendMessage` (and, with `migrated_to` set, the Bot API's 400 with
`parameters.migrate_to_chat_id` for the old group's id). A request that does not have the documented shape (or whose
signature does not check out) is refused with 400 and kept in `malformed`, so a test sees
why.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

CHAT_ID = "-100123"  # the one Telegram chat the stand-in's bot is in


@dataclass(frozen=True)
class Request:
    at: float
    path: str
    query: dict[str, str]
    body: Any
    status: int  # what the receiver answered
    key: str | None = None  # the Idempotency-Key header
    raw: bytes = b""  # the body as it came, parsed as UTF-8 JSON as the platforms do
    content_type: str = ""


class ChatServer:
    protocol_version = "HTTP/1.0"  # HTTP/1.1: each connection kept alive, as the platforms keep them

    def __init__(self, kind: str, secret: str | None = None, token: str = "123:abc"):
        self.kind, self.secret, self.token = kind, secret, token
        self.requests: list[Request] = []
        self.posts: list[Any] = []  # accepted bodies
        self.malformed: list[str] = []
        self.reads: list[str] = []  # paths of GET requests
        self.pages: dict[str, Any] = {}  # path -> what a GET of it answers with 200 (a page, not a hook)
        self.migrated_to: int | None = None  # telegram: CHAT_ID was upgraded to this supergroup
        self._queue: deque[tuple[int, dict] | None] = deque()
        self._lock = threading.Lock()
        self.hold_after: int | None = None  # POSTs past this many wait for `release`, then are answered
        self.holding = threading.Event()  # one is waiting (its sender is stuck before the answer)
        self.release = threading.Event()
        self._arrived = 0

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        base = f"http://{host}:{port}"
        if self.kind == "telegram":
            return base
        return f"{base}/robot/send?access_token=tok" if self.kind == "dingtalk" else f"{base}/hook/abc"

    def queue(self, *answers: tuple[int, dict] | tuple[int, dict, bytes] | None) -> None:
        """The next requests' answers (status, headers and optionally the body's bytes), in
        order; None answers one as usual."""
        self._queue.extend(answers)

    def __enter__(self) -> Self:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = server.protocol_version

            def do_POST(self):  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                server._hold()
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                status, headers, body = server._answer(parts.path, query, raw,
                                                       self.headers.get("Content-Type", ""),
                                                       self.headers.get("Idempotency-Key"))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                try:
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the sender is gone (killed while its post was held)
                    pass

            def do_GET(self):  # noqa: N802 (http.server's name)
                parts = urlsplit(self.path)
                status, body = server._read(parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()})
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _hold(self) -> None:
        with self._lock:
            self._arrived += 1
            held = self.hold_after is not None and self._arrived > self.hold_after
        if held:
            self.holding.set()
            self.release.wait(60)

    def _answer(self, path: str, query: dict, raw: bytes, content_type: str, key: str | None):
        with self._lock:
            try:
                body = json.loads(raw.decode("utf-8"))
            except ValueError:
                body = None
            scripted = self._queue.popleft() if self._queue else None  # None: answer as usual
            if scripted is not None:
                status, headers, *said = scripted  # said: the body's bytes, when scripted too
                self.requests.append(Request(time.monotonic(), path, query, body, status, key, raw, content_type))
                return status, headers, said[0] if said else {"error": f"scripted {status}"}
            if self.migrated_to and isinstance(body, dict) and str(body.get("chat_id")) == CHAT_ID:
                self.requests.append(Request(time.monotonic(), path, query, body, 400, key, raw, content_type))
                return 400, {}, {"ok": False, "error_code": 400,
                                 "description": "Bad Request: group chat was upgraded to a supergroup chat",
                                 "parameters": {"migrate_to_chat_id": self.migrated_to}}
            problem = None if "application/json" in content_type else "not JSON"
            problem = problem or self._too_big(len(raw)) or self._check(path, query, body)
            status = 400 if problem else 200
            self.requests.append(Request(time.monotonic(), path, query, body, status, key, raw, content_type))
            if problem:
                self.malformed.append(problem)
                return 400, {}, {"error": problem}
            self.posts.append(body)
            return 200, {}, self._ok()

    def _read(self, path: str, query: dict) -> tuple[int, dict]:
        """A GET: Telegram's getMe (the Bot API's call for testing a token) and getChat (a
        chat the bot is in: CHAT_ID only); nothing else reads."""
        with self._lock:
            self.reads.append(path)
        if path in self.pages:
            return 200, self.pages[path]
        if self.kind == "telegram" and path == f"/bot{self.token}/getMe":
            return 200, {"ok": True, "result": {"id": 123, "is_bot": True, "first_name": "RL Digest",
                                                "username": "rl_digest_bot"}}
        if self.kind == "telegram" and path == f"/bot{self.token}/getChat":
            if query.get("chat_id") == CHAT_ID:
                return 200, {"ok": True, "result": {"id": int(CHAT_ID), "type": "supergroup", "title": "RL group"}}
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}
        if self.kind == "telegram":
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        return 405, {"error": "webhooks take POST only"}

    def _ok(self) -> Any:
        return {"slack": b"ok", "feishu": {"code": 0, "msg": "success", "data": {}},
                "dingtalk": {"errcode": 0, "errmsg": "ok"},
                "telegram": {"ok": True, "result": {"message_id": len(self.posts)}},
                "webhook": b""}[self.kind]

    def _too_big(self, size: int) -> str | None:
        """Feishu's documented 20 KB of a custom bot's request body; DingTalk's 20,000 bytes,
        as its robot says when it refuses one (errcode 460101)."""
        if self.kind == "feishu" and size > 20_000:
            return f"feishu: 9499 Bad Request: the request body is {size} bytes, over 20 KB"
        if self.kind == "dingtalk" and size > 20_000:
            return f"dingtalk: 460101 message too long, exceed 20000 bytes ({size})"
        return None

    def _check(self, path: str, query: dict, body: Any) -> str | None:
        """Why a request is not what the platform's documentation asks for; None if it is."""
        if not isinstance(body, dict):
            return "the body is not a JSON object"
        if self.kind == "slack":
            blocks = body.get("blocks")
            if not isinstance(body.get("text"), str) or not isinstance(blocks, list) \
                    or not 0 < len(blocks) <= 50:
                return "slack: text and 1-50 blocks"
            for block in blocks:
                text = block.get("text", {})
                if block.get("type") != "section" or text.get("type") != "mrkdwn" \
                        or not 0 < len(text.get("text", "")) <= 3000:
                    return f"slack: not a mrkdwn section of 1-3000 characters: {block!r:.200}"
            if sum(len(block["text"]["text"]) for block in blocks) > 12_000:
                return "slack: msg_blocks_too_long (over 12,000 characters of block text)"
        elif self.kind == "feishu":
            card = body.get("card", {})
            if body.get("msg_type") != "interactive" or "header" not in card \
                    or not card.get("elements") or card["elements"][0].get("tag") != "markdown":
                return "feishu: an interactive card with a markdown element"
            if self.secret:
                stamp = body.get("timestamp", "")
                key = f"{stamp}\n{self.secret}".encode()
                want = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
                if body.get("sign") != want or abs(time.time() - int(stamp or 0)) > 3600:
                    return "feishu: sign match fail or timestamp is not within one hour"
        elif self.kind == "dingtalk":
            if body.get("msgtype") != "markdown" or not body.get("markdown", {}).get("title") \
                    or not body["markdown"].get("text"):
                return "dingtalk: msgtype markdown with title and text"
            if query.get("access_token") != "tok":
                return "dingtalk: the access_token is lost"
            if self.secret:
                stamp = query.get("timestamp", "0")
                digest = hmac.new(self.secret.encode(), f"{stamp}\n{self.secret}".encode(),
                                  hashlib.sha256).digest()
                if query.get("sign") != base64.b64encode(digest).decode() \
                        or abs(time.time() * 1000 - int(stamp)) > 3600_000:
                    return "dingtalk: sign not match"
        elif self.kind == "telegram":
            if path != f"/bot{self.token}/sendMessage":
                return "telegram: not /bot<token>/sendMessage"
            text = body.get("text", "")
            if body.get("parse_mode") != "HTML" or not body.get("chat_id") \
                    or not 0 < len(text.encode("utf-16-le")) // 2 <= 4096:
                return "telegram: chat_id, parse_mode HTML and 1-4096 characters of text"
        elif self.kind == "webhook":
            if not {"title", "date", "papers"} <= body.keys():
                return "webhook: title, date and papers"
        return None
