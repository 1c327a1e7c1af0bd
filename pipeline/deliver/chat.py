"""Chat channels: a Slack, Feishu, DingTalk or Telegram group, or any JSON webhook.

Each gets the compact digest (the highlights, featured papers with one line each, the top
papers of each topic, a link to the web edition: compact.py), worded by templates/channels/ and shaped
the way the platform's documentation asks:

* slack: incoming webhook, `{"text", "blocks": [section blocks of mrkdwn]}`
  (https://api.slack.com/messaging/webhooks); answers `ok`.
* feishu: custom bot webhook, an interactive card with one markdown element; with a
  signing secret, `timestamp` (seconds) and `sign` = base64(HMAC-SHA256 keyed with
  "timestamp\\nsecret", over nothing) in the body; answers `{"code": 0}`.
* dingtalk: custom robot webhook, `{"msgtype": "markdown"}`; with a signing secret,
  `&timestamp=` (ms) `&sign=` base64(HMAC-SHA256 keyed with the secret, over
  "timestamp\\nsecret") on the URL; answers `{"errcode": 0}`.
  A Feishu or DingTalk body stays under 20 KB (FEISHU_BYTES, DINGTALK_BYTES): fewer papers a
  topic, then the Markdown split between lines over several posts (those the digest takes
  without its topics' papers, which then fill their room).
* telegram: Bot API `sendMessage`, `parse_mode: HTML`, the text split at 4096
  characters between lines, so never inside a tag or an entity; answers `{"ok": true}`.
* webhook: the digest's structured content as JSON; any 2xx.

Every body goes as JSON in UTF-8 (`encoded`), and a size is counted in its bytes as sent.

The webhook URL, bot token and signing secret come from the environment variables the
entry names (`url_env`, `token_env`, `secret_env`), read when sending; they never appear
in a log line or an error. 429 and 5xx answers are retried here, waiting as long as
Retry-After asks; a longer ask than `max_wait_seconds` defers the row at once, to be
tried no sooner than asked. What still fails stays in the outbox.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote_plus, urlsplit

import requests
import urllib3
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline import escape, render, retry
from pipeline.config import unknown_key
from pipeline.config_sections import EnvName
from pipeline.deliver.channels import ChannelSetup, Deferred, Interrupted, Message, Refused, Unreachable
from pipeline.deliver.chat_split import split_html, split_lines, utf16
from pipeline.deliver.compact import compact, slack_escape
from pipeline.errors import ConfigError, DigestError
from pipeline.models import Digest
from pipeline.sources.http import looks_like_html
from pipeline.stopping import Stopped, pause

# characters in one section block's text; Slack does not say whether an emoji or a rare CJK
# character beyond the BMP is 1 or 2, so both limits are counted in UTF-16 units (2): within
# either reading
SLACK_BLOCK = 3000
SLACK_BLOCKS = 50
# what all blocks of one message may hold together: Slack refuses more with msg_blocks_too_long
# (undocumented but for its markdown block; measured at about 13,000: slackapi/bolt-js#2509)
SLACK_MESSAGE = 12_000
TELEGRAM_LIMIT = 4096  # UTF-16 code units of one message
# Feishu's custom bot: "请求体大小不能超过20K" (else code 9499, Bad Request), its guide at
# https://open.feishu.cn/document/ukTMukTMukTM/ucTM5YjL3ETO24yNxkjN; less room for timestamp and sign
FEISHU_BYTES = 20_000 - 200
# DingTalk's custom robot: no size is in its documentation; the robot refuses a bigger body
# with errcode 460101, "message too long, exceed 20000 bytes" (quoted in
# https://github.com/timonwong/prometheus-webhook-dingtalk/issues/30), now worded "body 大小不合法;
# 请保持大小在 20000bytes 以内" (https://github.com/feiyu563/PrometheusAlert/issues/318)
DINGTALK_BYTES = 20_000
JSON = "application/json; charset=utf-8"  # every body, `encoded`
PART = "#"  # in a stored Message-ID: "<id>#2", the first two messages were posted


class ChatOptions(BaseModel):
    """A chat entry's own keys under `channels` (besides `type` and `name`)."""

    model_config = ConfigDict(extra="forbid")
    url_env: EnvName | None = None  # slack, feishu, dingtalk, webhook: the webhook URL
    secret_env: EnvName | None = None  # feishu, dingtalk: the signing secret, when set
    token_env: EnvName | None = None  # telegram: the bot token
    # telegram: the group or channel; unquoted in YAML an integer, as the Bot API types it too
    chat_id: str | None = Field(None, coerce_numbers_to_str=True)
    api_url: str = "https://api.telegram.org"  # telegram: the Bot API
    languages: list[Literal["zh", "en"]] | None = Field(None, min_length=1)  # default: languages
    top: int = Field(3, ge=0)  # papers per topic
    retries: int = Field(3, ge=0)
    timeout_seconds: float = Field(30, gt=0)
    max_wait_seconds: float = Field(60, ge=0)  # the longest Retry-After waited for in a run


