"""The learned half of relevance, and what a reader teaches it.

A rule explains why; a text model reads what a rule cannot (who is being trained).
Neither alone generalises best: the hybrid AVERAGES the text model's probability with
a calibrated version of the rule's score (a logistic fit of the label on the rule's
value, a sigmoid about its threshold), as measured in benchmarks/relevance.md. The
rule's output is not a feature of the text model: on the data the rule was tuned on,
the model would just copy it.

The text model reads which word 1-2-grams a paper has (in title or abstract), each
scaled by its naive-Bayes log-count ratio (how much more often relevant papers hold it),
L2-normalised, into a logistic regression with balanced classes: NB-LR (Wang and Manning,
2012), which beat TF-IDF with the title counted twice on the time folds of
benchmarks/relevance.md. It ships as numpy arrays (grams, scales, coefficients: `pack`,
`load`), an install's refit is kept in its state the same way, and it scores batches in
numpy (pipeline/grams.py); only a refit (after `rl-digest mark`) imports scikit-learn.
The decision made with it, the reader's profile after it, is decide.py's.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import math
import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache, cached_property
from importlib.resources import files
from itertools import chain
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

import numpy as np

from pipeline import grams
from pipeline.extract import withdrawn
from pipeline.models import Paper

if TYPE_CHECKING:
    from pipeline.config_sections import Relevance

MODEL_FILE = "relevance_model.npz"
TRAIN_FILE = "relevance_train.jsonl.gz"
BORDERLINE_WEIGHT = 0.3  # a row a reasonable annotator could flip teaches less
VERDICT_WEIGHT = 5.0  # the install's own verdicts (rl-digest mark) are few and precious
READER_WEIGHT = 2.0  # a reader's 👍/👎 from an email: a quick click, weighed below a mark
TAUGHT_C = 3.0  # the "like the reader's marks" model: few positives, so regularised more
TAUGHT_CUT = 0.1  # its probability from which the reader's marks decide (balanced classes)
SEED = 0

_CHUNK = 128  # papers per numpy pass: its arrays (about 2 MB) stay in the cache


def features_many(titles: Sequence[str], abstracts: Sequence[str]) -> list[dict[str, int]]:
    """Where each gram (pipeline/grams.py) of each paper is: 1 in the abstract, 2 in the
    title, 3 in both. The model reads presence; the benchmarks' TF-IDF candidates read where."""
    texts = [text for pair in zip(titles, abstracts, strict=True) for text in pair]
    found = grams.strings(grams.words(texts), len(texts))
    out = []
    for title, abstract in zip(found[0::2], found[1::2], strict=True):
        counts = dict.fromkeys(abstract, 1)
        for gram in set(title):
            counts[gram] = counts.get(gram, 0) + 2
        out.append(counts)
    return out


def features(title: str, abstract: str) -> dict[str, int]:
    return features_many([title], [abstract])[0]


