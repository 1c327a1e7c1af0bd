"""The reader links an email carries: one-click unsubscribe (`/u/TOKEN`), resubscribe
(`/r/TOKEN`) and per-paper feedback (`/f/TOKEN`), answered by `rl-digest serve`.

A token is `payload.signature`: the payload names the action, the paper and the reader
by an opaque id (an HMAC of the address, so no address is in clear), the signature is an
HMAC-SHA256 of the payload with the secret from `serve.secret_env`. A token that does not
check out is refused (403) and changes nothing.

Rotating the secret: new links are signed with the current one only, and a token signed
with one of `serve.previous_secret_envs`' still checks (its reader id is that secret's
too), so the links of emails already mailed keep working for as long as it stays named.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

from pipeline.config import Config
from pipeline.errors import ConfigError

PATHS = {"unsubscribe": "u", "resubscribe": "r", "up": "f", "down": "f"}
WEB = "web"  # the one reader behind every web-edition page: its visitors have no address
RECIPIENT = "{recipient}"  # in email.unsubscribe_url: the reader's address, URL-quoted
# Where a reader's token goes, in an email rendered once for all and made each reader's in
# this process. Random: a link an abstract carries (a project page at
# https://evil.example/rl-digest-reader-link.up.arxiv%3A2611.00002) was given every reader's
# token too, for its host to read on a click, or on a mail scanner's prefetch, and post.
MARK = "rl-digest-reader-link-" + secrets.token_hex(8)
ADDRESS = "rl-digest-reader-address-" + secrets.token_hex(8)  # RECIPIENT's place in such an email, as random
_MARKED = re.compile(re.escape(MARK) + r"\.(\w+)\.([^\s\"'<>)\]]*)")


def placeholder(base_url: str, action: str, paper: str = "") -> str:
    """A link for whoever reads the email: `Links.personal` puts the reader's token in."""
    return f"{base_url.rstrip('/')}/{PATHS[action]}/{MARK}.{action}.{quote(paper, safe='')}"


@dataclass(frozen=True)
class Claim:
    """What a valid token says: `action` on `paper` (feedback) by the reader `rid`."""

    action: str
    rid: str
    paper: str
    signer: int = 0  # which of Links.keys signed it: 0 the current secret, then the previous


def sized(text: str) -> str:
    """`text` with each placeholder link as long as a reader's. A token's length depends on
    its action and paper only, so an email measured with these stays under the limit for
    every reader."""
    return _SIZER.personal(text, "")


class Links:
    def __init__(self, base_url: str, secret: str, previous: Sequence[str] = ()):
        self.base = base_url.rstrip("/") + "/"
        self.key = secret.encode()
        self.keys = (self.key, *(p.encode() for p in previous if p and p != secret))  # what checks

    @classmethod
    def of(cls, config: Config) -> Links | None:
        """The links at `serve.base_url`; None when it is not set."""
        return cls.signed(config, config.serve.base_url) if config.serve.base_url else None

    @classmethod
    def signed(cls, config: Config, base_url: str) -> Links:
        """Links at `base_url`, signed with the secret `serve.secret_env` names; checked with
        it and those of `serve.previous_secret_envs` that are set (doctor names one unset)."""
        secret = config.secret(config.serve.secret_env)
        if not secret:
            raise ConfigError(f"serve.secret_env: {config.serve.secret_env} is not set (the "
                              "secret that signs the reader links)")
        previous = [config.secret(name) or "" for name in config.serve.previous_secret_envs]
        return cls(base_url, secret, previous)

    def rid(self, address: str, key: bytes | None = None) -> str:
        return _b64(hmac.new(key or self.key, b"reader:" + address.lower().encode(), hashlib.sha256)
                    .digest()[:12])

    def token(self, action: str, address: str, paper: str = "") -> str:
        payload = _b64(f"{action}\n{self.rid(address)}\n{paper}".encode())
        return f"{payload}.{self._sign(payload)}"

    def url(self, action: str, address: str, paper: str = "") -> str:
        return f"{self.base}{PATHS[action]}/{self.token(action, address, paper)}"

    def personal(self, text: str, address: str) -> str:
        """`text` with each placeholder link made this reader's."""
        return _MARKED.sub(lambda m: self.token(m[1], address, unquote(m[2])), text)

    def check(self, token: str) -> Claim | None:
        """The claim of a token signed with our secret, or a previous one; None for anything else."""
        payload, _, signature = token.partition(".")
        signer = next((n for n, key in enumerate(self.keys)
                       if hmac.compare_digest(signature.encode(), self._sign(payload, key).encode())), None)
        if signer is None:
            return None
        try:
            action, rid, paper = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)) \
                .decode().split("\n")
        except ValueError:
            return None
        return Claim(action, rid, paper, signer) if action in PATHS else None

    def reader(self, claim: Claim, addresses: list[str]) -> str | None:
        """The address among `addresses` (or WEB) the claim is about (its id made with the
        secret that signed the claim)."""
        key = self.keys[claim.signer]
        return next((a for a in [*addresses, WEB] if hmac.compare_digest(self.rid(a, key), claim.rid)), None)

    def on_the_web(self, action: str, paper: str) -> str:
        """A 👍/👎 link for a web-edition page: the same link for every visitor, so their
        clicks are one reader's verdict (WEB), the latest click standing."""
        return self.url(action, WEB, paper)

    def _sign(self, payload: str, key: bytes | None = None) -> str:
        return _b64(hmac.new(key or self.key, payload.encode(), hashlib.sha256).digest()[:18])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


_SIZER = Links("https://example.org/", "only-for-measuring")  # sized()'s tokens: their length only
