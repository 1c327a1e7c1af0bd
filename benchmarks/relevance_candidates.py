"""Candidate relevance models under the same time folds as the shipped one (issue 21).

    RL_DIGEST_SHARED=../shared .venv/bin/python benchmarks/relevance_candidates.py [NAME ...]

Each candidate is fitted on earlier months only and scores the next block (the folds of
relevance_model.py); its weight and threshold are chosen on earlier months only (`nested`),
so no figure is tuned on its test fold. NAME picks candidates (default: all; about 10 min):

The text model of every candidate is the shipped NB-LR (presence of each gram scaled by its
naive-Bayes log-count ratio) unless it says TF-IDF; rows of benchmarks/relevance.md measured
before 2026-12-02's fourth session used TF-IDF with the title twice throughout.

- shipped: the shipped recipe (text model averaged with the Platt-calibrated rule);
- tfidf: the recipe shipped before, TF-IDF of the grams with the title counted twice;
- roles: beside the grams, each abstract word tagged by its sentence's kind (the paper's own,
  the setting, other);
- logit-stack: one regression over the text model's out-of-fold logit, the rule's value, whether
  it passes and that times the logit, in place of the average;
- stacked: the issue's first idea, the text grams plus the rule's own features (its value, whether
  it passes, each reason it gives: which terms fired and where, negation, the subject rule)
  in one balanced logistic regression; `alpha` scales the rule's block against the text's;
- rule-features: those rule features alone, and as the rule's half of the average;
- categories: arXiv categories as features of the text model;
- borderline: the weight of borderline rows (shipped 0.3);
- C: the text model's regularisation (shipped 16): 2, 8, 32;
- char: character 3-5-grams beside the words;
- fields: title and abstract grams as separate vocabularies (instead of the title counted twice);
- svm: a linear SVM, Platt-calibrated on 5 inner folds, instead of the logistic regression;
- authors: an author prior (how often a paper's authors wrote relevant papers in the training
  months) mixed into the text half; authors+: the same beside C 8, separate vocabularies and
  borderline weight 0.1;
- boosted: a gradient-boosted combiner (HistGradientBoostingClassifier, fixed settings) over the
  text model's out-of-fold probability, the rule's value and reasons (and categories, lengths,
  whether arXiv's comment field is filled);
- knn: a nearest-neighbour prior (the share of relevant papers among a paper's k most similar
  training papers, cosine over the text model's NB-scaled grams, or TF-IDF) mixed into the
  text half;
- gated: two mixing weights, one for papers whose rule value lies in a low band (one RL term:
  0.9-1.0; or anything above 0 up to 1.0) and one for the rest, both chosen on earlier months;
- local: beside the text model of all papers, one fitted only on the papers the rule found
  something in (its value not 0), mixed into the text half of those papers: a model of which
  RL-naming papers are relevant, not of which papers name RL;
- embed: a sentence embedding (all-MiniLM-L6-v2 of "title. abstract", written by
  benchmarks/relevance_embed.py into the file RL_DIGEST_EMBEDDINGS names): a balanced logistic
  regression on it, or a k-nearest-neighbour prior over its cosine, mixed into the text half
  (beta 1.0: in place of it). Does a model of meaning know what the grams do not?
- mil, mil-title, mil-em, mil-hard: multiple instances, a sentence-level NB-LR (the shipped
  featurisation over each abstract sentence of pipeline/extract.py, each inheriting its paper's
  label; -title: the title one more instance; -em: one soft EM pass; -hard: mi-SVM-style
  relabelling from an out-of-fold first pass), a paper scored by an aggregate of its sentences
  (max, mean of the best two, noisy-or, log-mean-exp of the logits) mixed into the text half,
  in place of it, or as a third half with its own weight chosen on earlier months.

Prints P and R on all rows and non-borderline rows, min(P, R) of each fold (the noise), and
the optimistic figure (weight and threshold chosen on the pooled test folds themselves).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys

import numpy as np
import relevance_model
from _common import ROOT
from relevance_model import THRESHOLDS, both, choose, corpus, mix, nested, time_folds

WIDE = tuple(round(0.30 + 0.025 * i, 3) for i in range(25))  # 0.3 .. 0.9


def rule_features(row, categories=False) -> dict[str, float]:
    found = {"value": max(-2.0, min(3.0, row["rule"])), "passes": float(row["rule"] >= 0.9)}
    for reason in row["reasons"]:
        found["reason " + reason.lower()] = 1.0
        kind = "kind " + reason.split(":", 1)[0]
        found[kind] = found.get(kind, 0.0) + 1.0
    if categories:
        found |= {"category " + c: 1.0 for c in row.get("categories") or ()}
    return found


class Candidate:
    """kind: "hybrid" (text model + rule, averaged), "text", "stacked" or "rule" (one model)."""

    def __init__(self, kind, c=16.0, alpha=1.0, categories=False, borderline=0.3, char=False,
                 rule_features=False, fields=False, svm=False, nb=True, roles=False):
        self.kind, self.c, self.alpha, self.categories = kind, c, alpha, categories
        self.borderline, self.char, self.rule_half = borderline, char, rule_features
        self.fields, self.svm, self.nb, self.roles = fields, svm, nb, roles

    def _text(self, rows, fit):
        from scipy.sparse import hstack
        from sklearn.feature_extraction import DictVectorizer
        from sklearn.feature_extraction.text import TfidfTransformer, TfidfVectorizer

        docs = [r["fields"] if self.fields else r["features"] for r in rows]
        if self.categories:
            docs = [d | {"category " + c: 1 for c in r.get("categories") or ()}
                    for d, r in zip(docs, rows, strict=True)]
        if self.roles:
            docs = [d | r["roles"] for d, r in zip(docs, rows, strict=True)]
        if fit:
            self.words = DictVectorizer()
            counts = self.words.fit_transform(docs)
            self.keep = np.flatnonzero(np.asarray((counts > 0).sum(0)).ravel() >= 3)
            if self.nb:
                self.scale = nb_scale(counts[:, self.keep] > 0, rows, self.borderline)
            else:
                self.tfidf = TfidfTransformer(sublinear_tf=True).fit(counts[:, self.keep])
        counts = self.words.transform(docs)[:, self.keep]
        if self.nb:
            from sklearn.preprocessing import normalize

            x = normalize((counts > 0).multiply(self.scale).tocsr())
        else:
            x = self.tfidf.transform(counts)
        if self.char:
            texts = [(r["title"] + " ") * 2 + r["abstract"] for r in rows]
            if fit:
                self.chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), min_df=3,
                                             sublinear_tf=True)
                x = hstack([x, self.chars.fit_transform(texts)]).tocsr()
            else:
                x = hstack([x, self.chars.transform(texts)]).tocsr()
        return x

    def _rules(self, rows, fit):
        from sklearn.feature_extraction import DictVectorizer

        docs = [rule_features(r) for r in rows]
        if fit:
            self.reasons = DictVectorizer()
            return self.reasons.fit_transform(docs) * self.alpha
        return self.reasons.transform(docs) * self.alpha

    def _matrix(self, rows, fit):
        from scipy.sparse import hstack

        if self.kind == "rule":
            return self._rules(rows, fit)
        if self.kind == "stacked":
            return hstack([self._text(rows, fit), self._rules(rows, fit)]).tocsr()
        return self._text(rows, fit)

    def __call__(self, train, seeds, scored):
        """(row, a, b) of the scored rows: a the model's probability, b the rule's half."""
        from sklearn.linear_model import LogisticRegression

        rows = train + seeds
        model = LogisticRegression(C=self.c, class_weight="balanced", solver="liblinear", random_state=0)
        if self.svm:
            from sklearn.calibration import CalibratedClassifierCV
            from sklearn.svm import LinearSVC

            model = CalibratedClassifierCV(LinearSVC(C=self.c, class_weight="balanced", random_state=0),
                                           method="sigmoid", cv=5)
        model.fit(self._matrix(rows, True), [r["label"] for r in rows],
                  sample_weight=[self.borderline if r.get("borderline") else 1.0 for r in rows])
        a = model.predict_proba(self._matrix(scored, False))[:, 1]
        if self.kind != "hybrid":
            return [(r, p, 0.0) for r, p in zip(scored, a, strict=True)]
        if self.rule_half:
            rule = LogisticRegression(C=1.0, class_weight="balanced", solver="liblinear", random_state=0)
            rule.fit(self._rules(train, True), [r["label"] for r in train],
                     sample_weight=[self.borderline if r.get("borderline") else 1.0 for r in train])
            b = rule.predict_proba(self._rules(scored, False))[:, 1]
        else:
            rule = LogisticRegression(C=100.0, solver="liblinear", random_state=0)
            rule.fit([[r["rule"]] for r in train], [r["label"] for r in train])
            b = rule.predict_proba([[r["rule"]] for r in scored])[:, 1]
        return [(r, p, q) for r, p, q in zip(scored, a, b, strict=True)]


def nb_scale(present, rows, borderline):
    """The shipped model's gram scales (pipeline/learn.py) over these rows."""
    from pipeline import learn

    weights = np.array([borderline if r.get("borderline") else 1.0 for r in rows])
    return learn.log_count_ratio(present.astype(float), np.array([r["label"] for r in rows]), weights)


