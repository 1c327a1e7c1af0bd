"""The reading list at scale: 100,000 stored papers, its Markdown and web pages as publish writes them.

    .venv/bin/python benchmarks/reading_list.py [--papers 100000]

The database is built through the product (Store.upsert_papers, Store.set_scores), with a
cached Chinese + English summary for every paper (bulk-inserted into the enrichment cache,
as if every paper had been summarised) and the built-in seed pages. Every paper is one the
relevance rule keeps (dev rows it scores relevant, repeated with fresh ids, submitted over
the last three years), so the list holds them all. Then, each in a fresh process (so its
peak RSS is the writer's own), reading_list.publish's one streamed pass writes
READING_LIST.md and reading-list/ and feeds site_papers.Papers (the web edition's papers/
pages, search index, papers.xml and exports/): first into an empty folder, then again with
nothing changed, then after one more week of papers (the newest week's share of the three
years) was stored, as a weekly run finds it. Each run counts the published files it
rewrote; the second and third render only the months whose fingerprint changed and replay
the others from the build cache (`out/.rl-digest-cache/`, pipeline/months.py). The first run
leaves the older months to a helper process on a second core (reading_list.SPLIT); its
peak RSS is reported beside the writer's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import dev_rows, machine, make_papers, maxrss_mib, table, write_config

YEARS = 3  # the papers' submission dates span this many years, ending 2026-11-30


def relevant_rows(config) -> list[dict]:
    from pipeline import rank

    rules = rank.compile_rules(config.relevance)
    rows = []
    for row in dev_rows():
        scored = rank.score(row["title"], row.get("abstract") or "", rules)
        if scored.relevant:
            topic, others = rank.assign_topics(row["title"], row.get("abstract") or "", config.topics)
            rows.append({**row, "_score": scored, "_topics": (topic, others)})
    return rows


def stock(store, rows: list[dict], papers: list, first: int) -> list[list]:
    """Store `papers` (the `first`-th paper on) scored and summarised; [step, seconds] each."""
    import sqlalchemy as sa

    from pipeline import extract
    from pipeline.models import Scored, paper_key
    from pipeline.store_schema import enrichments, now_iso

    n, steps = len(papers), []
    began = time.perf_counter()
    store.upsert_papers(papers)
    steps.append([f"Store.upsert_papers ({n:,} new)", time.perf_counter() - began])

    began = time.perf_counter()
    scored = []
    for k, paper in enumerate(papers, first):
        row = rows[k % len(rows)]
        s, (topic, others) = row["_score"], row["_topics"]
        scored.append(Scored(paper.id, s.value, s.relevant, tuple(s.reasons), topic, tuple(others)))
    store.set_scores(scored)
    steps.append([f"Store.set_scores ({n:,})", time.perf_counter() - began])

    began = time.perf_counter()
    stamp = now_iso()
    cache = []
    for k, paper in enumerate(papers, first):
        row = rows[k % len(rows)]
        english = extract.contribution(paper.abstract)
        data = {"title_zh": paper.title, "summary_zh": row.get("summary_zh") or "中文摘要",
                "summary_en": english, "key_points_zh": ["要点一", "要点二"],
                "key_points_en": ["Point one", "Point two"]}
        key = "paper_summary:" + hashlib.sha256(paper.id.encode()).hexdigest()
        cache.append(dict(key=key, item_key=paper_key(paper.id), kind="paper_summary",
                          data=data, tokens_in=100, tokens_out=50,
                          created=stamp))
    with store.tx() as conn:
        conn.execute(sa.insert(enrichments), cache)
    steps.append([f"cached summaries, bulk insert ({n:,})", time.perf_counter() - began])
    return steps


def publish(config_path: str) -> None:
    """The child process: one publish of the reading list's Markdown and the web edition's
    papers, streamed from the store in one pass, with its time, the process's own peak RSS
    and the outputs' sizes as JSON on stdout."""
    from contextlib import ExitStack

    from pipeline import config as cfg
    from pipeline import reading_list, render, site_papers
    from pipeline.store import Store

    config = cfg.load(Path(config_path))
    store = Store.open(config.storage.url)
    settings = render.Settings.of(config)
    began = time.perf_counter()
    with ExitStack() as stack:
        papers = stack.enter_context(site_papers.Papers(config, store, settings, config.outputs.dir / "site",
                                                        [], "2026-11-30"))
        files = reading_list.publish(config, store, "2026-11-30", also=[papers])
    seconds = time.perf_counter() - began
    sizes = sorted(path.stat().st_size for path in files.values())
    site = [p for p in (config.outputs.dir / "site").rglob("*") if p.is_file()]
    print(json.dumps({"seconds": seconds, "rss": peak_mib(), "helper": helper_mib(), "files": len(files),
                      "largest": sizes[-1],
                      "bytes": sum(sizes), "count": reading_list.count(store),
                      "index": (config.outputs.dir / "READING_LIST.md").stat().st_size,
                      "site_files": len(site), "site_bytes": sum(p.stat().st_size for p in site),
                      "search": sum(p.stat().st_size for p in site if p.name.startswith("search-index"))}))


