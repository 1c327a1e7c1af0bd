"""The decision on each paper: the relevance model's probability (or the rule's value without
it), then the reader's profile (`relevance.follow_authors`, `include`, `exclude`), whose
orders win; the rule's reasons stay the explanation.

Apart from learn.py, which makes and keeps the model: this reads the config's standing
orders and needs neither numpy's arrays nor the store.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import chain
from typing import TYPE_CHECKING, Any

from pipeline import rank
from pipeline.export import name_parts
from pipeline.extract import readable

if TYPE_CHECKING:
    from pipeline.learn import Hybrid


def author_name(author: str) -> str:
    """The key a followed author is matched by: `Röpke`, `Ropke` and arXiv's `R\\"opke`
    are one name, whatever the case, the accents, the dots of initials or the hyphens; a
    name written `Family, Given` (a bibliography's order) is `Given Family`."""
    family, given = name_parts(readable(author) or "")  # as the exports read the name's order
    decoded = unicodedata.normalize("NFKD", f"{given} {family}".casefold())
    bare = "".join(c for c in decoded if not unicodedata.combining(c)).translate(_UNACCENTED)
    return " ".join(bare.replace(".", " ").replace(",", " ").replace("-", " ").split())


_UNACCENTED = str.maketrans({"ø": "o", "ł": "l", "đ": "d", "ð": "d", "ı": "i", "æ": "ae",
                             "œ": "oe", "þ": "th"})  # letters NFKD leaves as they are (casefold makes ß ss)


@dataclass(frozen=True)
class Profile:
    """`relevance.include`, `exclude` and `follow_authors`: the reader's standing orders."""

    phrases: rank.Lexicon
    authors: frozenset[str]

    @classmethod
    def compile(cls, cfg: Any) -> Profile:
        # the rule's plurals add (e)s; a phrase's "policy" also finds "policies", and "LLM
        # agents" "an LLM agent", each named as written
        lists = {"include": cfg.include, "exclude": cfg.exclude}
        other = {form: p for p in chain(*lists.values()) if (form := _other_number(p.strip()))}
        phrases = rank.Lexicon.compile({name: [*found, *(k for k, p in other.items() if p in found)]
                                        for name, found in lists.items()})
        names = {key: other.get(name, name) for key, name in phrases.names.items()}
        return cls(replace(phrases, names=names), frozenset(author_name(a) for a in cfg.follow_authors))

    def order(self, title: str, abstract: str, authors: Iterable[str]) -> tuple[bool | None, str | None]:
        """(True, reason) to keep, (False, reason) to drop, (None, None) when nothing applies.
        A followed author wins over an exclude phrase, which wins over an include phrase."""
        followed = None
        if self.authors:
            followed = next((a for a in authors if author_name(a) in self.authors), None)
        if followed:
            return True, f"{FOLLOW}{readable(followed) or followed}"
        found = {name: key for _, name, key in self.phrases.find(f"{title}\n{abstract}")}
        for name, keep in (("exclude", False), ("include", True)):
            if name in found:
                return keep, f"{name}: {self.phrases.names[found[name]]}"
        return None, None


# a phrase's last word in the number the rule's plurals (a tail of s or es) cannot reach:
# "policy" -> "policies" (not "survey"); "policies", "LLMs", "boxes", "losses", "agents" ->
# the singular; not a word that only ends in s ("process", "corpus", "analysis", "dynamics"),
# nor one whose singular is another short word ("news" is not "new")
_NUMBER = ((re.compile(r"(?i)(?<=[b-df-hj-np-tv-z])y$"), "ies"),
           (re.compile(r"(?i)(?<=[b-df-hj-np-tv-z])ies$"), "y"), (re.compile(r"(?<=[A-Z0-9]{2})s$"), ""),
           (re.compile(r"(?i)(?:(?<=ch)|(?<=sh)|(?<=ss)|(?<=[xz]))es$"), ""),
           (re.compile(r"(?i)(?<=[a-z]{4})(?<![sui])(?<!ic)s$"), ""))
FOLLOW = "follow: "
TAUGHT = "like papers you marked: "
PROFILE_REASONS = (FOLLOW, "include: ", "exclude: ", TAUGHT)
FOLLOW_BOOST = 1.0  # a followed author's paper sorts above every scored one


def _other_number(phrase: str) -> str | None:
    return next((rule.sub(ending, phrase) for rule, ending in _NUMBER if rule.search(phrase)), None)


def decide(title: str, abstract: str, authors: Iterable[str], rule: rank.Score,
           model: Hybrid | None, profile: Profile) -> rank.Score:
    """`decide_all` of one paper."""
    return decide_all([(title, abstract, authors)], [rule], model, profile)[0]


def decide_all(papers: Sequence[tuple[str, str, Iterable[str]]], rules: Sequence[rank.Score],
               model: Hybrid | None, profile: Profile) -> list[rank.Score]:
    """The final scores of (title, abstract, authors): the hybrid's probability (or the rule's
    value without a model), then the profile's orders; the rule's reasons stay the explanation.
    All at once, since the text model scores a batch far faster than one paper at a time."""
    if model is None:
        judged = [(rule.value, rule.relevant, False) for rule in rules]
    else:
        judged = model.decide([p[0] for p in papers], [p[1] for p in papers], [r.value for r in rules])
    out = []
    for paper, rule, (value, relevant, taught) in zip(papers, rules, judged, strict=True):
        title, abstract, authors = paper
        reasons = rule.reasons
        if model is not None:
            value = round(value, 4)
            if taught:
                reasons = (f"{TAUGHT}{'relevant' if relevant else 'not relevant'}", *reasons)
        keep, reason = profile.order(title, abstract, authors)
        if reason is None:
            out.append(rank.Score(value, relevant, reasons))
            continue
        if reason.startswith(FOLLOW):
            value += FOLLOW_BOOST
        out.append(rank.Score(value, bool(keep), (reason, *reasons)))
    return out


def reader_decided(reasons: Iterable[str]) -> bool:
    """Whether the profile or the reader's marks decided this paper (the LLM judge leaves it alone)."""
    return any(r.startswith(PROFILE_REASONS) for r in reasons)