ROLE_WORD = re.compile(r"[a-z][a-z0-9-]+")
OWN = re.compile(r"\b(we|our|this paper|this work|this study)\b")
SETTING = re.compile(r"\b(existing|prior|previous|recent|recently|such as|e\.g\.|typically|conventional|"
                     r"traditional|although|while|however|despite|unlike|has been|have been|widely)\b")


def sentence_roles(abstract: str) -> dict[str, int]:
    """Each word of the abstract tagged by the kind of sentence it stands in: the paper's own
    ("we", "this paper"), the setting (background cues), or other."""
    found = {}
    for sentence in re.split(r"(?<=[.!?])\s+", abstract.lower()):
        role = "own" if OWN.search(sentence) else "setting" if SETTING.search(sentence) else "other"
        found |= {f"{role}:{word}": 1 for word in ROLE_WORD.findall(sentence)}
    return found


KINDS = ("title", "abstract", "background", "negated", "negative", "similar to seed")
CATEGORIES = ("cs.CL", "cs.CV", "cs.AI", "cs.LG", "cs.RO", "stat.ML", "cs.MA", "cs.IR", "cs.SE", "cs.CR")


def combiner_features(row, text: float, extra: bool) -> list[float]:
    """What the boosted combiner reads of a paper: the text model's probability, the rule's
    value and how its reasons split by kind, and (extra) the arXiv categories, lengths, comment."""
    kinds = [sum(reason.startswith(kind + ":") or reason.startswith(kind + " ") for reason in row["reasons"])
             for kind in KINDS]
    found = [text, max(-2.0, min(3.0, row["rule"])), float(row["rule"] >= 0.9), *kinds,
             float(any("not a language model" in reason for reason in row["reasons"]))]
    if extra:
        categories = row.get("categories") or []
        found += [float(bool(categories) and categories[0] == c) for c in CATEGORIES]
        found += [float(c in categories) for c in CATEGORIES]
        found += [len(categories), len(row["title"].split()), len(row["abstract"].split()),
                  float(bool(row.get("comment")))]
    return found