@dataclass(frozen=True, eq=False)
class TextModel:
    """Logistic regression over the L2-normalised presence of `features`, each gram scaled:
    its grams in one newline-joined string (split only when `terms` is asked for), their
    scale and coefficient as arrays, and a hash table from gram to row for scoring."""

    vocabulary: str
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    @cached_property
    def _table(self) -> tuple[grams.Table, np.ndarray, np.ndarray]:
        """The grams' hashes in order, with scale x coefficient and scale squared beside them:
        built on the first score (`status` shows a refit's version without it)."""
        return (grams.Table.build(grams.hash_joined(self.vocabulary, "\n")),
                self.scale * self.coef, self.scale * self.scale)

    @classmethod
    def of(cls, terms: Mapping[str, Sequence[float]], intercept: float) -> TextModel:
        """From gram -> (scale, coefficient); the grams are kept in sorted order."""
        ordered = sorted(terms)
        pairs = np.array([terms[gram] for gram in ordered], dtype=float).reshape(-1, 2)
        return cls("\n".join(ordered), pairs[:, 0].copy(), pairs[:, 1].copy(), intercept)

    @cached_property
    def terms(self) -> dict[str, tuple[float, float]]:
        """gram -> (scale, coefficient)."""
        names = self.vocabulary.split("\n") if self.vocabulary else []
        return dict(zip(names, zip(self.scale.tolist(), self.coef.tolist(), strict=True), strict=True))

    def contributions(self, title: str, abstract: str) -> dict[str, float]:
        """Each known gram's share of the logit (its normalised scale times its coefficient)."""
        weighted = {gram: self.terms[gram] for gram in features(title, abstract) if gram in self.terms}
        norm = math.sqrt(sum(v * v for v, _ in weighted.values())) or 1.0
        return {gram: v / norm * coef for gram, (v, coef) in weighted.items()}

    def probability(self, title: str, abstract: str) -> float:
        return self.probabilities([title], [abstract])[0]

    def probabilities(self, titles: Sequence[str], abstracts: Sequence[str]) -> list[float]:
        """The same sum as `contributions`, for many papers at once in numpy (the hot path
        of ranking: a Python loop per word was most of its time)."""
        out: list[float] = []
        for at in range(0, len(titles), _CHUNK):
            out += self._chunk(titles[at:at + _CHUNK], abstracts[at:at + _CHUNK])
        return out

    def _chunk(self, titles: Sequence[str], abstracts: Sequence[str]) -> list[float]:
        known, scale_coef, scale_square = self._table
        texts = [text for pair in zip(titles, abstracts, strict=True) for text in pair]
        hashes, text = grams.hashed(grams.words(texts))
        where = known.find(hashes)
        hit = where >= 0
        # keys (paper, gram) sorted and distinct: the grams each paper holds, title or abstract
        width = len(scale_coef)
        keys = np.sort((text[hit] >> 1) * width + where[hit])
        keys = keys[_firsts(keys)]
        paper, gram = keys // width, keys % width
        n = len(titles)
        dot = np.bincount(paper, weights=scale_coef[gram], minlength=n)
        square = np.bincount(paper, weights=scale_square[gram], minlength=n)
        logit = self.intercept + np.divide(dot, np.sqrt(square), out=np.zeros(n), where=square > 0)
        return (1.0 / (1.0 + np.exp(-np.maximum(logit, -40.0)))).tolist()

    def strongest(self, title: str, abstract: str, n: int = 6) -> list[tuple[str, float]]:
        """The grams that pushed this paper's probability most, either way."""
        found = self.contributions(title, abstract)
        return sorted(found.items(), key=lambda item: -abs(item[1]))[:n]


def _firsts(ordered: np.ndarray) -> np.ndarray:
    """Where each run of equal values in a sorted array begins."""
    return np.concatenate((ordered[:1] == ordered[:1], ordered[1:] != ordered[:-1]))


@dataclass(frozen=True)
class Hybrid:
    """text weight x P(text) + (1 - text weight) x sigmoid(slope x (rule value - offset)).

    A refit adds `taught`: a model of "papers like those the reader marked" (marked rows
    against the shipped ones). Where it fires, the reader has said what they want and the
    rule's generic view steps aside: the refitted text model alone decides.
    """

    text: TextModel
    rule_slope: float
    rule_offset: float
    text_weight: float
    threshold: float
    version: str
    verdicts: int = 0  # reader verdicts in its training data
    taught: TextModel | None = None

    def rule_probability(self, value: float) -> float:
        return _sigmoid(self.rule_slope * (value - self.rule_offset))

    def probability(self, title: str, abstract: str, rule_value: float) -> float:
        text = self.text.probability(title, abstract)
        return self.text_weight * text + (1 - self.text_weight) * self.rule_probability(rule_value)

    def decide(self, titles: Sequence[str], abstracts: Sequence[str],
               rule_values: Sequence[float]) -> list[tuple[float, bool, bool]]:
        """(probability, relevant, whether the reader's marks decided) of each paper."""
        texts = self.text.probabilities(titles, abstracts)
        taught = self.taught.probabilities(titles, abstracts) if self.taught else [0.0] * len(texts)
        out = []
        for text, like, value in zip(texts, taught, rule_values, strict=True):
            if like >= TAUGHT_CUT:
                out.append((text, text >= 0.5, True))
            else:
                mixed = self.text_weight * text + (1 - self.text_weight) * self.rule_probability(value)
                out.append((mixed, mixed >= self.threshold, False))
        return out

    def meta(self) -> dict[str, Any]:
        """Everything but the grams."""
        return {"version": self.version, "verdicts": self.verdicts, "intercept": self.text.intercept,
                "rule_slope": self.rule_slope, "rule_offset": self.rule_offset,
                "text_weight": self.text_weight, "threshold": self.threshold}

    def to_dict(self) -> dict[str, Any]:
        data = {**self.meta(), "terms": _terms(self.text)}
        if self.taught is not None:
            data["taught"] = {"intercept": self.taught.intercept, "terms": _terms(self.taught)}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hybrid:
        taught = data.get("taught")
        return cls(_text(data), data["rule_slope"], data["rule_offset"], data["text_weight"],
                   data["threshold"], data["version"], data.get("verdicts", 0),
                   _text(taught) if taught else None)


