"""How much a relevant paper matters to this reader: the order of the digest's full
entries, its featured candidates and its highlights.

importance = relevance (the stored score)
           + similarity × (TF-IDF cosine to the closest seed entry or paper the reader marked relevant)
           + code       × (a code or project link in the abstract or comment)
           + venue      × (a stated venue: "Accepted at NeurIPS 2026", a journal-ref)
           + authors    × (a followed author, relevance.follow_authors)
           + revision   × (a new version of a paper the reader marked relevant)
           − irrelevant × (TF-IDF cosine to the closest paper the reader marked irrelevant)
with the weights of `digest.importance` in config.yaml. `rl-digest status --paper ID`
prints each part.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

from pipeline.config_sections import Importance as Weights
from pipeline.decide import author_name
from pipeline.extract import links, venue
from pipeline.models import Paper, SeedEntry


@dataclass(frozen=True)
class Importance:
    """Each part already weighted; the total is their sum."""

    relevance: float = 0.0
    similarity: float = 0.0
    code: float = 0.0
    venue: float = 0.0
    authors: float = 0.0
    revision: float = 0.0
    irrelevant: float = 0.0  # zero or negative

    @property
    def total(self) -> float:
        return round(sum(value for _, value in self.parts()), 4)

    def parts(self) -> list[tuple[str, float]]:
        return [(f.name, getattr(self, f.name)) for f in fields(self)]


@dataclass(frozen=True)
class Taste:
    """What the reader likes and dislikes, as texts: seed entries and marked papers."""

    liked: tuple[str, ...] = ()
    disliked: tuple[str, ...] = ()
    marked: frozenset[str] = frozenset()  # ids of papers judged relevant
    authors: frozenset[str] = frozenset()  # followed authors, as learn's names


def taste(seeds: Iterable[SeedEntry], resolved: Iterable[Paper], liked: Iterable[Paper],
          disliked: Iterable[Paper], follow_authors: Iterable[str]) -> Taste:
    """The reader's taste: seed entries (with their paper's abstract when resolved), the
    papers judged relevant and irrelevant (learn.judged: `rl-digest mark`, and readers' 👍/👎
    by majority), the followed authors."""
    abstracts = {p.id: p.abstract for p in resolved}
    liked = list(liked)
    texts = [text_of(s.title, abstracts.get(s.arxiv_id or "", "")) for s in seeds]
    texts += [text_of(p.title, p.abstract) for p in liked]
    return Taste(tuple(texts), tuple(text_of(p.title, p.abstract) for p in disliked),
                 frozenset(p.id for p in liked), frozenset(author_name(a) for a in follow_authors))


def text_of(title: str, abstract: str = "") -> str:
    return f"{title} {title} {abstract}"


def weigh(papers: Sequence[Paper], relevance: dict[str, float], taste: Taste,
          weights: Weights) -> dict[str, Importance]:
    """Paper id -> its importance, each part weighted by `weights` (digest.importance)."""
    if not papers:
        return {}
    texts = [text_of(p.title, p.abstract) for p in papers]
    near = _closest(texts, taste.liked, taste.disliked)
    found = {}
    for paper, (like, dislike) in zip(papers, near, strict=True):
        kinds = {kind for kind, _ in links(paper.abstract, paper.comment)}
        followed = bool(taste.authors) and any(author_name(a) in taste.authors for a in paper.authors)
        found[paper.id] = Importance(
            relevance=round(weights.relevance * (relevance.get(paper.id) or 0.0), 4),
            similarity=round(weights.similarity * like, 4),
            code=weights.code if kinds & {"code", "project"} else 0.0,
            venue=weights.venue if venue(paper.comment, paper.journal_ref) else 0.0,
            authors=weights.authors if followed else 0.0,
            revision=weights.revision if paper.version > 1 and paper.id in taste.marked else 0.0,
            irrelevant=round(-weights.irrelevant * dislike, 4),
        )
    return found


def _closest(texts: list[str], liked: Iterable[str], disliked: Iterable[str]) -> list[tuple[float, float]]:
    """For each text, the highest cosine to a liked and to a disliked text (0 with none),
    with term weights learnt over all of them."""
    liked, disliked = list(liked), list(disliked)
    if not liked and not disliked:
        return [(0.0, 0.0)] * len(texts)
    from sklearn.feature_extraction.text import TfidfVectorizer  # heavy: loaded when needed

    vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
    vectorizer.fit(texts + liked + disliked)
    mine = vectorizer.transform(texts)

    def best(others: list[str]) -> list[float]:
        if not others:
            return [0.0] * len(texts)
        return [float(v) for v in (mine @ vectorizer.transform(others).T).max(axis=1).toarray().ravel()]

    return list(zip(best(liked), best(disliked), strict=True))
