"""The relevance rule, topics and featured choice, against the shipped config.yaml.

Hand-written titles and abstracts, one per hard case of LABELING.md; no test
here needs ../shared except the dev-corpus check, which skips without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline import config, rank, rank_eval

REPO = Path(__file__).resolve().parents[1]
DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "arxiv_dev.jsonl"


@pytest.fixture(scope="module")
def cfg():
    return config.load(REPO / "config.yaml")


@pytest.fixture(scope="module")
def rules(cfg):
    return rank.compile_rules(cfg.relevance)


# --- relevance: LABELING.md hard cases ------------------------------------------------

CASES = {
    "vla-with-rl": (True,
        "Fine-Tuning Vision-Language-Action Models with Online Reinforcement Learning",
        ("Vision-language-action (VLA) models are usually trained by imitation. We fine-tune a "
         "pretrained VLA policy with PPO in simulation, using sparse task-success rewards. Our "
         "recipe improves success rates on manipulation benchmarks by 20% over supervised "
         "fine-tuning.")),
    "rl-on-text-to-image-diffusion": (False,
        "Flow-GRPO: Group Relative Policy Optimization for Text-to-Image Diffusion Models",
        ("We apply GRPO to text-to-image diffusion models. A vision-language model scores each "
         "generated image as the reward, and we optimize the diffusion model with policy "
         "optimization over denoising steps. Image generation quality improves on GenEval.")),
    "unified-multimodal-llm-generating-images": (True,
        "Reinforcing Unified Multimodal Models for Reasoning-Driven Image Generation",
        ("Unified multimodal large language models both understand and generate images. We "
         "post-train a unified autoregressive MLLM with GRPO, using its own understanding branch "
         "as the reward for text-to-image generation. The model improves on GenEval and on "
         "visual question answering.")),
    "vla-in-a-driving-title": (True,
        "Closed-Loop Exploration for Autonomous Driving VLA Models",
        ("Driving VLA models imitate expert trajectories and rarely explore. We fine-tune the VLA "
         "in a closed-loop simulator with group relative rewards for progress and safety. Collisions "
         "drop by a third on the nuPlan benchmark.")),
    "rl-on-an-image-generator-named-only-by-its-name": (False,
        "Structure-Preserving Texture Editing with Reinforcement Learning",
        ("We fine-tune Qwen-Image-Edit for texture editing: a cold-start stage on rendered "
         "scenes, then RL with a reward for preserved geometry. Edits keep the object's shape "
         "better than open and closed editors.")),
    "diffusion-language-model-with-rl": (True,
        "Reinforcement Learning for Masked Diffusion Language Models",
        ("Diffusion large language models such as LLaDA generate text by iterative unmasking. We "
         "propose a policy optimization method for diffusion language models that estimates "
         "sequence likelihoods efficiently, and train with verifiable rewards on math and code. "
         "Our method improves reasoning accuracy over supervised fine-tuning.")),
    "on-policy-distillation": (True,
        "On-Policy Distillation as an Alternative to RLVR",
        ("Reinforcement learning with verifiable rewards (RLVR) is costly. We study on-policy "
         "distillation, where the student samples its own rollouts and a teacher LLM provides "
         "dense token-level rewards. On math reasoning, on-policy distillation matches GRPO at a "
         "fraction of the compute.")),
    "plain-sft-distillation": (False,
        "Distilling Long Chain-of-Thought into Small Language Models",
        ("We distill reasoning traces from DeepSeek-R1 into a 7B student with supervised "
         "fine-tuning on 100K curated problems. The distilled model rivals larger models on AIME "
         "and outperforms RL baselines such as GRPO trained on the same data.")),
    "reward-model-for-rl": (True,
        "Training Generative Reward Models for RLHF",
        ("Reward models are central to reinforcement learning from human feedback. We train a "
         "generative reward model that reasons before judging, and use it as the reward in PPO "
         "training of a 7B LLM. Policies trained with our reward model win more often against "
         "strong baselines.")),
    "judge-benchmark-without-reward": (False,
        "JudgeBench: How Well Do LLM Judges Agree with Human Experts?",
        ("LLM-as-a-judge is widely used for evaluation. We collect 5,000 expert annotations "
         "across writing, coding and math, and measure the agreement of 20 proprietary and open "
         "LLM judges. Judges are biased towards longer answers and their own outputs.")),
    "llm-writes-rewards-for-non-llm-agent": (False,
        "Language Models Write Reward Functions for Quadruped Locomotion",
        ("We prompt GPT-4 to write reward functions for a PPO agent that controls a quadruped "
         "robot in MuJoCo. The generated rewards match expert-designed rewards on five "
         "locomotion tasks.")),
    "rl-trained-llm-router": (True,
        "Router-R1: Teaching LLM Routers to Orchestrate Models with Reinforcement Learning",
        ("We train an LLM-based router with GRPO to decide which candidate model to call at each "
         "step of a multi-round dialogue, with a reward that balances answer quality and cost. "
         "Router-R1 outperforms prompt-based and classifier routers on seven QA benchmarks.")),
    "jailbreak-with-rl-attacker": (True,
        "Red-Teaming Language Models with Reinforcement Learning Attackers",
        ("We train an attacker language model with reinforcement learning to generate jailbreak "
         "prompts against a target LLM. The attacker is rewarded for eliciting harmful responses "
         "while staying diverse. RL-trained attackers find more jailbreaks than prompt-based "
         "red-teaming.")),
    "prompt-only-jailbreak": (False,
        "A Simple Prompt-Based Jailbreak of Aligned Language Models",
        ("Safety-aligned LLMs, typically trained with RLHF, still follow harmful instructions "
         "when they are wrapped in role-play. We present a prompt template that jailbreaks GPT-4 "
         "and Llama-3 with a 90% success rate without any optimization.")),
    "rl-survey": (True,
        "A Survey of Reinforcement Learning for Large Reasoning Models",
        ("We survey reinforcement learning for large reasoning models: reward design, policy "
         "optimization algorithms such as PPO and GRPO, sampling strategies, training resources "
         "and applications, and discuss open problems in scaling RL for LLM reasoning.")),
    "broad-llm-survey": (False,
        "A Survey of Large Language Models",
        ("This survey reviews large language models: pre-training data and architectures, "
         "instruction tuning, alignment methods (e.g., RLHF), prompting, evaluation and "
         "applications.")),
    "grpo-only-as-baseline": (False,
        "Self-Consistency Decoding Improves Math Reasoning of LLMs",
        ("We propose a training-free decoding method that aggregates multiple sampled reasoning "
         "paths of an LLM. Our method outperforms GRPO baselines on GSM8K and MATH without any "
         "training.")),
    "vlm-shapes-rewards-for-driving-agent": (False,
        "Reward Shaping for Autonomous Driving Reinforcement Learning",
        ("Reinforcement learning for autonomous driving suffers from sparse rewards. We query a "
         "vision-language model (VLM) about each camera frame and turn its answer into a dense "
         "shaping reward for a PPO driving policy. The agent learns lane keeping twice as fast.")),
    "vla-driving-policy-with-rl": (True,
        "Closed-Loop Reinforcement Learning for Autonomous Driving",
        ("Vision-language-action (VLA) models drive from camera input and instructions. We "
         "fine-tune a VLA driving policy with GRPO in a closed-loop simulator, rewarding safe "
         "progress. The VLA reduces collisions by 30% over imitation learning.")),
    "rl-named-only-as-an-implication": (False,
        "Probing How Language Models Store Arithmetic Facts",
        ("We locate the attention heads that store arithmetic facts in large language models. "
         "Ablating ten heads removes most of the arithmetic ability of Llama-3. Activation "
         "patching shows that the heads read operands from earlier layers. The findings suggest "
         "targets for reinforcement learning.")),
    "technical-report-with-rl-stage": (True,
        "Falcon-R 7B Technical Report",
        ("We present Falcon-R, a 7B open-weight language model for reasoning. It is pretrained on "
         "12T tokens, instruction-tuned on curated data, and aligned in a final stage of "
         "reinforcement learning with verifiable rewards on math and code. Falcon-R matches "
         "larger models on AIME and LiveCodeBench.")),
    "classical-rl-robot-control": (False,
        "Sim-to-Real Reinforcement Learning for Quadruped Locomotion",
        ("We train a locomotion policy with PPO in simulation with domain randomization and "
         "deploy it on a real quadruped robot. The policy walks robustly over rough terrain.")),
    "bandits-for-recommendation": (False,
        "Contextual Bandits for News Recommendation",
        ("We cast news recommendation as a contextual bandit problem and propose an exploration "
         "strategy with a regret bound. Online experiments show higher click-through rates.")),
    "plain-positive": (True,
        "GRPO for Mathematical Reasoning in Large Language Models",
        ("We study group relative policy optimization for training LLMs on math problems with "
         "verifiable rewards.")),
    "no-evidence": (False, "Efficient Attention for Long Documents",
        "We propose a sparse attention kernel that halves memory use on long inputs."),
}

# Borderline in LABELING.md and beyond a term rule: the title says "process reward model"
# or "reinforcement learning", and only the full reading tells who is trained.
KNOWN_MISSES = {
    "reward-model-only-at-inference": (False,
        "Process Reward Models for Best-of-N Decoding",
        ("We use a process reward model at inference time to rerank best-of-N samples from a "
         "frozen LLM, without training the policy. Step-level scores select better solutions "
         "than majority voting on math benchmarks.")),
    "rl-trained-small-policy-for-kv-cache": (False,
        "Learning KV Cache Eviction with Reinforcement Learning",
        ("Long contexts make the KV cache of a large language model expensive. We train a "
         "lightweight policy network with PPO to decide which tokens to evict from the KV cache "
         "of a frozen LLM, with reward equal to the negative loss increase. The policy halves "
         "memory with little accuracy loss.")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hard_case(rules, name):
    expected, title, abstract = CASES[name]
    result = rank.score(title, abstract, rules)
    assert result.relevant is expected, (result.value, result.reasons)
    assert (result.value >= rules.threshold) is expected


@pytest.mark.parametrize("name", sorted(KNOWN_MISSES))
@pytest.mark.xfail(strict=True, reason="borderline hard case the term rule gets wrong (see benchmarks/relevance.md)")
def test_known_miss(rules, name):
    expected, title, abstract = KNOWN_MISSES[name]
    assert rank.score(title, abstract, rules).relevant is expected


def test_reasons_explain_the_score(rules):
    _, title, abstract = CASES["plain-positive"]
    reasons = rank.score(title, abstract, rules).reasons
    assert "title: grpo" in reasons
    assert "title: large language model" in reasons
    assert "abstract: verifiable reward" in reasons
    diffusion = rank.score(*CASES["rl-on-text-to-image-diffusion"][1:], rules).reasons
    assert "negative: text-to-image" in diffusion


def test_rl_named_only_in_background_counts_less(rules):
    background = rank.score("Math reasoning with LLMs",
                            "Existing methods such as GRPO need many samples.", rules)
    method = rank.score("Math reasoning with LLMs",
                        "We train the model with GRPO on verified answers.", rules)
    assert background.value < method.value
    assert "background: grpo" in background.reasons
    assert "abstract: grpo" in method.reasons


def test_rl_that_outperforms_is_not_background(rules):
    """"Outperforms" makes background of the baseline beaten, after it (LABELING rule 3), not of
    the method that wins, before it."""
    title = "Tool calling with LLMs"
    winner = rank.score(title, "We study how to teach tools to an LLM. Post-training on our data "
                        "helps, with reinforcement learning outperforming supervised fine-tuning. "
                        "Code is released.", rules)
    beaten = rank.score(title, "We study how to teach tools to an LLM. Post-training on our data "
                        "helps, and our prompting outperforms reinforcement learning. "
                        "Code is released.", rules)
    assert "abstract: reinforcement learning" in winner.reasons and winner.relevant
    assert "background: reinforcement learning" in beaten.reasons and not beaten.relevant


def test_rl_said_not_to_be_used_counts_nothing(rules):
    negated = rank.score("Self-distillation for code LLMs",
                         "Can an LLM improve at coding without a verifier, a teacher or reinforcement "
                         "learning? We fine-tune it on its own samples.", rules)
    assert negated.value == 0 and not negated.relevant
    assert "negated: reinforcement learning" in negated.reasons
    # A negation after the RL term, or in another sentence, does not count.
    used = rank.score("Self-distillation for code LLMs",
                      "We train the LLM with reinforcement learning without any human labels. "
                      "No teacher is used.", rules)
    assert used.relevant and "abstract: reinforcement learning" in used.reasons


def test_first_and_last_sentences_count_less(rules):
    title = "Math reasoning with LLMs"
    middle = rank.score(title, "LLMs can solve math problems. Sampling many answers helps. "
                        "Reinforcement learning sharpens the model. Results are strong.", rules)
    edge = rank.score(title, "LLMs can solve math problems. Sampling many answers helps. "
                      "Results are strong. Reinforcement learning sharpens the model.", rules)
    assert edge.value == pytest.approx(middle.value * rules.edge_weight)
    recipe = rank.score(title, "LLMs can solve math problems. Sampling many answers helps. "
                        "Results are strong. We then train the model with reinforcement learning.",
                        rules)
    assert recipe.value > middle.value  # a method sentence counts fully wherever it stands


def test_language_models_that_only_help_a_non_lm_subject_do_not_count(rules):
    _, title, abstract = CASES["vlm-shapes-rewards-for-driving-agent"]
    helper = rank.score(title, abstract, rules)
    assert "title: subject is not a language model" in helper.reasons and not helper.relevant
    _, title, abstract = CASES["vla-driving-policy-with-rl"]
    assert rank.score(title, abstract, rules).relevant  # the VLA is the trained policy


def test_a_language_model_policy_lifts_the_negatives_of_its_subject(rules):
    """A VLA that drives or a unified multimodal model that draws is RL for a language model."""
    for name, policy, subject in (("vla-in-a-driving-title", "vla", "autonomous driving"),
                                  ("unified-multimodal-llm-generating-images",
                                   "unified multimodal model", "text-to-image")):
        result = rank.score(*CASES[name][1:], rules)
        assert f"the policy is a language model: {policy}" in result.reasons
        assert f"negative: {subject}" not in result.reasons and result.relevant
    # What the paper says of itself still counts: a broad survey is not RL training.
    survey = rank.score("A Survey of Vision-Language-Action Models",
                        "We review vision-language-action (VLA) models for robots: architectures, "
                        "data, imitation and reinforcement learning fine-tuning, and benchmarks.", rules)
    assert "negative: survey" in survey.reasons and not survey.relevant


def test_no_language_model_no_score(rules):
    result = rank.score("Proximal Policy Optimization for Atari",
                        "We improve PPO with a new advantage estimator on Atari games.", rules)
    assert result.value <= 0 and not result.relevant


def test_verdict_overrides_the_score(rules):
    _, title, abstract = CASES["bandits-for-recommendation"]
    kept = rank.score(title, abstract, rules, verdict=True)
    assert kept.relevant and kept.reasons[0] == "user: marked relevant"
    _, title, abstract = CASES["plain-positive"]
    dropped = rank.score(title, abstract, rules, verdict=False)
    assert not dropped.relevant and dropped.value >= rules.threshold


def test_empty_texts(rules):
    assert rank.score("", "", rules) == rank.Score(0.0, False, ())


# --- word boundaries ------------------------------------------------------------------

def test_word_boundaries_and_case():
    lexicon = rank.Lexicon.compile({"rl": {"ppo": 1, "rl": 1, "reward model": 1, "qwen*": 1}})

    def found(text):
        return [key for _, _, key in lexicon.find(text)]

    assert found("We support URL parsing and controls") == []
    assert found("PPO and ppo, RL-based, an RL.") == ["ppo", "ppo", "rl", "rl"]
    assert found("reward models, Reward-Model and reward\nmodel") == ["reward model"] * 3
    assert found("reward modeling") == []  # not a plural: a different word
    assert found("Qwen2.5-7B and QWEN3") == ["qwen*", "qwen*"]
    assert found("使用GRPO和RL训练") == ["rl"]
    assert [(at, key) for at, _, key in lexicon.find("RL: PPO_x rl_ppo ppo")] == [(0, "rl"), (17, "ppo")]


def test_terms_that_begin_with_no_letter_are_found_in_place():
    """Such terms (a reader's `include: ["(rl)"]`, Chinese terms) take the regex's slower path."""
    lexicon = rank.Lexicon.compile({"include": ["(rl)", "强化学习", "grpo"]})
    hits = lexicon.find("(RL) x(rl) 用强化学习 and GRPO")
    assert [(at, key) for at, _, key in hits] == [(0, "(rl)"), (12, "强化学习"), (21, "grpo")]  # not x(rl)


def test_longest_term_wins_but_credits_other_lists():
    lexicon = rank.Lexicon.compile({
        "rl": {"reward model": 1, "process reward model": 1},
        "lm": {"reward model": 0.5},
        "negative": {"diffusion": 1, "diffusion language model": 0},
    })
    hits = lexicon.find("a process reward model for diffusion language models")
    assert [(name, key) for _, name, key in hits] == [
        ("rl", "process reward model"), ("lm", "reward model"),
        ("negative", "diffusion language model"),
    ]


def test_a_long_term_credits_the_longest_run_of_whole_words_another_list_holds():
    lexicon = rank.Lexicon.compile({
        "rl": {"reward policy model": 1, "alpha beta gamma": 1},
        "lm": {"model": 1, "policy": 1, "reward model": 1, "gamma": 1, "alpha": 1, "alph": 1},
    })
    found = [(name, key) for _, name, key in lexicon.find("a reward policy model; alpha beta gamma")]
    # "reward model" is not a run of the longer term's words; of equal length, the first listed
    assert found == [("rl", "reward policy model"), ("lm", "policy"),
                     ("rl", "alpha beta gamma"), ("lm", "gamma")]


def test_sentences_do_not_end_at_abbreviations():
    text = "Methods, e.g. GRPO, differ. We train it. Et al. Then more. See Fig. 2! I.E. Also (a) vs. b? Yes"
    starts = rank.sentence_starts(text)
    assert [text[i:i + 2] for i in starts] == ["Me", "We", "Et", "Se", "I.", "Ye"]


# --- similarity to exemplars ----------------------------------------------------------

SEEDS = [
    ("BroRL: Scaling Reinforcement Learning via Broadened Exploration",
     "BroRL: Scaling Reinforcement Learning via Broadened Exploration"),
    ("DocReward: A Document Reward Model for Structuring and Stylizing",
     "DocReward: A Document Reward Model for Structuring and Stylizing"),
    ("Tree Search for LLM Agent Reinforcement Learning",
     "Tree Search for LLM Agent Reinforcement Learning"),
]


def test_exemplar_similarity():
    exemplars = rank.build_exemplars(SEEDS)
    label, sim = exemplars.best("Broadened exploration for scaling reinforcement learning")
    assert label.startswith("BroRL") and sim > 0.5
    label, same = exemplars.best(SEEDS[1][1])
    assert label.startswith("DocReward") and same == pytest.approx(1.0)
    assert exemplars.best("Protein folding with graph networks") == (None, 0.0)
    assert rank.build_exemplars([]).best("anything") == (None, 0.0)


def test_similarity_is_a_reason_and_weighs_by_seed_weight(cfg):
    exemplars = rank.build_exemplars(SEEDS)
    title = "Scaling Reinforcement Learning for LLMs via Broadened Exploration"
    abstract = "We train LLMs with GRPO and many more rollouts per prompt."
    plain = rank.compile_rules(cfg.relevance.model_copy(update={"seed_weight": 0.0}))
    weighted = rank.compile_rules(cfg.relevance.model_copy(update={"seed_weight": 1.0}))
    base = rank.score(title, abstract, plain, exemplars)
    more = rank.score(title, abstract, weighted, exemplars)
    reason = [r for r in base.reasons if r.startswith("similar to seed")]
    assert reason and reason[0].startswith("similar to seed BroRL 0.")
    assert more.value > base.value


# --- topics ---------------------------------------------------------------------------

TOPIC_CASES = {
    "algorithms": ("Rethinking the Objective: Token-Level Loss Aggregation for GRPO",
                   "We analyse how GRPO normalizes the policy gradient over tokens."),
    "rewards": ("Generative Process Reward Models as Verifiers",
                "We train a process reward model that verifies each reasoning step."),
    "agentic": ("Multi-Turn Agentic RL for Tool Use",
                "We train LLM agents over multi-turn interactions with tools and web search."),
    "exploration": ("Entropy Collapse and Exploration in RLVR",
                    "Policy entropy drops early; we keep exploration alive with a bonus."),
    "scaling": ("Scaling Laws for RL Compute in LLM Post-Training",
                "We fit scaling laws to training dynamics across model sizes."),
    "systems": ("Asynchronous Rollouts for High-Throughput RL Training",
                "Our system decouples generation from training to raise GPU throughput."),
    "multimodal": ("Visual Reasoning in Multimodal LLMs with GRPO",
                   "We train a vision-language model on image and video questions."),
    "analysis": ("A Survey of Reinforcement Learning for LLMs",
                 "We review methods, analyse open problems and summarise benchmarks."),
    "applications": ("Clinical Report Generation with Reinforcement Learning",
                     "We train a medical LLM to write radiology reports."),
}


@pytest.mark.parametrize("key", sorted(TOPIC_CASES))
def test_each_topic_gets_its_typical_paper(cfg, key):
    title, abstract = TOPIC_CASES[key]
    primary, secondary = rank.assign_topics(title, abstract, cfg.topics)
    assert primary == key, secondary
    assert primary not in secondary


def test_every_configured_topic_is_tested(cfg):
    assert {t.key for t in cfg.topics} == set(TOPIC_CASES)


def test_title_only_seed_entries_get_a_topic(cfg):
    keys = {t.key for t in cfg.topics}
    for title, expected in [
        ("BroRL: Scaling Reinforcement Learning via Broadened Exploration", "exploration"),
        ("ΔL Normalization: Rethink Loss Aggregation in RLVR", "algorithms"),
        ("Part II: ROLL Flash -- Accelerating RLVR and Agentic Training with Asynchrony",
         "systems"),
        ("The Landscape of Agentic Reinforcement Learning for LLMs: A Survey", "analysis"),
        ("BaseReward: A Strong Baseline for Multimodal Reward Model", "rewards"),
    ]:
        assert rank.assign_topics(title, "", cfg.topics)[0] == expected, title
    primary, secondary = rank.assign_topics("Learning, Fast and Slow", "", cfg.topics)
    assert primary == "applications" and secondary == ()
    assert rank.assign_topics("", "", cfg.topics)[0] in keys
    assert rank.assign_topics("本文提出一种多模态强化学习方法", "", cfg.topics)[0] == "multimodal"


def test_topic_fallback_is_the_topic_without_terms(cfg):
    topics = [cfg.topics[0], cfg.topics[-1].model_copy(update={"terms": []}), cfg.topics[1]]
    assert rank.assign_topics("Nothing to see", "", topics)[0] == cfg.topics[-1].key
    assert rank.assign_topics("Nothing", "", topics[::2])[0] == cfg.topics[1].key


def test_topics_are_the_same_in_every_process():
    """Weights whose float sum depends on the order of adding them (0.1 + 0.2 + 0.3 is not
    0.3 + 0.2 + 0.1): a tie with the first-listed topic must not be broken by hash order."""
    script = (
        "from types import SimpleNamespace as T\n"
        "from pipeline import rank\n"
        "topics = [T(key='b', terms={'delta': 0.6}),"
        " T(key='a', terms={'alpha': 0.1, 'beta': 0.2, 'gamma': 0.3})]\n"
        "print(rank.assign_topics('', 'alpha beta gamma delta', topics))\n")
    found = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            cwd=REPO, env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
             for seed in range(8)}
    assert len(found) == 1, found


# --- featured -------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    key: str
    topic: str
    score: float


ENTRIES = [Entry("a", "algorithms", 9), Entry("b", "algorithms", 8), Entry("c", "rewards", 7),
           Entry("d", "agentic", 3), Entry("e", "rewards", 2)]


def _featured(entries, n, forced=()):
    chosen = rank.choose_featured(entries, n, key_topic=lambda e: e.topic,
                                  key_score=lambda e: e.score, forced=forced)
    return [e.key for e in chosen]


def test_featured_prefers_diversity():
    assert _featured(ENTRIES, 2) == ["a", "c"]
    assert _featured(ENTRIES, 3) == ["a", "c", "d"]
    assert _featured(ENTRIES, 4) == ["a", "c", "d", "b"]


def test_forced_seed_entries_win_first():
    assert _featured(ENTRIES, 2, forced=[ENTRIES[4]]) == ["e", "a"]
    assert _featured(ENTRIES, 1, forced=lambda e: e.key in {"d", "e"}) == ["d"]


def test_featured_with_few_candidates():
    assert _featured(ENTRIES[:2], 5) == ["a", "b"]
    assert _featured([], 3) == []
    assert _featured(ENTRIES, 0) == []


# --- evaluation and query coverage ----------------------------------------------------

def _row(id, label, name, categories=("cs.CL",)):
    _, title, abstract = CASES[name]
    return {"id": id, "title": title, "abstract": abstract, "label": label,
            "categories": list(categories)}


FIXTURE = [
    _row("1", 1, "plain-positive"),
    _row("2", 1, "rl-survey"),
    _row("3", 1, "no-evidence"),                     # a miss: fn
    _row("4", 0, "broad-llm-survey"),
    _row("5", 0, "bandits-for-recommendation", ("cs.IR",)),
    _row("6", 0, "reward-model-for-rl"),             # a false alarm: fp
    _row("7", 1, "vla-with-rl", ("cs.RO", "cs.LG")),
]


def test_evaluate_counts(rules):
    result = rank_eval.evaluate(FIXTURE, rules)
    assert (result.tp, result.fp, result.tn, result.fn) == (3, 1, 2, 1)
    assert result.n == 7
    assert result.precision == pytest.approx(0.75) and result.recall == pytest.approx(0.75)
    assert result.f1 == pytest.approx(0.75)
    assert [m.id for m in result.false_positives] == ["6"]
    assert [m.id for m in result.false_negatives] == ["3"]
    assert result.false_positives[0].reasons
    assert result.seconds_per_1000 > 0 and result.papers_per_second > 0


def test_query_coverage():
    rows = FIXTURE + [_row("8", 1, "on-policy-distillation", ("cs.CE",))]
    coverage = rank_eval.query_coverage(rows, ["cs.LG", "cs.CL"], ["GRPO", "reinforcement learning"])
    assert coverage.positives == 5
    assert coverage.missed_by_category == ("8",)  # cs.RO + cs.LG counts: any category
    assert coverage.missed_by_terms == ("3",)     # no "GRPO" or "reinforcement learning"
    assert coverage.missed == 2
    assert coverage.candidates == 4
    plural = rank_eval.query_coverage([{**FIXTURE[0], "title": "LLMs", "abstract": "reward models"}],
                                 ["cs.CL"], ["reward model", "LLM"])
    assert plural.missed == 1  # phrase search, plurals not assumed


def test_shipped_query_terms_cover_the_hard_positives(cfg):
    rows = [_row(name, 1, name) for name, (label, _, _) in CASES.items() if label]
    coverage = rank_eval.query_coverage(rows, cfg.sources.arxiv.categories, cfg.sources.arxiv.terms)
    assert coverage.missed == 0
    assert len(cfg.sources.arxiv.terms) <= 30


# --- the dev corpus (skipped without ../shared) ---------------------------------------

@pytest.mark.skipif(not DEV.exists(), reason="needs ../shared/data/arxiv_dev.jsonl")
def test_dev_corpus_figures(cfg, rules):
    rows = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines() if line]
    result = rank_eval.evaluate(rows, rules)
    # The targets of the relevance issue (achieved: P 0.922, R 0.916; benchmarks/relevance.md).
    assert result.precision >= 0.92
    assert result.recall >= 0.90
    coverage = rank_eval.query_coverage(rows, cfg.sources.arxiv.categories, cfg.sources.arxiv.terms)
    assert coverage.missed <= 5