@dataclass(frozen=True)
class Platform:
    template: str | None  # under templates/channels/; None: the JSON content itself
    html: bool  # rendered with HTML autoescape (telegram)
    needs: tuple[str, ...]  # required options
    # (title, text, content) -> request bodies
    bodies: Callable[[str, str, dict[str, Any]], list[dict[str, Any]]]
    answer: Callable[[requests.Response], str | None]  # None: accepted; else the refusal
    busy: Callable[[requests.Response], bool] = lambda response: False  # a rate limit in a 200
    one_post: bool = False  # a raised `top` gives way (fewer papers a topic) before another post
    takes: tuple[str, ...] = ()  # its optional keys of PLATFORM_KEYS


PLATFORM_KEYS = ("url_env", "secret_env", "token_env", "chat_id", "api_url")  # each some platforms' only
SECRETS = {"url_env": "the webhook URL", "secret_env": "the signing secret", "token_env": "the bot token"}


def _slack(title: str, text: str, content: dict[str, Any]) -> list[dict[str, Any]]:
    """Section blocks of mrkdwn, `verbatim` so that a URL or a name in a paper's text is not
    turned into a link or a mention; past 50 blocks or 12,000 characters, the next message
    goes on. `text`, what a notification shows, is the subject as the heading shows it."""
    messages: list[list[dict[str, Any]]] = []
    size = 0  # UTF-16 units of block text in the message being filled
    for chunk in (chunk for block in text.strip().split("\n\n") if block.strip()
                  for chunk in split_lines(block.strip(), SLACK_BLOCK, utf16)):
        if not messages or len(messages[-1]) == SLACK_BLOCKS or size + utf16(chunk) > SLACK_MESSAGE:
            messages.append([])
            size = 0
        messages[-1].append({"type": "section", "text": {"type": "mrkdwn", "text": chunk, "verbatim": True}})
        size += utf16(chunk)
    return [{"text": slack_escape(title), "blocks": blocks} for blocks in messages]


def _feishu(title: str, text: str, content: dict[str, Any]) -> list[dict[str, Any]]:
    return _in_bytes(lambda part: {"msg_type": "interactive", "card": {
        "config": {"wide_screen_mode": True},
        "header": {"title": {"tag": "plain_text", "content": title}, "template": "blue"},
        "elements": [{"tag": "markdown", "content": part}]}}, text, FEISHU_BYTES)


def _dingtalk(title: str, text: str, content: dict[str, Any]) -> list[dict[str, Any]]:
    return _in_bytes(lambda part: {"msgtype": "markdown", "markdown": {"title": title, "text": part}},
                     text, DINGTALK_BYTES)


def _in_bytes(body: Callable[[str], dict[str, Any]], text: str, limit: int) -> list[dict[str, Any]]:
    """A body for each piece of the Markdown `text`, whole lines, each at most `limit`
    bytes as sent (`encoded`)."""
    room = limit - len(encoded(body("")))
    parts = split_lines(text.strip(), room, lambda part: len(encoded(part)) - 2)  # less the quotes
    return [body(part.strip()) for part in parts]


def encoded(body: object) -> bytes:
    """A body as posted: JSON in UTF-8, a Chinese character 3 bytes (requests' `json=`
    escapes every non-ASCII one as \\uXXXX, 6 bytes of Feishu's or DingTalk's 20,000)."""
    return json.dumps(body, ensure_ascii=False, allow_nan=False).encode()


