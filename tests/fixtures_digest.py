"""A fixed Digest for the render tests: hostile titles, both languages, every kind of entry.

Nothing here varies between runs, so the golden files compare byte for byte.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from pipeline import compose, render, trends
from pipeline.config_sections import Bilingual, Topic, TopicDef
from pipeline.models import Digest, Entry, Highlight, Paper, Part, Row, Section, TopicWeeks, Trends, Update

TOPICS = [
    TopicDef(key="algorithms", name=Bilingual(zh="算法与目标", en="Algorithms and objectives"), terms=[]),
    TopicDef(key="rewards", name=Bilingual(zh="奖励模型与验证器", en="Reward models and verifiers"), terms=[]),
    TopicDef(key="agentic", name=Bilingual(zh="智能体与多轮强化学习", en="Agentic and multi-turn RL"),
             terms=[]),
    TopicDef(key="multimodal", name=Bilingual(zh="多模态强化学习", en="Multimodal RL"), terms=[]),
    TopicDef(key="analysis", name=Bilingual(zh="综述与分析", en="Surveys and analyses"), terms=[]),
]
NAMES = {t.key: t.name for t in TOPICS}

INTRO_ZH = ("强化学习（Reinforcement Learning, RL）是通过与环境交互、根据奖励信号优化策略的机器学习范式。"
            "在 LLM 领域，RL 被广泛应用于后训练阶段，通过 RLHF、RLVR、DPO、GRPO 等方法对模型进行对齐和能力增强。")
INTRO_EN = ("Reinforcement learning optimises a policy from reward signals gathered by interacting "
            "with an environment. For LLMs it drives post-training: RLHF, RLVR, DPO and GRPO align "
            "models and extend what they can do.")


def config(languages=("zh", "en"), templates_dir: Path | None = None, base_url: str | None = None,
           unsubscribe_url: str | None = None) -> render.Settings:
    """render's settings, fixed here so the bundled config.yaml can change freely."""
    return render.Settings(
        topic=Topic(name=Bilingual(zh="强化学习", en="Reinforcement Learning for LLMs"),
                    intro=Bilingual(zh=INTRO_ZH, en=INTRO_EN)),
        languages=tuple(languages),
        topic_names={t.key: (t.name.zh, t.name.en) for t in TOPICS},
        base_url=base_url.rstrip("/") + "/" if base_url else None,
        unsubscribe_url=unsubscribe_url, templates=templates_dir, timezone="Asia/Shanghai",
    )


def section(key: str, entries: list[Entry]) -> Section:
    return Section(key, NAMES[key].zh, NAMES[key].en, tuple(entries))


