"""One logging setup: rich on a terminal, plain timestamped lines elsewhere.

cron, systemd and Docker keep stderr, so each line there carries its time. The HTTP
clients underneath (httpx, openai, urllib3, arxiv) log every request at INFO; they
stay at WARNING unless -vv asks for them.
"""

from __future__ import annotations

import logging
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


SECRETS: list[str] = []  # what no line may show, longest first (hide)
MASK = "***"


def hide(values: Iterable[str]) -> None:
    """The secrets the config's *_env variables hold: every log line, error and traceback
    shows them as ***. For a URL also its path and query, which an HTTP library logs
    alone ("POST /bot123:TOKEN/sendMessage", "/robot/send?access_token=…")."""
    for value in values:
        found = [value]
        if "://" in value:
            parts = urlsplit(value)
            found.append(parts.path + (f"?{parts.query}" if parts.query else ""))
        SECRETS.extend(part for part in found if len(part) >= 6 and part not in SECRETS)
    SECRETS.sort(key=len, reverse=True)


def redact(text: str) -> str:
    for secret in SECRETS:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


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
