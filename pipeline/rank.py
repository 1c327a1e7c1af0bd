"""Relevance, topics and featured picks: is a paper about RL for language models?

A transparent rule, so that a reader sees why a paper was kept ("title: GRPO",
"abstract: LLM") and can tune it in config.yaml; pipeline/learn.py averages it with
a trained text model. Pure functions, no I/O: the caller reads papers and passes
user verdicts in.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeVar

T = TypeVar("T")

# Text is lower-cased once and scanned by one regex for all term lists: a
# case-insensitive regex is twice as slow, one regex per list five times. ASCII
# boundaries make "PPO" miss "support" and "RL" miss "URL", while "GRPO" still
# matches inside Chinese text ("使用GRPO训练").
_BEFORE = r"(?<![a-z0-9_])"
_AFTER = r"(?![a-z0-9_])"
_PIECE = {" ": r"[\s\-]+", "*": r"[a-z0-9]*"}
_WORD_START = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
# A sentence ends at ". X", but not after an abbreviation ("e.g. GRPO", "et al. Then"; any
# case, ASCII only): the lookbehinds keep that test in the regex engine.
_SENTENCE_END = re.compile(r"[.!?](?<!(?ai:e\.g\.|i\.e\.|etc\.|fig\.))(?<!(?ai:al\.|vs\.|cf\.|eq\.))"
                           r"\s+[A-Z0-9\\$(\[]")


def term_key(term: str) -> str:
    """The form terms are compared in: lower case, hyphens and spaces alike."""
    return " ".join(term.lower().replace("-", " ").split())


def _lower(text: str) -> str:
    """Lower case with offsets kept (a few letters, like "İ", grow when lowered)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c.lower() if len(c.lower()) == 1 else " " for c in text)


def _trie_regex(keys: Iterable[str]) -> str:
    """One alternation factored by prefix: far faster than one branch per term."""
    trie: dict[str, Any] = {}
    for key in keys:
        node = trie
        for char in key:
            node = node.setdefault(char, {})
        node[""] = {}

    def walk(node: dict[str, Any]) -> str:
        branches = [
            _PIECE.get(char, re.escape(char)) + walk(child)
            for char, child in sorted(node.items())
            if char
        ]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return walk(trie)


def _inner(key: str) -> list[str]:
    """The terms a key holds inside it: its runs of whole words, shorter than itself."""
    words = key.split(" ")
    n = len(words)
    return [" ".join(words[i:j]) for i in range(n) for j in range(i + 1, n + 1) if j - i < n]


@dataclass(frozen=True)
class Lexicon:
    """Named lists of weighted terms, compiled into a single regex.

    The longest term wins at each place ("diffusion language model" is not
    "diffusion"); a long term still credits the shorter terms inside it that
    other lists hold ("process reward model" also counts as "reward model").
    """

    pattern: re.Pattern[str] | None
    lists: Mapping[str, Mapping[str, float]]  # list name -> key -> weight
    credits: Mapping[str, tuple[tuple[str, str], ...]]  # matched key -> (list, key) pairs
    names: Mapping[str, str]  # key -> the term as written in the config
    prefixes: tuple[str, ...]  # "qwen*" terms, without the star
    plurals: bool
    # the credits of each matched spelling seen so far: a text names the same few terms
    # again and again, and resolving one is most of the time of a look-up
    seen: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def compile(cls, lists: Mapping[str, Mapping[str, float] | Iterable[str]],
                plurals: bool = True) -> Lexicon:
        weights: dict[str, dict[str, float]] = {}
        names: dict[str, str] = {}
        for name, terms in lists.items():
            items = terms.items() if isinstance(terms, Mapping) else ((t, 1.0) for t in terms)
            weights[name] = {}
            for term, weight in items:
                if term_key(term):
                    weights[name][term_key(term)] = float(weight)
                    names.setdefault(term_key(term), term)
        every = sorted({k for found in weights.values() for k in found})
        position = {name: {k: i for i, k in enumerate(found)} for name, found in weights.items()}
        credits = {}
        for key in every:
            pairs = []
            inner = _inner(key)
            for name, found in weights.items():
                if key in found:
                    pairs.append((name, key))
                    continue
                # the longest of this list's terms inside the matched one (of equals, the first listed)
                held = sorted((k for k in inner if k in found and "*" not in k),
                              key=position[name].__getitem__)
                if held:
                    pairs.append((name, max(held, key=len)))
            credits[key] = tuple(pairs)
        pattern = None
        if every:
            tail = "(?:e?s)?" if plurals else ""
            body = f"(?:{_trie_regex(every)}){tail}{_AFTER}"
            if all(k[0] in _WORD_START for k in every):
                # the character before a term, matched rather than looked behind: the regex
                # engine then skips in C from one non-word character to the next, where it
                # would try every position (twice as fast; `find` puts a blank before the text)
                pattern = re.compile(f"[^a-z0-9_]({body})")
            else:
                pattern = re.compile(f"{_BEFORE}({body})")
        prefixes = tuple(sorted((k[:-1] for k in every if k.endswith("*")), key=len, reverse=True))
        return cls(pattern, weights, credits, names, prefixes, plurals)

    def find(self, text: str) -> list[tuple[int, str, str]]:
        """(offset, list name, key) for each term found in `text`."""
        if self.pattern is None:
            return []
        found = []
        seen = self.seen
        for match in self.pattern.finditer(" " + _lower(text)):
            spelling = match.group(1)
            credits = seen.get(spelling)
            if credits is None:
                credits = seen[spelling] = self.credits.get(self._resolve(term_key(spelling)), ())
            start = match.start(1) - 1
            found += [(start, name, k) for name, k in credits]
        return found

    def _resolve(self, key: str) -> str:
        if key in self.credits:
            return key
        if self.plurals:
            for singular in (key[:-1], key[:-2]):
                if singular in self.credits:
                    return singular
        return next((p + "*" for p in self.prefixes if key.startswith(p)), key)

    def weight(self, name: str, key: str) -> float:
        return self.lists[name][key]


