"""The relevance rule on the labelled dev corpus: slices, threshold sweep, ablations, cross-check.

    .venv/bin/python benchmarks/relevance.py [--config config.yaml]

Prints the tables of benchmarks/relevance.md. Each ablation turns one part of the rule
off through the config alone (no code change), so it shows what that part is worth:

- negation: no `negation_cues` ("without RL" counts like "with RL");
- edges: `edge_weight` 1 (first and last sentences count like the others);
- subject: `subject_weight` out of reach (an LM that only helps a non-LM subject counts);
- sentence roles: every RL mention counts fully (`background_weight`, `plain_weight` 1).

The cross-check re-picks only the threshold on one slice and scores the other, so it shows
how much the figures move between corpora of a different make. Last, `seed_weight`: how much
similarity to the built-in seed titles would change.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import ROOT, dev_rows, table


def figures(rows, rules) -> list:
    from pipeline import rank_eval

    e = rank_eval.evaluate(rows, rules)
    return [len(rows), f"{e.precision:.3f}", f"{e.recall:.3f}", f"{e.f1:.3f}", e.tp, e.fp, e.tn, e.fn]


def best_threshold(rows, relevance, floor: float = 0.90) -> float:
    """The threshold with the best precision at recall >= floor (else the best recall)."""
    from pipeline import rank, rank_eval

    best = None
    for step in range(5, 21):
        cut = step / 10
        e = rank_eval.evaluate(rows, rank.compile_rules(relevance.model_copy(update={"threshold": cut})))
        key = (e.recall >= floor, e.precision if e.recall >= floor else e.recall)
        if best is None or key > best[0]:
            best = (key, cut)
    return best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--speed", action="store_true", help="only the speed lines")
    args = parser.parse_args()

    from pipeline import config, rank, rank_eval
    from pipeline.config import bundled
    from pipeline.sources.seeds import load_seeds

    relevance = config.load(args.config).relevance
    rules = rank.compile_rules(relevance)
    rows = dev_rows()
    if args.speed:
        print(speed(rows, relevance))
        return
    part1 = [r for r in rows if str(r.get("source", "")).startswith("dw-dengwei")]
    part2 = [r for r in rows if not str(r.get("source", "")).startswith("dw-dengwei")]
    clear = [r for r in rows if not r.get("borderline")]

    head = ["slice", "papers", "P", "R", "F1", "tp", "fp", "tn", "fn"]
    print(table(head, [
        ["all", *figures(rows, rules)],
        ["part 1 (keyword-enriched)", *figures(part1, rules)],
        ["part 2 (natural prevalence)", *figures(part2, rules)],
        ["borderline rows left out", *figures(clear, rules)],
    ]))

    print()
    sweep = []
    for cut in (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.5):
        changed = rank.compile_rules(relevance.model_copy(update={"threshold": cut}))
        sweep.append([cut, *figures(rows, changed)[1:]])
    print(table(["threshold", "P", "R", "F1", "tp", "fp", "tn", "fn"], sweep))

    print()
    ablations = {
        "shipped": {},
        "no negation cues": {"negation_cues": []},
        "edge sentences count fully": {"edge_weight": 1.0},
        "no subject rule": {"subject_weight": 1e9},
        "no sentence roles": {"background_weight": 1.0, "plain_weight": 1.0, "edge_weight": 1.0},
    }
    print(table(["rule", "P", "R", "F1", "tp", "fp", "tn", "fn"], [
        [name, *figures(rows, rank.compile_rules(relevance.model_copy(update=change)))[1:]]
        for name, change in ablations.items()
    ]))

    print()
    cross = []
    for name, fit, held in (("part 1 -> part 2", part1, part2), ("part 2 -> part 1", part2, part1)):
        cut = best_threshold(fit, relevance)
        cross.append([name, cut, *figures(held, rank.compile_rules(relevance.model_copy(
            update={"threshold": cut})))[1:]])
    print(table(["threshold picked on -> scored on", "threshold", "P", "R", "F1", "tp", "fp", "tn", "fn"],
                cross))

    print()
    seeds = [(e.title, e.title) for doc in load_seeds([bundled("seeds")]) for e in doc.entries]
    exemplars = rank.build_exemplars(seeds)
    similar = []
    for weight in (0.0, 0.5, 1.0, 2.0):
        changed = rank.compile_rules(relevance.model_copy(update={"seed_weight": weight}))
        e = rank_eval.evaluate(rows, changed, exemplars)
        similar.append([weight, f"{e.precision:.3f}", f"{e.recall:.3f}", f"{e.f1:.3f}", e.tp, e.fp])
    print(f"similarity to the {len(seeds)} built-in seed titles:")
    print(table(["seed_weight", "P", "R", "F1", "tp", "fp"], similar))

    print()
    print(speed(rows, relevance))


def speed(rows, relevance, repeat: int = 5) -> str:
    """Papers per second, rule alone and rule + shipped model + profile (the best of `repeat`
    passes over the dev corpus, wall clock and CPU time), and the model's load time in a fresh
    interpreter (what every run pays once). Run it on one core: taskset -c 0."""
    import os
    import subprocess
    import sys
    import time

    from pipeline import decide, learn, rank, rank_eval

    load = subprocess.run([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, sys.argv[1]); t, c = time.perf_counter(), time.process_time(); "
        "from pipeline import learn; learn.shipped(); "
        "print(time.perf_counter() - t, time.process_time() - c)"), str(ROOT)],
        capture_output=True, text=True, check=True).stdout.split()
    model, profile, rules = learn.shipped(), decide.Profile.compile(relevance), rank.compile_rules(relevance)

    def then(rows, scores):
        papers = [(r["title"], r.get("abstract") or "", r.get("authors") or ()) for r in rows]
        return decide.decide_all(papers, scores, model, profile)

    lines = [f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"]
    for name, final in (("rule alone", None), ("rule + model + profile", then)):
        wall = cpu = float("inf")
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            rank_eval.evaluate(rows, rules, then=final)
            wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
        lines.append(f"speed, {name}: {len(rows) / wall:,.0f} papers/s wall clock, {len(rows) / cpu:,.0f} "
                     f"papers/s of CPU time ({len(rows)} papers, best of {repeat})")
    lines.append(f"loading the shipped model: {float(load[0]) * 1000:.0f} ms, {float(load[1]) * 1000:.0f} ms "
                 f"of CPU (import included); load average after: "
                 f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
