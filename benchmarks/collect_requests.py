"""Requests and seconds of a first run and of a normal weekday collect, at arXiv's 3 s pace.

Runs the real collect (and the seed resolution of the 38 built-in seeds) against the
local arXiv stand-in with no delay, counts every request per source, and computes the
time at arXiv's pace as requests x 3 s: the pace, not the stand-in, sets the time (parsing
is milliseconds). Synthetic days: 100 new papers per category and evening, 1 in 20 about RL.

    .venv/bin/python benchmarks/collect_requests.py
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _common  # noqa: F401  (puts this checkout first on the import path)

from pipeline import collect, sources, store_seeds
from pipeline.config import load
from pipeline.models import Paper
from pipeline.run import collect_and_rank, complete_thin, resolve_seeds, seed_documents
from pipeline.store import Store
from tests.helpers import write_config
from tests.servers.arxiv_server import ArxivServer

PACE = 3.0


def papers(cats: list[str], start: datetime, days: int, per_day: int, n: int = 0) -> list[Paper]:
    out = []
    for day in range(days):
        moment = start + timedelta(days=day)
        for i in range(per_day):
            n += 1
            rl = i % 20 == 0
            out.append(Paper(
                id=f"2611.{n:05d}",
                title=f"GRPO for language model reasoning {n}" if rl else f"Graph study {n}",
                abstract=("We train a large language model with reinforcement learning." if rl
                          else "We bound the chromatic number of sparse graphs."),
                authors=("A. B.",), categories=(cats[i % len(cats)],), submitted=moment, updated=moment))
    return out


def measure(config_path: Path, as_of: datetime, seeds: bool) -> dict[str, int]:
    config = load(config_path)
    store = Store.open(config.storage.url)
    fetcher = collect.make_fetcher(config)
    counts: dict[str, int] = {}
    if seeds:
        store_seeds.save_seeds(store, [e for doc in seed_documents(config) for e in doc.entries])
        before = fetcher.requests
        resolve_seeds(config, store, fetcher, store_seeds.all_seeds(store))
        counts["api (seed titles)"] = fetcher.requests - before
    report, _, _ = collect_and_rank(config, store, sources.configured(config), fetcher, as_of)
    for name, part in report.sources.items():
        if part.requests:
            counts[name] = part.requests
    thin = [p.id for p in report.new if p.submitted is None]
    before = fetcher.requests
    complete_thin(config, store, fetcher, thin)
    counts["api (id_list)"] = fetcher.requests - before
    return counts


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # --help, not a run
    cats = load(None).sources.arxiv.categories
    start = datetime(2026, 11, 16, 12, tzinfo=UTC)
    per_day = 100 * len(cats)  # 100 new papers per category and evening
    with tempfile.TemporaryDirectory() as tmp, ArxivServer(papers(cats, start, 8, per_day)) as server:
        server.oai_page_size = 1000  # about what arXiv sends per ListRecords page
        folder = Path(tmp)
        config = write_config(folder, {"sources": {
            "arxiv": {"api_url": server.api_url},
            "rss": {"urls": [server.rss_url(cats)]},
            "oai": {"enabled": True, "url": server.oai_url}},
            "seeds": {"paths": [], "builtin": True}}, seeds=False)
        began = time.monotonic()
        first = measure(config, datetime(2026, 11, 24, 14, tzinfo=UTC), seeds=True)
        server.add(*papers(cats, start + timedelta(days=8), 1, per_day, n=8 * per_day))  # Tuesday's batch
        weekday = measure(config, datetime(2026, 11, 25, 14, tzinfo=UTC), seeds=False)
        local = time.monotonic() - began
    print(f"categories: {len(cats)}, one feed each; pace {PACE:g} s per request "
          f"(time = requests x pace; both runs took {local:.1f} s locally with no delay)")
    print("| collect | requests | by source | seconds at 3 s |")
    print("| --- | --- | --- | --- |")
    for name, counts in (("first run (7-day lookback, 38 seeds)", first),
                         ("normal weekday collect", weekday)):
        total = sum(counts.values())
        parts = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        print(f"| {name} | {total} | {parts} | {total * PACE:.0f} |")


if __name__ == "__main__":
    main()