def _terms(model: TextModel) -> dict[str, list[float]]:
    return {gram: list(pair) for gram, pair in model.terms.items()}


def _text(data: Mapping[str, Any]) -> TextModel:
    return TextModel.of(data["terms"], data["intercept"])


def _sigmoid(x: float) -> float:
    if x < -40:
        return 0.0
    return 1.0 / (1.0 + math.exp(-x))


def version_of(data: Mapping[str, Any]) -> str:
    """A short hash of everything that decides the scores."""
    body = {k: v for k, v in data.items() if k not in ("version", "check")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]


# --- the shipped model and its training rows -------------------------------------------

def pack(model: Hybrid, check: Sequence[Mapping[str, Any]] = (), level: int = 9) -> bytes:
    """The model as numpy arrays in a zip (what np.load reads): the grams as one newline-joined
    string, their scales and coefficients as float64 (the very numbers fitted), the rest (and
    `check`, the scores the training run gave a few texts) as JSON; a refit's taught model
    beside them (`taught_`). Loading that takes a few milliseconds where parsing 40,000 grams
    of JSON took a hundred or more. Fixed timestamps: the same model, the same bytes. `level`:
    deflate's, 9 for the shipped file; a refit's 600,000 grams deflate 3 times faster at 6, 1 % larger."""
    meta = {**model.meta(), "check": list(check)}
    arrays = {"vocabulary": np.frombuffer(model.text.vocabulary.encode(), dtype=np.uint8),
              "scale": model.text.scale, "coef": model.text.coef}
    if model.taught is not None:
        meta["taught_intercept"] = model.taught.intercept
        arrays |= {"taught_vocabulary": np.frombuffer(model.taught.vocabulary.encode(), dtype=np.uint8),
                   "taught_scale": model.taught.scale, "taught_coef": model.taught.coef}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        meta_array = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)
        for name, array in {"meta": meta_array, **arrays}.items():
            buffer = io.BytesIO()
            np.save(buffer, array, allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            archive.writestr(info, buffer.getvalue(), zipfile.ZIP_DEFLATED, level)
    return out.getvalue()


def save(model: Hybrid, path: Path, check: Sequence[Mapping[str, Any]] = ()) -> None:
    """Write the model as the package ships it (`pack`)."""
    if model.taught is not None:
        raise ValueError("a reader's refit lives in the install's state, not in a model file")
    path.write_bytes(pack(model, check))


def load(handle: IO[bytes]) -> tuple[Hybrid, list[dict[str, Any]]]:
    """(model, check) from bytes written by `pack`."""
    with np.load(handle, allow_pickle=False) as found:
        meta = json.loads(found["meta"].tobytes())

        def text(prefix: str, intercept: float) -> TextModel:
            return TextModel(found[f"{prefix}vocabulary"].tobytes().decode(), found[f"{prefix}scale"],
                             found[f"{prefix}coef"], intercept)

        taught = text("taught_", meta["taught_intercept"]) if "taught_intercept" in meta else None
        return Hybrid(text("", meta["intercept"]), meta["rule_slope"], meta["rule_offset"],
                      meta["text_weight"], meta["threshold"], meta["version"], meta["verdicts"],
                      taught), meta["check"]


@cache
def _shipped_file() -> tuple[Hybrid, list[dict[str, Any]]]:
    with files("pipeline").joinpath("data", MODEL_FILE).open("rb") as handle:
        return load(handle)


def shipped() -> Hybrid:
    """The model built by `make model`, inside the package."""
    return _shipped_file()[0]


def shipped_check() -> list[dict[str, Any]]:
    """The scores the training run gave a few texts (tests compare them)."""
    return _shipped_file()[1]


def training_rows() -> list[dict[str, Any]]:
    """The labelled rows the shipped model learnt from (dev corpus and seed titles)."""
    raw = gzip.decompress(files("pipeline").joinpath("data", TRAIN_FILE).read_bytes())
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


# --- fitting --------------------------------------------------------------------------

@dataclass(frozen=True)
class Counts:
    """The papers' term frequencies over every gram they hold: a refit fits twice on one."""

    matrix: Any  # scipy CSR, a row per paper, its grams in the order features_many gave them
    names: list[str]  # the grams, a column each
    df: np.ndarray  # papers holding each gram

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> Counts:
        """A chunk of papers at a time: every paper's grams as strings at once took 400 MB
        for 6,000 papers (what a refit on thousands of verdicts reads)."""
        from scipy.sparse import csr_matrix

        column: dict[str, int] = {}  # gram -> its column, in the order the papers hold them
        columns, tf, sizes = [], [], [0]
        for at in range(0, len(rows), _CHUNK):
            part = rows[at:at + _CHUNK]
            docs = features_many([r["title"] for r in part], [r.get("abstract") or "" for r in part])
            found = list(chain.from_iterable(docs))
            columns.append(np.fromiter((column.setdefault(gram, len(column)) for gram in found), np.intp,
                                       len(found)))
            tf.append(np.fromiter(chain.from_iterable(doc.values() for doc in docs), float, len(found)))
            sizes += [len(doc) for doc in docs]
        found_columns = np.concatenate([np.zeros(0, np.intp), *columns])
        matrix = csr_matrix((np.concatenate([np.zeros(0), *tf]), found_columns, np.cumsum(sizes)),
                            shape=(len(rows), len(column)))
        return cls(matrix, list(column), np.bincount(found_columns, minlength=len(column)))


def fit_text(rows: Sequence[Mapping[str, Any]], min_df: int = 3, c: float = 16.0,
             counts: Counts | None = None) -> TextModel:
    """Fit the text model on rows with title, abstract, label and optional borderline,
    verdict (a reader's own row) flags. Deterministic: liblinear with a fixed seed.
    `counts`: Counts.of(rows), when the caller has it already.

    A gram's scale is its `log_count_ratio`."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import normalize

    counts = counts or Counts.of(rows)
    mine = [i for i, r in enumerate(rows) if r.get("verdict")]
    kept = np.array(sorted(np.union1d(np.flatnonzero(counts.df >= min_df), counts.matrix[mine].indices),
                           key=counts.names.__getitem__), dtype=np.intp)  # a reader's rare words too; by gram
    present = (counts.matrix[:, kept] > 0).astype(float)  # each row's grams keep their order
    y = np.array([int(r["label"]) for r in rows])
    weights = np.array([r.get("weight", VERDICT_WEIGHT) if r.get("verdict") else
                        BORDERLINE_WEIGHT if r.get("borderline") else 1.0 for r in rows])
    scale = log_count_ratio(present, y, weights)
    model = LogisticRegression(C=c, class_weight="balanced", solver="liblinear", random_state=SEED)
    model.fit(normalize(present.multiply(scale).tocsr()), y, sample_weight=weights)
    coef = model.coef_[0]
    used = np.abs(coef) >= 1e-4
    return TextModel("\n".join(counts.names[i] for i in kept[used].tolist()),
                     _rounded(scale[used]), _rounded(coef[used]), round(float(model.intercept_[0]), 5))


def _rounded(values: np.ndarray) -> np.ndarray:
    """Each value to 5 places as Python's round gives it (numpy's may differ in the last bit)."""
    return np.array([round(v, 5) for v in values.tolist()], dtype=float)


def log_count_ratio(present: Any, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """|log-count ratio| of each column of a presence matrix: the log of its (weighted,
    add-one) share among the relevant rows' grams over its share among the others'. Its sign
    would only flip the coefficient's, so the absolute value keeps the model's meaning and the
    scales positive."""
    share = [1.0 + np.asarray(present.T @ (weights * (y == label))).ravel() for label in (1, 0)]
    return np.abs(np.log(share[0] / share[0].sum()) - np.log(share[1] / share[1].sum()))


def fit_rule_calibration(values: Sequence[float], labels: Sequence[int]) -> tuple[float, float]:
    """(slope, offset) of a logistic fit of the label on the rule's value (Platt scaling)."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=100.0, solver="liblinear", random_state=SEED)
    model.fit([[v] for v in values], labels)
    slope = float(model.coef_[0][0])
    return round(slope, 5), round(-float(model.intercept_[0]) / slope, 5)


