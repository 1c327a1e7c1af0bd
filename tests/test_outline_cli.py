"""The digest's outline through the real CLI (issue 14): the LLM's highlights lead the
digest and the inbox preview; the featured pair shares a question."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.helpers import DAY, KEY, full_config, rl_paper
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer, ok
from tests.test_entries_cli import outputs

# The hidden first line, then invisible padding so that an inbox's preview stops there
# rather than running on into the header's window line.
PREHEADER = re.compile('<div class="preheader"[^>]*>([^<]*?)((?:\u034f\u200c&nbsp;)*)</div>')


def test_highlights_name_and_link_their_papers_and_lead_the_inbox_preview(tmp_path, cli):
    papers = [rl_paper(i, DAY) for i in range(1, 5)]
    with ArxivServer(papers) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm)
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        asked = [r for r in llm.requests if r.task == "highlights"]
    assert len(asked) == 1
    prompt = asked[0].user
    assert "3 to 5 one-line takeaways" in prompt  # templates/prompts/highlights.j2
    assert all(f"GRPO variant {i} for" in prompt for i in range(1, 5))
    got = outputs(tmp_path, "2026-11-02")
    md = got["md"]
    block = md.split("## 本周看点 · Highlights", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("- ")]
    assert 3 <= len(lines) <= 5
    for line in lines:  # each in both languages, naming and linking its paper
        title = line.split("看点：", 1)[1].split(" / ", 1)[0]
        assert f"*Takeaway: {title}*" in line
        assert f"→ [{title}](https://arxiv.org/abs/2611." in line
    assert md.index("## 本周看点") < md.index("## 精选解读") < md.index("## 本周论文")
    # The first takeaway is the hidden preheader: what the inbox shows before opening.
    first = lines[0].split("- ", 1)[1].split(" / ", 1)[0]
    found = PREHEADER.search(got["html"])
    assert found and found.group(1) == first
    assert len(found.group(2)) >= 3 * 60  # 180 invisible characters: past any inbox's preview
    assert got["html"].index('class="preheader"') < got["html"].index("<h1")
    txt = " ".join(got["txt"].split())
    assert first in txt and "Takeaway:" in txt


def test_two_takeaways_on_one_paper_are_sent_back_and_the_digest_names_each_paper_once(tmp_path, cli):
    said = []

    def twice(request):
        if request.task != "highlights":
            return None
        said.append(request)
        if len(said) > 1:
            return None  # the stand-in's own answer: one takeaway per paper
        return ok({"items": [{"paper": n, "zh": f"看点 {k}", "en": f"Takeaway {k}"}
                             for k, n in enumerate((1, 1, 2), 1)]})

    papers = [rl_paper(i, DAY) for i in range(1, 5)]
    with ArxivServer(papers) as arxiv, OpenAIServer(script=twice) as llm:
        config = full_config(tmp_path, arxiv, llm)
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
    assert len(said) == 2 and "two takeaways" in said[1].prompt  # the retry says what was wrong
    md = outputs(tmp_path, "2026-11-02")["md"]
    block = md.split("## 本周看点 · Highlights", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"\]\((https://arxiv.org/abs/[^)]+)\)", block)
    assert len(named) >= 3 and len(set(named)) == len(named)


def test_highlights_without_an_llm_invent_nothing(tmp_path, cli):
    """...and the inbox preview reads the featured title as written: it was escaped twice,
    "Don&#39;t Trust Q&amp;A" in the preview of every digest whose first featured title
    had an apostrophe or an ampersand."""
    papers = [rl_paper(i, DAY, title=f"GRPO variant {i}: Don't Trust Q&A Rewards in reinforcement learning "
                                     "of large language models") for i in range(1, 5)]
    with ArxivServer(papers) as arxiv:
        config = full_config(tmp_path, arxiv, enrich={"provider": "none"})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
    got = outputs(tmp_path, "2026-11-02")
    block = got["md"].split("## 本周看点 · Highlights", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("- ")]
    # The featured titles and the top topics with their counts, nothing else.
    assert lines and all(ln.startswith("- 精选 Featured：GRPO variant") or re.search(r"：\d+ 篇", ln)
                         for ln in lines), lines
    found = PREHEADER.search(got["html"])
    assert found and "GRPO variant" in found.group(1)
    assert ": Don't Trust Q&A Rewards in" in html.unescape(found.group(1))


def test_a_digest_of_seeds_alone_without_an_llm_still_has_three_highlights(tmp_path, cli):
    from tests.helpers import write_config

    config = write_config(tmp_path)  # the seed documents, no source, no LLM
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    got = outputs(tmp_path, "2026-11-02")
    block = got["md"].split("## 本周看点 · Highlights", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("- ")]
    assert len(lines) == 3, lines  # the seed page's featured pair, then a curated entry
    assert [ln.split("：", 1)[0] for ln in lines] == ["- 精选 Featured", "- 精选 Featured", "- 精选收录 Curated"]
    curated = lines[2].split("：", 1)[1]
    shelf = got["md"].split("## 收录 · From the reading list", 1)[1]
    assert f"**{curated}**" in shelf  # a title the digest lists below, not one it invents
    txt = " ".join(got["txt"].split())
    assert f"精选收录 Curated：{curated}" in txt
    assert "精选收录 Curated：" in got["html"].split("<h2", 2)[1]  # the email's Highlights block


def week_of_two_questions() -> list:
    """Two reward-hacking papers among unrelated ones; the unrelated score higher."""
    hacking = [
        rl_paper(1, DAY, title="Reward hacking in RLHF: policies exploit reward model loopholes"),
        rl_paper(2, DAY, title="Detecting reward hacking of learned reward models during RL fine-tuning"),
    ]
    hacking = [replace(p, abstract=(
        "Policies trained with reinforcement learning from human feedback exploit loopholes in the "
        "reward model: reward hacking inflates proxy reward while true quality drops. We study "
        f"reward hacking in large language models and measure overoptimisation ({p.id}).")) for p in hacking]
    others = [
        ("Tool-using agents trained with multi-turn reinforcement learning for web navigation",
         "Web agents built on large language models browse sites and call tools; multi-turn RL with "
         "sparse task success trains the agent policy over long horizons of clicks and forms."),
        ("Vision-language models learn chart reasoning with GRPO on synthetic plots",
         "A multimodal large language model reads charts and plots; GRPO with verifiable answers on "
         "synthetic figures improves visual question answering over chart images."),
        ("Asynchronous rollout systems make PPO training of large language models faster",
         "Rollout generation dominates the cost of PPO for large language models; an asynchronous "
         "system overlaps generation and training on GPU clusters and doubles throughput."),
        ("Curriculum RLVR for competition mathematics with verifiable rewards",
         "Reinforcement learning with verifiable rewards on olympiad mathematics problems, ordered "
         "by a curriculum of difficulty, improves large language model proof accuracy."),
        ("DPO for code generation with unit test preferences",
         "Direct preference optimization on pairs of programs ranked by unit tests teaches a large "
         "language model to write correct code in Python repositories."),
    ]
    unrelated = [replace(rl_paper(10 + i, DAY), title=title, abstract=abstract)
                 for i, (title, abstract) in enumerate(others)]
    return hacking + unrelated


def featured_titles(md: str) -> list[str]:
    block = md.split("## 精选解读 · Featured", 1)[1].split("\n## ", 1)[0]
    return [ln[4:] for ln in block.splitlines() if ln.startswith("### ")]


def test_the_featured_pair_shares_a_question_the_llm_names(tmp_path, cli):
    def pick(request):
        if request.task != "featured_pick":
            return None
        numbers = [n for n, t in enumerate(request.titles, 1) if "eward hacking" in t]
        return ok({"papers": numbers, "question_zh": "RL 训练中的奖励黑客如何被发现？",
                   "question_en": "How does reward hacking show up in RL training, and how is it caught?"})

    with ArxivServer(week_of_two_questions()) as arxiv, OpenAIServer(script=pick) as llm:
        config = full_config(tmp_path, arxiv, llm)
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        asked = [r for r in llm.requests if r.task == "featured_pick"]
        compared = [r for r in llm.requests if r.task == "comparison"]
    assert len(asked) == 1 and len(asked[0].titles) == 7  # chosen from the top candidates
    md = outputs(tmp_path, "2026-11-02")["md"]
    assert sorted(featured_titles(md)) == sorted(
        ["Detecting reward hacking of learned reward models during RL fine-tuning",
         "Reward hacking in RLHF: policies exploit reward model loopholes"])
    assert len(compared) == 1
    assert "How does reward hacking show up in RL training, and how is it caught?" in compared[0].user
    assert all("eward hacking" in t for t in compared[0].titles)
    assert ("**共同问题 Shared question**：RL 训练中的奖励黑客如何被发现？ / "
            "*How does reward hacking show up in RL training, and how is it caught?*") in md


def test_no_shared_question_features_one_paper_and_compares_nothing(tmp_path, cli):
    def nothing_shared(request):
        if request.task == "featured_pick":
            return ok({"papers": [], "question_zh": "", "question_en": ""})
        return None

    with ArxivServer(week_of_two_questions()) as arxiv, OpenAIServer(script=nothing_shared) as llm:
        config = full_config(tmp_path, arxiv, llm)
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        compared = [r for r in llm.requests if r.task == "comparison"]
    got = outputs(tmp_path, "2026-11-02")
    assert len(featured_titles(got["md"])) == 1 and not compared
    for fmt, text in got.items():
        assert "对比 · Comparison" not in text and "综合洞察" not in text, fmt


def test_without_an_llm_the_pair_is_found_by_term_overlap(tmp_path, cli):
    with ArxivServer(week_of_two_questions()) as arxiv:
        config = full_config(tmp_path, arxiv, enrich={"provider": "none"})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
    md = outputs(tmp_path, "2026-11-02")["md"]
    assert all("eward hacking" in t for t in featured_titles(md)) and len(featured_titles(md)) == 2


ENGLISH_LABELS = ("Highlights", "Featured", "This week's papers", "Comparison", "Synthesis",
                  "Shared question", "Read the paper", "From the reading list", "Why it matters",
                  "Reading list", "Unsubscribe", "Window", "Coverage", "Updates", "papers")
ENGLISH_PROSE = ("English summary of", "Takeaway:", "finds a core problem", "Shared question of",
                 "Synthesis:", "point one", "matters: it changes", "English translation for",
                 "announcements read")


def test_chinese_only_shows_no_english_prose_outside_names_and_titles(tmp_path, cli):
    papers = [rl_paper(i, DAY) for i in range(1, 5)]
    with ArxivServer(papers) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm, languages=["zh"],
                             seeds={"paths": [], "builtin": True})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
    for fmt, text in outputs(tmp_path, "2026-11-02").items():
        visible = re.sub(r"<[^>]+>|\(https?://[^)]*\)|https?://\S+", " ", text)
        for title in [p.title for p in papers]:
            visible = visible.replace(title, " ")
        for words in ENGLISH_PROSE:
            assert words not in visible, (fmt, words)
        for label in ENGLISH_LABELS:
            assert not re.search(rf"(?<![\w-]){re.escape(label)}(?![\w-])", visible), (fmt, label)
    md = outputs(tmp_path, "2026-11-02")["md"]
    assert md.index("## 本周看点") < md.index("## 精选解读") < md.index("## 本周论文") < md.index("## 收录")


@pytest.mark.slow  # make test-slow: a long scenario beside faster ones on the same path
def test_an_offline_preview_changes_nothing_the_online_run_publishes(tmp_path, cli):
    from tests.servers.smtp_server import SmtpServer, refused_port

    papers = [rl_paper(i, DAY) for i in range(1, 4)]
    made = {}
    for name, preview in (("direct", False), ("previewed", True)):
        folder = tmp_path / name
        folder.mkdir()
        port = refused_port()
        with ArxivServer(papers) as arxiv, SmtpServer(port=port) as smtp:
            config = full_config(folder, arxiv, smtp_port=port, enrich={"provider": "none"},
                                 seeds={"paths": [], "builtin": True})
            if preview:
                cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
                assert not smtp.messages  # a preview sends nothing
            cli("--config", str(config), "run", "--as-of", "2026-11-02")
            made[name] = (outputs(folder, "2026-11-02"), sorted(m.rcpt_tos[0] for m in smtp.messages))
    assert made["previewed"] == made["direct"]
    assert made["direct"][1] == ["ada@example.org", "alan@example.org"]


@pytest.mark.slow  # make test-slow: a long scenario beside faster ones on the same path
def test_the_weeks_movers_are_named_once_there_is_a_week_before(tmp_path, cli):
    """Two papers, then six, then two: the first digest says nothing of trends, the second
    names the topic up from 2, the third down from 6; a re-render of the second keeps its figures."""
    later = DAY + timedelta(days=7)
    weeks = [[rl_paper(i, DAY) for i in (1, 2)], [rl_paper(i, later) for i in range(3, 9)],
             [rl_paper(i, later + timedelta(days=7)) for i in (9, 10)]]
    with ArxivServer(weeks[0]) as arxiv:
        config = full_config(tmp_path, arxiv, enrich={"provider": "none"})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        first = outputs(tmp_path, "2026-11-02")
        arxiv.papers = weeks[0] + weeks[1]
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
        second = outputs(tmp_path, "2026-11-09")
        arxiv.papers = weeks[0] + weeks[1] + weeks[2]
        cli("--config", str(config), "run", "--as-of", "2026-11-16")
        third = outputs(tmp_path, "2026-11-16")
    for text in first.values():  # no history: no chart, no line, nothing invented
        assert "本周变化" not in text and "Movers" not in text and "主题趋势" not in text
    up = "本周变化：算法与目标 6 篇，上周 2 篇 / Movers: Algorithms and objectives 6 papers, up from 2"
    assert f"> {up}" in [line.rstrip() for line in second["md"].splitlines()]  # a header line
    assert up in " ".join(second["txt"].split())
    html = second["html"]
    chart = html[html.index("主题趋势 · Trends</h2>"):]
    assert "算法与目标 · Algorithms and objectives · <strong>6</strong>" in chart and "(2)</span>" in chart
    assert up in chart
    assert "Algorithms and objectives 2 papers, down from 6" in third["md"]
    again = cli("--config", str(config), "render", "--digest", "2026-11-09").stdout
    assert f"> {up}" in [line.rstrip() for line in again.splitlines()]  # that week's figures, not today's
