"""The reading list at 100,000 stored papers (make test-slow): every file GitHub has to
render stays under 500 KB, and every paper is in its topic's files and its month's."""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from pipeline import config as cfg
from pipeline import reading_list
from pipeline.models import Paper, Scored, paper_key
from pipeline.store import Store
from pipeline.store_schema import enrichments, now_iso
from tests.helpers import write_config

N = 100_000
WORDS = ("policy optimisation reward model verifier rollout credit assignment agentic multi-turn tool "
         "reasoning exploration entropy scaling curriculum preference alignment distillation "
         "multimodal vision-language long-horizon web agents sparse rewards group relative").split()
ZH = "强化学习大模型推理奖励验证器策略优化智能体探索多轮工具使用对齐蒸馏多模态长程信用分配"


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def build(store: Store, topics: list[str]) -> None:
    """Papers over three years (as benchmarks/reading_list.py spreads them), topics skewed
    (the first takes a third), titles and summaries of real lengths, some code and venues."""
    rng = random.Random(20)
    end = datetime(2026, 11, 30, tzinfo=UTC)
    span = timedelta(days=3 * 365)
    weights = [len(topics) * 2] + [2] * (len(topics) - 1)
    for start in range(0, N, 10_000):
        papers, scores, cache = [], [], []
        for k in range(start, start + 10_000):
            day = end - span * (k + 0.5) / N
            code = f" Code: https://github.com/lab-{k}/project-{k}." if k % 3 == 0 else ""
            paper = Paper(id=f"{26 - k // 40_000}{k % 12 + 1:02d}.{k:05d}",
                          title=f"{sentence(rng, 9).capitalize()}: {sentence(rng, 5)} for LLMs",
                          abstract=sentence(rng, 150) + "." + code, authors=("Ada Lovelace", "Alan Turing"),
                          categories=("cs.LG",), submitted=day, updated=day,
                          comment="Accepted at NeurIPS 2026" if k % 10 == 0 else None)
            papers.append(paper)
            scores.append(Scored(paper.id, 2.0, True, (), rng.choices(topics, weights)[0]))
            zh = "".join(rng.choice(ZH) for _ in range(120)) + "。"
            cache.append(dict(key="paper_summary:" + hashlib.sha256(paper.id.encode()).hexdigest(),
                              item_key=paper_key(paper.id), kind="paper_summary", created=now_iso(),
                              data={"summary_zh": zh, "summary_en": sentence(rng, 35) + ".",
                                    "title_zh": "".join(rng.choice(ZH) for _ in range(25))}))
        store.upsert_papers(papers)
        store.set_scores(scores)
        with store.tx() as conn:
            conn.execute(sa.insert(enrichments), cache)


@pytest.mark.slow
def test_every_reading_list_file_stays_under_500_kb_at_100000_papers(tmp_path):
    config = cfg.load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    build(store, [t.key for t in config.topics])
    files = reading_list.publish(config, store, "2026-11-30")
    store.close()
    sizes = {name: path.stat().st_size for name, path in files.items()}
    assert max(sizes.values()) < 500_000, max(sizes.items(), key=lambda kv: kv[1])
    rows = {"topic": 0, "month": 0}
    for name, path in files.items():
        if name.startswith("reading-list/"):
            kind = "month" if name[len("reading-list/")].isdigit() else "topic"
            rows[kind] += sum(1 for line in path.read_text(encoding="utf-8").splitlines()
                              if line.startswith("| ["))
    assert rows == {"topic": N, "month": N}
    assert len(files) < 400  # a few hundred files, not one per paper
