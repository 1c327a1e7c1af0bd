"""The reading list at scale: 100,000 stored relevant papers, READING_LIST.md built as publish does.

    .venv/bin/python benchmarks/reading_list.py [--papers 100000] [--no-memory]

The database is built through the product (Store.upsert_papers, Store.set_scores), with a
cached Chinese + English summary for every paper (bulk-inserted into the enrichment cache,
as if every paper had been summarised) and the built-in seed pages. Every paper is one the
relevance rule keeps (dev rows it scores relevant, repeated with fresh ids, submitted over
the last three years), so the list holds them all. Then, timed one by one, the steps of
publish(): run.reading_list, compose.sections, render.reading_list_markdown, the write.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import dev_rows, machine, make_papers, maxrss_mib, mib, table, write_config


def build(config, store, n: int) -> list[list]:
    import sqlalchemy as sa

    from pipeline import extract, rank, run
    from pipeline.models import paper_key
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
        scored.append((paper.id, s.value, s.relevant, list(s.reasons), topic, list(others)))
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


def publish_steps(config, store, out: Path, memory: bool) -> tuple[list[list], int, int]:
    """publish()'s reading-list half, step by step: (seconds, tracemalloc peak) each."""
    from pipeline import compose, render, run
    from pipeline.deliver.files import write_atomic

    results = []

    def step(label, action):
        if memory:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
        began = time.perf_counter()
        value = action()
        seconds = time.perf_counter() - began
        peak = tracemalloc.get_traced_memory()[1] - base if memory else 0
        results.append([label, seconds, peak])
        return value

    if memory:
        tracemalloc.start()
    reading = step("run.reading_list", lambda: run.reading_list(config, store))
    sections = step("compose.sections", lambda: compose.sections(reading, config.topics))
    text = step("render.reading_list_markdown", lambda: render.reading_list_markdown(
        render.Settings.of(config), sections, len(reading), "2026-11-30"))
    step("write_atomic READING_LIST.md", lambda: write_atomic(out / "READING_LIST.md", text))
    held = tracemalloc.get_traced_memory()[0] if memory else 0
    if memory:
        tracemalloc.stop()
    return results, len(reading), held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    args = parser.parse_args()
    from pipeline import config as cfg
    from pipeline.store import Store

    dev_rows()  # exits with a message when ../shared is missing
    print(machine())
    with tempfile.TemporaryDirectory(prefix="rl-digest-bench-") as tmp:
        config = cfg.load(write_config(Path(tmp), {}))
        store = Store.open(config.storage.url)
        print(f"building a database of {args.papers:,} relevant papers ...", flush=True)
        built = build(config, store, args.papers)
        db = Path(tmp, "state", "digest.sqlite3")
        size = sum(p.stat().st_size for p in db.parent.glob("digest.sqlite3*"))
        timed, count, _ = publish_steps(config, store, Path(tmp) / "out", memory=False)
        rss = maxrss_mib()
        memory = held = None
        if not args.no_memory:
            memory, _, held = publish_steps(config, store, Path(tmp) / "out", memory=True)
        out = (Path(tmp) / "out" / "READING_LIST.md").stat().st_size
        store.engine.dispose()

    print(f"\n## Building the database ({args.papers:,} papers, {size / 2**20:,.0f} MiB on disk)\n")
    print(table(["step", "seconds", "papers/s"],
                [[label, f"{sec:.2f}", f"{args.papers / sec:,.0f}" if "seed" not in label else "-"]
                 for label, sec in built]))
    total = sum(sec for _, sec, _ in timed)
    print(f"\n## The reading list of {count:,} entries, as publish() builds it\n")
    rows = [[label, f"{sec:.2f}", f"{100 * sec / total:.0f}%",
             mib(memory[i][2]) if memory else "-"] for i, (label, sec, _) in enumerate(timed)]
    rows.append(["total", f"{total:.2f}", "100%", mib(max(m[2] for m in memory)) if memory else "-"])
    print(table(["step", "seconds", "share", "tracemalloc peak MiB"], rows))
    print()
    print(table(["measure", "value"], [
        ["entries per second", f"{count / total:,.0f}"],
        ["READING_LIST.md", f"{out / 2**20:.1f} MiB"],
        ["ru_maxrss after the timed pass", f"{rss:,.0f} MiB"],
        ["Entry list + text held at the end (tracemalloc)",
         f"{mib(held)} MiB ({held / count / 1024:.1f} KiB per entry)" if held else "-"],
    ]))


if __name__ == "__main__":
    main()
