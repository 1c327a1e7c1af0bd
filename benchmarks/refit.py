"""The install's refit on many verdicts: the state it stores, the memory of the refit, the load.

    RL_DIGEST_SHARED=../shared .venv/bin/python benchmarks/refit.py --verdicts 1500 3000

For each count N: a SQLite store of N papers (the dev corpus's texts under fresh ids, its
labels as the verdicts: every other one an `rl-digest mark`, the others a reader's 👍/👎),
then, each in a fresh process, as a run and `status` would:
- the refit (learn.current): its seconds and the process's peak RSS;
- the stored refit: bytes of its row(s) in the state table;
- loading it (learn.current without refitting, what `status` does) and then scoring the
  dev corpus with it: seconds and peak RSS.
The scores of the last step are hashed with their rounding to 4 places (what the store keeps):
two versions of the code that print the same hash decide every paper alike.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from _common import ROOT, dev_rows, machine, make_papers, table


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def relevance():
    from pipeline import config

    return config.load(ROOT / "config.yaml").relevance


def fill(db: Path, n: int) -> None:
    """n papers, each judged with its dev label: a mark, or a reader's vote."""
    from pipeline import store_readers
    from pipeline.models import paper_key
    from pipeline.store import Store

    rows = dev_rows()
    papers = make_papers(rows, n, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
    store = Store.open(f"sqlite:///{db}")
    store.upsert_papers(papers)
    for k, paper in enumerate(papers):
        label = bool(rows[k % len(rows)]["label"])
        if k % 2:
            store_readers.record_verdict(store, paper_key(paper.id), f"reader{k % 5}@example.org", label)
        else:
            store_readers.set_verdict(store, paper.id, label)
    store.close()


def child_refit(db: Path) -> dict:
    from pipeline import learn
    from pipeline.store import Store

    cfg, store = relevance(), Store.open(f"sqlite:///{db}")
    before = peak_mb()
    start = time.perf_counter()
    model = learn.current(cfg, store)
    seconds = time.perf_counter() - start
    store.close()
    assert model is not None and model.taught is not None
    return {"seconds": seconds, "peak_mb": peak_mb(), "before_mb": before,
            "terms": len(model.text.scale), "taught_terms": len(model.taught.scale)}


def child_load(db: Path) -> dict:
    from pipeline import learn, rank
    from pipeline.store import Store

    cfg, store = relevance(), Store.open(f"sqlite:///{db}")
    rows = dev_rows()
    rules = rank.compile_rules(cfg)
    values = [rank.score(r["title"], r.get("abstract") or "", rules).value for r in rows]
    learn.shipped()  # the package's model: loaded by every command, refit or not
    before = peak_mb()
    start = time.perf_counter()
    model = learn.current(cfg, store, refit_now=False)
    loaded = time.perf_counter() - start
    assert model is not None and model.verdicts
    start = time.perf_counter()
    made = model.decide([r["title"] for r in rows], [r.get("abstract") or "" for r in rows], values)
    scored = time.perf_counter() - start
    store.close()
    digest = hashlib.sha256(json.dumps([[round(p, 4), r, t] for p, r, t in made]).encode()).hexdigest()
    return {"load_seconds": loaded, "score_seconds": scored, "peak_mb": peak_mb(), "before_mb": before,
            "version": model.version, "scores": digest[:12]}


def in_child(mode: str, db: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(db)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def measure(n: int, folder: Path) -> list[str]:
    db = folder / f"verdicts{n}.sqlite3"
    fill(db, n)
    fitted = in_child("refit", db)
    with sqlite3.connect(db) as conn:
        (stored,) = conn.execute("SELECT sum(length(CAST(value AS BLOB))) FROM state "
                                 "WHERE key LIKE 'relevance_model%'").fetchone()  # what any release keeps
    loaded = in_child("load", db)
    return [f"{n:,}", f"{fitted['terms']:,} + {fitted['taught_terms']:,}", f"{stored / 1e6:.1f} MB",
            f"{fitted['seconds']:.1f} s", f"{fitted['peak_mb']:.0f} MB ({fitted['before_mb']:.0f} before)",
            f"{loaded['load_seconds'] * 1000:.0f} ms", f"{loaded['score_seconds'] * 1000:.0f} ms",
            f"{loaded['peak_mb']:.0f} MB ({loaded['before_mb']:.0f} before)",
            f"{loaded['version']} / {loaded['scores']}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verdicts", type=int, nargs="+", default=[1500, 3000])
    parser.add_argument("--child", nargs=2, metavar=("MODE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, db = args.child
        print(json.dumps((child_refit if mode == "refit" else child_load)(Path(db))))
        return
    dev_rows()  # exits with a word when ../shared is not here
    print(machine())
    with tempfile.TemporaryDirectory() as folder:
        found = [measure(n, Path(folder)) for n in args.verdicts]
    print(table(["verdicts", "terms (text + taught)", "stored refit", "refit", "refit peak RSS",
                 "load (status)", "score 2,952 papers", "load+score peak RSS", "version / scores"], found))


if __name__ == "__main__":
    main()
