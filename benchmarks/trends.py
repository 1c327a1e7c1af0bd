"""The trend record at scale: 100,000 relevant papers listed by weekly digests over
three years, and the query a digest makes for its 26 weeks (Store.listed_per_topic,
then trends.record).

    .venv/bin/python benchmarks/trends.py [--papers 100000] [--repeat 5]

The database is built through the product (Store.upsert_papers, set_scores, save_digest
with each digest's items); titles are made up (the query reads no text), so ../shared is
not needed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from _common import fresh_id, machine, table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--weeks", type=int, default=156)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from pipeline import trends
    from pipeline.config_sections import Bilingual, TopicDef
    from pipeline.models import Paper, Scored, paper_key
    from pipeline.store import Store

    topics = [TopicDef(key=f"topic{k}", name=Bilingual(zh=f"主题{k}", en=f"Topic {k}"), terms=[])
              for k in range(8)]
    end = date(2026, 11, 30)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{Path(tmp)}/digest.sqlite3")
        began = time.perf_counter()
        ids = [fresh_id(k) for k in range(args.papers)]
        store.upsert_papers(Paper(id=pid, title=f"Paper {pid}", abstract="An abstract.",
                                  submitted=datetime(2026, 1, 1, tzinfo=UTC)) for pid in ids)
        store.set_scores(Scored(pid, 2.0, True, (), topics[k % 7 + (k % 11 == 0)].key)
                         for k, pid in enumerate(ids))
        per = args.papers // args.weeks
        for week in range(args.weeks):
            day = end - timedelta(days=7 * (args.weeks - week))
            moment = datetime.combine(day, datetime.min.time(), UTC)
            chunk = ids[week * per:(week + 1) * per]
            store.save_digest(day.isoformat(), (moment, moment), {},
                              [(paper_key(pid), True) for pid in chunk], [])
        built = time.perf_counter() - began
        seconds = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            rows = store.listed_per_topic(*trends.span(end), known=[t.key for t in topics])
            history = [(day, topic, n) for day, topic, n, _ in rows]  # every topic known: no renames
            record = trends.record(history, [], end, topics)
            seconds.append(time.perf_counter() - began)
        store.close()
    assert record is not None
    print(machine())
    print(table(["what", "figure"], [
        [f"build: {args.papers:,} papers, {args.weeks} weekly digests", f"{built:.1f} s"],
        [f"listed_per_topic + record, 26 weeks (median of {args.repeat})",
         f"{statistics.median(seconds) * 1000:.1f} ms ({len(history)} rows)"],
    ]))


if __name__ == "__main__":
    main()
