"""Importance: relevance plus what says a paper matters to this reader, part by part;
through the CLI it orders the full entries and `status --paper` explains it."""

from __future__ import annotations

from dataclasses import replace

from pipeline import importance
from pipeline.config_sections import Importance as Weights
from tests.helpers import DAY, full_config, rl_paper
from tests.servers.arxiv_server import ArxivServer
from tests.test_entries_cli import outputs

WEIGHTS = Weights()


def test_each_part_counts_and_the_total_is_their_sum():
    plain = rl_paper(1, DAY)
    shipped = replace(rl_paper(2, DAY), comment="Accepted at NeurIPS 2026. Code: https://github.com/ada/grpo")
    followed = replace(rl_paper(3, DAY), authors=("Grace Hopper",))
    revised = replace(rl_paper(4, DAY), version=2)
    liked = replace(rl_paper(5, DAY), title="Reward hacking under RLHF",
                    abstract="Policies exploit the reward model; reward hacking grows with optimisation.")
    disliked = replace(rl_paper(6, DAY), title="Quantum annealing schedules",
                       abstract="Annealing schedules for quantum hardware and spin glasses.")
    taste = importance.Taste(
        liked=(importance.text_of("Reward hacking in RLHF", "reward model exploitation and reward hacking"),),
        disliked=(importance.text_of("Quantum annealing", "annealing schedules for spin glasses"),),
        marked=frozenset({revised.id}), authors=frozenset({"grace hopper"}))
    papers = [plain, shipped, followed, revised, liked, disliked]
    found = importance.weigh(papers, {p.id: 0.5 for p in papers}, taste, WEIGHTS)
    assert found[shipped.id].code == 0.1 and found[shipped.id].venue == 0.1
    assert found[plain.id].code == 0 and found[plain.id].venue == 0
    assert found[followed.id].authors == 0.5 and found[plain.id].authors == 0
    assert found[revised.id].revision == 0.3 and found[plain.id].revision == 0
    assert found[liked.id].similarity > 0.3 > found[plain.id].similarity
    assert found[disliked.id].irrelevant < -0.3 and found[plain.id].irrelevant > -0.1
    for weighed in found.values():
        assert weighed.relevance == 0.5
        assert abs(weighed.total - sum(v for _, v in weighed.parts())) < 1e-3
    order = sorted(papers, key=lambda p: -found[p.id].total)
    assert order[0] == liked and order[-1] == disliked
    assert importance.weigh(papers, {}, importance.Taste(), WEIGHTS)[plain.id].total == 0


def test_importance_orders_the_full_entries_and_status_explains_it(tmp_path, cli):
    papers = [rl_paper(i, DAY) for i in range(1, 4)]
    # The three are equally relevant; the last's code and venue alone lift it to the one full
    # entry (a followed author would lift its relevance too, and relevance order would pass).
    papers[2] = replace(papers[2], comment="Accepted at ICML 2027. Code: https://github.com/grace/rl")
    with ArxivServer(papers) as arxiv:
        config = full_config(tmp_path, arxiv, enrich={"provider": "none"},
                             digest={"max_papers": 1, "featured": 0})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        explained = cli("--config", str(config), "status", "--paper", papers[2].id).stdout
        plain = cli("--config", str(config), "status", "--paper", papers[0].id).stdout
    md = outputs(tmp_path, "2026-11-02")["md"]
    week = md.split("## 本周论文 · This week's papers", 1)[1]
    full = [ln for ln in week.splitlines() if ln.startswith("- **[")]
    assert len(full) == 1 and "GRPO variant 3 for" in full[0]  # the one with code and venue
    line = next(ln for ln in explained.splitlines() if "importance:" in ln)
    assert "code +0.10" in line and "venue +0.10" in line and "authors +0.00" in line
    assert "relevance +" in line and "similarity +" in line and "irrelevant " in line
    other = next(ln for ln in plain.splitlines() if "importance:" in ln)
    assert "code +0.00" in other and "authors +0.00" in other
    assert line.endswith(" irrelevant +0.00")  # nothing marked irrelevant: not "-0.00" (README's sample)
