"""One logging setup: rich on a terminal, plain timestamped lines elsewhere.

cron, systemd and Docker keep stderr, so each line there carries its time. The HTTP
clients underneath (httpx, openai, urllib3, arxiv) log every request at INFO; they
stay at WARNING unless -vv asks for them.
"""

from __future__ import annotations

import logging
import sys

from rich.logging import RichHandler

from pipeline import progress
from pipeline.text import for_terminal

THIRD_PARTY = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "urllib3", "arxiv", "apscheduler",
               "filelock")
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"


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
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("pipeline").setLevel(logging.DEBUG if verbose and not quiet else logging.NOTSET)
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose >= 2 else max(level, logging.WARNING))