@dataclass(frozen=True)
class Rules:
    """The relevance settings, compiled once per config."""

    lexicon: Lexicon
    threshold: float
    title_weight: float
    title_cap: float
    background_weight: float
    plain_weight: float
    edge_weight: float
    abstract_cap: float
    lm_full: float
    subject_weight: float
    policy_lms: frozenset[str]
    seed_weight: float


def compile_rules(cfg: Any) -> Rules:
    """Compile a `Relevance` config (or anything with the same attributes)."""
    lexicon = Lexicon.compile(
        {
            "rl": cfg.rl_terms,
            "lm": cfg.lm_terms,
            "negative": cfg.negative_terms,
            "not_rl": cfg.not_rl_terms,
            "background": cfg.background_cues,
            "comparison": cfg.comparison_cues,
            "method": cfg.method_cues,
            "negation": cfg.negation_cues,
        }
    )
    return Rules(
        lexicon,
        threshold=cfg.threshold,
        title_weight=cfg.title_weight,
        title_cap=cfg.title_cap,
        background_weight=cfg.background_weight,
        plain_weight=cfg.plain_weight,
        edge_weight=cfg.edge_weight,
        abstract_cap=cfg.abstract_cap,
        lm_full=cfg.lm_full,
        subject_weight=cfg.subject_weight,
        policy_lms=frozenset(term_key(t) for t in cfg.policy_lm_terms),
        seed_weight=cfg.seed_weight,
    )


@dataclass(frozen=True)
class Score:
    """A paper's relevance: the value, whether it passes, and the evidence for it."""

    value: float
    relevant: bool
    reasons: tuple[str, ...]


def sentence_starts(text: str) -> list[int]:
    """Offsets where sentences begin (abbreviations such as "e.g." do not end one)."""
    return [0, *(match.end() - 1 for match in _SENTENCE_END.finditer(text))]


