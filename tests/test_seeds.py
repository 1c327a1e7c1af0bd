"""The seed parser: the two shipped seed pages entry by entry, malformed variants, a property."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.sources.seeds import load_seeds, parse_seed_file

SEEDS = Path(__file__).resolve().parent.parent / "seeds"
PAGE_000 = SEEDS / "000_fba6f3c0aaa545ca.txt"
PAGE_004 = SEEDS / "004_72f404bdcf255312.txt"

TITLES_000 = [
    "ARM-FM: Automated Reward Machines via Foundation Models for Compositional Reinforcement Learning",
    "The Art of Scaling Reinforcement Learning Compute for LLMs",
    "What is the objective of reasoning with reinforcement learning?",
    "DocReward: A Document Reward Model for Structuring and Stylizing",
    "Part II: ROLL Flash -- Accelerating RLVR and Agentic Training with Asynchrony",
    "QeRL: Beyond Efficiency -- Quantization-enhanced Reinforcement Learning for LLMs",
    "LiveThinking: Enabling Real-Time Efficient Reasoning for AI-Powered Livestreaming via Reinforcement Learning",
    "CALM Before the STORM: Unlocking Native Reasoning for Optimization Modeling",
    "MARS: Optimizing Dual-System Deep Research via Multi-Agent Reinforcement Learning",
    "The Landscape of Agentic Reinforcement Learning for LLMs: A Survey",
    "A Practitioner's Guide to Multi-turn Agentic Reinforcement Learning",
    "BroRL: Scaling Reinforcement Learning via Broadened Exploration",
    "Enhancing Large Language Model Reasoning with Reward Models: An Analytical Survey",
    "Executable Counterfactuals: Improving LLMs' Causal Reasoning Through Code",
    "SCRIBES: Web-Scale Script-Based Semi-Structured Data Extraction with Reinforcement Learning",
    "Online Process Reward Leanring for Agentic Reinforcement Learning",  # sic: the page's typo
    "Reinforcement Learning Fine-Tuning Enhances Activation Intensity and Diversity in the Internal Circuitry of LLMs",
    "Training Task Reasoning LLM Agents for Multi-turn Task Planning via Single-turn Reinforcement Learning",
    "Tree Search for LLM Agent Reinforcement Learning",
    "BaseReward: A Strong Baseline for Multimodal Reward Model",
    "Reinforcement Learning Meets Large Language Models: A Survey of Advancements and Applications Across the LLM Lifecycle",
    "ΔL Normalization: Rethink Loss Aggregation in RLVR",
    "FlowRL: Matching Reward Distributions for LLM Reasoning",
    "A Survey of Reinforcement Learning for Large Reasoning Models",
]

DATED_TITLES_004 = [
    "Learning, Fast and Slow: Towards LLMs That Adapt Continually",
    "AlphaGRPO: Unlocking Self-Reflective Multimodal Generation in UMMs via Decompositional Verifiable Reward",
    "Unmasking On-Policy Distillation: Where It Helps, Where It Hurts, and Why",
    "Shepherd: A Runtime Substrate Empowering Meta-Agents with a Formalized Execution Trace",
    "Can RL Teach Long-Horizon Reasoning to LLMs? Expressiveness Is Key",
    "Recursive Agent Optimization",
    "StraTA: Incentivizing Agentic Reinforcement Learning with Strategic Trajectory Abstraction",
    "Beyond Negative Rollouts: Positive-Only Policy Optimization with Implicit Negative Gradients",
    "Verifier-Backed Hard Problem Generation for Mathematical Reasoning",
    "Text Corpora as Concept Fields: Black-Box Hallucination and Novelty Measurement",
    "OpenSeeker-v2: Pushing the Limits of Search Agents with Informative and High-Difficulty Trajectories",
    "Reinforcement Learning for LLM-based Multi-Agent Systems through Orchestration Traces",
]
DATES_004 = [date(2026, 5, day) for day in (12, 12, 11, 11, 7, 7, 7, 7, 7, 6, 5, 4)]
TITLES_004 = DATED_TITLES_004 + ["PRISM", "Exploration Hacking"]


@pytest.fixture(scope="module")
def page_000():
    return parse_seed_file(PAGE_000)


@pytest.fixture(scope="module")
def page_004():
    return parse_seed_file(PAGE_004)


def by_title(document, title):
    return next(entry for entry in document.entries if entry.title == title)


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode("utf-8"))  # bytes: keep CRLF exactly as written
    return path


# --- the shipped seed pages -------------------------------------------------------------


def test_seed_directory_yields_all_38_titles_in_order():
    documents = load_seeds([SEEDS])
    assert [d.source for d in documents] == [PAGE_000.name, PAGE_004.name]
    assert [e.title for d in documents for e in d.entries] == TITLES_000 + TITLES_004
    assert all(not d.warnings for d in documents)


def test_page_000_has_24_title_summary_pairs_with_title_lines(page_000):
    assert [e.title for e in page_000.entries] == TITLES_000
    assert [e.line for e in page_000.entries] == [1] + list(range(4, 49, 2))
    assert all(e.source == PAGE_000.name for e in page_000.entries)


def test_navigation_line_is_not_a_paper(page_000):
    assert all("第4页" not in (e.title + (e.summary_zh or "")) for e in page_000.entries)
    assert 3 not in [e.line for e in page_000.entries]
    assert not page_000.warnings
    first = page_000.entries[0]
    assert first.summary_zh.startswith("本文提出了ARM-FM框架")  # the pair before the nav line


def test_summary_with_missing_name_is_kept_verbatim(page_000):
    for title in (
        "The Art of Scaling Reinforcement Learning Compute for LLMs",
        "ΔL Normalization: Rethink Loss Aggregation in RLVR",
    ):
        assert "名为 的" in by_title(page_000, title).summary_zh


def test_truncated_summaries_keep_their_dots_and_are_flagged(page_000):
    truncated = [e.title for e in page_000.entries if e.truncated]
    assert truncated == [TITLES_000[0], TITLES_000[9], TITLES_000[15], TITLES_000[18]]
    for entry in page_000.entries:
        assert entry.truncated == entry.summary_zh.endswith("...") if entry.summary_zh else True
    assert "truncated" in page_000.entries[0].flags


def test_summary_repeating_the_title_means_no_summary(page_000):
    survey = by_title(page_000, TITLES_000[20])
    assert survey.summary_zh is None
    assert survey.flags == ("no-summary",)
    # The repeat line did not become a title of its own, nor shift the pairs after it.
    assert by_title(page_000, TITLES_000[21]).summary_zh.startswith("本文提出了一种名为 的新型")


def test_every_other_page_000_entry_has_its_own_chinese_summary(page_000):
    summaries = [e.summary_zh for e in page_000.entries if e is not page_000.entries[20]]
    assert all(s and re.search(r"[\u4e00-\u9fff]", s) for s in summaries)
    assert len(set(summaries)) == 23


def test_page_000_has_no_page_framing(page_000):
    assert page_000.intro_zh is None
    assert page_000.comparison == ()
    assert page_000.synthesis_zh is None


def test_page_004_dated_items_all_parse(page_004):
    dated = [e for e in page_004.entries if not e.featured]
    assert [e.title for e in dated] == DATED_TITLES_004
    assert [e.date for e in dated] == DATES_004
    assert [e.line for e in dated] == list(range(2, 14))
    assert dated[0].summary_zh.startswith("大型语言模型 (LLM) 通过更新其参数")
    assert not any(e.truncated for e in dated)


def test_page_004_intro_is_the_opening_paragraph(page_004):
    assert page_004.intro_zh.startswith("强化学习（Reinforcement Learning, RL）是")
    assert page_004.intro_zh.endswith("研究了 LLM 训练中的强化学习。")
    assert page_004.entries[0].title != page_004.intro_zh


def test_featured_papers_carry_headline_and_labelled_parts(page_004):
    prism, hacking = [e for e in page_004.entries if e.featured]
    assert (prism.title, prism.line) == ("PRISM", 14)
    assert prism.headline_zh.startswith("PRISM 发现标准 SFT→RLVR 流程中的核心问题")
    assert prism.summary_zh == prism.headline_zh
    assert [label for label, _ in prism.parts_zh] == ["解决方案", "关键发现"]
    assert prism.parts_zh[0][1].startswith("在 SFT 和 RLVR 之间插入分布对齐阶段")
    assert (hacking.title, hacking.line) == ("Exploration Hacking", 18)
    assert hacking.headline_zh.startswith("Exploration Hacking 揭示了")
    assert [label for label, _ in hacking.parts_zh] == ["实验设计", "检测与缓解", "核心警示"]
    assert hacking.parts_zh[2][1] == "在能力足够强的 LLM 上，探索黑客攻击是 RL 训练的一种现实威胁。"
    assert prism.flags == hacking.flags == ("featured",)


def test_comparison_table_keeps_header_and_rows_without_separator(page_004):
    table = page_004.comparison
    assert len(table) == 6
    assert all(len(row) == 3 for row in table)
    assert table[0] == ("维度", "PRISM", "Exploration Hacking")
    assert table[4] == ("涉及算法", "GRPO, DAPO, GSPO", "通用 RL 训练")
    assert not any(set(cell) <= {"-"} for row in table for cell in row)


def test_framing_line_before_table_is_neither_paper_nor_warning(page_004):
    assert not page_004.warnings
    assert all("两篇论文" not in (e.summary_zh or "") for e in page_004.entries)
    assert len(page_004.entries) == 14


def test_synthesis_is_the_closing_paragraph_without_its_label(page_004):
    assert page_004.synthesis_zh.startswith("LLM 的 RL 训练不仅面临技术效率问题（PRISM）")
    assert "综合洞察" not in page_004.synthesis_zh


# --- malformed text files ----------------------------------------------------------------


def test_empty_file_has_no_entries_and_no_warnings(tmp_path):
    document = parse_seed_file(write(tmp_path, "empty.txt", ""))
    assert (document.entries, document.warnings) == ((), ())


def test_binary_garbage_is_one_warning(tmp_path):
    document = parse_seed_file(write(tmp_path, "junk.txt", b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01"))
    assert document.entries == ()
    assert len(document.warnings) == 1
    assert "not UTF-8" in document.warnings[0].message
    assert str(document.warnings[0]).startswith("junk.txt:")


def test_bom_crlf_blank_lines_and_trailing_whitespace_are_tolerated(tmp_path):
    text = "\ufeffFirst   Paper\r\n本文提出了第一个方法。  \r\n\r\n\nSecond Paper \n本文提出了第二个方法。\r"
    document = parse_seed_file(write(tmp_path, "mixed.txt", text))
    assert [(e.title, e.line, e.summary_zh) for e in document.entries] == [
        ("First Paper", 1, "本文提出了第一个方法。"),
        ("Second Paper", 5, "本文提出了第二个方法。"),
    ]
    assert document.warnings == ()


def test_an_emoji_joined_in_a_summary_keeps_its_joiner_a_title_loses_zero_widths(tmp_path):
    """A zero-width space in a title makes it read as another; the joiner inside 👨‍💻 in a
    summary is part of the character a reader sees."""
    text = "Zero\u200bWidth RLHF (2026-05-01): 👨\u200d💻 工程师的强化学习\n"
    (entry,) = parse_seed_file(write(tmp_path, "emoji.txt", text)).entries
    assert (entry.title, entry.summary_zh) == ("ZeroWidth RLHF", "👨\u200d💻 工程师的强化学习")


def test_line_with_only_a_date_is_a_warning(tmp_path):
    text = "Some Paper（2026-05-12）：本文提出了方法。\n2026-05-13\n（2026-05-14）\n"
    document = parse_seed_file(write(tmp_path, "dates.txt", text))
    assert [e.title for e in document.entries] == ["Some Paper"]
    assert [(w.line, w.message) for w in document.warnings] == [
        (2, "a date with no title"),
        (3, "a date with no title"),
    ]


def test_ascii_parens_and_colon_are_accepted_for_dated_items(tmp_path):
    document = parse_seed_file(
        write(tmp_path, "ascii.txt", "A Paper (2026-05-01): 本文提出了方法。")
    )
    (entry,) = document.entries
    assert (entry.title, entry.date, entry.summary_zh) == (
        "A Paper",
        date(2026, 5, 1),
        "本文提出了方法。",
    )


def test_invalid_date_keeps_the_item_and_warns(tmp_path):
    document = parse_seed_file(
        write(tmp_path, "bad.txt", "A Paper（2026-13-40）：本文提出了方法。")
    )
    assert [(e.title, e.date) for e in document.entries] == [("A Paper", None)]
    assert document.warnings[0].line == 1 and "2026-13-40" in document.warnings[0].message


def test_summary_with_no_title_is_a_warning_and_pairs_do_not_shift(tmp_path):
    text = "本文提出了孤立的摘要。\nPaper One\n本文提出了一。\n本文提出了多余的一行。\nPaper Two\n本文提出了二。\n"
    document = parse_seed_file(write(tmp_path, "orphan.txt", text))
    assert [(e.title, e.summary_zh) for e in document.entries] == [
        ("Paper One", "本文提出了一。"),
        ("Paper Two", "本文提出了二。"),
    ]
    assert [(w.line, w.message) for w in document.warnings] == [
        (1, "a summary with no title before it"),
        (4, "a summary with no title before it"),
    ]


def test_missing_summary_line_does_not_shift_following_pairs(tmp_path):
    text = "Paper One\nPaper Two\n本文提出了二。\nPaper Three\n本文提出了三。"
    document = parse_seed_file(write(tmp_path, "gap.txt", text))
    assert [(e.title, e.summary_zh) for e in document.entries] == [
        ("Paper One", None),
        ("Paper Two", "本文提出了二。"),
        ("Paper Three", "本文提出了三。"),
    ]


def test_missing_path_is_a_warning_not_an_exception(tmp_path):
    (document,) = load_seeds([tmp_path / "nope.txt"])
    assert document.entries == ()
    assert str(document.warnings[0]) == f"seeds.paths: {tmp_path / 'nope.txt'}: no such file or directory"


def test_directory_reads_seed_suffixes_sorted_and_skips_readme(tmp_path):
    write(tmp_path, "b.yaml", "- title: From YAML\n")
    write(tmp_path, "a.txt", "From Text\n本文提出了方法。")
    write(tmp_path, "README.md", "Not A Seed\n")
    write(tmp_path, "c.yml", "entries:\n  - title: From YML\n")
    write(tmp_path, "notes.md", "- **My Pick**（2026-05-01）：本文提出了方法。\n")
    documents = load_seeds([tmp_path])
    assert [d.source for d in documents] == ["a.txt", "b.yaml", "c.yml", "notes.md"]
    assert [d.entries[0].title for d in documents[:3]] == ["From Text", "From YAML", "From YML"]
    assert documents[3].entries == ()  # another kind of file is said, not read
    assert [str(w) for w in documents[3].warnings] == [
        f"seeds.paths: {tmp_path / 'notes.md'}: not a seed file (.txt, .yaml, .yml); skipped"]


def test_a_text_seed_pasted_from_markdown_reads_as_its_text_and_comments_are_skipped(tmp_path):
    text = ("# my picks\n"
            "## Reasoning\n"
            "- **Good Paper**（2026-11-02）：一个很好的论文。\n"
            "### Agents\n"
            "2. __Another Paper__ (2026-11-03): 另一篇论文。\n"
            "\ufeff# a second file's comment, after its BOM (cat a.txt b.txt)\n"
            "2026-13-45 garbage line\n")
    document = parse_seed_file(write(tmp_path, "mine.txt", text))
    assert [(e.title, e.date, e.summary_zh) for e in document.entries] == [
        ("Good Paper", date(2026, 11, 2), "一个很好的论文。"),
        ("Another Paper", date(2026, 11, 3), "另一篇论文。")]
    assert [(w.line, w.message) for w in document.warnings] == [
        (7, "a date before the title (write `Title（YYYY-MM-DD）：summary`)")]


def test_an_arxiv_link_in_a_text_seed_names_the_entrys_paper_and_is_not_a_title(tmp_path):
    """A Markdown link reads as its text; an arXiv link, in it or alone on the line under a
    title, gives the entry its arxiv_id. A link line was a paper titled by its URL that took
    the summary of the title above it."""
    text = ("1. [DocReward: A Document Reward Model](https://arxiv.org/abs/2510.11391v2)（2025-10-13）：文档奖励模型。\r\n"
            '- **[QeRL: Beyond Efficiency](https://arxiv.org/pdf/2510.11696v1 "QeRL")**\r\n'
            "本文提出了 QeRL 框架。\r\n"
            "FlowRL: Matching Reward Distributions for LLM Reasoning\r\n"
            "https://arxiv.org/abs/2509.15207v2\r\n"
            "本文提出了 FlowRL 算法。\r\n"
            "BroRL: Scaling Reinforcement Learning via Broadened Exploration\r\n"
            "本文提出了 BroRL 方法。\r\n"
            "<https://arxiv.org/html/2510.01180v1>\r\n"
            "Tree Search for LLM Agent Reinforcement Learning\r\n"
            "本文提出了树搜索方法，见 [代码](https://github.com/example/tree)。\r\n"
            "arXiv:2509.21240\r\n"
            "arXiv:2509.00001\r\n")
    document = parse_seed_file(write(tmp_path, "mine.txt", "\ufeff" + text))
    assert [(e.title, e.arxiv_id, e.summary_zh) for e in document.entries] == [
        ("DocReward: A Document Reward Model", "2510.11391", "文档奖励模型。"),
        ("QeRL: Beyond Efficiency", "2510.11696", "本文提出了 QeRL 框架。"),
        ("FlowRL: Matching Reward Distributions for LLM Reasoning", "2509.15207", "本文提出了 FlowRL 算法。"),
        ("BroRL: Scaling Reinforcement Learning via Broadened Exploration", "2510.01180", "本文提出了 BroRL 方法。"),
        ("Tree Search for LLM Agent Reinforcement Learning", "2509.21240", "本文提出了树搜索方法，见 代码。")]
    assert [(w.line, w.message) for w in document.warnings] == [
        (13, "an arXiv link with no title before it; skipped")]
    page = ("PRISM 发现标准 SFT→RLVR 流程中的核心问题：问题一。\n解决方案：方案。\n"
            "📄 [查看论文](https://arxiv.org/abs/2605.00001v2)\n"
            "Exploration Hacking 发现新问题：问题二。\n关键发现：发现。\n📄 查看论文\n")
    document = parse_seed_file(write(tmp_path, "page.txt", page))  # a featured paper's own link
    assert [(e.title, e.featured, e.arxiv_id) for e in document.entries] == [
        ("PRISM", True, "2605.00001"), ("Exploration Hacking", True, None)]


def test_a_date_written_with_slashes_dots_or_chinese_units_is_the_entrys_date(tmp_path):
    """`2025/09/18` made the whole line a title, which took the next paper's line as its
    summary, without a word."""
    text = ("FlowRL: Matching Reward Distributions（2025/09/18）：本文提出了 FlowRL 算法。\n"
            "QeRL: Beyond Efficiency (2025.10.13): 本文提出了 QeRL 框架。\n"
            "Tree Search for LLM Agent RL（2025年9月8日）：本文提出了树搜索方法。\n")
    document = parse_seed_file(write(tmp_path, "mine.txt", text))
    assert document.warnings == ()
    assert [(e.title, e.date, e.summary_zh) for e in document.entries] == [
        ("FlowRL: Matching Reward Distributions", date(2025, 9, 18), "本文提出了 FlowRL 算法。"),
        ("QeRL: Beyond Efficiency", date(2025, 10, 13), "本文提出了 QeRL 框架。"),
        ("Tree Search for LLM Agent RL", date(2025, 9, 8), "本文提出了树搜索方法。")]


def test_an_undated_title_and_summary_on_one_line_are_an_entry(tmp_path):
    """`Title：摘要` without a date read as one title holding the summary; a title's
    `FlowRL：…` summary line stays its summary."""
    text = ("- **FlowRL: Matching Reward Distributions for LLM Reasoning**：本文提出了 FlowRL 算法。\n"
            "QeRL: Beyond Efficiency -- Quantization-enhanced RL for LLMs: 量化增强的强化学习框架。\n"
            "QeRL: Beyond Efficiency：本文提出了 QeRL 框架。\n"
            "BroRL: Scaling Reinforcement Learning via Broadened Exploration\n"
            "BroRL：本文提出了拓宽探索的方法。\n")
    document = parse_seed_file(write(tmp_path, "mine.txt", text))
    assert document.warnings == ()
    assert [(e.title, e.summary_zh) for e in document.entries] == [
        ("FlowRL: Matching Reward Distributions for LLM Reasoning", "本文提出了 FlowRL 算法。"),
        ("QeRL: Beyond Efficiency -- Quantization-enhanced RL for LLMs", "量化增强的强化学习框架。"),
        ("QeRL: Beyond Efficiency", "本文提出了 QeRL 框架。"),
        ("BroRL: Scaling Reinforcement Learning via Broadened Exploration", "BroRL：本文提出了拓宽探索的方法。")]


def test_a_table_of_papers_with_no_featured_paper_to_compare_is_a_warning(tmp_path):
    """A table is a seed page's comparison of its featured papers; a list of picks pasted as
    a Markdown table was read as one, never shown: '0 entries from 1 file', not a word."""
    text = ("# my picks\n| 论文 | 日期 | 摘要 |\n|---|---|---|\n"
            "| FlowRL: Matching Reward Distributions | 2025-09-18 | 本文提出了 FlowRL。 |\n")
    document = parse_seed_file(write(tmp_path, "mine.txt", text))
    assert document.entries == ()
    assert [(w.line, w.message) for w in document.warnings] == [
        (2, "a table with no featured paper to compare: its rows are not read as papers "
            "(write one a line, `Title（YYYY-MM-DD）：summary`, or use a .yaml file)")]


def test_an_arxiv_link_copied_with_its_query_or_anchor_names_the_paper(tmp_path):
    """The address bar gives `?context=cs.LG` (an abs page reached from a listing) or `#S3`
    (an html page's section): the YAML entry was skipped, the text link was no link."""
    text = ('- title: A Paper\n  arxiv_id: "https://arxiv.org/abs/2410.10110v2?context=cs.LG"\n'
            '- title: B Paper\n  arxiv_id: "https://arxiv.org/html/2410.10111v1#S3"\n'
            '- title: D Paper\n  arxiv_id: "arXiv: 2410.10113"\n')  # as some reference styles write it
    document = parse_seed_file(write(tmp_path, "mine.yaml", text))
    assert document.warnings == ()
    assert [(e.title, e.arxiv_id) for e in document.entries] == [
        ("A Paper", "2410.10110"), ("B Paper", "2410.10111"), ("D Paper", "2410.10113")]
    text = "[C Paper](https://arxiv.org/pdf/2410.10112v3.pdf?download=1)\n本文提出了方法。\n"
    document = parse_seed_file(write(tmp_path, "mine.txt", text))
    assert [(e.title, e.arxiv_id) for e in document.entries] == [("C Paper", "2410.10112")]


# --- YAML ---------------------------------------------------------------------------------


def test_yaml_entries_with_all_keys(tmp_path):
    text = """\
entries:
  - title: "Some  Paper:\\n A Title"
    summary_zh: 本文提出了方法...
    summary_en: We propose a method.
    arxiv_id: 2410.10110
    date: 2026-05-12
    topic: 强化学习
    featured: true
  - title: Plain Paper
"""
    document = parse_seed_file(write(tmp_path, "mine.yaml", text))
    assert document.warnings == ()
    first, second = document.entries
    assert first.title == "Some Paper: A Title"
    assert (first.line, first.date, first.arxiv_id) == (2, date(2026, 5, 12), "2410.10110")
    assert (first.summary_zh, first.truncated, first.featured) == ("本文提出了方法...", True, True)
    assert (first.summary_en, first.topic) == ("We propose a method.", "强化学习")
    assert (second.title, second.line, second.featured) == ("Plain Paper", 9, False)


def test_unparseable_yaml_is_one_warning_with_its_line(tmp_path):
    document = parse_seed_file(write(tmp_path, "bad.yaml", "- title: ok\n- title: [unclosed\n"))
    assert document.entries == ()
    assert len(document.warnings) == 1
    assert document.warnings[0].message.startswith("not valid YAML")
    assert 1 <= document.warnings[0].line <= 2


def test_yaml_unknown_key_and_bad_date_skip_only_their_entries(tmp_path):
    text = """\
- title: Good One
  date: 2026-05-01
- title: Has Typo
  sumary_zh: 拼错的键
- title: Bad Date
  date: 2026-02-30
- title: Good Two
"""
    document = parse_seed_file(write(tmp_path, "user.yml", text))
    assert [e.title for e in document.entries] == ["Good One", "Good Two"]
    unknown, bad_date = (str(w) for w in document.warnings)
    assert unknown.startswith("user.yml:4:") and "sumary_zh" in unknown
    assert bad_date.startswith("user.yml:6:") and "'date'" in bad_date


def test_a_yaml_key_given_twice_skips_its_entry_with_a_warning(tmp_path):
    """The second title won unsaid ('- {title: x, title: y}' read as y)."""
    text = "- title: Meant\n  summary_zh: 摘要\n  title: Pasted over\n- title: Kept\n"
    document = parse_seed_file(write(tmp_path, "twice.yaml", text))
    assert [e.title for e in document.entries] == ["Kept"]
    assert [str(w) for w in document.warnings] == [
        "twice.yaml:3: key 'title' is given twice in one entry (also on line 1); entry skipped"]


def test_yaml_wrong_types_and_shapes_are_warnings(tmp_path):
    text = "- title: [not, text]\n- just a string\n- featured: yes\n- title: Kept\n  featured: 1\n"
    document = parse_seed_file(write(tmp_path, "types.yaml", text))
    assert document.entries == ()
    assert [w.line for w in document.warnings] == [1, 2, 3, 5]
    top = parse_seed_file(write(tmp_path, "top.yaml", "title: not a list\n"))
    assert top.entries == () and "expected a list" in top.warnings[0].message


def test_a_yaml_alias_bomb_is_a_short_warning_not_a_hang(tmp_path):
    """Nine aliases a level make a list of 9^n items out of n short lines: its repr in the
    warning grew with it (9 levels: 387 million items, `rl-digest seeds` ran a minute and
    ended in MemoryError). The warning shows its start; the other entries are kept."""
    levels = ['  x0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    levels += [f"  x{n}: &a{n} [" + ",".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 9)]
    text = "\n".join(["defs:", *levels, "entries:", "  - title: Bomb", "    summary_zh: *a8",
                      "  - title: Kept", ""])
    document = parse_seed_file(write(tmp_path, "bomb.yaml", text))
    assert [e.title for e in document.entries] == ["Kept"]
    assert [w.line for w in document.warnings] == [1, 13]
    assert len(document.warnings[1].message) < 200, document.warnings[1].message[:300]
    assert document.warnings[1].message.startswith("key 'summary_zh' must be text, not [[[...], [...]")


def test_empty_yaml_has_no_entries_and_no_warnings(tmp_path):
    document = parse_seed_file(write(tmp_path, "empty.yaml", "# nothing yet\n"))
    assert (document.entries, document.warnings) == ((), ())


# --- property -----------------------------------------------------------------------------

LINE_PIECES = st.sampled_from(
    [
        "Some Paper Title",
        "本文提出了一种方法。",
        "本文提出了...",
        "强化学习 第4页",
        "2026-05-12",
        "Paper（2026-05-12）：摘要。",
        "Paper (2026-13-45): x",
        "PRISM 发现问题。",
        "解决方案：做法。",
        "📄 查看论文",
        "| a | b |",
        "|---|---|",
        "综合洞察：总结。",
        "两篇论文：",
        "",
        "   ",
        "- title: x",
        "  date: 2026-99-01",
        "entries:",
        "key: [",
        "\ufeff",
        "\x00",
    ]
)
TEXTS = st.one_of(
    st.text(),
    st.lists(st.one_of(LINE_PIECES, st.text(max_size=20)), max_size=30).flatmap(
        lambda lines: st.sampled_from(["\n", "\r\n", "\r"]).map(lambda nl: nl.join(lines))
    ),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=TEXTS, suffix=st.sampled_from([".txt", ".yaml"]))
def test_any_text_parses_without_raising_and_warnings_point_into_the_file(tmp_path, text, suffix):
    path = write(tmp_path, "prop" + suffix, text)
    document = parse_seed_file(path)
    n_lines = max(1, len(re.split(r"\r\n|\r|\n", text)))
    for warning in document.warnings:
        assert 1 <= warning.line <= n_lines, warning
    for entry in document.entries:
        assert entry.title and 1 <= entry.line <= n_lines


def test_readme_yaml_example_parses_cleanly(tmp_path):
    readme = (SEEDS / "README.md").read_text(encoding="utf-8")
    example = re.search(r"```yaml\n(.*?)```", readme, re.DOTALL).group(1)
    document = parse_seed_file(write(tmp_path, "example.yaml", example))
    assert document.warnings == ()
    assert len(document.entries) == 2 and document.entries[0].featured


def test_an_arxiv_id_pasted_with_its_prefix_or_url_ties_the_entry_and_a_wrong_one_is_a_warning(tmp_path, cli):
    """`arXiv:2611.00001` or the abs URL, as copied from arXiv, is the id; the entry was
    kept waiting for a paper of that literal name, and never showed, without a word."""
    from tests.helpers import DAY, rl_paper
    from tests.processes import config_with
    from tests.servers.arxiv_server import ArxivServer

    (tmp_path / "seeds").mkdir()
    write(tmp_path / "seeds", "010_mine.yaml", '- title: My pick\n  arxiv_id: "arXiv:2611.00001"\n'
          "  summary_zh: 我的 强化学习 摘要\n- title: My other pick\n  arxiv_id: https://arxiv.org/abs/2611.00002v2\n"
          '- title: A typo\n  arxiv_id: "2611-00003"\n')
    with ArxivServer([rl_paper(1, DAY), rl_paper(2, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, seeds={"paths": [str(tmp_path / "seeds")]})
        listed = cli("--config", str(config), "seeds")
        ran = cli("--config", str(config), "run", "--as-of", "2026-11-02")

    assert "relevant 2 (2 seeds)" in ran.stdout
    assert "010_mine.yaml:7: key 'arxiv_id' must be an arXiv id such as 2410.10110, not '2611-00003'" in listed.stderr
    rows = [line for line in (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8").splitlines()
            if "arxiv.org/abs/2611.0000" in line]
    assert len(rows) == 2 and all("010\\_mine.yaml" in row or "010_mine.yaml" in row for row in rows), rows
    assert any("我的 强化学习 摘要" in row for row in rows)


def test_a_seed_whose_arxiv_id_arxiv_never_returns_is_shown_by_its_own_text_once(tmp_path, cli):
    """A seed naming an arXiv id arXiv does not return was in no digest ('Curated: 0'), in
    no reading list and in no count, waiting for a paper that never came, without a word."""
    from tests.helpers import DAY, rl_paper
    from tests.processes import config_with
    from tests.servers.arxiv_server import ArxivServer

    (tmp_path / "seeds").mkdir()
    write(tmp_path / "seeds", "010_mine.yaml", '- title: My pick on reward overoptimization\n'
          '  arxiv_id: "2410.10110"\n  date: 2026-10-20\n  summary_zh: 我的 强化学习 摘要\n')
    with ArxivServer([rl_paper(1, DAY), rl_paper(2, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, seeds={"paths": [str(tmp_path / "seeds")]})
        ran = cli("--config", str(config), "run", "--as-of", "2026-11-02")
        again = cli("--config", str(config), "run", "--as-of", "2026-11-09")

    assert "relevant 3 (1 seeds)" in ran.stdout
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert "Curated: 1" in digest and "我的 强化学习 摘要" in digest
    assert "Sources: arXiv API + RSS + 精选清单 curated list (" in digest  # the user's seeds alone
    assert "[My pick on reward overoptimization](https://arxiv.org/abs/2410.10110)" in digest
    assert "Reading list: 3 " in digest
    rows = [line for line in (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8").splitlines()
            if "arxiv.org/abs/2410.10110" in line]
    assert len(rows) == 1 and "我的 强化学习 摘要" in rows[0]
    assert "no digest: nothing relevant is waiting for one" in again.stdout  # shown once


def test_a_seed_naming_an_older_paper_by_id_gets_its_record_from_arxiv(tmp_path, cli):
    """A seed naming by arxiv_id a paper announced before any collect's window showed only
    its own text: no authors, no abstract, never asked for (title-only seeds were searched)."""
    from dataclasses import replace

    from tests.helpers import DAY, rl_paper
    from tests.processes import config_with
    from tests.servers.arxiv_server import ArxivServer

    old = replace(rl_paper(9, DAY - timedelta(days=90), cats=("q-bio.NC",)), id="2608.00009",
                  authors=("Grace Hopper",))  # in no feed or search of the run: only asked for by id
    # arXiv's own id is cs/9605103; citations write the subject class in: cs.AI/9605103
    survey = replace(rl_paper(8, datetime(1996, 5, 1, tzinfo=UTC), cats=("cs.AI",)), id="cs/9605103",
                     authors=("Leslie Pack Kaelbling",))
    (tmp_path / "seeds").mkdir()
    write(tmp_path / "seeds", "010_mine.yaml", '- title: My pick on reward overoptimization\n'
          f'  arxiv_id: "{old.id}"\n  summary_zh: 我的 强化学习 摘要\n'
          '- title: "Reinforcement Learning: A Survey"\n  arxiv_id: "arXiv:cs.AI/9605103"\n'
          "  summary_zh: 强化学习 综述\n")
    with ArxivServer([rl_paper(1, DAY), old, survey]) as arxiv:
        config = config_with(tmp_path, arxiv, seeds={"paths": [str(tmp_path / "seeds")]})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        asked = [r for r in arxiv.requests if old.id in r.query.get("id_list", "")]
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
        again = [r for r in arxiv.requests if old.id in r.query.get("id_list", "")]
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    curated = digest.split("收录 · From the reading list", 1)[1]
    assert "Grace Hopper" in curated and "我的 强化学习 摘要" in curated
    assert "Leslie Pack Kaelbling" in curated and "https://arxiv.org/abs/cs/9605103" in curated
    assert "2608.00009" not in digest.split("收录 · From the reading list", 1)[0]  # never this week's
    assert len(asked) == 1 and again == asked  # stored: not asked again


def test_a_seed_pages_table_row_pasted_short_of_a_cell_shows_it_empty(tmp_path, cli):
    """A comparison row with a cell missing (or one too many) is how a table reads after a
    careless paste: the digest of that page stopped with 'unexpected error: IndexError'."""
    from tests.helpers import write_config

    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "010_page.txt").write_text(
        "Alpha Paper on RLHF（2026-05-12）：第一篇论文摘要。\n"
        "Beta Paper on GRPO（2026-05-11）：第二篇论文摘要。\n"
        "Alpha 发现标准流程中的核心问题：问题一。\n解决方案：方案。\n📄 查看论文\n"
        "Beta 发现新问题：问题二。\n关键发现：发现。\n📄 查看论文\n"
        "| 维度 | Alpha | Beta |\n|---|---|---|\n| 视角 | 正面 |\n| 核心问题 | 甲 | 乙 | 丙 |\n"
        "综合洞察：总结。\n", encoding="utf-8")
    config = write_config(tmp_path, {"seeds": {"paths": ["seeds"]}}, seeds=False)
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert "| 视角 | 正面 |  |\n" in digest and "| 核心问题 | 甲 | 乙 |\n" in digest, digest


def test_the_same_title_in_two_places_is_one_entry_and_a_warning_names_both(tmp_path, cli):
    """A group's file repeating a built-in page's title (or its own, with other case or
    punctuation) is one seed, the one read last; `seeds` listed both without a word, and the
    page's curated summary was silently replaced by the later one."""
    from tests.helpers import write_config

    (tmp_path / "seeds").mkdir()
    write(tmp_path / "seeds", "000_page.txt", "FlowRL: Matching Reward Distributions for LLM Reasoning\n"
          "本文提出了 FlowRL，匹配奖励分布。\n")
    write(tmp_path / "seeds", "010_group.txt", "Group Pick on Policy Gradients（2026-08-03）：第一篇摘要。\n"
          "flowrl - matching reward distributions for LLM reasoning（2026-08-04）：我们的 FlowRL 摘要。\n"
          "Group Pick On Policy-Gradients!（2026-08-06）：同一篇，标点不同。\n")
    config = write_config(tmp_path, {"seeds": {"paths": ["seeds"]}}, seeds=False)
    listed = cli("--config", str(config), "seeds")
    assert ("warning: 010_group.txt:2: same title as 000_page.txt:1 "
            "('FlowRL: Matching Reward Distributions for LLM Reasoning'); this later one is used") in listed.stderr
    assert ("warning: 010_group.txt:3: same title as 010_group.txt:1 "
            "('Group Pick on Policy Gradients'); this later one is used") in listed.stderr
    assert "2 entries from 2 files" in listed.stdout, listed.stdout


@pytest.mark.slow
def test_a_shown_seed_gets_the_english_of_its_chinese_as_it_is_now(tmp_path, cli):
    """A seed shown by a run without the LLM never got its English, and a summary edited
    after it was shown kept the English of the old text: only seeds not yet shown were
    translated, so the web edition and exports showed none, or a stale one, for good."""
    import json
    import time

    from tests.helpers import DAY, full_config, rl_paper
    from tests.servers.arxiv_server import ArxivServer
    from tests.servers.openai_server import OpenAIServer, default_content, ok

    def english(request):
        if request.task != "seed_translation":
            return None
        return ok({**default_content(request), "summary_en": "Edited English." if "改过" in request.user
                   else "First English."})

    def shown_english(path):
        rows = [json.loads(line) for line in (path / "out" / "site" / "exports" / "reading-list.jsonl")
                .read_text(encoding="utf-8").splitlines()]
        return next(row["summary_en"] for row in rows if row["title"] == "Our pick on process rewards")

    (tmp_path / "seeds").mkdir()
    pick = tmp_path / "seeds" / "010_ours.yaml"
    pick.write_text("- title: Our pick on process rewards\n  summary_zh: 我们选的，过程奖励。\n", encoding="utf-8")
    env = {"OPENAI_API_KEY": "k"}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, OpenAIServer(english) as llm:
        off = full_config(tmp_path, arxiv, seeds={"paths": [str(tmp_path / "seeds")]})
        cli("--config", str(off), "run", "--as-of", "2026-11-02", "--no-email")
        assert "Our pick on process rewards" in (tmp_path / "out" / "digests" / "2026-11-02.md").read_text("utf-8")
        assert shown_english(tmp_path) is None
        arxiv.add(rl_paper(2, DAY + timedelta(days=7)))
        on = full_config(tmp_path, arxiv, llm, seeds={"paths": [str(tmp_path / "seeds")]})
        cli("--config", str(on), "run", "--as-of", "2026-11-09", "--no-email", env=env)
        assert shown_english(tmp_path) == "First English."
        pick.write_text("- title: Our pick on process rewards\n  summary_zh: 我们改过的摘要。\n", encoding="utf-8")
        time.sleep(1)  # a week later: the newer translation by its time (stamped to the second)
        arxiv.add(rl_paper(3, DAY + timedelta(days=14)))
        cli("--config", str(on), "run", "--as-of", "2026-11-16", "--no-email", env=env)
    assert shown_english(tmp_path) == "Edited English."


@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
def test_an_entry_fixed_or_removed_from_the_seed_files_leaves_the_reading_list_and_later_digests(tmp_path, cli,
                                                                                              db_url):
    """A title whose typo was fixed, or a file deleted, stayed in the store for good: the
    typo'd title, in no file any more, was shown in the next digest and the fixed one in the
    one after (one paper twice), and the reading list kept both rows and the deleted file's."""
    from tests.helpers import DAY, broken_links, full_config, rl_paper
    from tests.servers.arxiv_server import ArxivServer

    (tmp_path / "seeds").mkdir()
    ours = write(tmp_path / "seeds", "010_ours.txt", "Online Process Reward Leanring for Agents（2026-08-01）：第一篇。\n"
                 "Another Pick on GRPO（2026-08-02）：第二篇。\n")
    old = write(tmp_path / "seeds", "020_old.yaml", "- title: A pick we dropped\n  summary_zh: 不要了。\n")
    write(tmp_path / "seeds", "notes.md", "our notes\n")  # another kind of file: skipped, no matter
    shown = []
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = full_config(tmp_path, arxiv, db_url=db_url, seeds={"paths": [str(tmp_path / "seeds")]},
                             digest={"max_curated": 1})
        for week, day in enumerate(["2026-11-02", "2026-11-09", "2026-11-16", "2026-11-23"]):
            if week == 1:
                ours.write_text(ours.read_text(encoding="utf-8").replace("Leanring", "Learning"), encoding="utf-8")
                old.unlink()
            if week == 3:  # what the digests showed stays in the reading list they link to
                ours.unlink()
            arxiv.add(rl_paper(week + 2, DAY + timedelta(days=7 * week)))
            cli("--config", str(config), "run", "--as-of", day, "--no-email")
            digest = (tmp_path / "out" / "digests" / f"{day}.md").read_text(encoding="utf-8")
            shown += re.findall(r"^- \*\*([^\[].*?)\*\*", digest.split("收录 · From the reading list", 1)[-1], re.M)
    assert shown == ["Another Pick on GRPO", "Online Process Reward Learning for Agents"], shown
    listed = (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")
    assert "Leanring" not in listed and "A pick we dropped" not in listed and "020\\_old" not in listed
    assert "Online Process Reward Learning for Agents" in listed and "Another Pick on GRPO" in listed
    assert broken_links(tmp_path / "out" / "site") == []


def test_an_old_digests_link_to_a_seed_finds_it_after_its_date_or_words_change(tmp_path, cli):
    """The web edition's digest links a seed entry's page by the topic and month it had that
    week; a date corrected in the seed file (or a summary that now reads as another topic)
    moved the entry, and the old digest's 'paper page' link led to a page that was gone."""
    from tests.helpers import DAY, broken_links, full_config, rl_paper
    from tests.servers.arxiv_server import ArxivServer

    (tmp_path / "seeds").mkdir()
    ours = write(tmp_path / "seeds", "010_ours.yaml", "- title: Our pick on reward models\n  date: 2026-08-04\n"
                 "  summary_zh: 奖励模型的论文。\n")
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = full_config(tmp_path, arxiv, seeds={"paths": [str(tmp_path / "seeds")]})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", "--no-email")
        page = (tmp_path / "out" / "site" / "digests" / "2026-11-02.html").read_text(encoding="utf-8")
        assert "-2026-08.html#p-seed-ourpickonrewardmodels" in page
        ours.write_text("- title: Our pick on reward models\n  date: 2025-07-04\n  summary_zh: 多智能体协作的论文。\n",
                        encoding="utf-8")
        arxiv.add(rl_paper(2, DAY + timedelta(days=7)))
        cli("--config", str(config), "run", "--as-of", "2026-11-09", "--no-email")
    assert broken_links(tmp_path / "out" / "site") == []


def test_a_yaml_entry_pasted_into_a_text_file_is_a_warning_not_a_title(tmp_path, cli):
    """`- title: …` in a .txt file read as a paper titled 'title: …', with no summary and
    no word, and was shown so in the digest's curated section."""
    from tests.helpers import write_config

    (tmp_path / "seeds").mkdir()
    write(tmp_path / "seeds", "010_group.txt", "Group Pick on Policy Gradients（2026-08-03）：第一篇摘要。\n"
          "- title: A YAML Line In A Text File\n  summary_zh: 粘贴错了文件。\n"
          "Date: A Paper Whose Title Starts So\n")
    config = write_config(tmp_path, {"seeds": {"paths": ["seeds"]}}, seeds=False)
    listed = cli("--config", str(config), "seeds")
    assert "title: A YAML Line" not in listed.stdout and "2 entries from 1 file" in listed.stdout, listed.stdout
    assert "Date: A Paper Whose Title Starts So" in listed.stdout
    for line in (2, 3):
        assert (f"warning: 010_group.txt:{line}: a YAML line in a text file "
                "(YAML entries go in a .yaml file); skipped") in listed.stderr, listed.stderr


def test_a_seed_file_that_cannot_be_read_keeps_its_entries(tmp_path, cli):
    """An entry in no file is taken out, but not while its file cannot be read (a save in
    another encoding, a YAML slip): the file's picks stay in the reading list meanwhile."""
    from tests.helpers import DAY, full_config, rl_paper
    from tests.servers.arxiv_server import ArxivServer

    (tmp_path / "seeds").mkdir()
    picks = write(tmp_path / "seeds", "010_ours.yaml", "- title: Our pick on process rewards\n  summary_zh: 过程奖励。\n"
                  "- title: Our pick on reward models\n  summary_zh: 奖励模型。\n")
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = full_config(tmp_path, arxiv, seeds={"paths": [str(tmp_path / "seeds")]}, digest={"max_curated": 1})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", "--no-email")
        for broken in ("- title: Our pick on process rewards\n  summary_zh: 过程奖励。\n".encode("gb18030"),
                       b"- title: [Our pick\n  summary_zh: x\n"):
            picks.write_bytes(broken)
            cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-09")
            listed = (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")
            assert "Our pick on process rewards" in listed and "Our pick on reward models" in listed


def test_two_titles_naming_one_paper_are_one_entry_the_one_read_last_and_a_warning_names_both(tmp_path, cli):
    """Two entries of other titles naming one paper (a title close enough to tie to it, an
    arxiv_id given twice) made one row with the words of whichever the store listed last, the
    entry added last even when read first, without a word; two naming a paper arXiv never
    returned were two rows of one paper, each counted, in the digest and the reading list."""
    from tests.helpers import DAY, rl_paper
    from tests.processes import config_with
    from tests.servers.arxiv_server import ArxivServer

    seeds = tmp_path / "seeds"
    seeds.mkdir()
    write(seeds, "010_mine.yaml", "- title: GRPO variant 1 for reinforcement learning of large language models\n"
          "  summary_zh: 我的 强化学习 摘要。\n")
    write(seeds, "020_group.txt", "GRPO Variant 1 for Reinforcement Learning of Large Language Model（2026-10-29）："
          "小组的 强化学习 摘要。\n")
    write(seeds, "030_ids.yaml", '- title: Never returned A\n  arxiv_id: "2410.10110"\n  summary_zh: 甲的摘要。\n'
          '- title: Never returned B\n  arxiv_id: "2410.10110"\n  summary_zh: 乙的摘要。\n')
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, seeds={"paths": [str(seeds)]})
        listed = cli("--config", str(config), "seeds")
        ran = cli("--config", str(config), "run", "--as-of", "2026-11-02", "--no-email")
        write(seeds, "005_early.yaml", "- title: Our own name for GRPO variant 1\n  arxiv_id: \"2611.00001\"\n"
              "  summary_zh: 后加的 强化学习 摘要。\n")  # added later, read first
        again = cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-09")

    said = ("030_ids.yaml:4: same arXiv paper (2410.10110) as 030_ids.yaml:1 ('Never returned A'); "
            "this later one is used")
    assert f"warning: {said}" in listed.stderr
    assert "3 entries from 3 files (1 naming a paper another entry names, each counted once)" in listed.stdout
    assert said in ran.stderr
    assert ("020_group.txt:1: same arXiv paper (2611.00001) as 010_mine.yaml:1 ('GRPO variant 1 for "
            "reinforcement learning of large language models'); this later one is used") in ran.stderr
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert digest.count("arxiv.org/abs/2410.10110)") == 1 and "乙的摘要" in digest and "甲的摘要" not in digest
    assert "小组的 强化学习 摘要" in digest and "我的 强化学习 摘要" not in digest
    assert "Reading list: 2 " in digest
    rows = [line for line in (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8").splitlines()
            if "arxiv.org/abs/" in line]
    assert len(rows) == 2, rows
    assert "小组的 强化学习 摘要" in rows[0] and "乙的摘要" in rows[1]
    assert "005_early.yaml:1: same arXiv paper (2611.00001)" not in again.stderr  # read first: not the later
    assert ("010_mine.yaml:1: same arXiv paper (2611.00001) as 005_early.yaml:1 ('Our own name for GRPO variant "
            "1'); this later one is used") in again.stderr
    rows = [line for line in (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8").splitlines()
            if "arxiv.org/abs/2611.00001" in line]
    assert len(rows) == 1 and "小组的 强化学习 摘要" in rows[0], rows


def test_an_entry_another_entry_of_its_paper_outranks_costs_no_llm_call(tmp_path, cli):
    """Of two entries naming one paper only the one read last is shown (digest, reading
    list, web edition), but a run asked the LLM to translate both: a call, and its tokens,
    for English nobody would read."""
    from tests.helpers import DAY, full_config, rl_paper
    from tests.servers.arxiv_server import ArxivServer
    from tests.servers.openai_server import OpenAIServer

    seeds = tmp_path / "seeds"
    seeds.mkdir()
    write(seeds, "030_ids.yaml", '- title: Never returned A\n  arxiv_id: "2410.10110"\n  summary_zh: 甲的摘要。\n'
          '- title: Never returned B\n  arxiv_id: "2410.10110"\n  summary_zh: 乙的摘要。\n'
          "- title: A pick of our own\n  summary_zh: 丙的摘要。\n")
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm, seeds={"paths": [str(seeds)]})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", "--no-email", env={"OPENAI_API_KEY": "k"})
        asked = [r.user for r in llm.requests if r.task == "seed_translation"]
    assert len(asked) == 2 and not any("甲的摘要" in user for user in asked), asked
    assert any("乙的摘要" in user for user in asked) and any("丙的摘要" in user for user in asked)
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert "乙的摘要" in digest and "甲的摘要" not in digest


def test_a_seeds_paper_read_from_a_feed_alone_shows_its_first_versions_date(tmp_path, cli):
    """A paper a seed entry is tied to that a feed alone brought and that the score did not
    keep showed the feed's date (11-24, the day after its announcement) in the digest and the
    reading list, where a kept paper of the same day showed its submission's (11-20): only the
    kept ones were completed from the API."""
    from datetime import UTC, datetime, timezone

    from pipeline.models import Paper
    from tests.processes import config_with
    from tests.servers.arxiv_server import ArxivServer

    sent = datetime(2026, 11, 20, 15, tzinfo=UTC)
    robot = Paper(id="2611.00042", title="Reward shaping for quadruped locomotion with policy gradient",
                  abstract="We shape rewards for a legged robot trained with policy gradient in simulation.",
                  authors=("Grace Hopper",), categories=("cs.LG",), submitted=sent, updated=sent)
    kept = Paper(id="2611.00043", title="GRPO for reinforcement learning of large language models",
                 abstract="We train a large language model with reinforcement learning from verifiable rewards.",
                 authors=("Ada Lovelace",), categories=("cs.LG",), submitted=sent, updated=sent)
    other = Paper(id="2611.00044", title="Parsing Hungarian morphology", abstract="We parse words.",
                  authors=("A. B.",), categories=("cs.CL",), submitted=sent, updated=sent)
    (tmp_path / "seeds").mkdir()
    with ArxivServer([other], announced=datetime(2026, 11, 24, tzinfo=timezone(timedelta(hours=-5)))) as arxiv:
        config = config_with(tmp_path, arxiv, seeds={"paths": [str(tmp_path / "seeds")]})
        cli("--config", str(config), "run", "--as-of", "2026-11-23T14:00:00+00:00", "--no-email")
        arxiv.add(robot, kept)  # Monday evening's, in the feeds only: the window before was read
        write(tmp_path / "seeds", "010_mine.yaml", f"- title: {robot.title}\n  summary_zh: 我们的 强化学习 摘要。\n")
        cli("--config", str(config), "run", "--as-of", "2026-11-24T14:00:00+00:00", "--no-email")
    digest = (tmp_path / "out" / "digests" / "2026-11-24.md").read_text(encoding="utf-8")
    assert f"**[{robot.title}](https://arxiv.org/abs/2611.00042)**（2026-11-20）" in digest, digest
    assert f"**[{kept.title}](https://arxiv.org/abs/2611.00043)**（2026-11-20）" in digest
    rows = [line for line in (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8").splitlines()
            if "arxiv.org/abs/2611.0004" in line]
    assert len(rows) == 2 and all("| 2026-11-20 |" in row for row in rows), rows


@pytest.mark.slow  # two runs, 3 s
def test_a_seed_translated_by_an_llm_run_keeps_its_english_in_a_later_run_without_it(tmp_path, cli):
    """The LLM translates every seed entry not shown yet; one shown a week later by a run
    with the LLM off, after a switch to another model (whose cache holds nothing yet),
    shows the English the store holds from then."""
    from tests.helpers import DAY, full_config, rl_paper
    from tests.servers.arxiv_server import ArxivServer
    from tests.servers.openai_server import OpenAIServer

    seeds = tmp_path / "seeds"
    seeds.mkdir()
    write(seeds, "010_ours.yaml", "- title: First pick on process rewards\n  summary_zh: 第一篇，过程奖励。\n"
          "- title: Second pick on verifier rewards\n  summary_zh: 第二篇，验证器奖励。\n")
    settings = {"seeds": {"paths": [str(seeds)]}, "digest": {"max_curated": 1}}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, OpenAIServer() as llm:
        on = full_config(tmp_path, arxiv, llm, **settings)
        cli("--config", str(on), "run", "--as-of", "2026-11-02", "--no-email", env={"OPENAI_API_KEY": "k"})
        assert sum(r.task == "seed_translation" for r in llm.requests) == 2
        arxiv.add(rl_paper(2, DAY + timedelta(days=7)))
        off = full_config(tmp_path, arxiv, enrich={"model": "another-model"}, **settings)
        cli("--config", str(off), "run", "--as-of", "2026-11-09", "--no-email")
    first, later = ((tmp_path / "out" / "digests" / f"{day}.md").read_text(encoding="utf-8")
                    for day in ("2026-11-02", "2026-11-09"))
    shown, waited = ("First", "Second") if "First pick" in first else ("Second", "First")
    assert f"{waited} pick" not in first and f"{shown} pick" not in later
    assert f"English translation for {waited} pick" in later, later