def row_weights(rows) -> list[float]:
    """Each row's weight in a fit, as the shipped text model weighs it (borderline rows less)."""
    from pipeline.learn import BORDERLINE_WEIGHT

    return [BORDERLINE_WEIGHT if r.get("borderline") else 1.0 for r in rows]


def text_both_ways(train, seeds, scored, splitter):
    """The text model's probabilities of the training rows out of fold (each inner fold of
    `splitter` scored by a model of the others), so that a combiner does not learn to trust a
    model that has seen the row; and of the scored rows, by a model of all training rows."""
    out_of_fold = np.zeros(len(train))
    for fit, held in splitter.split(train):
        text = Candidate("text")([train[i] for i in fit], seeds, [train[i] for i in held])
        out_of_fold[held] = [p for _, p, _ in text]
    return out_of_fold, [p for _, p, _ in Candidate("text")(train, seeds, scored)]


class Boosted:
    """A gradient-boosted combiner (scikit-learn's HistGradientBoostingClassifier, fixed
    settings, not tuned) over `combiner_features`. The text probability it learns from is
    out-of-fold on the training months (5 inner folds), so it does not learn to trust a text
    model that has seen the row; the scored rows get the text model fitted on all of them."""

    kind = "boosted"

    def __init__(self, extra=False):
        self.extra = extra

    def __call__(self, train, seeds, scored):
        from sklearn.ensemble import HistGradientBoostingClassifier
        from sklearn.model_selection import KFold

        out_of_fold, text = text_both_ways(train, seeds, scored, KFold(5, shuffle=True, random_state=0))
        model = HistGradientBoostingClassifier(learning_rate=0.05, max_iter=200, max_leaf_nodes=15,
                                               min_samples_leaf=20, l2_regularization=1.0, random_state=0)
        model.fit([combiner_features(r, p, self.extra) for r, p in zip(train, out_of_fold, strict=True)],
                  [r["label"] for r in train],
                  sample_weight=row_weights(train))
        found = model.predict_proba([combiner_features(r, p, self.extra)
                                     for r, p in zip(scored, text, strict=True)])[:, 1]
        return [(r, float(p), 0.0) for r, p in zip(scored, found, strict=True)]


