"""Importance against relevance alone: on the labelled dev corpus, week by week, how many
of the top `digest.max_papers` (30) papers are labelled relevant and not borderline.

    .venv/bin/python benchmarks/importance.py [--config config.yaml]

Each week (ISO week of `listed_date`) the papers the pipeline keeps as relevant (the
rule, the shipped model and the profile, as `run` scores them) are ordered twice: by the
relevance score alone, and by importance (pipeline/importance.py) with the built-in seed
entries as the reader's taste. A second importance column adds a reader who marks, in
each digest, the papers they read: the labelled-relevant ones as relevant and the
labelled-irrelevant ones as irrelevant; those marks count from the next week on.

Three sources of relevance: the shipped model (fitted on this very corpus, so its score
already knows the labels and any other order can only lose), the rule alone, and the
honest one: each week scored by a model fitted on earlier months only (the time folds of
relevance_model.py), as a new week reaches an install.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from datetime import date
from pathlib import Path

from _common import ROOT, dev_rows, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    args = parser.parse_args()

    from pipeline import importance, learn
    from pipeline.config import bundled, load
    from pipeline.sources.seeds import load_seeds

    config = load(args.config)
    rows = dev_rows()
    seeds = [e for doc in load_seeds([bundled("seeds")]) for e in doc.entries]
    liked = tuple(importance.text_of(s.title, s.summary_en or "") for s in seeds)
    n = config.digest.max_papers
    lines = []
    scorers = [("shipped model (fit on this corpus)", relevant_by_week(rows, config, learn.shipped())),
               ("rule alone", relevant_by_week(rows, config, None)),
               ("model of earlier months only (held out)", held_out_by_week(config))]
    for scorer, weeks in scorers:
        good, counted = compare(weeks, liked, n, config.digest.importance)
        lines += [[scorer, counted, name, good[name], f"{good[name] / (counted * n):.3f}"] for name in good]
    print(f"the top {n} of each week with more than {n} relevant papers\n")
    print(table(["relevance from", "weeks", "order", f"labelled relevant, not borderline, in the top {n}",
                 "share"], lines))


def relevant_by_week(rows, config, model) -> dict:
    """ISO week -> [(paper, relevance, row)] of the papers `run` would keep."""
    from pipeline import decide, rank
    from pipeline.models import Paper

    rules = rank.compile_rules(config.relevance)
    profile = decide.Profile.compile(config.relevance)
    weeks: dict = defaultdict(list)
    for row in rows:
        paper = Paper(id=row["id"], title=row["title"], abstract=row.get("abstract") or "",
                      authors=tuple(row.get("authors") or ()), categories=tuple(row.get("categories") or ()),
                      comment=row.get("comment"))
        rule = rank.score(paper.title, paper.abstract, rules)
        decided = decide.decide(paper.title, paper.abstract, paper.authors, rule, model, profile)
        if decided.relevant:
            week = date.fromisoformat(row["listed_date"][:10]).isocalendar()[:2]
            weeks[week].append((paper, decided.value, row))
    return weeks


def held_out_by_week(config) -> dict:
    """ISO week -> [(paper, relevance, row)] with relevance from a model that never saw the
    week: the time folds of relevance_model.py (each block scored by a model fitted on the
    earlier months only), mixed and cut with the shipped model's weight and threshold."""
    from relevance_model import corpus, time_folds

    from pipeline import learn
    from pipeline.models import Paper

    shipped = learn.shipped()
    rows, seeds = corpus(config.relevance)
    weeks: dict = defaultdict(list)
    for row, text, rule in (x for fold in time_folds(rows, seeds)[1:] for x in fold):  # [0]: inner fold
        value = shipped.text_weight * text + (1 - shipped.text_weight) * rule
        if value >= shipped.threshold:
            paper = Paper(id=row["id"], title=row["title"], abstract=row.get("abstract") or "",
                          authors=tuple(row.get("authors") or ()), comment=row.get("comment"))
            weeks[date.fromisoformat(row["listed_date"][:10]).isocalendar()[:2]].append((paper, value, row))
    return weeks


def compare(weeks: dict, liked: tuple[str, ...], n: int, weights) -> tuple[dict, int]:
    """Labelled-relevant, non-borderline papers in each order's top n, summed over weeks."""
    from pipeline import importance

    good: dict[str, int] = {"relevance": 0, "importance": 0, "importance + marks": 0}
    marks: tuple[list[str], list[str]] = ([], [])
    counted = 0
    for week in sorted(weeks):
        found = weeks[week]
        if len(found) <= n:
            continue  # every paper fits: the order cannot matter
        counted += 1
        relevance = {p.id: value for p, value, _ in found}
        papers = [p for p, _, _ in found]
        label = {p.id: row["label"] == 1 and not row.get("borderline") for p, _, row in found}
        orders = {"relevance": sorted(papers, key=lambda p: -relevance[p.id])}
        for name, taste in (("importance", importance.Taste(liked)),
                            ("importance + marks", importance.Taste(liked + tuple(marks[0]),
                                                                    tuple(marks[1])))):
            weighed = importance.weigh(papers, relevance, taste, weights)
            orders[name] = sorted(papers, key=lambda p, w=weighed: -w[p.id].total)
        for name, order in orders.items():
            good[name] += sum(label[p.id] for p in order[:n])
        shown = {p.id for p in orders["importance + marks"][:n]}
        for p, _, row in found:  # the reader marks what this week's digest showed them
            if p.id in shown:
                marks[0 if row["label"] == 1 else 1].append(importance.text_of(p.title, p.abstract))
    return good, counted

if __name__ == "__main__":
    main()
