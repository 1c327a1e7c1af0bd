"""An LLM endpoint that is down (HTTP 500 to every call): what one run costs in calls, log
lines and time. The circuit breaker (enrich.failure_limit) should keep all three small.

    .venv/bin/python benchmarks/llm_down.py [--papers 97]

RL_DIGEST_SRC=/path/to/a/copy measures another copy (e.g. one without the breaker).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from _common import SRC, machine, table, write_config


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--papers", type=int, default=97)
    args = parser.parse_args()
    from tests.helpers import CATS, rl_paper
    from tests.servers.arxiv_server import ArxivServer
    from tests.servers.openai_server import OpenAIServer, error

    day = datetime(2026, 11, 26, 12, tzinfo=UTC)
    print(machine())
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer() as llm, \
            ArxivServer([rl_paper(i, day) for i in range(args.papers)]) as arxiv:
        llm.script = lambda request: error(500)
        config = write_config(Path(tmp), {
            "sources": {"arxiv": {"api_url": arxiv.api_url, "categories": CATS, "page_size": 200,
                                  "delay_seconds": 0, "overlap_hours": 0},
                        "rss": {"enabled": True, "urls": [arxiv.rss_url(CATS)]}},
            "seeds": {"paths": [], "builtin": False},
            "enrich": {"provider": "openai", "base_url": llm.url, "timeout_seconds": 5,
                       "deadline_seconds": 10, "concurrency": 4},
        })
        env = {**os.environ, "PYTHONPATH": str(SRC), "OPENAI_API_KEY": "benchmark"}
        done = subprocess.run([sys.executable, "-m", "pipeline", "--config", str(config), "run",
                               "--as-of", "2026-11-30"], env=env, capture_output=True, text=True,
                              cwd="/")
    summary = re.search(r"([\d.]+) s; LLM: (\d+) calls", done.stdout)
    if summary is None:
        sys.exit(f"no summary line (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    print(table(["papers", "exit", "log lines", "LLM calls (HTTP requests)", "run"],
                [[args.papers, done.returncode, len(done.stderr.splitlines()),
                  f"{summary[2]} ({len(llm.requests)})", f"{summary[1]} s"]]))


if __name__ == "__main__":
    main()