SCRIPT = Entry(
    key="arxiv:2611.00001", title="<script>alert(1)</script> Policy Optimisation for LLM Reasoning",
    topic="algorithms", url="https://arxiv.org/abs/2611.00001", date="2026-11-27",
    authors=("Jane Doe <jane@example.org>", "Wei Zhang", "A. N. Other", "Fourth Author"),
    categories=("cs.LG", "cs.CL"), score=3.5,
    summary_zh="我们提出一种新的策略优化方法，在数学推理基准上将 GRPO 的样本效率提高了一倍。",
    summary_en="A new policy-optimisation method that doubles GRPO's sample efficiency on maths.",
    abstract="We propose <b>X</b>. It works.", version=3, revised=True, llm=True,
)
PIPES = Entry(
    key="seed:pipes", title="a | b: Pipes in Titles Break Tables", topic="algorithms",
    url="https://arxiv.org/abs/2611.00002", date="2026-11-25",
    summary_zh="标题中的竖线 | 不应破坏表格，*星号* 也不应变成强调。", curated=True,
)
BOLD = Entry(
    key="arxiv:2611.00003", title="**bold** claims and [x](http://evil)", topic="algorithms",
    url="https://arxiv.org/abs/2611.00003", date="2026-11-24",
    authors=("Solo Author",), categories=("cs.AI",), score=1.5,
    summary_en="We study credit assignment for multi-turn tool use with <i>sparse</i> rewards.",
    abstract="We study credit assignment for multi-turn tool use with <i>sparse</i> rewards. More.",
)
ALPHA = Entry(
    key="arxiv:2611.00004", title="$\\alpha_t$ & <b> Advantage:\nMulti-turn Credit Assignment",
    topic="agentic", url="https://arxiv.org/abs/2611.00004", date="2026-11-28",
    authors=("Li Hua", "Carol <c@d.org>"), categories=("cs.CL",), score=2.0,
    summary_zh="我们用优势函数 $\\alpha_t$ 为多轮智能体分配信用 | 并在网页导航任务上验证；详见 http://evil.example/x 。",
    summary_en="Per-turn advantages $\\alpha_t$ for agents (see www.evil.example and a_b_c); "
               "\u0008no <img src=x onerror=alert(1)> here.",
    llm=True,
)
LONG = Entry(
    key="arxiv:2611.00005", title="Recursive Agent Optimization", topic="agentic",
    url="https://arxiv.org/abs/2611.00005", date="2026-11-26",
    authors=("Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov"),
    categories=("cs.LG", "cs.AI", "cs.MA"), score=2.5,
    summary_zh="我们引入了递归代理优化（RAO），这是一种用于训练递归代理的强化学习方法：可以递归地生成子任务"
               "并将其委托给自身的新实例的代理。实验表明，RAO 在长程任务上显著优于单一代理基线，"
               "并且在训练和推理时的计算开销都更低。",
    summary_en="RAO trains agents that recursively spawn sub-tasks and delegate them to fresh "
               "instances of themselves, beating single-agent baselines on long-horizon tasks "
               "while costing less compute at training and inference time.",
    llm=True,
)
PRISM = Entry(
    key="seed:prism", title="PRISM: Distribution Alignment between SFT and RLVR for Multimodal Reasoning",
    topic="multimodal", url="https://arxiv.org/abs/2611.00006", date="2026-11-20",
    authors=("Author One", "Author Two"), categories=("cs.CV", "cs.LG"), curated=True,
    summary_zh="PRISM 在 SFT 与 RLVR 之间插入分布对齐阶段。",
    headline_zh="PRISM 发现标准 SFT→RLVR 流程中的核心问题：SFT 阶段引入的分布漂移在多模态推理中被放大。",
    headline_en="PRISM finds the weakness of the usual SFT→RLVR recipe: SFT's drift is amplified.",
    parts=(
        Part("解决方案", "Approach", "在 SFT 和 RLVR 之间插入分布对齐阶段。",
             "An alignment stage between SFT and RLVR."),
        Part("关键发现", "Key findings", "在 GRPO、DAPO、GSPO 下均获得一致提升。",
             "Consistent gains under GRPO, DAPO and GSPO <em>everywhere</em>."),
        Part("启示", "", "训练流程可以改进。", None),
    ),
)
HACKING = Entry(
    key="arxiv:2611.00007", title="Exploration Hacking: Can LLMs Learn to Resist RL Training?",
    topic="analysis", url="https://arxiv.org/abs/2611.00007", date="2026-11-21",
    authors=("Eve Adversary",), categories=("cs.LG",), score=4.0, version=2, revised=True,
    summary_zh="LLM 可能在 RL 训练中学会策略性地改变探索行为。",
    summary_en="LLMs may learn to steer their own exploration during RL training.",
    headline_zh="Exploration Hacking 揭示了一个此前未被关注的风险。",
    headline_en="A risk nobody had looked at: models that steer their own RL training.",
    parts=(
        Part("实验设计", "Experiment", "通过微调创建“选择性 RL 抵抗”的模型生物。",
             "Model organisms fine-tuned to resist RL | selectively."),
        Part("核心警示", "Warning", "探索黑客攻击是现实威胁。", "Exploration hacking is a real threat."),
    ),
    llm=True,
)


