"""The benchmarks still run (make test-slow): they are run by hand, and three of them had
stopped at once or hung on code that moved (a method that became a class's, a query that
gained a column, a feed that waited 90 min for its batch), unnoticed until the next
measurement. Each runs here at its smallest size; the figures are not checked."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT, shared_file

pytestmark = pytest.mark.slow

SMALL = {
    "collect_requests.py": [],
    "delivery.py": ["--readers", "3"],
    "end_to_end.py": ["--papers", "200", "--repeat", "1", "--no-memory"],
    "enrich.py": ["--papers", "8"],
    "importance.py": [],
    "llm_down.py": ["--papers", "8"],
    "reading_list.py": ["--papers", "300"],
    "refit.py": ["--verdicts", "40"],
    "scheduler_year.py": ["--weeks", "2", "--readers", "2", "--no-trace"],
    "relevance.py": ["--speed"],
    "store_calls.py": ["--papers", "20"],
    "trends.py": ["--papers", "2000", "--weeks", "3", "--repeat", "1"],
    "year.py": ["--weeks", "3", "--readers", "2"],
}


@pytest.mark.parametrize("script", sorted(SMALL))
def test_a_benchmark_runs_and_prints_its_figures(script):
    dev = shared_file("data", "arxiv_dev.jsonl")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *SMALL[script]],
                          env={**os.environ, "RL_DIGEST_SHARED": str(dev.parent.parent)}, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "skipped:" not in done.stderr
    assert any(character.isdigit() for character in done.stdout), done.stdout[-2000:]  # its figures