def _telegram(title: str, text: str, content: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"text": part, "parse_mode": "HTML", "link_preview_options": {"is_disabled": True}}
            for part in split_html(text.strip(), TELEGRAM_LIMIT)]


def _webhook(title: str, text: str, content: dict[str, Any]) -> list[dict[str, Any]]:
    return [content]


def _json(response: requests.Response) -> dict[str, Any]:
    try:
        found = response.json()
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _text(response: requests.Response) -> str:
    """The body as text: UTF-8 unless its Content-Type names a charset (requests reads a
    text/* body without one as Latin-1, HTTP/1.1's old default: a receiver's Chinese words
    became mojibake such as 'è¯·æ±')."""
    if "charset" not in response.headers.get("Content-Type", "").lower():
        response.encoding = "utf-8"
    return response.text


def _code(response: requests.Response, *keys: str) -> int | None:
    data = _json(response)
    for key in keys:
        if isinstance(data.get(key), int):
            return data[key]
    return None


PLATFORMS = {
    "slack": Platform("slack.txt.j2", False, ("url_env",), _slack,
                      lambda r: None if _text(r).strip() == "ok" else _words(r)),
    "feishu": Platform("markdown.md.j2", False, ("url_env",), _feishu,
                       lambda r: None if _code(r, "code", "StatusCode") == 0 else _words(r),
                       busy=lambda r: _code(r, "code") == 11232, one_post=True, takes=("secret_env",)),
    "dingtalk": Platform("markdown.md.j2", False, ("url_env",), _dingtalk,
                         lambda r: None if _code(r, "errcode") == 0 else _words(r),
                         busy=lambda r: _code(r, "errcode") == 130101, one_post=True,
                         takes=("secret_env",)),
    "telegram": Platform("telegram.html.j2", True, ("token_env", "chat_id"), _telegram,
                         lambda r: None if _json(r).get("ok") is True else _words(r),
                         takes=("api_url",)),
    "webhook": Platform(None, False, ("url_env",), _webhook, lambda r: None),
}