def build(text: TextModel, slope: float, offset: float, text_weight: float, threshold: float,
          verdicts: int = 0, taught: TextModel | None = None) -> Hybrid:
    """A Hybrid whose version is the hash of its contents."""
    draft = Hybrid(text, slope, offset, text_weight, threshold, "", verdicts, taught)
    return replace(draft, version=_version(draft))


def _version(model: Hybrid) -> str:
    """`version_of(model.to_dict())` without the dict: its JSON hashed a few thousand grams at a
    time (a refit's 600,000 grams as Python objects took seconds and 150 MB). The grams are
    kept sorted, so the chunks' sorted JSON, joined, is the whole mapping's."""
    body: dict[str, Any] = {**model.meta(), "terms": "\0text"}
    if model.taught is not None:
        body["taught"] = {"intercept": model.taught.intercept, "terms": "\0taught"}
    digest = hashlib.sha256()
    for n, piece in enumerate(re.split(r'"\\u0000(text|taught)"', json.dumps(
            {k: v for k, v in body.items() if k != "version"}, sort_keys=True))):
        if n % 2 == 0:
            digest.update(piece.encode())
            continue
        text = model.text if piece == "text" else model.taught
        assert text is not None
        names = text.vocabulary.split("\n") if text.vocabulary else []
        digest.update(b"{")
        for at in range(0, len(names), 5000):
            pairs = zip(text.scale[at:at + 5000].tolist(), text.coef[at:at + 5000].tolist(), strict=True)
            chunk = json.dumps(dict(zip(names[at:at + 5000], map(list, pairs), strict=True)), sort_keys=True)
            digest.update(((", " if at else "") + chunk[1:-1]).encode())
        digest.update(b"}")
    return digest.hexdigest()[:12]