def peak_mib() -> float:
    """This process's peak RSS since its exec (VmHWM): ru_maxrss would also count the pages of
    the parent it was forked from, which holds the 100,000 papers it stored."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return maxrss_mib()  # no /proc: the larger figure


def helper_mib() -> float:
    """The peak RSS of the helper process a first build forks (0 when it forked none): its
    resident pages, those it still shares with this process included, so the sum of the
    two overstates what the pair held."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run_child(path: Path, out: Path) -> dict:
    """One publish in a fresh process; adds how many published files it wrote, and the
    size of the build cache."""
    from pipeline.months import FOLDER

    def stamps() -> dict[Path, int]:
        return {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and FOLDER not in p.parts}

    before = stamps()
    child = subprocess.run([sys.executable, __file__, "--publish", str(path)], check=True,
                           capture_output=True, text=True)
    got = json.loads(child.stdout.strip().splitlines()[-1])
    after = stamps()
    got["rewritten"] = sum(1 for p, t in after.items() if before.get(p) != t)
    got["outputs"] = len(after)
    got["cache"] = sum(p.stat().st_size for p in (out / FOLDER).rglob("*") if p.is_file())
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--publish", metavar="CONFIG", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.publish:
        publish(args.publish)
        return
    from pipeline import config as cfg
    from pipeline import store_seeds
    from pipeline.store import Store

    dev_rows()  # exits with a message when ../shared is missing
    print(machine())
    with tempfile.TemporaryDirectory(prefix="rl-digest-bench-") as tmp:
        path = write_config(Path(tmp), {})
        config = cfg.load(path)
        store = Store.open(config.storage.url)
        print(f"building a database of {args.papers:,} relevant papers ...", flush=True)
        from pipeline import run

        rows = relevant_rows(config)
        week = round(args.papers / (YEARS * 52))
        end = datetime(2026, 11, 30, tzinfo=UTC)
        papers = make_papers(rows, args.papers + week, end - timedelta(days=YEARS * 365), end)
        began = time.perf_counter()
        store_seeds.save_seeds(store, [e for doc in run.seed_documents(config) for e in doc.entries])
        built = [["save_seeds (built-in seed pages)", time.perf_counter() - began]]
        built += stock(store, rows, papers[:args.papers], 0)
        db = Path(tmp, "state", "digest.sqlite3")
        size = sum(p.stat().st_size for p in db.parent.glob("digest.sqlite3*"))
        out = config.outputs.dir
        store.close()  # as after any earlier run: its WAL folded into the file (Store.close)
        os.sync()  # and on disk: the first run does not share the disk with the build's writes
        runs = [run_child(path, out), run_child(path, out)]
        stock(store, rows, papers[args.papers:], args.papers)
        store.close()
        runs.append(run_child(path, out))

    print(f"\n## Building the database ({args.papers:,} papers, {size / 2**20:,.0f} MiB on disk)\n")
    print(table(["step", "seconds", "papers/s"],
                [[label, f"{sec:.2f}", f"{args.papers / sec:,.0f}" if "seed" not in label else "-"]
                 for label, sec in built]))
    first = runs[0]
    print(f"\n## The reading list of {first['count']:,} entries: Markdown and web pages in one pass,"
          " each run in a fresh process\n")
    labels = [f"first, into an empty folder ({first['count']:,} entries)", "again, nothing changed",
              f"a week later ({runs[2]['count'] - first['count']:,} new papers)"]
    print(table(["run", "seconds", "peak RSS (VmHWM)", "helper process's peak RSS", "files rewritten"], [
        [label, f"{got['seconds']:.2f}", f"{got['rss']:,.0f} MiB",
         f"{got['helper']:,.0f} MiB" if got["helper"] else "none",
         f"{got['rewritten']:,} of {got['outputs']:,}"]
        for label, got in zip(labels, runs, strict=True)]))
    print()
    print(table(["output", "size"], [
        ["Markdown files", f"{first['files']:,} ({first['bytes'] / 2**20:.1f} MiB in all)"],
        ["largest Markdown file", f"{first['largest'] / 1000:,.0f} KB"],
        ["READING_LIST.md", f"{first['index'] / 1000:,.0f} KB"],
        ["site files", f"{first['site_files']:,} ({first['site_bytes'] / 2**20:.1f} MiB in all)"],
        ["search index", f"{first['search'] / 2**20:.1f} MiB"],
        ["build cache (not published)", f"{first['cache'] / 2**20:.1f} MiB"],
    ]))


if __name__ == "__main__":
    main()