# Built from a Paper the way a run builds it: TeX in the title, links and a venue in the
# abstract and comment, and a `javascript:` link that must stay dead text.
LAMBDA_PAPER = Paper(
    id="2611.00008", version=1,
    title="GRPO-$\\lambda$: \\textsc{Eligibility} Traces for $\\alpha$-RL",
    abstract=("Group-relative policy optimisation assigns one advantage to a whole response. "
              "We propose GRPO-$\\lambda$, which spreads credit over tokens with eligibility traces. "
              "Code: https://github.com/example-lab/grpo-lambda. Weights: "
              "https://huggingface.co/example-lab/grpo-lambda-7b; data at "
              "huggingface.co/datasets/example-lab/traces. Do not click javascript:alert(1) "
              "or [this](javascript:alert(document.cookie))."),
    authors=("Mei Lin", "Omar Haddad"), categories=("cs.LG", "cs.CL"),
    comment="Accepted at NeurIPS 2026. 9 pages, 3 figures",
    submitted=datetime(2026, 11, 27, 9, tzinfo=UTC),
)
LAMBDA = compose.paper_entry(LAMBDA_PAPER, "algorithms", 3.0, {
    "title_zh": "GRPO-$\\lambda$：用资格迹为 $\\alpha$-RL 分配信用",
    "summary_zh": "本文提出了 GRPO-λ，通过资格迹把奖励分配到各个 token，从而缓解长回答的信用分配问题。",
    "summary_en": "GRPO-λ spreads each reward over tokens with eligibility traces.",
    "why_zh": "它让 GRPO 不再对整条回答使用同一个优势值。",
    "why_en": "It stops GRPO from giving every token of a response the same advantage.",
    "kind": "method",
    "key_points_zh": ["资格迹", "token 级信用"], "key_points_en": ["eligibility traces", "token credit"],
})
# No LLM: the English line is the abstract's contribution sentence, not its first one.
OFFLINE = compose.paper_entry(Paper(
    id="2611.00009", title="Verifier Drift in RLVR", version=2,
    abstract=("Verifiers are widely used to reward reasoning. However, they drift. "
              "We show that verifier drift explains most reward hacking in RLVR runs. "
              "We release our logs."),
    authors=("Ana Souza",), categories=("cs.LG",), comment="ICLR 2026 (oral)",
    submitted=datetime(2026, 11, 26, 9, tzinfo=UTC),
), "rewards", 1.0)
UPDATE = Update(
    key="arxiv:2610.00042", title="Sparse $\\beta$-Rewards for Long Agents",
    url="https://arxiv.org/abs/2610.00042", title_zh="面向长程智能体的稀疏 β 奖励",
    changes=(("version", "1", "3"), ("venue", "", "ICLR 2027 <b>"),
             ("code", "", "https://github.com/example-lab/sparse-beta")),
)


# A paper beyond digest.max_papers: one line under its topic.
BRIEF = Entry(
    key="arxiv:2611.00010", title="Rubric Rewards | for Open-Ended Writing", topic="rewards",
    url="https://arxiv.org/abs/2611.00010", date="2026-11-25", score=0.5,
    title_zh="面向开放式写作的评分细则奖励", summary_en="Rubric rewards for writing.", llm=True,
)


HOSTILE_TOPIC = TopicWeeks("tools", "<b>工具</b> & 智能体", "Tools <script> & 'agents' | *x*", (0, None, 3, 7))
WEEKS = (TopicWeeks("algorithms", NAMES["algorithms"].zh, NAMES["algorithms"].en, (4, None, 19, 31)),
         TopicWeeks("rewards", NAMES["rewards"].zh, NAMES["rewards"].en, (2, None, 12, 4)),
         TopicWeeks("agentic", NAMES["agentic"].zh, NAMES["agentic"].en, (0, None, 1, 2)),
         HOSTILE_TOPIC)
# Four weeks, one without a digest; movers as trends.movers finds them.
TRENDS = Trends(("2026-11-09", "2026-11-16", "2026-11-23", "2026-11-30"), WEEKS, trends.movers(WEEKS))


