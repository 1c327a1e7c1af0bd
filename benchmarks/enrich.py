"""Enrichment throughput: paper summaries from a local OpenAI-compatible server that answers
after a fixed delay, at several concurrencies; then the same papers again (all from the cache).

    .venv/bin/python benchmarks/enrich.py [--papers 48] [--delay 0.2] [--concurrency 1,4,16]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import dev_rows, machine, make_papers, table, write_config


def _serve(delay: float, pipe) -> None:
    """The stand-in in a child process: its threads must not share our GIL (they would
    cost about 0.6 s of the 1.3 s at concurrency 16)."""
    from tests.servers.openai_server import OpenAIServer

    with OpenAIServer(delay=delay) as server:
        pipe.send(server.url)
        while pipe.recv() != "stop":
            pipe.send((len(server.requests), server.max_in_flight))


class StandIn:
    def __init__(self, delay: float):
        self._pipe, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("fork").Process(
            target=_serve, args=(delay, child), daemon=True)

    def __enter__(self):
        self._process.start()
        self.url = self._pipe.recv()
        return self

    def stats(self) -> tuple[int, int]:
        """(requests so far, most requests in flight at once)"""
        self._pipe.send("stats")
        return self._pipe.recv()

    def __exit__(self, *exc):
        self._pipe.send("stop")
        self._process.join(10)


def one_level(rows, n: int, delay: float, concurrency: int) -> list:
    from pipeline import config as cfg
    from pipeline import templating
    from pipeline.enrich import Enricher, make_client
    from pipeline.store import Store

    end = datetime(2026, 11, 30, tzinfo=UTC)
    papers = make_papers(rows, n, end - timedelta(days=7), end)
    with StandIn(delay) as server, tempfile.TemporaryDirectory() as tmp:
        config = cfg.load(write_config(Path(tmp), {"enrich": {
            "provider": "openai", "base_url": server.url, "model": "bench-model",
            "concurrency": concurrency, "max_papers": n, "timeout_seconds": 30,
            "deadline_seconds": 120}}))
        store = Store.open(config.storage.url)

        def enricher() -> Enricher:
            return Enricher(config.enrich, config.languages, store, make_client(config.enrich),
                            templating.text_env(config.templates.dir), progress=False)

        first = enricher()
        began = time.perf_counter()
        done = first.summarise(papers)
        seconds = time.perf_counter() - began
        calls, in_flight = server.stats()
        again = enricher()
        began = time.perf_counter()
        cached = again.summarise(papers)
        rerun = time.perf_counter() - began
        store.engine.dispose()
        ideal = delay * -(-n // concurrency)
        return [concurrency, f"{len(done)}/{n}", f"{seconds:.2f}", f"{n / seconds:.1f}",
                f"{ideal:.2f}", f"{100 * ideal / seconds:.0f}%", in_flight, calls,
                first.report.failures, f"{len(cached)}/{n}", server.stats()[0] - calls,
                f"{rerun * 1000:.0f} ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=48)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the server waits per answer")
    parser.add_argument("--concurrency", default="1,4,16")
    args = parser.parse_args()
    rows = dev_rows()  # exits with a message when ../shared is missing
    os.environ["OPENAI_API_KEY"] = "sk-benchmark-local"  # the stand-in takes any key
    print(machine())
    results = [one_level(rows, args.papers, args.delay, int(c)) for c in args.concurrency.split(",")]
    print(f"\n## Paper summaries, {args.papers} papers, server answering after "
          f"{args.delay * 1000:.0f} ms\n")
    print(table(["concurrency", "summarised", "seconds", "papers/s", "ideal s", "efficiency",
                 "max in flight", "calls", "failures", "re-run: from cache", "re-run: calls",
                 "re-run: time"], results))
    print("\nideal = delay x ceil(papers / concurrency); efficiency = ideal / measured.")


if __name__ == "__main__":
    main()
