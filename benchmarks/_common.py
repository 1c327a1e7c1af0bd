"""What the benchmark scripts share: the import path, papers, a config, a stage timer, tables.

The `pipeline` package is imported from this checkout; set RL_DIGEST_SRC to a copy of
the repository to measure a patched version of it instead (its tests/ are not used).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(os.environ.get("RL_DIGEST_SRC") or ROOT)
sys.path[1:1] = list(dict.fromkeys([str(SRC), str(ROOT)]))  # after the script's own folder

from tests.helpers import config_file  # noqa: E402  (the tests' config writer)

# ../shared beside the checkout; RL_DIGEST_SHARED points elsewhere (a worktree in a subfolder)
DEV = Path(os.environ.get("RL_DIGEST_SHARED") or ROOT.parent / "shared") / "data" / "arxiv_dev.jsonl"


def dev_rows() -> list[dict]:
    """The labelled dev corpus, or exit with a message when ../shared is not here."""
    if not DEV.exists():
        print(f"skipped: {DEV} is not here (../shared is optional); nothing measured", file=sys.stderr)
        sys.exit(0)
    with DEV.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def fresh_id(k: int) -> str:
    """The k-th made-up new-style arXiv id: 2601.00000, 2601.00001, ... (100,000 a month)."""
    return f"26{1 + k // 100_000:02d}.{k % 100_000:05d}"


def make_papers(rows: list[dict], n: int, start: datetime, end: datetime, source: str = "api"):
    """n Paper records: the dev rows over and over with fresh ids, submitted evenly in (start, end)."""
    from pipeline.models import Paper

    span = (end - start).total_seconds()
    papers = []
    for k in range(n):
        row = rows[k % len(rows)]
        moment = start + timedelta(seconds=span * (k + 0.5) / n)
        papers.append(Paper(
            id=fresh_id(k), title=row["title"], abstract=row.get("abstract") or "", version=1,
            authors=tuple(row.get("authors") or ()), categories=tuple(row.get("categories") or ()),
            submitted=moment.replace(microsecond=0), updated=moment.replace(microsecond=0),
            sources=(source,),
        ))
    return papers


def write_config(folder: Path, overrides: dict) -> Path:
    """A config in `folder` (state and outputs stay there) over the built-in defaults."""
    data = {
        "sources": {"arxiv": {"delay_seconds": 0, "retries": 1, "timeout_seconds": 120},
                    "rss": {"enabled": False, "poll_minutes": 0}, "oai": {"enabled": False}},
        "enrich": {"provider": "none"},
        "seeds": {"paths": []},
        "outputs": {"dir": "out"},
        "storage": {"url": "sqlite:///state/digest.sqlite3"},
    }
    return config_file(folder, data, overrides)


class Stages:
    """Wraps functions in place; each call's time and memory go to its stage, exclusive of
    wrapped calls inside it, so the stages add up to the whole. With memory=True the
    tracemalloc peak above the level at the stage's start is kept per stage (the largest
    over its calls, nested stages included)."""

    def __init__(self, memory: bool = False):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.memory = memory
        self._stack: list[list] = []  # [label, started, child_seconds, start_bytes, peak_bytes]
        self._undo: list[tuple[object, str, object]] = []

    def wrap(self, owner, name: str, label: str, nested: bool = False) -> None:
        """nested=True: the label is put under the caller's stage ("fetch+parse: HTTP")."""
        original = getattr(owner, name)
        stages = self

        @functools.wraps(original)
        def timed(*args, **kwargs):
            outer = stages._stack[-1][0].split(":")[0] if nested and stages._stack else "other"
            stages._enter(f"{outer}: {label}" if nested else label)
            try:
                return original(*args, **kwargs)
            finally:
                stages._leave()

        self._undo.append((owner, name, original))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()

    def _fold(self) -> None:
        if self.memory:
            peak = tracemalloc.get_traced_memory()[1]
            for frame in self._stack:
                frame[4] = max(frame[4], peak)
            tracemalloc.reset_peak()

    def _enter(self, label: str) -> None:
        self._fold()
        current = tracemalloc.get_traced_memory()[0] if self.memory else 0
        self._stack.append([label, time.perf_counter(), 0.0, current, current])

    def _leave(self) -> None:
        self._fold()
        label, started, children, start_bytes, peak = self._stack.pop()
        total = time.perf_counter() - started
        self.seconds[label] = self.seconds.get(label, 0.0) + total - children
        self.calls[label] = self.calls.get(label, 0) + 1
        self.peak[label] = max(self.peak.get(label, 0), peak - start_bytes)
        if self._stack:
            self._stack[-1][2] += total


def maxrss_mib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def table(headers: list[str], rows: list[list]) -> str:
    """A Markdown table, columns padded so it also reads in a terminal."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *map(line, cells[1:])])


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                cpu = text.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import pipeline
    source = Path(pipeline.__file__).parent
    try:
        commit = subprocess.run(["git", "-C", str(source), "describe", "--always", "--dirty"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        commit = ""
    return (f"{datetime.now():%Y-%m-%d %H:%M} · {cpu} · {os.cpu_count()} CPUs · {mem:.0f} GiB · "
            f"Python {platform.python_version()} · pipeline from {source}"
            + (f" at {commit}" if commit else ""))
