"""End to end: one `run_digest` against a local arXiv stand-in serving N papers, stage by stage.

    .venv/bin/python benchmarks/end_to_end.py --papers 10000 [--repeat 3] [--no-memory] [--profile F.html]

The stand-in runs in a child process (its CPU and memory are not ours) and is the test
server (tests/servers/arxiv_server.py) with the query's result memoised: the stock server
evaluates the whole query over all N papers on every request, which at 50,000 papers is
slower than everything we measure; its cost per request is measured and printed apart.
The floor is the `arxiv` package alone fetching and parsing the same pages from the same
server. A second run with tracemalloc gives each stage's memory peak.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import time
import tracemalloc
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

from _common import Stages, dev_rows, machine, make_papers, maxrss_mib, mib, table, write_config

AS_OF = "2026-11-30"
PAGE_SIZE = 2000


# --- the stand-in, in a child process -------------------------------------------------------

def _serve(rows: list[dict], n: int, start: datetime, end: datetime, pipe) -> None:
    from tests.servers import arxiv_server as stock

    class Server(stock.ArxivServer):
        """The stock stand-in, but a query is evaluated once and entries rendered once."""

        def __init__(self, papers):
            super().__init__(papers)
            self._found: dict[tuple, list] = {}
            self._entries: dict[str, str] = {}
            self.busy = 0.0  # seconds spent answering (server-only time)

        def answer(self, path, query, fault):
            if path == "/_stats":
                answered = [r for r in self.requests if not r.path.startswith("/_")]
                stats = {"requests": len(answered), "server_seconds": round(self.busy, 3),
                         "paths": sorted({r.path for r in answered})}
                if "reset" in query:
                    self.requests.clear()
                    self.busy = 0.0
                return 200, "application/json", json.dumps(stats).encode()
            if path == "/_stock":  # what the stock server spends on this request
                began = time.perf_counter()
                found = stock.ArxivServer._select(self, query)  # not memoised
                start, size = int(query.get("start", 0)), int(query.get("max_results", 10))
                entries = "".join(stock._atom_entry(p) for p in found[start:start + size])
                body = stock.atom_feed(query.get("search_query", ""), start, size, len(found), entries)
                return 200, "application/json", json.dumps(
                    {"seconds": time.perf_counter() - began, "bytes": len(body)}).encode()
            began = time.perf_counter()
            try:
                return super().answer(path, query, fault)
            finally:
                self.busy += time.perf_counter() - began

        def _select(self, query):
            key = (query.get("search_query", ""), query.get("id_list", ""),
                   query.get("sortBy", "relevance"), query.get("sortOrder", ""))
            if key not in self._found:  # the stock server's own selection, once per query
                self._found[key] = super()._select(query)
            return self._found[key]

        def _entry(self, paper):
            if paper.id not in self._entries:
                self._entries[paper.id] = super()._entry(paper)
            return self._entries[paper.id]

    from pipeline import config as cfg
    from pipeline.sources.arxiv_api import build_query

    arxiv = cfg.load(None).sources.arxiv
    query = stock.compile_query(build_query(arxiv.categories, arxiv.terms, start, end))
    inside = (start + timedelta(minutes=1), end - timedelta(minutes=1))  # clear of minute rounding
    samples = make_papers(rows, len(rows), *inside)
    candidates = [row for row, paper in zip(rows, samples, strict=True) if query(paper)]  # all N match
    with Server(make_papers(candidates, n, *inside)) as server:
        pipe.send((server.url, len(rows), len(candidates)))
        pipe.recv()  # until the parent is done


class StandIn:
    def __init__(self, rows: list[dict], n: int, start: datetime, end: datetime):
        self._pipe, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("fork").Process(
            target=_serve, args=(rows, n, start, end, child), daemon=True)

    def __enter__(self):
        self._process.start()
        self.url, self.rows, self.candidates = self._pipe.recv()
        self.api_url = f"{self.url}/api/query"
        return self

    def __exit__(self, *exc):
        self._pipe.send("stop")
        self._process.join(10)

    def get(self, path: str, **query) -> bytes:
        with urllib.request.urlopen(f"{self.url}{path}?{urlencode(query)}", timeout=3600) as answer:
            return answer.read()

    def stats(self) -> dict:
        return json.loads(self.get("/_stats", reset=1))


# --- the pipeline, stage by stage -----------------------------------------------------------

def wrap_stages(stages: Stages) -> None:
    import arxiv._feed

    from pipeline import ask, collect, compose, publish, reading_list, render, run, store_seeds, week
    from pipeline.sources import arxiv_api, http
    from pipeline.store import Store

    for owner, name, label, *nested in [
        (run, "run_digest", "other (runs table, seeds query, glue)"),
        (run, "seed_documents", "seeds: read files"),
        (store_seeds, "save_seeds", "seeds: store"),
        (collect, "collect", "collect: other"),
        (arxiv_api, "search_window", "fetch+parse: Result -> Paper"),
        (http.Fetcher, "get", "HTTP (incl. stand-in)", True),
        (arxiv_api._FetcherSession, "_check_page", "check page (_check_page)", True),
        (arxiv._feed, "parse", "arxiv parse (lxml)", True),
        (Store, "upsert_papers", "store: upsert papers"),
        (run, "rank_papers", "rank: score + read"),
        (Store, "set_scores", "store: set scores"),
        (run, "resolve_seeds", "resolve seeds"),
        (run, "complete_thin", "resolve seeds"),
        (ask, "make_enricher", "enrich (cache only)"),
        (ask, "summarise", "enrich (cache only)"),
        (run, "build_digest", "compose: digest"),
        (week, "digest_entries", "compose: digest_entries"),
        (compose, "sections", "compose: sections"),
        (publish, "publish", "publish: other"),
        (render, "digest_as", "render: digest md/html/txt"),
        (reading_list, "publish", "render: reading list"),
        (publish, "stored_digest", "render: feed"),
        (render, "feed_xml", "render: feed"),
        (publish, "write_atomic", "write: files"),
        (Store, "save_digest", "write: digest rows"),
    ]:
        stages.wrap(owner, name, label, *nested)


def run_pipeline(server: StandIn, memory: bool, profile: str | None = None):
    from pipeline import config as cfg
    from pipeline.models import Options
    from pipeline.run import parse_as_of, run_digest
    from pipeline.store import Store

    with tempfile.TemporaryDirectory(prefix="rl-digest-bench-") as tmp:
        path = write_config(Path(tmp), {"sources": {"arxiv": {
            "api_url": server.api_url, "page_size": PAGE_SIZE, "overlap_hours": 0}}})
        config = cfg.load(path)
        store = Store.open(config.storage.url)
        options = Options(as_of=parse_as_of(AS_OF, config), no_email=True)
        stages = Stages(memory=memory)
        wrap_stages(stages)
        if memory:
            tracemalloc.start()
        profiler = None
        if profile:
            from pyinstrument import Profiler
            profiler = Profiler(interval=0.001)
            profiler.start()
        began = time.perf_counter()
        try:
            report = run_digest(config, store, options)
        finally:
            elapsed = time.perf_counter() - began
            if profiler:
                profiler.stop()
                Path(profile).write_text(profiler.output_html())
                print(profiler.output_text(unicode=True, color=False, show_all=False))
            stages.restore()
        records = reading = None
        if memory:
            tracemalloc.stop()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            papers = store.papers()
            records = (tracemalloc.get_traced_memory()[0] - before, len(papers))
            del papers
            from pipeline import reading_list
            before = tracemalloc.get_traced_memory()[0]
            entries = list(reading_list.entries(config, store))  # all held at once, to size them
            reading = (tracemalloc.get_traced_memory()[0] - before, len(entries))
            del entries
            tracemalloc.stop()
        size = sum(f.stat().st_size for f in (Path(tmp) / "out").rglob("*") if f.is_file())
        store.engine.dispose()
        return elapsed, stages, report, records, reading, size


def run_floor(server: StandIn, start: datetime, end: datetime) -> tuple[float, int, float]:
    """The arxiv package alone: same query, page size and server; delay 0."""
    import arxiv
    import arxiv._feed

    from pipeline import config as cfg
    from pipeline.sources.arxiv_api import build_query

    settings = cfg.load(None).sources.arxiv
    stages = Stages()
    stages.wrap(arxiv._feed, "parse", "parse")
    client = arxiv.Client(page_size=PAGE_SIZE, delay_seconds=0, num_retries=0)
    client.query_url_format = server.api_url + "?{}"
    search = arxiv.Search(query=build_query(settings.categories, settings.terms, start, end),
                          max_results=None, sort_by=arxiv.SortCriterion.SubmittedDate,
                          sort_order=arxiv.SortOrder.Ascending)
    began = time.perf_counter()
    results = list(client.results(search))
    elapsed = time.perf_counter() - began
    stages.restore()
    return elapsed, len(results), stages.seconds.get("parse", 0.0)


def window() -> tuple[datetime, datetime]:
    """The window a first run reads (collect.window): lookback_days back from --as-of."""
    from pipeline import config as cfg
    from pipeline.run import parse_as_of

    config = cfg.load(None)
    end = parse_as_of(AS_OF, config)
    return end - timedelta(days=config.sources.arxiv.lookback_days), end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=10_000)
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    parser.add_argument("--profile", metavar="HTML", help="profile the first run with pyinstrument")
    parser.add_argument("--repeat", type=int, default=1,
                        help="time the run and the floor this many times; report the median")
    args = parser.parse_args()
    n = args.papers
    rows = dev_rows()  # exits with a message when ../shared is missing
    start, end = window()
    print(machine())
    print(f"building the stand-in with {n:,} papers ...", flush=True)
    with StandIn(rows, n, start, end) as server:
        from pipeline import config as cfg
        from pipeline.sources.arxiv_api import build_query
        settings = cfg.load(None).sources.arxiv
        first = {"search_query": build_query(settings.categories, settings.terms, start, end),
                 "sortBy": "submittedDate", "sortOrder": "ascending", "start": 0,
                 "max_results": PAGE_SIZE}
        stock = json.loads(server.get("/_stock", **first))
        server.get("/api/query", **first)  # evaluate and memoise the query before any timing
        server.stats()
        print(f"stand-in: {n:,} papers from {server.candidates:,} of {server.rows:,} dev rows "
              f"that match the query; stock server {stock['seconds']:.2f} s per page request",
              flush=True)

        runs, floors = [], []
        for k in range(args.repeat):  # the pipeline, then the floor, in turns
            runs.append((*run_pipeline(server, memory=False, profile=k == 0 and args.profile),
                         server.stats()))
            floors.append((*run_floor(server, start, end), server.stats()))
        rss = maxrss_mib()
        walls = sorted(run[0] for run in runs)
        elapsed, stages, report, _, _, size, pipe = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
        floor, floor_n, floor_parse, flo = sorted(floors, key=lambda r: r[0])[len(floors) // 2]
        peaks = records = reading = None
        if not args.no_memory:
            _, mem_stages, _, records, reading, _ = run_pipeline(server, memory=True)
            peaks = mem_stages.peak
            server.stats()

    total = sum(stages.seconds.values())
    rows = [[label, f"{sec:.2f}", f"{100 * sec / total:.0f}%", stages.calls[label],
             mib(peaks.get(label, 0)) if peaks else "-"]
            for label, sec in sorted(stages.seconds.items(), key=lambda kv: -kv[1])]
    print(f"\n## {n:,} papers: stages of run_digest (exclusive times; they add up to the run)\n")
    print(table(["stage", "seconds", "share", "calls", "tracemalloc peak MiB"], rows))
    fetch = sum(sec for label, sec in stages.seconds.items() if label.startswith("fetch+parse"))
    api_pages = -(-n // PAGE_SIZE)
    summary = [
        ["papers served / fetched / relevant", f"{n:,} / {report.fetched:,} / {report.relevant:,}"],
        ["run_digest wall" + (f" (median of {len(walls)})" if len(walls) > 1 else ""),
         f"{elapsed:.2f} s ({n / elapsed:,.0f} papers/s)"
         + (f"; all runs {', '.join(f'{w:.2f}' for w in walls)} s" if len(walls) > 1 else "")],
        ["  of which fetch+parse (API pages)", f"{fetch:.2f} s"],
        ["  of which the stand-in answering (server-only)", f"{pipe['server_seconds']:.2f} s"],
        ["HTTP requests (server log)", f"{pipe['requests']} ({api_pages} API pages + "
                                       f"{pipe['requests'] - api_pages} title searches)"],
        ["floor: arxiv.Client alone", f"{floor:.2f} s for {floor_n:,} results, {flo['requests']} "
                                      f"requests (lxml parse {floor_parse:.2f} s, server "
                                      f"{flo['server_seconds']:.2f} s)"],
        ["ratio run_digest / floor", f"{elapsed / floor:.1f}x"],
        ["ratio fetch+parse / floor", f"{fetch / floor:.1f}x"],
        ["ru_maxrss after the timed runs and the floor", f"{rss:,.0f} MiB"],
        ["output files", f"{size / 2**20:.1f} MiB"],
    ]
    if records:
        summary += [
            ["Paper records (store.papers())", f"{mib(records[0])} MiB for {records[1]:,} "
                                               f"({records[0] / records[1] / 1024:.1f} KiB each)"],
            ["reading-list Entry records", f"{mib(reading[0])} MiB for {reading[1]:,} "
                                           f"({reading[0] / max(1, reading[1]) / 1024:.1f} KiB each)"],
            ["largest stage peak / Paper records",
             f"{max(peaks.values()) / records[0]:.1f}x ({max(peaks, key=peaks.get)})"],
        ]
    print()
    print(table(["measure", "value"], summary))
    print(f"\nstock stand-in: {stock['seconds']:.2f} s per API page request ({stock['bytes'] / 2**20:.1f} "
          f"MiB page) -> about {stock['seconds'] * api_pages:.1f} s for the {api_pages} pages alone")


if __name__ == "__main__":
    main()
