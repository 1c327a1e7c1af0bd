"""A local stand-in for an OpenAI-compatible chat endpoint, with faults on demand.

    with OpenAIServer() as server:                       # valid replies by default
        server.queue(error(500), error(429, retry_after=1))   # the next requests, then default
        server.script = lambda req: invalid() if "Paper 3" in req.titles else None
        client = make_client(cfg.model_copy(update={"base_url": server.url}))
        ... ; server.requests, server.max_in_flight

`POST /v1/chat/completions` is answered from, in order: the queue, the script (a
callable returning a Reply, or None for "answer normally"), then the default: a
valid JSON object for the task (the schema named in response_format, or the
`Task: name` line of the prompt), echoing each paper's `Title:` so a test can
check that every text lands on its own paper. Every request is recorded with its
headers and JSON body, and the most requests in flight at once is kept.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

_TITLE = re.compile(r"^Title: (.+)$", re.MULTILINE)
_TASK = re.compile(r"^Task: (\w+)", re.MULTILINE)
_DEFAULT = object()


@dataclass(frozen=True)
class Reply:
    """One scripted answer. content=_DEFAULT means the default valid JSON for the task."""

    status: int = 200
    content: Any = _DEFAULT  # str sent as is; dict/list as JSON; None as a null content
    prefix: str = ""  # put before the content (e.g. a <think> block)
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None  # the whole HTTP body, instead of a chat completion
    delay: float = 0.0  # wait this long before answering (a stall)
    usage: tuple[int, int] | None = None  # (prompt, completion); None: the server's default
    trickle: float = 0.0  # send the body one byte every this many seconds
    header_trickle: float = 0.0  # send a header one byte every this many seconds, forever
    finish_reason: str = "stop"  # "length": the model hit its output limit; "content_filter"
    refusal: str | None = None  # the message's refusal (OpenAI's structured outputs); content null


def ok(content: Any = _DEFAULT, usage: tuple[int, int] | None = None) -> Reply:
    return Reply(content=content, usage=usage)


def error(status: int, retry_after: float | None = None,
          retry_after_ms: int | None = None) -> Reply:
    headers = []
    if retry_after is not None:
        headers.append(("Retry-After", str(retry_after)))
    if retry_after_ms is not None:
        headers.append(("retry-after-ms", str(retry_after_ms)))
    body = json.dumps({"error": {"message": f"scripted {status}", "type": "server_error"}})
    return Reply(status=status, headers=tuple(headers), body=body.encode())


def stall(seconds: float) -> Reply:
    """Answer normally, but only after `seconds` (a client with a shorter timeout has gone)."""
    return Reply(delay=seconds)


def trickle(interval: float) -> Reply:
    """A valid answer, sent one byte every `interval` seconds (a client deadline must end it)."""
    return Reply(trickle=interval)


def trickle_headers(interval: float) -> Reply:
    """A status line, then a header one byte every `interval` seconds: never a whole reply."""
    return Reply(header_trickle=interval)


def invalid() -> Reply:
    return Reply(content='{"title_zh": "不完整的 JSON", "summary_zh": ')


def blank() -> Reply:
    return Reply(content="")


def refusal(text: str = "I'm sorry, but I can't help with that.") -> Reply:
    """A refusal as OpenAI's structured outputs send it: no content, the reason in `refusal`."""
    return Reply(content=None, refusal=text)


def filtered_prompt() -> Reply:
    """Azure OpenAI's content filter refusing the prompt, as its documentation shows it:
    HTTP 400, error code content_filter, the categories that flagged it (here a jailbreak)."""
    said = ("The response was filtered due to the prompt triggering Azure OpenAI's content management "
            "policy. Please modify your prompt and retry. To learn more about our content filtering "
            "policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766")
    flags = {name: {"filtered": False, "severity": "safe"} for name in ("hate", "self_harm", "sexual", "violence")}
    body = {"error": {"message": said, "type": None, "param": "prompt", "code": "content_filter", "status": 400,
                      "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": {
                          **flags, "jailbreak": {"filtered": True, "detected": True}}}}}
    return Reply(status=400, body=json.dumps(body).encode())


