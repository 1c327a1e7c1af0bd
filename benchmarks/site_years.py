"""Years of stored digests: what a weekly run's web edition costs as they pile up.

    .venv/bin/python benchmarks/site_years.py [--digests 100 300] [--papers 40]

Saves --digests weekly digests of --papers papers each (the tests' fixture digest) in a fresh
SQLite store, then times a run's publishing with all of them (publish.publish as an offline
run calls it: the reading list, the site's digest pages and papers' pages, the feeds), first
into an empty folder and again with nothing changed (the weekly case), and on its own the
papers' pages' Updates (site_papers._updates). What grows here with the weeks kept is a run
that slows down with age.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from _common import machine, table

from pipeline import compose, publish, site_papers
from pipeline.config import load
from pipeline.models import Options, RunReport
from pipeline.store import Store
from tests import fixtures_digest as fx
from tests.helpers import write_config


def measure(n: int, papers: int) -> list:
    with tempfile.TemporaryDirectory() as folder:
        config = load(write_config(Path(folder), {"outputs": {"dir": f"{folder}/out"}}, seeds=False))
        store = Store.open(config.storage.url)
        week = fx.many(papers)
        for k in range(n):
            day = date(2020, 1, 6) + timedelta(weeks=k)
            moment = datetime.combine(day, datetime.min.time(), UTC)
            store.save_digest(day.isoformat(), (moment, moment),
                              compose.digest_to_dict(replace(week, id=day.isoformat())), [], [])
        as_of, seconds = datetime(2026, 1, 5, tzinfo=UTC), []
        for _ in range(2):
            started = time.perf_counter()
            report = RunReport(as_of=as_of.isoformat())
            publish.publish(config, store, Options(as_of, offline=True), None, report)
            seconds.append(time.perf_counter() - started)
        started = time.perf_counter()
        site_papers._updates(publish.StoredDigests(store))
        updates = time.perf_counter() - started
        store.close()
    return [n, papers, f"{seconds[0]:.1f}", f"{seconds[1]:.2f}", f"{updates:.2f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--digests", type=int, nargs="+", default=[100, 300])
    parser.add_argument("--papers", type=int, default=40)
    args = parser.parse_args()
    print(machine())
    rows = [measure(n, args.papers) for n in args.digests]
    print(table(["digests", "papers each", "publish, empty folder s", "publish, nothing changed s",
                 "papers' Updates s"], rows))


if __name__ == "__main__":
    main()
