"""Progress bars (rich) for the slow steps, shown only on a terminal.

Under cron, systemd or Docker nothing is drawn: the log lines say what happens.
Log records and bars share one console, so a log line prints above a bar, not through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

CONSOLE = Console(stderr=True)
T = TypeVar("T")


class _Enabled:
    """-q turns bars off; otherwise they follow whether stderr is a terminal."""

    quiet = False


ENABLED = _Enabled()


def shown() -> bool:
    return CONSOLE.is_terminal and not ENABLED.quiet


class _Count(ProgressColumn):
    """A running count read from `count()` at each refresh (requests made so far)."""

    def __init__(self, count: Callable[[], int], unit: str):
        super().__init__()
        self.count, self.unit = count, unit

    def render(self, task: Task) -> Text:
        return Text(f"{self.count()} {self.unit}")


@contextmanager
def bar(label: str, total: int | None = None, *, count: Callable[[], int] | None = None,
        unit: str = "", show: bool | None = None) -> Iterator[Callable[[], None]]:
    """Yield `advance()`; with `count`, the bar shows that number instead of a fraction."""
    if not (shown() if show is None else show):
        yield lambda: None
        return
    columns: list[ProgressColumn | str] = [SpinnerColumn(), TextColumn("{task.description}")]
    if count is not None:
        columns.append(_Count(count, unit))
    else:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=CONSOLE, transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda: progress.advance(task)


def track(items: Iterable[T], label: str, total: int) -> Iterator[T]:
    """Each item of `items`, advancing a bar labelled `label` after it."""
    with bar(label, total) as advance:
        for item in items:
            yield item
            advance()