def filtered_reply() -> Reply:
    """A reply the provider's content filter withheld: 200, no content, finish_reason
    content_filter (OpenAI's and Azure's chat completions)."""
    return Reply(content=None, finish_reason="content_filter")


def think(reasoning: str = 'Let me think first. {"not": "the answer"}') -> Reply:
    return Reply(prefix=f"<think>\n{reasoning}\n</think>\n\n")


@dataclass
class ChatRequest:
    path: str
    headers: dict[str, str]  # lower-case names
    body: dict[str, Any]
    started: float = field(default_factory=time.monotonic)

    @property
    def prompt(self) -> str:
        return "\n".join(str(m.get("content") or "") for m in self.body.get("messages", []))

    @property
    def user(self) -> str:
        users = [m for m in self.body.get("messages", []) if m.get("role") == "user"]
        return str(users[-1].get("content") or "") if users else ""

    @property
    def system(self) -> str:
        found = [m for m in self.body.get("messages", []) if m.get("role") == "system"]
        return str(found[0].get("content") or "") if found else ""

    @property
    def response_format(self) -> dict[str, Any]:
        return self.body.get("response_format") or {}

    @property
    def task(self) -> str | None:
        schema = self.response_format.get("json_schema") or {}
        if schema.get("name"):
            return schema["name"]
        match = _TASK.search(self.user)
        return match.group(1) if match else None

    @property
    def titles(self) -> list[str]:
        return [t.strip() for t in _TITLE.findall(self.user)]