class LogitStack:
    """One logistic regression over the text model's logit (out of fold on the training
    months: 5 inner blocks in time order), the rule's value (clipped to [-2, 3]), whether the
    rule passes, and that times the logit: a combiner that can trust the text model less
    where the rule already said yes. Its probability is thresholded alone."""

    kind = "combined"

    def __call__(self, train, seeds, scored):
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import KFold

        out_of_fold, text = text_both_ways(train, seeds, scored, KFold(5))

        def features(p, row):
            logit = float(np.log(np.clip(p, 1e-4, 1 - 1e-4) / (1 - np.clip(p, 1e-4, 1 - 1e-4))))
            passes = float(row["rule"] >= 0.9)
            return [logit, max(-2.0, min(3.0, row["rule"])), passes, passes * logit]

        model = LogisticRegression(C=1.0, solver="liblinear", random_state=0)
        model.fit([features(p, r) for p, r in zip(out_of_fold, train, strict=True)],
                  [r["label"] for r in train],
                  sample_weight=row_weights(train))
        found = model.predict_proba([features(p, r) for p, r in zip(text, scored, strict=True)])[:, 1]
        return [(r, float(p), 0.0) for r, p in zip(scored, found, strict=True)]


class Authors:
    """The shipped hybrid with an author prior mixed into its text half: for a paper with an
    author seen in the training months, the best share of relevant papers among those
    authors' training papers (smoothed toward the training base rate); `beta` of it
    replaces as much of the text probability. A paper with no known author is unchanged."""

    kind = "hybrid"

    def __init__(self, beta, **base):
        self.beta, self.base = beta, base

    def __call__(self, train, seeds, scored):
        seen: dict[str, list[int]] = {}
        for r in train:
            for author in r.get("authors") or ():
                counts = seen.setdefault(author, [0, 0])
                counts[0] += r["label"] == 1
                counts[1] += 1
        base = sum(r["label"] == 1 for r in train) / len(train)
        found = []
        for r, text, rule in Candidate("hybrid", **self.base)(train, seeds, scored):
            prior = [(p + base) / (n + 1) for p, n in (seen[a] for a in r.get("authors") or () if a in seen)]
            found.append((r, (1 - self.beta) * text + self.beta * max(prior) if prior else text, rule))
        return found


def neighbour_prior(similar, train, k):
    """The share of relevant papers among the `k` training papers most similar to each scored
    one (`similar`: scored rows by training rows)."""
    nearest = np.argpartition(-similar, k, axis=1)[:, :k]
    return np.array([r["label"] for r in train], dtype=float)[nearest].mean(1)


def mixed_in(found, prior, beta):
    """The hybrid's (row, text, rule) triples with `beta` of each text probability replaced by
    the paper's `prior`."""
    return [(r, (1 - beta) * text + beta * q, rule) for (r, text, rule), q in zip(found, prior, strict=True)]


class Knn:
    """The shipped hybrid with a nearest-neighbour prior mixed into its text half: the share
    of relevant papers among the `k` training papers most similar to a scored one (cosine
    over the text model's NB-scaled grams, or with `tfidf` over TF-IDF of the grams);
    `beta` of it replaces as much of the text probability."""

    kind = "hybrid"

    def __init__(self, k, beta, tfidf=False):
        self.k, self.beta, self.tfidf = k, beta, tfidf

    def __call__(self, train, seeds, scored):
        model = Candidate("hybrid")
        found = model(train, seeds, scored)
        space = Candidate("text", nb=False) if self.tfidf else model  # rows L2-normalised either way
        near = space._text(train, self.tfidf)
        prior = neighbour_prior((space._text(scored, False) @ near.T).toarray(), train, self.k)
        return mixed_in(found, prior, self.beta)


