"""The reading list at scale: 100,000 stored papers, its Markdown and web pages as publish writes them.

    .venv/bin/python benchmarks/reading_list.py [--papers 100000]

The database is built through the product (Store.upsert_papers, Store.set_scores), with a
cached Chinese + English summary for every paper (bulk-inserted into the enrichment cache,
as if every paper had been summarised) and the built-in seed pages. Every paper is one the
relevance rule keeps (dev rows it scores relevant, repeated with fresh ids, submitted over
the last three years), so the list holds them all. Then, in a fresh process
(so its peak RSS is the writer's own), reading_list.publish (READING_LIST.md and reading-list/)
and site_papers.build (the web edition's papers/ pages, search index, papers.xml and exports/),
streamed from the store; then both again, when every file is already as it should be.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import dev_rows, machine, make_papers, maxrss_mib, table, write_config


def build(config, store, n: int) -> list[list]:
    import sqlalchemy as sa

    from pipeline import extract, rank, run
    from pipeline.models import Scored, paper_key
    from pipeline.store import enrichments, now_iso

    rules = rank.compile_rules(config.relevance)
    rows = []
    for row in dev_rows():
        scored = rank.score(row["title"], row.get("abstract") or "", rules)
        if scored.relevant:
            topic, others = rank.assign_topics(row["title"], row.get("abstract") or "", config.topics)
            rows.append({**row, "_score": scored, "_topics": (topic, others)})
    end = datetime(2026, 11, 30, tzinfo=UTC)
    papers = make_papers(rows, n, end - timedelta(days=3 * 365), end)
    steps = []

    began = time.perf_counter()
    store.save_seeds([e for doc in run.seed_documents(config) for e in doc.entries])
    steps.append(["save_seeds (built-in seed pages)", time.perf_counter() - began])

    began = time.perf_counter()
    store.upsert_papers(papers)
    steps.append([f"Store.upsert_papers ({n:,} new)", time.perf_counter() - began])

    began = time.perf_counter()
    scored = []
    for k, paper in enumerate(papers):
        row = rows[k % len(rows)]
        s, (topic, others) = row["_score"], row["_topics"]
        scored.append(Scored(paper.id, s.value, s.relevant, tuple(s.reasons), topic, tuple(others)))
    store.set_scores(scored)
    steps.append([f"Store.set_scores ({n:,})", time.perf_counter() - began])

    began = time.perf_counter()
    stamp = now_iso()
    cache = []
    for k, paper in enumerate(papers):
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
    """The child process: the reading list's Markdown and the web edition's papers/ pages,
    search index, papers.xml and exports written from the store, twice (the second run finds
    every file as it is), with times and the process's own peak RSS as JSON on stdout."""
    from pipeline import config as cfg
    from pipeline import reading_list, render, site_papers
    from pipeline.store import Store

    config = cfg.load(Path(config_path))
    store = Store.open(config.storage.url)
    settings = render.Settings.of(config)
    times = []
    for _ in range(2):
        began = time.perf_counter()
        files = reading_list.publish(config, store, "2026-11-30")
        middle = time.perf_counter()
        site_papers.build(config, store, settings, config.outputs.dir / "site", [], "2026-11-30")
        times.append((middle - began, time.perf_counter() - middle))
    sizes = sorted(path.stat().st_size for path in files.values())
    site = [p for p in (config.outputs.dir / "site").rglob("*") if p.is_file()]
    print(json.dumps({"seconds": times, "rss": maxrss_mib(), "files": len(files), "largest": sizes[-1],
                      "bytes": sum(sizes), "count": reading_list.count(store),
                      "index": (config.outputs.dir / "READING_LIST.md").stat().st_size,
                      "site_files": len(site), "site_bytes": sum(p.stat().st_size for p in site),
                      "search": (config.outputs.dir / "site" / "search-index.js").stat().st_size}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--publish", metavar="CONFIG", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.publish:
        publish(args.publish)
        return
    from pipeline import config as cfg
    from pipeline.store import Store

    dev_rows()  # exits with a message when ../shared is missing
    print(machine())
    with tempfile.TemporaryDirectory(prefix="rl-digest-bench-") as tmp:
        path = write_config(Path(tmp), {})
        config = cfg.load(path)
        store = Store.open(config.storage.url)
        print(f"building a database of {args.papers:,} relevant papers ...", flush=True)
        built = build(config, store, args.papers)
        store.close()
        db = Path(tmp, "state", "digest.sqlite3")
        size = sum(p.stat().st_size for p in db.parent.glob("digest.sqlite3*"))
        child = subprocess.run([sys.executable, __file__, "--publish", str(path)], check=True,
                               capture_output=True, text=True)
        got = json.loads(child.stdout.strip().splitlines()[-1])

    print(f"\n## Building the database ({args.papers:,} papers, {size / 2**20:,.0f} MiB on disk)\n")
    print(table(["step", "seconds", "papers/s"],
                [[label, f"{sec:.2f}", f"{args.papers / sec:,.0f}" if "seed" not in label else "-"]
                 for label, sec in built]))
    (md, pages), (md_again, pages_again) = got["seconds"]
    print(f"\n## The reading list of {got['count']:,} entries, in a fresh process\n")
    print(table(["measure", "value"], [
        ["READING_LIST.md and reading-list/, first time", f"{md:.2f} s ({got['count'] / md:,.0f} entries/s)"],
        ["web edition papers/, search index, papers.xml, exports/", f"{pages:.2f} s"],
        ["both", f"{md + pages:.2f} s"],
        ["both again, nothing changed", f"{md_again + pages_again:.2f} s"],
        ["peak RSS of the process (ru_maxrss)", f"{got['rss']:,.0f} MiB"],
        ["Markdown files", f"{got['files']:,} ({got['bytes'] / 2**20:.1f} MiB in all)"],
        ["largest Markdown file", f"{got['largest'] / 1000:,.0f} KB"],
        ["READING_LIST.md", f"{got['index'] / 1000:,.0f} KB"],
        ["site files", f"{got['site_files']:,} ({got['site_bytes'] / 2**20:.1f} MiB in all)"],
        ["search-index.js", f"{got['search'] / 2**20:.1f} MiB"],
    ]))


if __name__ == "__main__":
    main()
