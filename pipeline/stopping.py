"""A stop asked for by SIGTERM/SIGINT: long waits end early, stages end at a checkpoint.

Every stage commits its own transactions, so stopping between them loses nothing.
"""

from __future__ import annotations

import threading

STOP = threading.Event()


class Stopped(Exception):
    """A stop was asked for; what was done so far is committed."""


def checkpoint() -> None:
    if STOP.is_set():
        raise Stopped()


def pause(seconds: float) -> None:
    """Sleep, unless a stop comes first."""
    if STOP.wait(seconds):
        raise Stopped()