class Gate:
    """A text weight that depends on the rule: `low` for papers whose rule value lies in
    (`above`, 1.0] (0.89: the one-RL-term band, from the rule's threshold 0.9 to 1.0; 0: every
    weak one, kept or not), `other` for the rest."""

    def __init__(self, above, low, other):
        self.above, self.low, self.other = above, low, other

    def __call__(self, row):
        return self.low if self.above < row["rule"] <= 1.0 else self.other


class Gated(Candidate):
    """The shipped hybrid, its weight chosen separately in a low band of the rule's value."""

    def __init__(self, above):
        super().__init__("hybrid")
        self.weights = tuple(Gate(above, low, other) for low in (0.0, 0.2, 0.4, 0.6, 0.8)
                             for other in (0.2, 0.3, 0.4, 0.5, 0.6))


class Local:
    """The shipped hybrid, plus a text model fitted only on the training papers the rule
    found something in (value not 0) and the seeds; for such a scored paper, `gamma` of its
    text probability is replaced by that model's."""

    kind = "hybrid"

    def __init__(self, gamma):
        self.gamma = gamma

    def __call__(self, train, seeds, scored):
        found = Candidate("hybrid")(train, seeds, scored)
        some = [i for i, r in enumerate(scored) if r["rule"] != 0]
        local = Candidate("text")([r for r in train if r["rule"] != 0], seeds, [scored[i] for i in some])
        for i, (_, p, _) in zip(some, local, strict=True):
            r, text, rule = found[i]
            found[i] = (r, (1 - self.gamma) * text + self.gamma * p, rule)
        return found


def embedding_key(row) -> str:
    """How a row's vector is filed: a dev row by its id, a seed (no id) by its title."""
    return row["id"] or "seed:" + row["title"]


@functools.cache
def embeddings() -> dict[str, np.ndarray]:
    """The vectors of the file RL_DIGEST_EMBEDDINGS names, by key, read once: they are made in a
    venv of their own (benchmarks/relevance_embed.py), so torch stays out of the project."""
    path = os.environ.get("RL_DIGEST_EMBEDDINGS")
    if not path:
        sys.exit("embed: set RL_DIGEST_EMBEDDINGS to the file benchmarks/relevance_embed.py wrote")
    found = np.load(path)
    return dict(zip(found["keys"].tolist(), found["vectors"], strict=True))


class Embed:
    """The shipped hybrid with a sentence-embedding model mixed into its text half: a balanced
    logistic regression (C `c`, borderline rows weighted 0.3) on the embeddings, or with `k` the
    share of relevant papers among the k training papers nearest by cosine; `beta` of it
    replaces as much of the text probability."""

    kind = "hybrid"

    def __init__(self, beta, c=1.0, k=None):
        self.beta, self.c, self.k = beta, c, k

    @staticmethod
    def vectors(rows):
        found = embeddings()
        return np.array([found[embedding_key(r)] for r in rows])

    def __call__(self, train, seeds, scored):
        from sklearn.linear_model import LogisticRegression

        found = Candidate("hybrid")(train, seeds, scored)
        if self.k:
            prior = neighbour_prior(self.vectors(scored) @ self.vectors(train).T, train, self.k)
        else:
            rows = train + seeds
            model = LogisticRegression(C=self.c, class_weight="balanced", solver="liblinear", random_state=0)
            model.fit(self.vectors(rows), [r["label"] for r in rows],
                      sample_weight=row_weights(rows))
            prior = model.predict_proba(self.vectors(scored))[:, 1]
        return mixed_in(found, prior, self.beta)


