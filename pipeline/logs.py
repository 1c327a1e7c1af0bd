"""One logging setup: rich on a terminal, plain timestamped lines elsewhere.

cron, systemd and Docker keep stderr, so each line there carries its time. The HTTP
clients underneath (httpx, openai, urllib3, arxiv) log every request at INFO; they
stay at WARNING unless -vv asks for them.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable
from urllib.parse import urlsplit

from rich.logging import RichHandler

from pipeline import progress
from pipeline.text import for_terminal

THIRD_PARTY = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "urllib3", "arxiv", "apscheduler",
               "filelock")
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"


SECRETS: dict[str, str] = {}  # what no line may show, longest first (hide): as what it shows
MASK = "***"
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# a token a git host issues, by its prefix (GitHub, GitLab, Bitbucket, Hugging Face), a UUID,
# or a run of 20 letters and digits with both in it (hex, base62, an Azure DevOps token)
_ISSUED = re.compile(r"(gh[pousr]_|github_pat_|gl(pat|dt|ptt|rt)-|ATBB|ATCTT|hf_)")
_UUID = re.compile(r"[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}")
_RUN = re.compile(r"[A-Za-z0-9]{20,}")


def hide(values: Iterable[str], urls: Iterable[str] = (), public: Iterable[str] = ()) -> None:
    """The secrets the config's *_env variables hold: every log line, error and traceback
    shows them as ***. For a URL also its path and query, which an HTTP library logs
    alone ("POST /bot123:TOKEN/sendMessage", "/robot/send?access_token=…"). `urls`, the
    addresses the config holds, show each query value as *** (mask_url): a mirror's key;
    and each path segment that looks like a token (a proxy's https://host/KEY/rss/cs.LG),
    but what the `public` addresses show (the site's, the unsubscribe page's: in every
    digest's links) is no secret."""
    found: dict[str, str] = {}
    for value in values:
        found[value] = MASK
        if "://" in value:
            parts = urlsplit(value)
            found[parts.path + (f"?{parts.query}" if parts.query else "")] = MASK
    shown = list(public)
    for url in urls:
        for pair in _query(url).split("&"):
            if len(_value(pair)) >= 6 and not any(pair in address for address in shown):  # ?v=2: none
                found[pair] = _masked_pair(pair)
        for segment in _path(url).split("/"):
            if _token_like(segment) and not any(segment in address for address in shown):
                found[segment] = MASK
    known = {**SECRETS, **{part: shown for part, shown in found.items() if len(part) >= 6}}
    SECRETS.clear()
    SECRETS.update(sorted(known.items(), key=lambda item: len(item[0]), reverse=True))


def redact(text: str) -> str:
    for secret, shown in SECRETS.items():
        if secret in text:
            text = text.replace(secret, shown)
    return text


def mask_url(url: str, paths: bool = False) -> str:
    """`url` as a line may show it: what stands before its host (user, password or token)
    and each query value as ***; with `paths`, each path segment that looks like a token
    too (a git remote's https://host/api/TOKEN/repo.git). The last @ before the path ends
    the userinfo: a password written with a raw @ is not shown in part."""
    scheme, _, rest = url.partition("://")
    host, slash, tail = rest.partition("/")
    host = f"{MASK}@{host.rsplit('@', 1)[1]}" if "@" in host else host
    path, mark, query = tail.partition("?")
    if paths:
        path = "/".join(MASK if _token_like(segment) else segment for segment in path.split("/"))
    return f"{scheme}://{host}{slash}{path}{mark}{'&'.join(map(_masked_pair, query.split('&')))}"


def masked_urls(text: str, paths: bool = False) -> str:
    """Every URL in `text` through mask_url (git's words name its remote's)."""
    return _URL.sub(lambda found: mask_url(found[0], paths), text)


def _masked_pair(pair: str) -> str:
    """One part of a query with its value as ***: `name=***`, or *** for a bare value."""
    name, equals, _ = pair.partition("=")
    return f"{name}={MASK}" if equals else MASK if pair else pair


def _value(pair: str) -> str:
    name, equals, value = pair.partition("=")
    return value if equals else name


def _query(url: str) -> str:
    return url.partition("?")[2] if "://" in url else ""


def _path(url: str) -> str:
    """What stands after a URL's host, before its query: as mask_url reads it, never raising."""
    path = url.partition("://")[2].partition("/")[2] if "://" in url else ""
    return re.split(r"[?#]", path, maxsplit=1)[0]


def _token_like(segment: str) -> bool:
    return bool(_ISSUED.match(segment) or _UUID.search(segment) or any(
        re.search(r"[0-9]", run) and re.search(r"[A-Za-z]", run) for run in _RUN.findall(segment)))


def _hidden(record: logging.LogRecord) -> bool:
    if SECRETS:
        record.msg, record.args = redact(record.getMessage()), ()
        if record.exc_info:  # -v's traceback: formatted here, so it can be redacted too
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
    return True


class _Plain(logging.Formatter):
    """Log lines carry feed text too (warnings, titles): no control characters either."""

    def format(self, record: logging.LogRecord) -> str:
        return for_terminal(super().format(record))


def _clean(record: logging.LogRecord) -> bool:
    """The same for rich's handler, which formats the message itself."""
    record.msg, record.args = for_terminal(record.getMessage()), ()
    return True


def setup(verbose: int = 0, quiet: bool = False) -> None:
    """-q: errors only; -v: our debug lines; -vv: the third-party libraries' too."""
    level = logging.ERROR if quiet else logging.DEBUG if verbose >= 2 else logging.INFO
    progress.ENABLED.quiet = quiet
    if progress.CONSOLE.is_terminal:
        handler: logging.Handler = RichHandler(console=progress.CONSOLE, show_path=False, markup=False,
                                               rich_tracebacks=False, log_time_format="[%X]")
        handler.addFilter(_clean)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_Plain(PLAIN_FORMAT, TIME_FORMAT))
    handler.addFilter(_hidden)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("pipeline").setLevel(logging.DEBUG if verbose and not quiet else logging.NOTSET)
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose >= 2 else max(level, logging.WARNING))
