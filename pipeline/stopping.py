"""A stop asked for by SIGTERM/SIGINT: long waits end early, stages end at a checkpoint.

Every stage commits its own transactions, so stopping between them loses nothing.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pipeline.errors import StoppedBySignal

log = logging.getLogger("pipeline")

STOP = threading.Event()


class Stopped(Exception):
    """A stop was asked for; what was done so far is committed."""


def from_signal(*steps: Callable[[], object]) -> None:
    """Run `steps` (STOP.set first) for a signal handler, on a thread of their own. The
    handler runs on the main thread between two of its bytecodes, maybe while that thread
    holds the very lock a step takes (inside STOP.wait, the scheduler's own wait, or the
    write of a log line, where a second write raises "reentrant call"), and the step would
    then wait for it forever or fail."""
    def run() -> None:
        for step in steps:
            step()
    threading.Thread(target=run, name="stop", daemon=True).start()


def checkpoint() -> None:
    if STOP.is_set():
        raise Stopped()


def pause(seconds: float) -> None:
    """Sleep, unless a stop comes first."""
    if STOP.wait(seconds):
        raise Stopped()


@contextmanager
def on_signals(said: tuple[str, str | None] | tuple[()] = ()) -> Iterator[None]:
    """A one-shot command (run, collect, send) under SIGTERM or Ctrl-C: stop at the next
    checkpoint, so its rows say `stopped` rather than `running` until the next run; a second
    signal does what it would have done without this (ends the process at once). `said`:
    what the stop's line says after the signal's name, and its hint, when not StoppedBySignal's."""
    kinds = (signal.SIGTERM, signal.SIGINT)
    before = {kind: signal.getsignal(kind) for kind in kinds}
    caught: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        caught.append(signum)
        for kind, handler in before.items():  # first: the log line below says a second one ends it
            signal.signal(kind, handler)
        name = signal.Signals(signum).name  # the log line from the thread too: see from_signal
        from_signal(STOP.set, lambda: log.warning(
            "%s: stopping at the next step boundary (send it again to stop at once)", name))

    for kind in kinds:
        signal.signal(kind, stop)
    try:
        yield
    except Stopped:
        raise StoppedBySignal(caught[0] if caught else signal.SIGTERM, *said) from None
    finally:
        for kind, handler in before.items():
            signal.signal(kind, handler)