def _abstract_rl(rules: Rules, hits: Mapping[str, list[tuple[int, str]]],
                 abstract: str) -> tuple[float, dict[str, str]]:
    """RL evidence per sentence: the best RL term of each sentence counts once.

    Mentions in several sentences are what separate a paper *about* RL from one
    that names RLHF once. A sentence with a background cue ("such as",
    "existing") counts `background_weight` (LABELING rule 3); one describing
    the paper's own recipe ("we", "followed by") counts fully; others count
    `plain_weight`. The first and last sentences of an abstract usually set
    the scene or draw implications, so there background and plain mentions
    count `edge_weight` times as much. Returns (evidence, {key: role}).
    """
    rl = hits.get("rl")
    if not rl:
        return 0.0, {}
    starts = sentence_starts(abstract)
    method = {bisect_right(starts, pos) for pos, _ in hits.get("method", ())}
    # A comparison cue ("outperforms") makes background of what comes after it, the beaten
    # baseline (LABELING rule 3), not of what comes before: "RL outperforms SFT" is a finding
    # about RL. Each background sentence keeps the offset from which its cues cover RL terms.
    background: dict[int, int] = {}
    for name in ("background", "comparison"):
        for pos, _ in hits.get(name, ()):
            sentence, reach = bisect_right(starts, pos), pos if name == "comparison" else -1
            background[sentence] = min(background.get(sentence, reach), reach)
    negations = [pos for pos, _ in hits.get("negation", ())]
    edges = {1, len(starts)} if len(starts) >= 3 else set()
    best: dict[int, float] = {}
    roles: dict[str, str] = {}
    for pos, key in rl:
        sentence = bisect_right(starts, pos)
        if any(pos - _NEGATION_REACH <= q < pos and bisect_right(starts, q) == sentence
               for q in negations):
            role, factor = "negated", 0.0
        elif sentence in background and background[sentence] < pos:
            role, factor = "background", rules.background_weight
        elif sentence in method:
            role, factor = "method", 1.0
        else:
            role, factor = "plain", rules.plain_weight
        if sentence in edges and role != "method":
            factor *= rules.edge_weight
        best[sentence] = max(best.get(sentence, 0.0), rules.lexicon.weight("rl", key) * factor)
        if _ROLE_RANK[role] > _ROLE_RANK.get(roles.get(key, ""), -1):
            roles[key] = role
    return min(sum(best.values()), rules.abstract_cap), roles


_ROLE_RANK = {"negated": 0, "background": 1, "plain": 2, "method": 3}
_NEGATION_REACH = 60  # characters before an RL term that a negation cue covers
_SIMILAR = 0.3  # similarity worth naming as a reason, even when seed_weight is 0


def _by_list(hits: list[tuple[int, str, str]]) -> dict[str, list[tuple[int, str]]]:
    """Lexicon hits as list name -> [(offset, key)], in order."""
    out: dict[str, list[tuple[int, str]]] = {}
    for pos, name, key in hits:
        if name in out:
            out[name].append((pos, key))
        else:
            out[name] = [(pos, key)]
    return out


def _keys(hits: Mapping[str, list[tuple[int, str]]], name: str) -> dict[str, None]:
    return dict.fromkeys(key for _, key in hits.get(name, ()))  # ordered set


def _negative(rules: Rules, name: str, title_hits: Mapping[str, list[tuple[int, str]]],
              abstract_hits: Mapping[str, list[tuple[int, str]]]) -> tuple[float, list[str]]:
    """The weight one list of negatives takes off (x title_weight in the title), and its
    keys that weigh anything (weight 0 only hides shorter terms), title ones first."""
    lex = rules.lexicon
    title = _keys(title_hits, name)
    abstract = [k for k in _keys(abstract_hits, name) if k not in title]
    value = rules.title_weight * sum(lex.weight(name, k) for k in title)
    value += sum(lex.weight(name, k) for k in abstract)
    return value, [k for k in (*title, *abstract) if lex.weight(name, k)]