class Sentences:
    """Multiple instances: a sentence-level NB-LR (the shipped featurisation: presence of word
    1-2-grams with negation, each scaled by its naive-Bayes log-count ratio, L2-normalised,
    balanced logistic regression, C 16, borderline rows 0.3) fitted on the abstracts' sentences
    (pipeline/extract.py's splitter), each sentence inheriting its paper's label and weight
    (`title`: the title is an instance too; `em`: one EM-style pass, the positive papers'
    sentences re-weighted by their first-pass probability, normalised to the paper's best;
    `em="hard"`: mi-SVM style, a positive paper's sentences under 0.5 relabelled negative but
    its best one, the first pass out of fold (5 inner folds of papers)).
    A paper's score is an aggregate of its sentences' probabilities (`agg`: max, top2 = mean of
    the best two, noisy-or, lse = log-mean-exp of the logits); `beta` of it replaces as much of
    the shipped text probability, or (`third`) it is a third half with its own weight, chosen on
    earlier months with the other two."""

    kind = "hybrid"
    _cache: dict = {}

    def __init__(self, agg, beta=None, title=False, em=False, third=False):
        self.agg, self.beta, self.title, self.em, self.third = agg, beta, title, em, third
        if third:
            self.weights = tuple(Third(w, v) for w in (0.2, 0.3, 0.4, 0.5) for v in (0.1, 0.2, 0.3)
                                 if w + v < 0.9)

    @staticmethod
    def instances(rows, title):
        """(grams of each instance, index of its paper)."""
        from pipeline import extract, grams

        texts, owner = [], []
        for i, r in enumerate(rows):
            pieces = extract.sentences(r.get("abstract") or "")
            if title or not pieces:  # a seed (title only) has no other instance
                pieces = [r["title"], *pieces]
            texts += pieces
            owner += [i] * len(pieces)
        found = grams.strings(grams.words(texts), len(texts))
        return [dict.fromkeys(g, 1) for g in found], np.array(owner)

    def _fit(self, train, seeds, scored):
        from sklearn.feature_extraction import DictVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import normalize

        from pipeline import learn

        rows = train + seeds
        docs, owner = self.instances(rows, self.title)
        y = np.array([rows[i]["label"] for i in owner])
        weights = np.array(row_weights(rows))[owner]
        words = DictVectorizer()
        counts = words.fit_transform(docs)
        keep = np.flatnonzero(np.asarray((counts > 0).sum(0)).ravel() >= 3)
        present = counts[:, keep] > 0

        def fit(w, labels=y, part=slice(None)):
            s = learn.log_count_ratio(present[part].astype(float), labels[part], w[part])
            m = LogisticRegression(C=16.0, class_weight="balanced", solver="liblinear", random_state=0)
            m.fit(normalize(present[part].multiply(s).tocsr()), labels[part], sample_weight=w[part])
            return s, m

        def predict(s, m, part=slice(None)):
            return m.predict_proba(normalize(present[part].multiply(s).tocsr()))[:, 1]

        scale, model = fit(weights)
        if self.em == "hard":  # mi-SVM style: a positive paper's sentences under 0.5 become negative
            # instances, its best one stays positive. The first pass is out of fold (5 inner folds
            # of papers): in sample the fit has memorised its sentences and would relabel almost none
            from sklearn.model_selection import KFold

            p = np.zeros(len(y))
            for fit_papers, held_papers in KFold(5, shuffle=True, random_state=0).split(rows):
                inside, held = np.isin(owner, fit_papers), np.isin(owner, held_papers)
                p[held] = predict(*fit(weights, part=inside), part=held)
            best = np.zeros(len(rows))
            np.maximum.at(best, owner, p)
            under = (y == 1) & (p < best[owner]) & (p < 0.5)
            if os.environ.get("MIL_VERBOSE"):
                print(f"relabelled {under.sum()} of {(y == 1).sum()} positive instances", flush=True)
            scale, model = fit(weights, np.where(under, 0, y))
        elif self.em:  # soft: a positive paper's sentences weighted by their probability / its best
            p = predict(scale, model)
            best = np.zeros(len(rows))
            np.maximum.at(best, owner, p)
            scale, model = fit(weights * np.where(y == 1, p / np.maximum(best[owner], 1e-9), 1.0))
        sdocs, sowner = self.instances(scored, self.title)
        x = normalize((words.transform(sdocs)[:, keep] > 0).multiply(scale).tocsr())
        p = model.predict_proba(x)[:, 1]
        return [p[sowner == i] for i in range(len(scored))]

    def __call__(self, train, seeds, scored):
        key = (self.title, self.em, len(train), scored[0]["id"], len(scored))
        if key not in self._cache:
            self._cache[key] = (Candidate("hybrid")(train, seeds, scored), self._fit(train, seeds, scored))
        found, probs = self._cache[key]
        prior = [aggregate(p, self.agg) for p in probs]
        if self.third:
            return [(dict(r, mil=q), text, rule) for (r, text, rule), q in zip(found, prior, strict=True)]
        return mixed_in(found, prior, self.beta)


