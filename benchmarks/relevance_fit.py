"""Check the relevance weights for over-fitting: a coordinate search, alone or cross-validated.

    .venv/bin/python benchmarks/relevance_fit.py         # search on the whole dev corpus (~5 min)
    .venv/bin/python benchmarks/relevance_fit.py --cv    # 5-fold: search on 4, score the 5th (~30 min)

The search changes one number at a time (the scalar settings over a small grid, each RL
and negative term over 0-1.5) and keeps a change when it raises the objective, the best
precision at recall >= 0.91, by at least 0.002 (about two papers). It prints the changes
it would make. It is a check, not a tuner: a change is only worth taking when an expert
would write it too (benchmarks/relevance.md says which were taken and which refused).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from _common import ROOT, dev_rows

SCALARS = {
    "threshold": [0.7, 0.8, 0.9, 1.0, 1.1, 1.2],
    "title_weight": [1.0, 1.5, 2.0],
    "background_weight": [0.3, 0.4, 0.5, 0.6],
    "plain_weight": [0.5, 0.6, 0.7, 0.8, 0.9],
    "edge_weight": [0.4, 0.5, 0.6, 0.8, 1.0],
    "lm_full": [0.7, 1.0, 1.3, 1.5],
}
TERM_GRID = [0.0, 0.3, 0.5, 0.7, 1.0, 1.5]
TERM_FIELDS = ("rl_terms", "negative_terms", "not_rl_terms")
RECALL_FLOOR = 0.91


def objective(relevance, rows) -> float:
    from pipeline import rank, rank_eval

    e = rank_eval.evaluate(rows, rank.compile_rules(relevance))
    return e.precision if e.recall >= RECALL_FLOOR else e.precision - 5 * (RECALL_FLOOR - e.recall)


def candidates(relevance):
    for key, values in SCALARS.items():
        for value in values:
            yield {key: value}
    for field in TERM_FIELDS:
        for term, weight in getattr(relevance, field).items():
            for value in TERM_GRID:
                if value != weight:
                    yield {field: {**getattr(relevance, field), term: value}}


def search(relevance, rows, sweeps: int = 2, margin: float = 0.002):
    best = objective(relevance, rows)
    for _ in range(sweeps):
        changed = False
        for update in candidates(relevance):
            trial = relevance.model_copy(update=update)
            value = objective(trial, rows)
            if value > best + margin:
                best, relevance, changed = value, trial, True
        if not changed:
            break
    return relevance


def changes(before, after) -> list[str]:
    found = [f"{k} {getattr(before, k)} -> {getattr(after, k)}" for k in SCALARS
             if getattr(before, k) != getattr(after, k)]
    for field in TERM_FIELDS:
        old = getattr(before, field)
        found += [f"{t} {old.get(t)} -> {w}" for t, w in getattr(after, field).items() if old.get(t) != w]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--cv", action="store_true", help="5-fold cross-validation of the search")
    args = parser.parse_args()

    from pipeline import config, rank, rank_eval

    shipped = config.load(args.config).relevance
    rows = dev_rows()
    if not args.cv:
        fitted = search(shipped, rows)
        e = rank_eval.evaluate(rows, rank.compile_rules(fitted))
        print("changes:", changes(shipped, fitted) or "none")
        print(f"after: P {e.precision:.3f} R {e.recall:.3f} F1 {e.f1:.3f} tp {e.tp} fp {e.fp} fn {e.fn}")
        return
    order = list(range(len(rows)))
    random.Random(0).shuffle(order)
    totals = {"re-fit": [0, 0, 0], "shipped": [0, 0, 0]}
    for fold in range(5):
        held = set(order[fold::5])
        train = [rows[i] for i in order if i not in held]
        test = [rows[i] for i in sorted(held)]
        fitted = search(shipped, train)
        print(f"fold {fold}: changes {changes(shipped, fitted) or 'none'}", flush=True)
        for name, relevance in (("re-fit", fitted), ("shipped", shipped)):
            e = rank_eval.evaluate(test, rank.compile_rules(relevance))
            print(f"  {name}: held-out P {e.precision:.3f} R {e.recall:.3f}")
            for i, n in enumerate((e.tp, e.fp, e.fn)):
                totals[name][i] += n
    for name, (tp, fp, fn) in totals.items():
        print(f"{name}: pooled held-out P {tp / (tp + fp):.3f} R {tp / (tp + fn):.3f}")


if __name__ == "__main__":
    main()
