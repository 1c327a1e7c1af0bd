"""Choose the featured papers: among the week's best, the pair (or `digest.featured`
papers) that speaks to one question, so the comparison compares along that question
instead of inventing a link between two unrelated papers.

The LLM, when there is one, picks from the top candidates and names the question;
without it the candidates are clustered by term overlap (TF-IDF cosine of title and
abstract). No pair shares a question: one paper is featured and nothing is compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.models import Entry

CANDIDATES = 10  # the top papers the pair is chosen from


@dataclass(frozen=True)
class Pick:
    entries: tuple[Entry, ...]
    question_zh: str | None = None  # the question the featured papers share
    question_en: str | None = None


def candidates(papers: Sequence[Entry], limit: int = CANDIDATES) -> list[Entry]:
    """The week's best papers, best first."""
    return sorted(papers, key=lambda e: (-(e.score or 0.0), e.key))[:limit]


def choose(papers: Sequence[Entry], n: int, min_similarity: float,
           reply: dict[str, Any] | None = None) -> Pick:
    """Up to n papers that share a question: the LLM's pick (`reply`, its numbers
    counting from 1 in candidates' order) or, without one, the closest pair by terms."""
    top = candidates(papers)
    if n < 2 or len(top) < 2:
        return Pick(tuple(top[:n]))
    if reply is not None:
        numbers = list(dict.fromkeys(k for k in reply["papers"] if 1 <= k <= len(top)))
        chosen = [top[k - 1] for k in numbers][:n]
        if len(chosen) < 2 or not reply["question_en"].strip():
            return Pick((top[0],))
        return Pick(tuple(chosen), reply["question_zh"].strip() or None, reply["question_en"].strip())
    return Pick(tuple(by_overlap(papers, top, n, min_similarity)))


def by_overlap(papers: Sequence[Entry], top: Sequence[Entry], n: int,
               min_similarity: float) -> list[Entry]:
    """The most similar pair among `top` (weights learnt over the whole week), grown to
    n with papers close to every one chosen; the best paper alone if no pair is close."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # heavy: loaded when needed

    week = {e.key: e for e in [*top, *papers]}
    vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
    vectorizer.fit([_text(e) for e in week.values()])
    vectors = vectorizer.transform([_text(e) for e in top])
    similar = (vectors @ vectors.T).toarray()
    pairs = [(similar[i, j], -i - j, i, j) for i in range(len(top)) for j in range(i + 1, len(top))]
    best, _, i, j = max(pairs)
    if best < min_similarity:
        return [top[0]]
    chosen = [i, j]
    while len(chosen) < n:
        rest = [(min(similar[k, c] for c in chosen), -k, k) for k in range(len(top)) if k not in chosen]
        if not rest or max(rest)[0] < min_similarity:
            break
        chosen.append(max(rest)[2])
    return sorted((top[k] for k in chosen), key=top.index)


def _text(entry: Entry) -> str:
    return f"{entry.title} {entry.title} {entry.abstract or entry.summary_en or ''}"
