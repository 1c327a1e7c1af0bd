"""The LLM client: an OpenAI-compatible endpoint, each call held to its item's deadline.

A module of its own because importing openai takes about 0.6 s: only a command that
talks to an LLM (a run with enrich.provider set, doctor) loads it; enrich.make_client
imports it when a client is made. Failures come back as LLMCallFailed with a reason in
words, and a reply as an Answer read without trusting its shape, so the rest of the
program never touches openai's exception classes or reply objects.
"""

from __future__ import annotations

import contextvars
import json
import re
import threading
import time
from typing import Any, NamedTuple

import httpcore2
import httpx2
import openai

from pipeline.config_sections import Enrich
from pipeline.errors import LLMCallFailed
from pipeline.retry import retry_after
from pipeline.stopping import STOP
from pipeline.text import clean_name, clip

PLACEHOLDER_KEY = "EMPTY"  # sent when the key variable is set but empty (Ollama, vLLM, llama.cpp)
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)
_RETRYABLE = {408, 409, 429} | set(range(500, 600))
_PHASES = ("connect", "read", "write", "pool")
MAX_REPLY_BYTES = 16 * 2**20  # far above any reply the bounded reply models accept


class Answer(NamedTuple):
    """What a chat completion said, read without trusting its shape (the client checks none)."""

    content: str | None
    refusal: str | None  # why the model would not answer (OpenAI's structured outputs)
    cut: bool  # finish_reason "length": the model hit its output limit
    filtered: bool  # finish_reason "content_filter": the provider's filter withheld the reply
    usage: tuple[int, int] | None  # prompt and completion tokens; None when not reported


def _answer(response: Any) -> Answer:
    choices = getattr(response, "choices", None)
    first = choices[0] if isinstance(choices, list) and choices else None
    message = getattr(first, "message", None)
    refusal = getattr(message, "refusal", None)
    usage = getattr(response, "usage", None)
    tokens = [getattr(usage, name, None) for name in ("prompt_tokens", "completion_tokens")]
    counted = [n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None for n in tokens]
    return Answer(_text(getattr(message, "content", None)), str(refusal) if refusal else None,
                  getattr(first, "finish_reason", None) == "length",
                  getattr(first, "finish_reason", None) == "content_filter",
                  None if counted == [None, None] else (counted[0] or 0, counted[1] or 0))


def _text(content: Any) -> str | None:
    """The message's text: a string; parts (`[{"type": "text", "text": …}]`, as some
    servers send it) joined, reasoning parts left out; anything else as JSON."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content if isinstance(part, dict)
                       and part.get("type", "text") == "text" and isinstance(part.get("text"), str))
    return json.dumps(content, ensure_ascii=False)


class DeadlineExceeded(openai.OpenAIError):
    """The item's wall-clock deadline passed; an OpenAIError, so the client stops retrying."""


class StopAsked(openai.OpenAIError):
    """SIGTERM or Ctrl-C came while a call was under way; an OpenAIError, so the client
    sends no retry (each could wait timeout_seconds again)."""


class ReplyTooLarge(openai.OpenAIError):
    """The reply's body passed MAX_REPLY_BYTES; not worth a retry."""