def digest() -> Digest:
    return Digest(
        id="2026-11-30", window_start="2026-11-23T08:00+08:00", window_end="2026-11-30T08:00+08:00",
        timezone="Asia/Shanghai",
        sections=(section("algorithms", [SCRIPT, LAMBDA, BOLD]),
                  replace(section("rewards", [OFFLINE]), brief=(BRIEF,)),
                  section("agentic", [ALPHA, LONG])),
        featured=(PRISM, HACKING), updates=(UPDATE,), pending_zh=2, curated=(PIPES,), first=True,
        comparison=(
            Row("视角", "Perspective", (("正面：提出解决方案", "constructive: a fix"),
                                         ("反面：发现新问题", "critical: a new risk"))),
            Row("核心问题", "Core problem", (("SFT 分布漂移", "SFT drift"),
                                              ("探索行为被操纵 | 对抗", "manipulated | exploration"))),
            Row("涉及算法", "", (("GRPO, DAPO, GSPO", ""), ("通用 RL 训练", ""))),
            Row("启示", "Implication", (("训练流程可以改进", "the recipe can improve"),)),  # a cell short
        ),
        synthesis_zh="LLM 的 RL 训练不仅面临技术效率问题（PRISM），还面临安全性问题（Exploration Hacking）。",
        synthesis_en="RL for LLMs faces questions of efficiency (PRISM) and of safety (Exploration Hacking).",
        new=7, revised=3, seeds=2, model="gpt-4o-mini",
        highlights=(
            Highlight(PRISM.key, PRISM.title, PRISM.url, "PRISM 在 SFT 与 RLVR 之间加入分布对齐，三种 RL 算法下均有提升。",
                      "PRISM aligns distributions between SFT and RLVR and gains under GRPO, DAPO and GSPO."),
            Highlight(HACKING.key, HACKING.title, HACKING.url, "模型可以在 RL 训练中操纵自己的探索 <b>。",
                      "Models can steer their own RL exploration | and so evade training."),
            Highlight(SCRIPT.key, SCRIPT.title, SCRIPT.url, "标题里的 <script> 不会变成标记。",
                      "A *hostile* title stays text."),
        ),
        question_zh="RL 后训练会出什么问题，如何修正？",
        question_en="What goes wrong in RL post-training of LLMs, and how is it fixed?",
        sources=("arXiv API", "RSS", "seeds"),
        categories=("cs.LG", "cs.CL", "cs.AI", "cs.CV", "cs.MA", "cs.RO", "stat.ML"),
        trends=TRENDS,
    )


def plain_digest() -> Digest:
    """No model, no comparison, no synthesis: the facts table and no invented prose."""
    return Digest(
        id="2026-12-07", window_start="2026-11-30T08:00+08:00", window_end="2026-12-07T08:00+08:00",
        timezone="Asia/Shanghai", sections=(section("agentic", [LONG]),),
        featured=(PRISM, HACKING), new=1, seeds=1, sources=("seeds",), categories=("cs.LG",),
    )


_ZH = ("我们提出一种新的强化学习方法，用于提升大型语言模型在数学推理和代码生成任务上的表现，"
       "并在多个基准上取得了一致的提升，同时降低了训练成本。")
_EN = ("We propose a reinforcement-learning method that improves large language models on "
       "mathematical reasoning and code generation, with consistent gains across benchmarks "
       "and a lower training cost than GRPO or PPO baselines.")


def many(n: int = 40, scale: int = 1) -> Digest:
    """A full week: `n` papers over five topics; `scale` multiplies the text of each."""
    keys = [t.key for t in TOPICS]
    entries: dict[str, list[Entry]] = {k: [] for k in keys}
    for i in range(n):
        key = keys[i % len(keys)]
        entries[key].append(Entry(
            key=f"arxiv:2611.{i:05d}",
            title=f"Paper {i}: Scalable Group-Relative Policy Optimisation with Verifiable Rewards",
            topic=key, url=f"https://arxiv.org/abs/2611.{i:05d}", date=f"2026-11-{1 + i % 28:02d}",
            authors=("First Author", "Second Author", "Third Author", "Fourth Author", "Fifth"),
            categories=("cs.LG", "cs.CL", "cs.AI"), score=float(n - i),
            summary_zh=_ZH * scale if i % 7 else None, summary_en=_EN * scale,
            abstract=_EN * 3 * scale, curated=i % 9 == 0, version=2 if i % 6 == 0 else 1,
            revised=i % 6 == 0, llm=True,
        ))
    base = digest()
    return Digest(
        id="2026-11-30", window_start=base.window_start, window_end=base.window_end,
        timezone=base.timezone, sections=tuple(section(k, v) for k, v in entries.items() if v),
        featured=base.featured, comparison=base.comparison, synthesis_zh=base.synthesis_zh,
        synthesis_en=base.synthesis_en, new=n, revised=n // 6, seeds=n // 9, model="gpt-4o-mini",
        sources=base.sources, categories=base.categories,
    )


def reading_entries() -> list[Entry]:
    """The reading list's input, in no particular order: the writer is handed them sorted."""
    return [BOLD, SCRIPT, PIPES, LONG, ALPHA, PRISM, HACKING, LAMBDA, OFFLINE]