def _zh(text: str) -> str:
    """A Chinese field that echoes an English title, with Chinese put before it so that it
    reads as Chinese (enrich wants two Han characters for each English word)."""
    if len(re.findall(r"\b[a-z]{2,}\b", text)) < 2:  # no English prose: nothing to check
        return text
    short = 2 * len(re.findall(r"[A-Za-z]+", text)) - len(re.findall(r"[\u4e00-\u9fff]", text))
    return "强化学习" * -(-short // 4) + text if short > 0 else text


def default_content(request: ChatRequest) -> dict[str, Any]:
    """A valid reply for the request's task, built from the titles in its prompt."""
    titles = request.titles or ["(no title)"]
    title = titles[0]
    task = request.task
    if task == "paper_summary":
        return {
            "title_zh": f"中文标题：{title}",
            "summary_zh": _zh(f"本文提出了{title}，通过强化学习优化策略，从而提升推理能力。"),
            "summary_en": f"English summary of {title}.",
            "why_zh": _zh(f"{title} 值得一读：它改变了训练方式。"),
            "why_en": f"Why {title} matters: it changes how training is done.",
            "kind": "method",
            "key_points_zh": [_zh(f"{title} 要点一"), _zh(f"{title} 要点二")],
            "key_points_en": [f"{title} point one", f"{title} point two"],
        }
    if task == "relevance_judgement":
        return {"relevant": True, "reason_en": f"{title} trains an LLM with RL."}
    if task == "translation":
        texts = re.findall(r"^Text \d+: (.+)$", request.user, re.MULTILINE)
        return {"texts_en": [f"English text {n}" for n in range(1, len(texts) + 1)]}
    if task == "doctor":
        return {"ok": True}
    if task == "seed_translation":
        return {"summary_en": f"English translation for {title}."}
    if task == "featured_reading":
        labels = [("核心问题", "Problem"), ("解决方案", "Approach"), ("关键发现", "Key findings")]
        return {
            "headline_zh": _zh(f"{title} 发现了一个核心问题。"),
            "headline_en": f"{title} finds a core problem.",
            "parts": [
                {"label_zh": zh, "label_en": en, "text_zh": _zh(f"{title}：{zh}"),
                 "text_en": f"{title}: {en}"}
                for zh, en in labels
            ],
        }
    if task == "featured_pick":
        wanted = re.search(r"featured papers: the (\d+) papers", request.user)
        count = min(int(wanted.group(1)) if wanted else 2, len(titles))
        return {"papers": list(range(1, count + 1)), "question_zh": _zh(f"共同问题：{titles[0]}"),
                "question_en": f"Shared question of {', '.join(titles[:2])}"}
    if task == "highlights":
        picks = list(range(1, len(titles) + 1))[:5]
        picks += [1] * (3 - len(picks))
        return {"items": [{"paper": n, "zh": _zh(f"看点：{titles[n - 1]}"),
                           "en": f"Takeaway: {titles[n - 1]}"} for n in picks]}
    if task == "comparison":
        labels = [("视角", "Perspective"), ("核心问题", "Core problem"), ("方法论", "Method"),
                  ("启示", "Implication")]
        return {
            "rows": [
                {"label_zh": zh, "label_en": en,
                 "cells": [{"zh": f"{t}·{zh}", "en": f"{t}/{en}"} for t in titles]}
                for zh, en in labels
            ],
            "synthesis_zh": _zh("综合洞察：" + "、".join(titles)),
            "synthesis_en": "Synthesis: " + ", ".join(titles),
        }
    return {"error": f"the stand-in does not know task {task!r}"}


class OpenAIServer:
    """Serves POST /v1/chat/completions on 127.0.0.1 (a free port) from a thread."""

    def __init__(self, script: Callable[[ChatRequest], Reply | None] | None = None,
                 delay: float = 0.0, usage: tuple[int, int] = (100, 50)):
        self.script = script
        self.delay = delay  # every answer waits this long (to make concurrency visible)
        self.usage = usage
        self.requests: list[ChatRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # a stalled handler must not stall teardown
        self._httpd.stand_in = self
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host}:{port}/v1"
        self._thread = threading.Thread(  # a short poll interval: a quick shutdown
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def queue(self, *replies: Reply) -> None:
        """The next requests get these replies, in order; then the script or the default."""
        with self._lock:
            self._queue.extend(replies)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def tasks(self) -> list[str | None]:
        return [r.task for r in self.requests]

    # --- called by the handler ---
    def _begin(self, request: ChatRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self._queue:
                return self._queue.popleft()
        scripted = self.script(request) if self.script else None
        return scripted or Reply()

    def _end(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stop.wait(seconds)

    def _answer(self, request: ChatRequest, reply: Reply) -> tuple[int, bytes]:
        if reply.body is not None:
            return reply.status, reply.body
        content = default_content(request) if reply.content is _DEFAULT else reply.content
        if isinstance(content, (dict, list)):
            content = json.dumps(content, ensure_ascii=False)
        if content is not None and reply.prefix:
            content = reply.prefix + content
        prompt_tokens, completion_tokens = reply.usage or self.usage
        body = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.body.get("model", "stand-in"),
            "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                         "message": {"role": "assistant", "content": content,
                                     **({"refusal": reply.refusal} if reply.refusal else {})}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        return reply.status, json.dumps(body, ensure_ascii=False).encode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        stand_in: OpenAIServer = self.server.stand_in
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        headers = {name.lower(): value for name, value in self.headers.items()}
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, b'{"error": {"message": "not found"}}', ())
            return
        request = ChatRequest(self.path, headers, body)
        reply = stand_in._begin(request)
        ended = False
        try:
            stand_in._wait(stand_in.delay + reply.delay)
            status, payload = stand_in._answer(request, reply)
            if reply.header_trickle:
                self._trickle_headers(reply.header_trickle, stand_in._stop)
                return
            if not reply.trickle:  # out of flight before the answer is written: the client may
                stand_in._end()    # send its next request the moment it has read this one
                ended = True
            self._send(status, payload, reply.headers, reply.trickle, stand_in._stop)
        finally:
            if not ended:
                stand_in._end()

    def _trickle_headers(self, interval: float, stop: threading.Event) -> None:
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            self.wfile.flush()
            while not stop.wait(interval):
                self.wfile.write(b"z")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client's deadline passed and it left

    def _send(self, status: int, payload: bytes, headers: tuple[tuple[str, str], ...],
              trickle: float = 0.0, stop: threading.Event | None = None) -> None:
        try:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if not trickle:
                self.wfile.write(payload)
            for index in range(len(payload) if trickle else 0):
                self.wfile.write(payload[index:index + 1])
                self.wfile.flush()
                if stop is not None and stop.wait(trickle):
                    return
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left

    def log_message(self, *args: object) -> None:
        pass  # keep test output clean; the request log is OpenAIServer.requests