def score(
    title: str,
    abstract: str,
    rules: Rules,
    exemplars: Exemplars | None = None,
    verdict: bool | None = None,
) -> Score:
    """(RL evidence) x (language-model factor) - negatives + seed_weight x similarity.

    RL evidence: title terms x title_weight (capped) plus abstract sentences.
    LM factor: summed LM term weights / lm_full, at most 1 — it only asks
    whether a language model is involved. A user verdict (`mark`) decides
    `relevant` whatever the value.
    """
    lex = rules.lexicon
    title_hits, abstract_hits = _by_list(lex.find(title)), _by_list(lex.find(abstract))
    names = lex.names
    reasons: list[str] = []

    rl_title = _keys(title_hits, "rl")
    rl_abstract, roles = _abstract_rl(rules, abstract_hits, abstract)
    title_rl = min(sum(lex.weight("rl", k) for k in rl_title), rules.title_cap)
    rl = rules.title_weight * title_rl + rl_abstract
    reasons += [f"title: {names[k]}" for k in rl_title]
    reasons += [
        f"{role if role in ('background', 'negated') else 'abstract'}: {names[k]}"
        for k, role in roles.items()
        if k not in rl_title
    ]

    lm_title = _keys(title_hits, "lm")
    lm_abstract = {k: None for k in _keys(abstract_hits, "lm") if k not in lm_title}
    reasons += [f"title: {names[k]}" for k in lm_title]
    reasons += [f"abstract: {names[k]}" for k in lm_abstract]

    neg_title = _keys(title_hits, "negative")
    title_lm = sum(lex.weight("lm", k) for k in lm_title)
    helpers_only = title_lm < rules.lm_full and any(
        lex.weight("negative", k) >= rules.subject_weight for k in neg_title)
    if helpers_only:
        # The title names a subject whose model is not a language model (driving,
        # point clouds, image or video diffusion) and names no language model:
        # language models met only in the abstract are helpers (reward shaping,
        # advice, encoders, judges) and do not count, unless they are the policy (VLA).
        reasons.append("title: subject is not a language model")
    lm = title_lm + sum(lex.weight("lm", k) for k in lm_abstract
                        if not helpers_only or k in rules.policy_lms)
    lm_factor = min(1.0, lm / rules.lm_full) if rules.lm_full > 0 else 1.0

    subject, subjects = _negative(rules, "negative", title_hits, abstract_hits)
    policy = next((k for k in (*lm_title, *lm_abstract) if k in rules.policy_lms), None)
    if policy is not None and subjects:
        # The language model is itself the trained policy of the subject the negatives name
        # (a VLA drives, a unified multimodal model draws): RL for a language model
        # (LABELING: 1, borderline), so they do not subtract. What the paper says of itself
        # (a survey, RL-free) still does.
        subject, subjects = 0.0, []
        reasons.append(f"the policy is a language model: {names[policy]}")
    claim, claims = _negative(rules, "not_rl", title_hits, abstract_hits)
    reasons += [f"negative: {names[k]}" for k in (*subjects, *claims)]

    value = rl * lm_factor - subject - claim
    # Similarity is a reason worth showing on candidates; with seed_weight 0 it
    # cannot change anything for a paper without evidence, so skip the work there.
    if exemplars is not None and (rules.seed_weight or value > 0):
        label, similarity = exemplars.best(title)  # titles: what seeds have, and quick
        value += rules.seed_weight * similarity
        if label is not None and similarity >= _SIMILAR:
            reasons.append(f"similar to seed {_short(label)} {similarity:.2f}")
    value = round(value, 4)
    relevant = value >= rules.threshold
    if verdict is not None:
        relevant = verdict
        reasons.insert(0, f"user: marked {'relevant' if verdict else 'not relevant'}")
    return Score(value, relevant, tuple(dict.fromkeys(reasons)))


# --- similarity to positive exemplars --------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how", "in",
    "into", "is", "it", "its", "of", "on", "or", "our", "that", "the", "their", "this", "to",
    "toward", "towards", "via", "we", "what", "when", "where", "which", "why", "with",
})


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOP and len(t) > 1]


@dataclass(frozen=True)
class Exemplars:
    """Positive examples (seed titles, papers marked relevant) as TF-IDF vectors,
    stored as an inverted index so that a query only touches the words it shares."""

    labels: tuple[str, ...]
    postings: Mapping[str, tuple[tuple[int, float], ...]]  # word -> (exemplar, weight)
    idf: Mapping[str, float]
    unseen_idf: float

    def best(self, text: str) -> tuple[str | None, float]:
        """(label, cosine similarity) of the closest exemplar; (None, 0.0) if none shares a word."""
        counts = Counter(_tokens(text))
        query = _unit({t: (1 + math.log(c)) * self.idf.get(t, self.unseen_idf)
                       for t, c in counts.items()})
        sims: dict[int, float] = {}
        for word, weight in query.items():
            for index, other in self.postings.get(word, ()):
                sims[index] = sims.get(index, 0.0) + weight * other
        if not sims:
            return None, 0.0
        index = max(sims, key=lambda i: (sims[i], -i))
        return self.labels[index], round(sims[index], 4)


