"""Build the shipped relevance model, and measure it: 5-fold CV by time, the learning scenario.

    .venv/bin/python benchmarks/relevance_model.py            # CV table, then write the model
    .venv/bin/python benchmarks/relevance_model.py --check    # CV table and scenario, write nothing
    make model                                                # the same as the first line

The model is the text half of pipeline/learn.py (NB-LR: which 1-2-grams a paper has,
each scaled by its naive-Bayes log-count ratio, into a balanced logistic regression,
borderline rows weighted 0.3) trained on
../shared/data/arxiv_dev.jsonl plus the built-in seed titles as positives; the
rule's calibration (Platt), the mixing weight and the threshold are chosen by
cross-validation with folds by time: the corpus sorted by listing date is cut into
six blocks and fold k trains on blocks 0..k-1 and scores block k (five folds, each
trained on earlier months only). Deterministic: liblinear with a fixed seed.
Writes pipeline/data/relevance_model.npz and relevance_train.jsonl.gz.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

from _common import ROOT, dev_rows, table

BLOCKS = 6
WEIGHTS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7)
THRESHOLDS = tuple(round(0.30 + 0.025 * i, 3) for i in range(13))
CHECK_TEXTS = (  # scores recorded in the model file; tests/test_learn.py compares them
    ("GRPO for LLM reasoning", "We train a large language model with GRPO and verifiable rewards."),
    ("Deep Q-learning for robot arms", "A policy for a robot arm trained with deep Q-learning."),
    ("A survey of retrieval-augmented generation", "We review RAG for large language models."),
)
# RL or preference optimisation for image and video generators: LABELING says 0 (borderline),
# a reader may want it
IMAGE_KIND = re.compile(r"text-to-image|text-to-video|image generation|video generation|image editing|"
                        r"diffusion model|flow matching|visual generation|t2i\b", re.I)
RL_KIND = re.compile(r"reinforcement|grpo|dpo\b|rlhf|reward|preference optimi[sz]", re.I)


def corpus(relevance):
    """Dev rows in time order with their rule values, and the seed titles as positives."""
    from pipeline import rank
    from pipeline.config import bundled
    from pipeline.sources.seeds import load_seeds

    rules = rank.compile_rules(relevance)
    rows = sorted(dev_rows(), key=lambda r: (r["listed_date"], r["id"]))
    for row in rows:
        row["rule"] = rank.score(row["title"], row.get("abstract") or "", rules).value
    seeds = [{"id": "", "title": e.title, "abstract": "", "label": 1}
             for doc in load_seeds([bundled("seeds")]) for e in doc.entries]
    return rows, seeds


def hybrid_halves(train, seeds, scored):
    """(row, P(text), P(rule)) of the `scored` rows, both halves fitted on `train` (+ seeds)."""
    from pipeline import learn

    text = learn.fit_text(train + seeds)
    slope, offset = learn.fit_rule_calibration([r["rule"] for r in train], [r["label"] for r in train])
    rule = learn.Hybrid(text, slope, offset, 0.0, 0.5, "")
    texts = text.probabilities([r["title"] for r in scored], [r["abstract"] for r in scored])
    return [(r, t, rule.rule_probability(r["rule"])) for r, t in zip(scored, texts, strict=True)]


def time_folds(rows, seeds, fit=hybrid_halves):
    """Out-of-fold (row, a, b) scores: fold k (1..5) fitted on blocks 0..k-1, scoring block k;
    first the inner fold of fold 1 (the earlier half of block 0 scoring the later half)."""
    n = len(rows)
    blocks = [rows[i * n // BLOCKS:(i + 1) * n // BLOCKS] for i in range(BLOCKS)]
    half = len(blocks[0]) // 2
    folds = [fit(blocks[0][:half], seeds, blocks[0][half:])]
    for k in range(1, BLOCKS):
        train = [r for block in blocks[:k] for r in block]
        folds.append(fit(train, seeds, blocks[k]))
        print(f"fold {k}: trained on {len(train)} rows up to {train[-1]['listed_date']}, "
              f"scored {len(blocks[k])} to {blocks[k][-1]['listed_date']}", flush=True)
    return folds


def counts(decisions, rows):
    tp = sum(d and r["label"] for d, r in zip(decisions, rows, strict=True))
    fp = sum(d and not r["label"] for d, r in zip(decisions, rows, strict=True))
    fn = sum(not d and r["label"] for d, r in zip(decisions, rows, strict=True))
    return tp / max(1, tp + fp), tp / max(1, tp + fn), tp, fp, fn


def both(decisions, rows):
    """P and R on all rows and on non-borderline rows."""
    clear = [i for i, r in enumerate(rows) if not r.get("borderline")]
    a = counts(decisions, rows)
    c = counts([decisions[i] for i in clear], [rows[i] for i in clear])
    return a[:2] + c[:2]


def mix(w, scored) -> list[float]:
    """w x a + (1 - w) x b of each (row, a, b); `w` may be a function of the row (a weight
    that depends on the rule's value: relevance_candidates.py's `gated`)."""
    found = []
    for row, a, b in scored:
        if hasattr(w, "combine"):  # a mix of more than two halves (relevance_candidates.py's `mil`)
            found.append(w.combine(row, a, b))
            continue
        weight = w(row) if callable(w) else w
        found.append(weight * a + (1 - weight) * b)
    return found


def choose(scored, weights=WEIGHTS):
    """The weight and threshold with the best min(P, R) over all rows (ties: non-borderline)."""
    rows = [r for r, _, _ in scored]
    best = None
    for w in weights:
        mixed = mix(w, scored)
        for t in THRESHOLDS:
            p, r, pc, rc = both([m >= t for m in mixed], rows)
            key = (round(min(p, r), 3), min(pc, rc))
            if best is None or key > best[0]:
                best = (key, w, t)
    return best[1], best[2]


def nested(folds, weights=WEIGHTS):
    """Decisions on the five outer folds, each with the weight and threshold chosen on earlier
    months only (fold 1 on its inner fold, fold k on folds 1..k-1): no choice sees its test
    fold. Returns (rows, decisions, the choices, (P, R) of each fold)."""
    rows, decisions, choices, per_fold = [], [], [], []
    for k in range(1, len(folds)):
        w, t = choose(folds[0] if k == 1 else [x for f in folds[1:k] for x in f], weights)
        made = [m >= t for m in mix(w, folds[k])]
        rows += [r for r, _, _ in folds[k]]
        decisions += made
        choices.append((w, t))
        per_fold.append(counts(made, [r for r, _, _ in folds[k]])[:2])
    return rows, decisions, choices, per_fold


def cv_table(folds, relevance, weight, threshold) -> str:
    """The rule, the text model and the hybrid on the pooled outer folds."""
    scored = [x for f in folds[1:] for x in f]
    rows = [r for r, _, _ in scored]
    text_rows, text_made, text_choices, _ = nested(folds, weights=(1.0,))
    _, made, choices, per_fold = nested(folds)
    spread = [min(p, r) for p, r in per_fold]
    lines = [
        (f"rule alone (threshold {relevance.threshold:.2f})", rows,
         [r["rule"] >= relevance.threshold for r in rows]),
        (f"text model alone (cut chosen on earlier months: "
         f"{', '.join(f'{t:.3f}' for _, t in text_choices)})",
         text_rows, text_made),
        (f"hybrid, weight and threshold chosen on earlier months "
         f"({', '.join(f'{w}/{t}' for w, t in choices)})",
         rows, made),
        (f"hybrid at the shipped {weight:.2f} x text, threshold {threshold:.3f} (chosen on these folds: "
         "optimistic)", rows, [weight * a + (1 - weight) * b >= threshold for _, a, b in scored]),
    ]
    head = ["scorer (pooled over 5 time folds)", "P all", "R all", "P non-borderline", "R non-borderline"]
    return (table(head,
                  [[name, *(f"{v:.3f}" for v in both(d, r))] for name, r, d in lines])
            + f"\nhybrid, min(P, R) per fold: {', '.join(f'{v:.3f}' for v in spread)}")


def scenario(rows, seeds, weight, threshold) -> str:
    """A reader marks 30 papers of RL for image/video generators relevant (LABELING: 0,
    borderline). The rest of that kind is held out of every training set (papers still to
    come), and so is the latest sixth of everything else, on which precision is measured."""
    from pipeline import learn

    kind = [r for r in rows if not r["label"] and r.get("borderline")
            and IMAGE_KIND.search(r["title"] + " " + r["abstract"])
            and RL_KIND.search(r["title"] + " " + r["abstract"])]
    marked, later = kind[:30], kind[30:]
    kind_ids = {r["id"] for r in kind}
    rest = [r for r in rows if r["id"] not in kind_ids]
    train, held = rest[:len(rest) * 5 // 6], rest[len(rest) * 5 // 6:]
    slope, offset = learn.fit_rule_calibration([r["rule"] for r in train], [r["label"] for r in train])
    base = learn.build(learn.fit_text(train + seeds), slope, offset, weight, threshold)
    marks = [{"id": r["id"], "title": r["title"], "abstract": r["abstract"], "label": 1} for r in marked]
    taught = learn.refit(base, marks, train + seeds)
    result = []
    for name, model in (("before (trained without the kind)", base), ("after 30 marks", taught)):
        kept = decide(model, later)
        p, _, tp, fp, _ = counts(decide(model, held), held)
        result.append([name, f"{sum(kept)}/{len(later)} ({sum(kept) / len(later):.0%})",
                       f"{p:.3f} ({tp} tp, {fp} fp)"])
    sweep, shipped_cut = [], learn.TAUGHT_CUT
    for cut in (0.05, 0.1, 0.2, 0.3, 0.5):
        learn.TAUGHT_CUT = cut
        kept = sum(decide(taught, later))
        p = counts(decide(taught, held), held)[0]
        sweep.append([cut, f"{kept}/{len(later)}", f"{p:.3f}"])
    learn.TAUGHT_CUT = shipped_cut
    return (f"{len(kind)} dev papers of the kind; the first 30 by date are marked relevant, the other "
            f"{len(later)} are scored; precision on the latest {len(held)} other papers\n"
            + table(["model", "other papers of the kind included", "precision on everything else"], result)
            + f"\n\nthe cut of the 'like papers you marked' model (shipped: {learn.TAUGHT_CUT})\n"
            + table(["cut", "kind included", "precision else"], sweep))


def decide(model, rows) -> list[bool]:
    made = model.decide([r["title"] for r in rows], [r["abstract"] for r in rows], [r["rule"] for r in rows])
    return [relevant for _, relevant, _ in made]


def write_model(rows, seeds, weight, threshold) -> Path:
    from pipeline import learn

    text = learn.fit_text(rows + seeds)
    slope, offset = learn.fit_rule_calibration([r["rule"] for r in rows], [r["label"] for r in rows])
    model = learn.build(text, slope, offset, weight, threshold)
    check = [{"title": t, "abstract": a, "text": round(model.text.probability(t, a), 6)}
             for t, a in CHECK_TEXTS]
    folder = ROOT / "pipeline" / "data"
    folder.mkdir(exist_ok=True)
    path = folder / learn.MODEL_FILE
    learn.save(model, path, check)
    train = [{k: r[k] for k in ("id", "title", "abstract", "label") if k in r}
             | ({"borderline": True} if r.get("borderline") else {}) for r in rows + seeds]
    lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in train)
    (folder / learn.TRAIN_FILE).write_bytes(gzip.compress(lines.encode("utf-8"), 9, mtime=0))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {len(model.text.terms)} terms, "
          f"version {model.version})")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--check", action="store_true", help="measure only; write no model")
    parser.add_argument("--scenario", action="store_true", help="only the learning scenario, with the "
                        "shipped weight and threshold")
    args = parser.parse_args()

    from pipeline import config

    relevance = config.load(args.config).relevance
    rows, seeds = corpus(relevance)
    if args.scenario:
        from pipeline import learn

        print(scenario(rows, seeds, learn.shipped().text_weight, learn.shipped().threshold))
        return
    folds = time_folds(rows, seeds)
    weight, threshold = choose([x for f in folds[1:] for x in f])
    print(cv_table(folds, relevance, weight, threshold))
    print()
    print(scenario(rows, seeds, weight, threshold))
    if not args.check:
        write_model(rows, seeds, weight, threshold)


if __name__ == "__main__":
    main()