class ChatChannel:
    """One chat entry: one reader (the chat id, or the name of the URL's variable)."""

    def __init__(self, setup: ChannelSetup, kind: str):
        where = setup.config.channel_entry_of(setup.name)
        try:
            self.options = ChatOptions(**setup.options)
        except ValidationError as exc:
            error = exc.errors()[0]
            key = ".".join(str(part) for part in error["loc"])
            platform = PLATFORMS[kind]  # `url:` on telegram is no webhook URL: it reads none
            own = (*platform.needs, *platform.takes)
            secret = error["type"] == "extra_forbidden" and f"{key}_env" in own
            # the keys this type reads are the closest it may mean; the hint names a secret's
            known = [] if secret else [k for k in ChatOptions.model_fields
                                       if k in own or k not in PLATFORM_KEYS]
            message = (unknown_key(key, known) if error["type"] == "extra_forbidden"
                       else error["msg"].removeprefix("Value error, "))
            raise ConfigError(f"{where}.{key}: {message}",  # `url:` holds a webhook's secret path
                              f"secrets are not read from the config file: put it in an environment "
                              f"variable and set {' or '.join(secret_keys(kind, key))} to its name"
                              if secret else None) from None
        for key in PLATFORMS[kind].needs:
            if not getattr(self.options, key):
                raise ConfigError(f"{where}.{key}: required for a {kind} channel")
        own = (*PLATFORMS[kind].needs, *PLATFORMS[kind].takes)
        for key in (k for k in PLATFORM_KEYS if k in self.options.model_fields_set and k not in own):
            # set in vain (a secret_env on a webhook: nothing is signed); the reader must know
            others = [name for name, p in PLATFORMS.items() if key in (*p.needs, *p.takes)]
            raise ConfigError(f"{where}.{key}: only {' and '.join(others)} channels take it, "
                              f"not a {kind} one: it would do nothing")
        self.name, self.kind, self.platform = setup.name, kind, PLATFORMS[kind]
        self.where = where  # how every message names the entry
        languages = self.options.languages or setup.config.languages
        self.settings = render.Settings.of(setup.config.model_copy(update={"languages": list(languages)}))
        self.session = requests.Session()

    def readers(self) -> list[str]:
        return [str(self.options.chat_id) if self.kind == "telegram" else str(self.options.url_env)]

    def build(self, digest: Digest, reader: str, message_id: str | None = None) -> Message:
        """The digest's messages; from message `k` on when `message_id` ends in `#k` (the
        first k were posted before a hand-over was cut off: they are not posted twice)."""
        top = self.options.top
        bodies = self._bodies(digest, top)
        if self.platform.one_post and len(bodies) > 1:
            # fewer papers a topic until the posts are as few as they can be: one, or as many as
            # the digest takes without its topics' papers (which then fill those posts' room)
            fewest = len(self._bodies(digest, 0))
            while len(bodies) > fewest:
                top -= 1
                bodies = self._bodies(digest, top)
        # a new id for each new hand-over (a resend by hand is a new post), kept while it is retried
        base, _, start = (message_id or f"{digest.id}.{self.name}.{secrets.token_hex(4)}").partition(PART)
        return Message(reader, base + (PART + start if start else ""), bodies[int(start or 0):])

    def _bodies(self, digest: Digest, top: int) -> list[dict[str, Any]]:
        return self.platform.bodies(*compact(self.settings, digest, self.platform.template,
                                             self.platform.html, top))

    def send(self, message: Message) -> str:
        base, _, start = message.id.partition(PART)
        first = int(start or 0)
        for number, body in enumerate(message.body):
            try:
                self._post(body, f"{base}{PART}{first + number}")
            except (Deferred, Refused, Interrupted) as exc:
                if number == 0 and first == 0:
                    raise
                done, total = first + number, first + len(message.body)
                if isinstance(exc, Refused):  # the rest would be refused again: stop here
                    raise Refused(f"{exc.reason} after {done} of {total} messages") from None
                raise Interrupted(f"{exc.reason} after {done} of {total} messages",
                                  resume=f"{base}{PART}{done}",
                                  after=exc.after if isinstance(exc, Deferred) else None) from None
            if number + 1 < len(message.body):  # stored before the next goes: a crash reposts none
                message.progress(f"{base}{PART}{first + number + 1}")
        parts = len(message.body)
        return f"{self.kind} accepted {parts} message{'s' if parts > 1 else ''}"

    def close(self) -> None:
        self.session.close()

    def check(self) -> str:
        """What `rl-digest doctor` says of this channel, posting nothing: the variables the
        entry names are set; Telegram's `getMe` (the Bot API's call for testing a token)
        and `getChat` answer; a webhook has no call that does not post, so its host is only reached (a
        TCP handshake, and TLS for https)."""
        where = self.where
        named = (self.options.url_env, self.options.token_env, self.options.secret_env)
        missing = [name for name in named if name and not os.environ.get(name)]
        if missing:
            raise DigestError(f"{where}: the environment variable {', '.join(missing)} is not set")
        if self.kind == "telegram":
            me = self._bot_read(where, "getMe")
            # a wrong chat_id, or a bot not in the chat, has every post refused for good
            chat = self._bot_read(where, "getChat", chat_id=self.options.chat_id)
            return (f"{where}: the token is good (bot @{me.get('username')}), chat "
                    f"{chat.get('title') or self.options.chat_id}; nothing posted")
        url = urlsplit(_secret(self.options.url_env, self.where))
        try:
            host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
        except ValueError:  # a port that is no number
            host = ""
        if url.scheme not in ("http", "https") or not host:  # as a post would say (it waits)
            raise DigestError(f"{where}: the URL in {self.options.url_env} is not a web address "
                              "(http:// or https://, then the host)")
        try:
            with socket.create_connection((host, port), timeout=self.options.timeout_seconds) as sock:
                if url.scheme == "https":
                    ssl.create_default_context().wrap_socket(sock, server_hostname=host).close()
        except OSError as exc:
            raise DigestError(f"{where}: {host}:{port}: {exc.strerror or exc}") from None
        return f"{where}: {host}:{port} reachable (a webhook has no call that posts nothing)"

    def _bot_read(self, where: str, method: str, **params: str | None) -> dict[str, Any]:
        """One Bot API call that changes nothing, for doctor: its result, else DigestError."""
        token = _secret(self.options.token_env, self.where)
        try:
            response = self.session.get(f"{self.options.api_url.rstrip('/')}/bot{token}/{method}",
                                        params=params, timeout=self.options.timeout_seconds)
        except requests.RequestException as exc:
            raise DigestError(f"{where}: {_reason(exc)}") from None
        found = _json(response).get("result")
        if response.status_code != 200 or not isinstance(found, dict):
            said = " ".join([method, *(value or "" for value in params.values())])
            raise DigestError(f"{where}: {said}: {_words(response)}")
        return found

    def _post(self, body: dict[str, Any], key: str) -> None:
        """One post, retried as the platform asks. `key`, the same on every try of this post
        (and on a post again after a hand-over was cut off), goes as the Idempotency-Key
        header, so a receiver of our webhook can tell a repeat from a new post."""
        url, body = self._address(body)
        where = self.where
        for attempt in range(self.options.retries + 1):
            try:
                response = self.session.post(url, data=encoded(body), timeout=self.options.timeout_seconds,
                                             headers={"Content-Type": JSON, "Idempotency-Key": key},
                                             allow_redirects=False)  # a 301 or 302 turns a POST into a GET
            except (requests.exceptions.MissingSchema, requests.exceptions.InvalidSchema,
                    requests.exceptions.InvalidURL) as exc:
                # not reached at all: the channel waits for the variable's fix, as for one unset
                raise Unreachable(f"{where}: the URL in {self.options.url_env or 'api_url'} is not a "
                                  f"web address ({type(exc).__name__})") from None
            except requests.RequestException as exc:
                if _before_sending(exc):
                    raise Unreachable(f"{where}: {_reason(exc)}") from None
                raise Interrupted(f"{where}: {_reason(exc)}") from None
            status = response.status_code
            busy = status == 429 or status >= 500 or (status == 200 and self.platform.busy(response))
            if not busy:
                break
            asked = retry_after(response)
            if asked is not None and asked > self.options.max_wait_seconds:  # not worth a wait
                raise Deferred(f"{where}: {_words(response)}, asking to wait {asked:.0f} s "
                               f"(more than max_wait_seconds)", after=asked)
            if attempt == self.options.retries:
                raise Deferred(f"{where}: {_words(response)} after {attempt} retries")
            try:
                pause(retry.backoff(attempt, 1.0, self.options.max_wait_seconds, asked))
            except Stopped:  # SIGTERM: a "later" like any other, so the parts posted are kept as posted
                raise Deferred(f"{where}: {_words(response)}; a stop was asked for before its retry",
                               after=asked) from None
        self._accepted(response)

    def _accepted(self, response: requests.Response) -> None:
        """The last answer to a post, when it is no "later": Refused unless it accepts."""
        where, status = self.where, response.status_code
        if 300 <= status < 400:  # followed, the post would arrive as a GET without its body
            raise Refused(f"{where}: {_words(response)}: the URL in {self.options.url_env or 'api_url'} "
                          "redirects elsewhere; set it to the address the webhook moved to")
        if not 200 <= status < 300:
            raise Refused(f"{where}: {_words(response)}")
        refusal = self.platform.answer(response)
        if refusal:
            raise Refused(f"{where}: {refusal}")

    def _address(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The URL to post to and the body, signed now (a signature is good for an hour)."""
        if self.kind == "telegram":
            token = _secret(self.options.token_env, self.where)
            return (f"{self.options.api_url.rstrip('/')}/bot{token}/sendMessage",
                    {"chat_id": self.options.chat_id, **body})
        url = _secret(self.options.url_env, self.where)
        secret = os.environ.get(self.options.secret_env) if self.options.secret_env else None
        if not secret:
            return url, body
        if self.kind == "feishu":
            stamp = str(int(time.time()))
            key = f"{stamp}\n{secret}".encode()
            sign = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
            return url, {"timestamp": stamp, "sign": sign, **body}
        if self.kind == "dingtalk":
            stamp = str(int(time.time() * 1000))
            digest = hmac.new(secret.encode(), f"{stamp}\n{secret}".encode(), hashlib.sha256).digest()
            sign = quote_plus(base64.b64encode(digest).decode())
            joiner = "&" if "?" in url else "?"
            return f"{url}{joiner}timestamp={stamp}&sign={sign}", body
        return url, body


def chat_factory(kind: str) -> Callable[[ChannelSetup], ChatChannel]:
    def make(setup: ChannelSetup) -> ChatChannel:
        return ChatChannel(setup, kind)

    return make


slack, feishu, dingtalk, telegram, webhook = (chat_factory(kind) for kind in PLATFORMS)


def secret_keys(kind: str, written: str) -> list[str]:
    """The keys of a `kind` entry that name the variable for a secret written at `written`
    (token, secret, url...): `written`_env where the platform reads one, else every one it
    reads, each with what its variable holds ('url_env (the webhook URL)')."""
    platform = PLATFORMS[kind]
    keys = [key for key in (*platform.needs, *platform.takes) if key in SECRETS]
    return [f"{key} ({SECRETS[key]})" for key in ([f"{written}_env"] if f"{written}_env" in keys else keys)]


# --- small helpers -----------------------------------------------------------------

def _secret(env_name: str | None, channel: str) -> str:
    value = os.environ.get(env_name) if env_name else None
    if not value:
        raise Unreachable(f"{channel}: the environment variable {env_name} is not set")
    return value


def retry_after(response: requests.Response) -> float | None:
    """Retry-After as every client reads it (pipeline/retry.py); Telegram also says it in
    parameters.retry_after."""
    header = retry.retry_after(response.headers)
    if header is not None:
        return header
    asked = _json(response).get("parameters", {})
    return float(asked["retry_after"]) if isinstance(asked, dict) and isinstance(
        asked.get("retry_after"), int) else None


def _words(response: requests.Response) -> str:
    """HTTP status and the platform's words, on one line and short (never the URL)."""
    data = _json(response)
    said = (data.get("msg") or data.get("errmsg") or data.get("description") or data.get("error")
            if data else _page_words(response))
    said = escape.one_line(json.dumps(said) if isinstance(said, dict) else said or "")[:200]
    moved = (data.get("parameters") or {}).get("migrate_to_chat_id") if data else None
    if moved:  # Telegram: the group became a supergroup with a new id, which it tells once asked
        said += f" (its new chat_id is {moved}: set chat_id to it)"
    return f"HTTP {response.status_code}" + (f" {said}" if said else "")


_INLINE_GAP = re.compile(r" (?=[.,;:!?)])")  # where a tag ended before punctuation ("<a>Help</a>.")


def _page_words(response: requests.Response) -> str:
    """The body as text; an HTML page (a proxy's 502, Slack's error page) as its words:
    title and text, without tags, scripts and styles, and without the status it repeats."""
    body = _text(response)
    if not looks_like_html(response.content, response.headers.get("Content-Type", "")):
        return body
    from selectolax.lexbor import LexborHTMLParser  # loaded only for a page

    tree = LexborHTMLParser(body[:100_000])  # the words come first; a huge page is not read whole
    tree.strip_tags(["script", "style", "noscript", "template"])
    title, text = (_INLINE_GAP.sub("", escape.one_line(node.text(separator=" "))) if node else ""
                   for node in (tree.css_first("title"), tree.body))
    words = text if text.startswith(title) else f"{title}: {text}" if text else title
    return words.removeprefix(f"{response.status_code} ")  # "502 Bad Gateway": HTTP 502 says it


def _before_sending(exc: requests.RequestException) -> bool:
    """Whether the request failed before anything left (no connection was made)."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, urllib3.exceptions.NewConnectionError)


def _reason(exc: requests.RequestException) -> str:
    """What went wrong, without the URL (it may hold a token)."""
    if isinstance(exc, requests.Timeout):
        return "timed out"
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        return "connection refused" if "refused" in str(reason).lower() else "cannot connect"
    return f"connection lost ({type(exc).__name__})"
