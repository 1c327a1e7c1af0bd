"""The relevance filter and the arXiv query measured against labelled papers.

What `rl-digest eval` and benchmarks/ report: precision and recall, the worst mistakes,
and the positives the query would never fetch. Apart from rank.py, which a run scores
papers with: nothing here runs in a digest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.rank import Exemplars, Query, Rules, Score, score


@dataclass(frozen=True)
class Miss:
    id: str
    title: str
    score: float
    reasons: tuple[str, ...]
    borderline: bool = False


@dataclass(frozen=True)
class Evaluation:
    n: int
    tp: int
    fp: int
    tn: int
    fn: int
    precision: float
    recall: float
    f1: float
    false_positives: tuple[Miss, ...]  # the ten highest-scored
    false_negatives: tuple[Miss, ...]  # the ten lowest-scored
    seconds_per_1000: float
    borderline_errors: int = 0

    @property
    def papers_per_second(self) -> float:
        return 1000 / self.seconds_per_1000 if self.seconds_per_1000 else float("inf")


def evaluate(rows: Sequence[Mapping[str, Any]], rules: Rules, exemplars: Exemplars | None = None,
             worst: int = 10,
             then: Callable[[Sequence[Mapping[str, Any]], list[Score]], list[Score]] | None = None,
             ) -> Evaluation:
    """Score labelled rows (dicts with id, title, abstract, label) and count agreement;
    `then` turns the rules' scores of all rows into the final ones (the model, pipeline/decide.py)."""
    start = time.perf_counter()
    scores = [score(row["title"], row.get("abstract") or "", rules, exemplars) for row in rows]
    if then is not None:
        scores = then(rows, scores)
    elapsed = time.perf_counter() - start
    fps, fns = [], []
    tp = tn = 0
    for row, result in zip(rows, scores, strict=True):
        miss = Miss(str(row.get("id", "")), row["title"], result.value, result.reasons,
                    bool(row.get("borderline")))
        if result.relevant and row["label"]:
            tp += 1
        elif result.relevant:
            fps.append(miss)
        elif row["label"]:
            fns.append(miss)
        else:
            tn += 1
    precision = tp / (tp + len(fps)) if tp + len(fps) else 0.0
    recall = tp / (tp + len(fns)) if tp + len(fns) else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Evaluation(
        n=len(rows), tp=tp, fp=len(fps), tn=tn, fn=len(fns),
        precision=round(precision, 4), recall=round(recall, 4), f1=round(f1, 4),
        false_positives=tuple(sorted(fps, key=lambda m: -m.score)[:worst]),
        false_negatives=tuple(sorted(fns, key=lambda m: m.score)[:worst]),
        seconds_per_1000=elapsed * 1000 / max(1, len(rows)),
        borderline_errors=sum(m.borderline for m in (*fps, *fns)),
    )


@dataclass(frozen=True)
class Coverage:
    positives: int
    candidates: int  # rows, of any label, that the query returns
    missed_by_category: tuple[str, ...]  # ids of positives outside every configured category
    missed_by_terms: tuple[str, ...]  # ids of positives without any term in title or abstract

    @property
    def missed(self) -> int:
        return len(set(self.missed_by_category) | set(self.missed_by_terms))


def query_coverage(rows: Sequence[Mapping[str, Any]], categories: Iterable[str],
                   terms: Iterable[str]) -> Coverage:
    """Which positives the arXiv candidate query (see Query) would miss."""
    query = Query.compile(categories, terms)
    positives = candidates = 0
    by_category, by_terms = [], []
    for row in rows:
        in_category = query.in_categories(row.get("categories") or ())
        has_term = query.has_term(row["title"], row.get("abstract") or "")
        candidates += in_category and has_term
        if not row.get("label"):
            continue
        positives += 1
        if not in_category:
            by_category.append(str(row.get("id", "")))
        if not has_term:
            by_terms.append(str(row.get("id", "")))
    return Coverage(positives, candidates, tuple(by_category), tuple(by_terms))