def _unit(weights: dict[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
    return {t: w / norm for t, w in weights.items()}


def build_exemplars(items: Sequence[tuple[str, str]]) -> Exemplars:
    """Exemplars from (label, text) pairs. IDF comes from the exemplars themselves,
    so words every exemplar shares ("learning") count least."""
    docs = [Counter(_tokens(text)) for _, text in items]
    df = Counter(t for doc in docs for t in doc)
    n = len(docs)
    idf = {t: math.log((n + 1) / (d + 0.5)) + 1.0 for t, d in df.items()}
    postings: dict[str, list[tuple[int, float]]] = {}
    for index, doc in enumerate(docs):
        for word, weight in _unit({t: (1 + math.log(c)) * idf[t] for t, c in doc.items()}).items():
            postings.setdefault(word, []).append((index, weight))
    return Exemplars(tuple(label for label, _ in items),
                     {w: tuple(p) for w, p in postings.items()}, idf, math.log((n + 1) / 0.5) + 1.0)


def _short(label: str) -> str:
    """"BroRL: Scaling ..." -> "BroRL"; long labels are cut."""
    head = label.split(":", 1)[0].strip() if ":" in label[:60] else label.strip()
    return head if len(head) <= 60 else head[:57] + "..."


# --- topics ---------------------------------------------------------------------------

@lru_cache(maxsize=16)
def _topic_lexicon(spec: tuple[tuple[str, tuple[tuple[str, float], ...]], ...]) -> Lexicon:
    return Lexicon.compile({key: dict(terms) for key, terms in spec})


def _topic_spec(topics: Sequence[Any]) -> tuple[tuple[str, tuple[tuple[str, float], ...]], ...]:
    spec = []
    for topic in topics:
        terms = topic.terms if isinstance(topic.terms, Mapping) else dict.fromkeys(topic.terms, 1.0)
        spec.append((topic.key, tuple(sorted(terms.items()))))
    return tuple(spec)


def assign_topics(title: str, abstract: str, topics: Sequence[Any]) -> tuple[str, tuple[str, ...]]:
    """(primary topic key, secondary keys) from the topics' terms, title counting double.

    Ties go to the topic listed first. With no evidence at all (a terse seed
    title) the paper goes to the first topic without terms, else the last one:
    the catch-all "applications".
    """
    lexicon = _topic_lexicon(_topic_spec(topics))
    scores: dict[str, float] = {}
    for text, weight in ((title, 2.0), (abstract or "", 1.0)):
        # in the order of the text, not of a set: float sums, and so ties, the same in every process
        for key, term in dict.fromkeys((name, k) for _, name, k in lexicon.find(text)):
            scores[key] = scores.get(key, 0.0) + weight * lexicon.weight(key, term)
    order = {topic.key: i for i, topic in enumerate(topics)}
    ranked = sorted((k for k in scores if scores[k] > 0), key=lambda k: (-scores[k], order[k]))
    if not ranked:
        fallback = next((t.key for t in topics if not t.terms), topics[-1].key)
        return fallback, ()
    top = scores[ranked[0]]
    secondary = tuple(k for k in ranked[1:] if scores[k] >= max(1.0, top / 2))
    return ranked[0], secondary


# --- featured -------------------------------------------------------------------------

def choose_featured(
    items: Iterable[T],
    n: int,
    key_topic: Callable[[T], str],
    key_score: Callable[[T], float],
    forced: Callable[[T], bool] | Collection[T] = (),
) -> list[T]:
    """Up to n items: forced ones first (seed entries marked featured), then the
    best-scored item of each topic not yet featured, then the best of the rest."""
    is_forced = forced if callable(forced) else (lambda item: item in forced)
    ranked = sorted(items, key=key_score, reverse=True)
    chosen = [item for item in ranked if is_forced(item)][:n]
    taken = {id(item) for item in chosen}
    topics = {key_topic(item) for item in chosen}
    for diverse in (True, False):
        for item in ranked:
            if len(chosen) >= n:
                return chosen
            if id(item) in taken or (diverse and key_topic(item) in topics):
                continue
            chosen.append(item)
            taken.add(id(item))
            topics.add(key_topic(item))
    return chosen


# --- the arXiv query ------------------------------------------------------------------

@dataclass(frozen=True)
class Query:
    """The arXiv candidate query as a test: any configured category AND any term.

    The API's ti:/abs: search is a phrase search; it is approximated by
    case-insensitive whole-word phrase matching, without plurals. RSS items go
    through the same test, so both sources see the same papers.
    """

    categories: frozenset[str]
    lexicon: Lexicon

    @classmethod
    def compile(cls, categories: Iterable[str], terms: Iterable[str]) -> Query:
        return cls(frozenset(categories), Lexicon.compile({"query": list(terms)}, plurals=False))

    def in_categories(self, categories: Iterable[str]) -> bool:
        return bool(self.categories & set(categories))

    def has_term(self, title: str, abstract: str) -> bool:
        return bool(self.lexicon.find(f"{title}\n{abstract}"))

    def matches(self, title: str, abstract: str, categories: Iterable[str]) -> bool:
        return self.in_categories(categories) and self.has_term(title, abstract)