class DeadlineHttpClient(openai.DefaultHttpxClient):
    """The openai client's HTTP client, held to the deadline of the item being enriched.

    openai retries inside one create() call, each attempt with the same timeout. Every
    attempt passes through send(), so here each one gets min(its timeout, time left),
    none starts after the deadline or a stop asked for, a timeout that the deadline caused
    ends the call at once, and a Retry-After longer than the time left means "do not retry"
    (the client obeys `x-should-retry: false`). `sent` counts the requests, retries too.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.sent = 0
        self._lock = threading.Lock()

    def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        deadline = _DEADLINE.get()
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise DeadlineExceeded("deadline passed before the request")
        if STOP.is_set():
            raise StopAsked("a stop was asked for before the request")
        with self._lock:
            self.sent += 1
        if deadline is None or left is None:
            return super().send(request, **kwargs)
        timeouts = request.extensions.get("timeout") or dict.fromkeys(_PHASES)
        capped = {name: left if value is None or value > left else value
                  for name, value in timeouts.items()}
        request.extensions = {**request.extensions, "timeout": capped}
        stream = kwargs.pop("stream", False)
        try:
            response = super().send(request, stream=True, **kwargs)
            if not stream:
                _read_before(response, deadline)
        except httpx2.TimeoutException:
            if capped != timeouts and time.monotonic() >= deadline - 0.05:
                raise DeadlineExceeded("deadline passed while waiting for the reply") from None
            raise
        if response.status_code in _RETRYABLE:
            wait = retry_after(response.headers)
            if wait is not None and time.monotonic() + wait >= deadline:
                response.headers["x-should-retry"] = "false"
        return response


class _DeadlineStream(httpcore2.NetworkStream):
    """A connection whose every read and write ends by the item's deadline.

    Each read is bounded by the timeout, but a server sending a header byte at a time
    passes every one of them; capping each read at the time left bounds the whole reply.
    """

    def __init__(self, stream: httpcore2.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _time_left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _time_left(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, *args: Any, **kwargs: Any) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(*args, **kwargs))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore2.SyncBackend):
    def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore2.NetworkStream:
        return _DeadlineStream(super().connect_tcp(*args, **kwargs))


def _time_left(timeout: float | None) -> float | None:
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore2.ReadTimeout("the deadline passed")
    return left if timeout is None else min(timeout, left)


def _deadline_transport() -> httpx2.HTTPTransport:
    transport = httpx2.HTTPTransport()
    transport._pool._network_backend = _DeadlineBackend()  # httpx2 takes no backend argument
    return transport


def _read_before(response: httpx2.Response, deadline: float) -> None:
    """Read the body piece by piece, so a reply trickling in still ends at the deadline."""
    pieces, size = [], 0
    try:
        for piece in response.iter_bytes():
            pieces.append(piece)
            size += len(piece)
            if size > MAX_REPLY_BYTES:
                raise ReplyTooLarge(f"the reply is larger than {MAX_REPLY_BYTES // 2**20} MB")
            if time.monotonic() > deadline:
                raise DeadlineExceeded("deadline passed while the reply was still arriving")
    except httpx2.TimeoutException:
        response.close()
        if time.monotonic() >= deadline - 0.05:  # a read cut short by the deadline
            raise DeadlineExceeded("deadline passed while the reply was still arriving") from None
        raise
    except BaseException:
        response.close()
        raise
    response._content = b"".join(pieces)  # what Response.read() sets; the stream is spent
    response.close()


class Client:
    """Chat completions at cfg.base_url; a failed call raises LLMCallFailed, never the key."""

    def __init__(self, cfg: Enrich, key: str, *, max_retries: int | None = None):
        self.cfg = cfg
        self.key = key.strip()
        self._http = DeadlineHttpClient(transport=_deadline_transport())
        self._openai = openai.OpenAI(
            api_key=self.key or PLACEHOLDER_KEY, base_url=cfg.base_url, timeout=cfg.timeout_seconds,
            max_retries=cfg.retries if max_retries is None else max_retries, http_client=self._http,
        )

    @property
    def requests(self) -> int:
        """HTTP requests sent so far: each complete() sends one, and one more for each retry."""
        return self._http.sent

    def complete(self, deadline: float | None = None, **kwargs: Any) -> Answer:
        """One create() (the client retries inside it), ended by the deadline (monotonic)."""
        token = _DEADLINE.set(deadline)
        try:
            response = self._openai.chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:  # Azure OpenAI: a prompt its content filter flags is
            # HTTP 400 with code content_filter
            raise LLMCallFailed(*self._describe(exc),
                                filtered=getattr(exc, "code", None) == "content_filter") from None
        except (ValueError, RecursionError):  # a 200 whose body is no JSON: a proxy's page, a
            # wrong base_url; or JSON nested too deeply to read
            raise LLMCallFailed(f"the reply from {self.cfg.base_url} was not JSON (a proxy's "
                                "page, or not an OpenAI-compatible endpoint?)") from None
        finally:
            _DEADLINE.reset(token)
        error = getattr(response, "error", None)  # OpenRouter and others: an error in a 200
        if error and not getattr(response, "choices", None):
            said = error.get("message") if isinstance(error, dict) else error
            raise LLMCallFailed(f"the provider at {self.cfg.base_url} answered with an error: "
                                f"{clip(clean_name(self._masked(str(said))), 200)}")
        answer = _answer(response)
        if answer.filtered:  # partial at most: not worth asking again with the same words
            raise LLMCallFailed(f"the content filter at {self.cfg.base_url} withheld the reply "
                                "(finish_reason: content_filter)", filtered=True)
        return answer

    def close(self) -> None:
        """Its connections, which the provider keeps alive: the client is a cycle the garbage
        collector alone frees, so a dropped one kept them open until it ran (in a scheduler
        idle between runs, for days)."""
        self._openai.close()

    def _masked(self, text: str) -> str:
        """The text with the key (which a provider may echo) as ***."""
        return text.replace(self.key, "***") if self.key else text

    def _describe(self, exc: openai.OpenAIError) -> tuple[str, bool]:
        """A short reason, never the key, and whether it should stop the run's calls
        (a refused key or an unknown model will not heal within the run)."""
        cfg = self.cfg
        if isinstance(exc, DeadlineExceeded):
            return f"deadline of {cfg.deadline_seconds:g} s passed ({exc})", False
        if isinstance(exc, (ReplyTooLarge, StopAsked)):
            return str(exc), False
        if isinstance(exc, openai.APITimeoutError):
            return f"no reply from {cfg.base_url} within {cfg.timeout_seconds:g} s", False
        if isinstance(exc, openai.APIConnectionError):
            return f"cannot connect to {cfg.base_url}", False
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            return (f"HTTP {exc.status_code} from {cfg.base_url}: the key was refused "
                    f"(check the {cfg.api_key_env} environment variable)"), True
        if isinstance(exc, openai.NotFoundError):
            return (f"HTTP 404 from {cfg.base_url}: "
                    f"unknown model {cfg.model!r} or wrong base_url"), True
        if isinstance(exc, openai.APIStatusError):
            message = self._masked(str(exc.message))
            # the status, said once (a body it could not read, a proxy's page: the SDK says only that)
            message = re.sub(r"^Error code: \d+(?: - |$)", "", message)
            message = clip(clean_name(message), 200)  # one line: vLLM's are multi-line validation errors
            # whatever the status: 400 from DeepSeek, 500 from llama-cpp-python's server
            hint = (" (a provider without json_schema replies: set enrich.structured: json_object)"
                    if cfg.structured == "json_schema"
                    and re.search(r"(?i)response_format|json_schema", message) else "")
            said = f": {message}" if message else ""
            return f"HTTP {exc.status_code} from {cfg.base_url}{said}{hint}", False
        return type(exc).__name__, False