def refit(base: Hybrid, verdict_rows: Sequence[Mapping[str, Any]],
          shipped_rows: Sequence[Mapping[str, Any]] | None = None) -> Hybrid:
    """The text model refitted on the shipped rows plus the reader's verdicts (weighted up),
    and the model of papers like the marked ones against the shipped rows; the rule's
    calibration, the mix and the threshold stay as shipped."""
    mine: list[Mapping[str, Any]] = [{**row, "verdict": True} for row in verdict_rows]
    marked = {row["id"] for row in mine}  # the reader's verdict replaces the shipped label
    rows = [r for r in (training_rows() if shipped_rows is None else shipped_rows) if r["id"] not in marked]
    counts = Counts.of([*rows, *mine])
    text = fit_text([*rows, *mine], counts=counts)
    taught = fit_text([{**r, "label": 0} for r in rows] + [{**r, "label": 1} for r in mine], c=TAUGHT_C,
                      counts=counts)
    return build(text, base.rule_slope, base.rule_offset, base.text_weight, base.threshold,
                 len(mine), taught)


# --- the install's own model ------------------------------------------------------------

STATE_KEY = "relevance_model.npz"  # the refit as `pack` writes it (base64), its fingerprint and base
OLD_STATE_KEY = "relevance_model"  # before 2026-12: every gram as JSON, 17 MB with thousands of verdicts


class Verdicts(Protocol):
    """What the learning needs of the store: the install's marks, the readers' 👍/👎, and
    where its refit lives. Both kinds of verdict live in this install's store only, so one
    install's readers never teach another's model."""

    def marked(self, relevant: bool) -> list[Paper]: ...

    def readers_verdicts(self) -> list[tuple[Paper, bool]]: ...

    def get_state(self, key: str) -> Any: ...

    def set_state(self, key: str, value: Any) -> None: ...