def aggregate(p, how):
    p = np.sort(np.asarray(p))[::-1]
    if how == "max":
        return float(p[0])
    if how == "top2":
        return float(p[:2].mean())
    if how == "noisy-or":
        return float(1 - np.prod(1 - p))
    if how == "lse":  # log-mean-exp of the logits: between their mean and their max
        q = np.clip(p, 1e-6, 1 - 1e-6)
        z = np.log(q / (1 - q))
        z = z.max() + np.log(np.mean(np.exp(z - z.max())))
        return float(1 / (1 + np.exp(-z)))
    raise ValueError(how)


class Third:
    """w x text + v x the sentence aggregate (the row's "mil") + (1 - w - v) x rule."""

    def __init__(self, w, v):
        self.w, self.v = w, v

    def combine(self, row, a, b):
        return self.w * a + self.v * row["mil"] + (1 - self.w - self.v) * b

    def __repr__(self):
        return f"{self.w}+{self.v}"


CANDIDATES = {
    "shipped": [("hybrid (shipped recipe)", Candidate("hybrid")), ("text model alone", Candidate("text"))],
    "tfidf": [("hybrid, TF-IDF with the title twice (shipped before)", Candidate("hybrid", nb=False)),
              ("TF-IDF text model alone", Candidate("text", nb=False))],
    "roles": [(f"hybrid + words tagged by sentence kind, C {c}", Candidate("hybrid", c=c, roles=True))
              for c in (4, 16)],
    "logit-stack": [("one regression over the text logit, the rule's value, its pass and their product",
                     LogitStack())],
    "stacked": [(f"stacked, C {c}, alpha {a}", Candidate("stacked", c=c, alpha=a))
                for c in (4, 16) for a in (0.3, 1.0, 3.0)],
    "rule-features": [("rule features alone (C 1)", Candidate("rule", c=1.0)),
                      ("hybrid, rule half = rule features", Candidate("hybrid", rule_features=True))],
    "categories": [("hybrid + categories", Candidate("hybrid", categories=True)),
                   ("stacked + categories", Candidate("stacked", categories=True))],
    "borderline": [(f"hybrid, borderline weight {b}", Candidate("hybrid", borderline=b))
                   for b in (0.1, 0.5, 1.0)],
    "C": [(f"hybrid, C {c}", Candidate("hybrid", c=c)) for c in (2, 8, 32)],
    "char": [("hybrid + char 3-5-grams", Candidate("hybrid", c=8, char=True))],
    "fields": [(f"hybrid, title and abstract as separate vocabularies, C {c}",
                Candidate("hybrid", c=c, fields=True)) for c in (4, 16)],
    "svm": [(f"hybrid, linear SVM (Platt-calibrated, 5 inner folds), C {c}",
             Candidate("hybrid", c=c, svm=True)) for c in (0.1, 1.0)],
    "authors": [(f"hybrid, author prior mixed into the text half, beta {b}", Authors(b))
                for b in (0.1, 0.2, 0.3, 0.5)],
    "authors+": [(f"hybrid with {name}, author prior beta {b}", Authors(b, **base)) for b in (0.2, 0.3)
                 for name, base in (("C 8", {"c": 8.0}), ("separate vocabularies, C 16", {"fields": True}),
                                    ("borderline weight 0.1", {"borderline": 0.1}))],
    "boosted": [("boosted combiner: text (out of fold), rule, reasons", Boosted()),
                ("boosted combiner + categories, lengths, comment", Boosted(extra=True))],
    "knn": [(f"hybrid, {k}-nearest-neighbour prior ({space}) mixed into the text half, beta {b}",
             Knn(k, b, tfidf=space == "TF-IDF")) for space in ("NB-scaled", "TF-IDF")
            for k in (10, 30) for b in (0.2, 0.4)],
    "gated": [(f"hybrid, its own weight for rule values in ({above}, 1.0]", Gated(above))
              for above in (0.89, 0.0)],
    "local": [(f"hybrid + a text model of the papers the rule found something in, gamma {g}", Local(g))
              for g in (0.3, 0.5, 1.0)],
    "embed": [(f"hybrid, embedding LR (C {c}) {'in place of' if b == 1.0 else 'mixed into'} the text half"
               + ("" if b == 1.0 else f", beta {b}"), Embed(b, c=c))
              for c in (1.0, 4.0) for b in (0.3, 0.5, 1.0)]
             + [(f"hybrid, {k}-nearest-neighbour prior (embedding cosine) mixed into the text half, beta {b}",
                 Embed(b, k=k)) for k in (10, 30, 50) for b in (0.2, 0.3, 0.4)],
    "mil": [(f"hybrid, sentence-level NB-LR ({agg}) mixed into the text half, beta {b}", Sentences(agg, b))
            for agg in ("max", "top2", "noisy-or", "lse") for b in (0.2, 0.3, 0.5)]
           + [(f"hybrid, sentence-level NB-LR ({agg}) in place of the text half", Sentences(agg, 1.0))
              for agg in ("max", "top2")]
           + [(f"hybrid, sentence-level NB-LR ({agg}) as a third half", Sentences(agg, third=True))
              for agg in ("max", "top2", "lse")],
    "mil-title": [(f"hybrid, sentence-level NB-LR, title an instance ({agg}) mixed into the text half, "
                   f"beta {b}", Sentences(agg, b, title=True))
                  for agg in ("max", "top2", "lse") for b in (0.2, 0.3, 0.5)],
    "mil-hard": [(f"hybrid, sentence-level NB-LR, mi-SVM-style relabelling ({agg}) mixed into the text half, "
                  f"beta {b}", Sentences(agg, b, em="hard"))
                 for agg in ("max", "top2") for b in (0.2, 0.3, 0.5)],
    "mil-em": [(f"hybrid, sentence-level NB-LR, one EM pass ({agg}) mixed into the text half, beta {b}",
                Sentences(agg, b, em=True)) for agg in ("max", "top2", "lse") for b in (0.2, 0.3, 0.5)],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"some of: {', '.join(CANDIDATES)}")
    args = parser.parse_args()
    unknown = set(args.names) - set(CANDIDATES)
    if unknown:
        parser.error(f"no candidate {', '.join(sorted(unknown))}")

    from pipeline import config, grams, learn, rank

    relevance = config.load(ROOT / "config.yaml").relevance
    rows, seeds = corpus(relevance)
    rules = rank.compile_rules(relevance)
    found = learn.features_many([r["title"] for r in rows + seeds],
                                [r.get("abstract") or "" for r in rows + seeds])
    texts = [text for r in rows + seeds for text in (r["title"], r.get("abstract") or "")]
    fields = grams.strings(grams.words(texts), len(texts))
    for row, title, abstract in zip(rows + seeds, fields[0::2], fields[1::2], strict=True):
        row["fields"] = dict.fromkeys(abstract, 1) | {"title " + gram: 1 for gram in title}
    for row, features in zip(rows + seeds, found, strict=True):
        row["abstract"] = row.get("abstract") or ""
        row["roles"] = sentence_roles(row["abstract"])
        score = rank.score(row["title"], row["abstract"], rules)
        row["rule"], row["reasons"] = score.value, score.reasons
        row["features"] = features
    for name in args.names or CANDIDATES:
        for label, candidate in CANDIDATES[name]:
            folds = time_folds(rows, seeds, candidate)
            weights = getattr(candidate, "weights", None) or (
                (0.2, 0.3, 0.4, 0.5, 0.6) if candidate.kind == "hybrid" else (1.0,))
            # a combiner's probability is its own calibration: its cut may lie above 0.6
            relevance_model.THRESHOLDS = WIDE if candidate.kind == "combined" else THRESHOLDS
            pooled, made, choices, per_fold = nested(folds, weights)
            scored = [x for f in folds[1:] for x in f]
            w, t = choose(scored, weights)
            optimistic = both([m >= t for m in mix(w, scored)], pooled)
            p, r, pc, rc = both(made, pooled)
            spread = [min(x, y) for x, y in per_fold]
            print(f"{label}: P {p:.3f} R {r:.3f}, non-borderline P {pc:.3f} R {rc:.3f}; "
                  f"min(P, R) per fold {min(spread):.3f}-{max(spread):.3f}; "
                  f"optimistic P {optimistic[0]:.3f} R {optimistic[1]:.3f} (at {w}/{t}); "
                  f"nested choices {', '.join(f'{a}/{b}' for a, b in choices)}",
                  flush=True)


if __name__ == "__main__":
    main()