def verdicts(store: Verdicts) -> list[tuple[Paper, bool, float]]:
    """(paper, relevant, weight) for every paper someone judged. The install's own verdict
    (`rl-digest mark`) weighs VERDICT_WEIGHT and wins over the readers'. Readers' 👍/👎
    (serve's feedback links) count by majority, one row per paper at READER_WEIGHT; a tie
    teaches nothing. A paper whose abstract is now arXiv's withdrawal notice teaches by its
    title: the verdict was on the paper, not on "withdrawn … an error"."""
    found = {p.id: (p, label, VERDICT_WEIGHT) for label in (True, False)
             for p in store.marked(relevant=label)}
    votes: dict[str, tuple[Paper, list[bool]]] = {}
    for paper, said in store.readers_verdicts():
        votes.setdefault(paper.id, (paper, []))[1].append(said)
    for pid, (paper, each) in votes.items():
        if pid not in found and (label := readers_say(each)) is not None:
            found[pid] = (paper, label, READER_WEIGHT)
    return [(replace(p, abstract="") if withdrawn(None, p.abstract) else p, label, weight)
            for p, label, weight in found.values()]


def readers_say(said: Iterable[bool]) -> bool | None:
    """What readers' 👍 (True) and 👎 on one paper teach: their majority; None on a tie."""
    balance = sum(1 if up else -1 for up in said)
    return balance > 0 if balance else None


def judged(store: Verdicts) -> tuple[list[Paper], list[Paper]]:
    """(relevant, not relevant) papers by `verdicts`: the taste that ranking leans towards."""
    found = verdicts(store)
    return [p for p, label, _ in found if label], [p for p, label, _ in found if not label]


def verdict_rows(store: Verdicts) -> list[dict[str, Any]]:
    """The verdicts as labelled, weighted rows for the refit."""
    return [{"id": p.id, "title": p.title, "abstract": p.abstract, "label": int(label), "weight": weight}
            for p, label, weight in verdicts(store)]


def current(cfg: Relevance, store: Verdicts, refit_now: bool = True, keep: bool = True) -> Hybrid | None:
    """The model this install scores with: None when `relevance.model` is off, the shipped
    one without verdicts, else a refit on the shipped rows plus the verdicts, kept in the
    install's state and redone only when the verdicts (or the shipped model) change.
    refit_now=False (status) takes the last refit as it is, if it was made from this shipped
    model; after an upgrade, the shipped model until the next run refits. keep=False (eval)
    refits without keeping it: only runs write the state, under the run lock."""
    if not cfg.model:
        return None
    base = shipped()
    stored = store.get_state(STATE_KEY) or store.get_state(OLD_STATE_KEY)
    # a refit from another shipped model (before an upgrade) is not this model's: its numbers
    # mean other things
    saved = stored if stored and stored.get("base") == base.version else None
    if not refit_now:
        return _stored_model(saved) if saved else base
    mine = verdict_rows(store)
    if not mine:
        if stored and keep:
            _keep(store, None)  # every verdict taken back
        return base
    made_from = fingerprint(base, mine)
    if saved and saved.get("fingerprint") == made_from:
        model = _stored_model(saved)
        if "npz" not in saved and keep:
            _keep(store, {"fingerprint": made_from, "base": base.version, "npz": _packed(model)})
        return model
    model = refit(base, mine)
    if keep:
        _keep(store, {"fingerprint": made_from, "base": base.version, "npz": _packed(model)})
    return model


def fingerprint(base: Hybrid, mine: Sequence[Mapping[str, Any]]) -> str:
    """What a refit is made from: the shipped model and the verdict rows (`verdict_rows`)."""
    return hashlib.sha256(json.dumps(
        [base.version, sorted((r["id"], r["label"], r["weight"]) for r in mine)]).encode()).hexdigest()[:16]


def _stored_model(saved: Mapping[str, Any]) -> Hybrid:
    """The refit in the install's state: `pack`'s bytes, or the JSON of releases before them,
    which the next run rewrites as bytes (the same model: a quarter of the bytes, loaded 30
    times faster)."""
    if "npz" in saved:
        return load(io.BytesIO(base64.b64decode(saved["npz"])))[0]
    return Hybrid.from_dict(saved)


def _packed(model: Hybrid) -> str:
    return base64.b64encode(pack(model, level=6)).decode("ascii")


def _keep(store: Verdicts, entry: Mapping[str, Any] | None) -> None:
    """Store the refit under STATE_KEY (None: forget it), never the old JSON beside it."""
    store.set_state(STATE_KEY, entry)
    store.set_state(OLD_STATE_KEY, None)


def band(cfg: Any) -> tuple[float, float]:
    """(threshold, grey band) of the stored score: the model's when it is on, else the rule's."""
    return (shipped().threshold, cfg.model_grey_band) if cfg.model else (cfg.threshold, cfg.grey_band)
