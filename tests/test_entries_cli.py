"""What each paper gives a reader, through the real CLI: Updates across two weeks, an
English-only digest without Chinese, and the glossary check counted in `status`."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.helpers import CATS, DAY, KEY, ROOT, full_config, rl_paper, untagged, write_config
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer, ok

CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def outputs(tmp_path, day: str) -> dict[str, str]:
    folder = tmp_path / "out" / "digests"
    read = {fmt: (folder / f"{day}.{fmt}").read_text(encoding="utf-8") for fmt in ("md", "html", "txt")}
    return {**read, "html": untagged(read["html"])}


@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
def test_a_revision_and_a_new_venue_are_listed_once_under_updates(tmp_path, cli, db_url):
    week1 = [rl_paper(i, DAY) for i in range(1, 4)]
    with ArxivServer(week1) as arxiv:
        config = full_config(tmp_path, arxiv, db_url=db_url)
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        first = outputs(tmp_path, "2026-11-02")
        assert "更新 · Updates" not in first["md"]
        # Week 2: paper 1 is replaced by v2 (RSS `replace`); paper 2 gets v2 with a
        # journal-ref; paper 3 is unchanged; paper 4 is new.
        later = DAY + timedelta(days=7)
        arxiv.papers = [
            replace(week1[0], version=2, updated=later, announce_type="replace"),
            replace(week1[1], version=2, updated=later, announce_type="replace",
                    journal_ref="ICLR 2027"),
            week1[2], rl_paper(4, later),
        ]
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
        second = outputs(tmp_path, "2026-11-09")
        cli("--config", str(config), "run", "--as-of", "2026-11-16")
    md = second["md"]
    updates = md.split("## 更新 · Updates", 1)[1].split("\n## ", 1)[0]
    assert "GRPO variant 1 for" in updates and "v1 → v2" in updates
    assert "GRPO variant 2 for" in updates and "accepted at ICLR 2027" in updates
    assert "已被 ICLR 2027 接收" in updates
    sample = (ROOT / "README.md").read_text(encoding="utf-8").split("## 更新 · Updates\n\n", 1)[1]
    assert sample.split("```", 1)[0].strip() in updates  # README's sample is this run's, whole
    assert "GRPO variant 3" not in md  # nothing changed: not listed again
    for fmt, text in second.items():  # each revised paper once, under Updates only
        assert text.count("GRPO variant 1 for") == 1, fmt
        assert text.count("GRPO variant 2 for") == 1, fmt
        assert "GRPO variant 4 for" in text
    assert "v1 → v2" in " ".join(second["txt"].split()) and "accepted at ICLR 2027" in second["html"]
    week3 = (tmp_path / "out" / "digests" / "2026-11-16.md")
    assert not week3.exists() or "更新 · Updates" not in week3.read_text(encoding="utf-8")


@pytest.mark.slow  # make test-slow: a long scenario beside faster ones on the same path
def test_a_withdrawn_paper_is_said_withdrawn_once_under_updates(tmp_path, cli):
    """arXiv withdraws a paper as a new version whose comment and abstract say so: to a
    reader that is more than "v1 → v2"."""
    week1 = [rl_paper(i, DAY) for i in range(1, 3)]
    later = DAY + timedelta(days=7)
    words = "This paper has been withdrawn by the authors due to an error in the reward model."
    with ArxivServer(week1) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        arxiv.papers = [replace(week1[0], version=2, updated=later, announce_type="replace",
                                comment="This paper has been withdrawn", abstract=words), week1[1]]
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
        arxiv.papers = [week1[1], rl_paper(3, later + timedelta(days=7))]
        cli("--config", str(config), "run", "--as-of", "2026-11-16")
        second, third = outputs(tmp_path, "2026-11-09"), outputs(tmp_path, "2026-11-16")
    updates = second["md"].split("## 更新 · Updates", 1)[1].split("\n## ", 1)[0]
    assert "GRPO variant 1 for" in updates and "v1 → v2" in updates
    assert "作者已撤稿 / withdrawn by its authors" in updates
    assert updates.index("withdrawn by its authors") < updates.index("v1 → v2")  # the weightiest first
    assert "withdrawn by its authors" in " ".join(second["txt"].split()) and "withdrawn by its authors" in second["html"]
    assert "withdrawn by its authors" not in third["md"]  # said once


def test_updates_go_withdrawn_venue_code_then_new_versions_in_every_edition(tmp_path, cli):
    """An email too big drops updates from the end: a withdrawal comes first, then a paper
    at a venue, code released, a new version alone (they went by title, so the withdrawal
    of 'GRPO variant 4' came last, the first an email gave way)."""
    week1 = [rl_paper(i, DAY) for i in range(1, 5)]
    later = DAY + timedelta(days=7)
    with ArxivServer(week1) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        v2 = {"version": 2, "updated": later, "announce_type": "replace"}
        arxiv.papers = [replace(week1[0], **v2), replace(week1[1], **v2, comment="Code: https://github.com/lab/g2"),
                        replace(week1[2], **v2, journal_ref="ICLR 2027"),
                        replace(week1[3], **v2, comment="This paper has been withdrawn",
                                abstract="This paper has been withdrawn by the authors.")]
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
    day = "2026-11-09"
    editions = {**outputs(tmp_path, day),
                "site": (tmp_path / "out" / "site" / "digests" / f"{day}.html").read_text("utf-8")}
    for fmt, text in editions.items():  # the week's only papers are its updates
        updates = " ".join(text.split())
        order = [int(n) for n in re.findall(r"GRPO variant (\d) for", updates)]
        assert order == [4, 3, 2, 1], (fmt, order)
        assert updates.index("withdrawn by its authors") < updates.index("accepted at ICLR 2027") \
            < updates.index("code released"), fmt


def test_a_paper_first_listed_in_one_line_gets_its_updates_too(tmp_path, cli):
    """Most of a busy week is one-line entries: their news is as much news. So is a seed's
    paper's, shown under 收录 · From the reading list: its new version was in no Updates."""
    week1 = [rl_paper(i, DAY) for i in range(1, 7)]
    later = DAY + timedelta(days=7)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "010.txt").write_text(f"{week1[5].title}\n本文提出了一种方法。\n", encoding="utf-8")
    with ArxivServer(week1) as arxiv:
        config = full_config(tmp_path, arxiv, digest={"max_papers": 1, "featured": 1},
                             seeds={"paths": [str(tmp_path / "mine")]})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        first = outputs(tmp_path, "2026-11-02")["md"]
        arxiv.papers = [replace(p, version=2, updated=later, announce_type="replace") for p in week1]
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
    one_line = [p for p in week1 if f"- [{p.title}](" in first]
    assert len(one_line) >= 3, first  # most of the week was listed in one line
    assert week1[5].title in first.split("## 收录 · From the reading list", 1)[1]
    md = outputs(tmp_path, "2026-11-09")["md"]
    assert f"更新 Updates: {len(week1)}" in md.split("\n\n", 2)[1]  # the header counts them
    updates = md.split("## 更新 · Updates", 1)[1].split("\n## ", 1)[0]
    for paper in week1:
        assert paper.title in updates and updates.count(paper.title) == 1, paper.title
    assert updates.count("v1 → v2") == len(week1)


def test_english_only_has_no_chinese_anywhere_seeds_included(tmp_path, cli):
    paper = replace(rl_paper(1, DAY), title="GRPO-$\\lambda$ for reasoning with reinforcement learning")
    week = [paper, *(rl_paper(i, DAY) for i in range(2, 5))]  # enough for highlights and a pair
    with ArxivServer(week) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm, languages=["en"],
                             seeds={"paths": [], "builtin": True})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        found = CJK.findall(text)
        assert not found, (path.name, "".join(found[:20]))
    md = outputs(tmp_path, "2026-11-02")["md"]
    for heading in ("## Highlights", "## Featured", "**Shared question**", "## Comparison", "## Synthesis",
                    "## This week's papers", "## From the reading list"):
        assert heading in md, heading
    assert "GRPO-λ for reasoning" in md and "$\\lambda$" not in md
    assert "Why it matters: Why GRPO-$" not in md  # the prompt saw the raw title; the page does not


def test_english_only_without_an_llm_shows_no_empty_comparison_or_synthesis(tmp_path, cli):
    """The seed page's pair, featured in a digest of seeds alone, is compared and
    synthesised in Chinese only: an English reader got a table of empty rows under
    Comparison and a Synthesis heading with nothing under it."""
    config = write_config(tmp_path, {"languages": ["en"], "seeds": {"paths": [], "builtin": True}},
                          seeds=False)
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-30")
    md = outputs(tmp_path, "2026-11-30")["md"]
    site = (tmp_path / "out" / "site" / "digests" / "2026-11-30.html").read_text(encoding="utf-8")
    assert "## Featured" in md and "## Comparison" in md
    table = md.split("## Comparison", 1)[1].split("\n## ", 1)[0]
    assert "| Topic |" in table  # what is known of the pair, in English
    assert not re.search(r"^\|( +\|)+$", table, re.M), table  # no row without a word
    assert not re.search(r"^\|[^|]+\|( +\|)+$", table, re.M), table  # nor a label over empty cells
    assert "## Synthesis" not in md
    txt = outputs(tmp_path, "2026-11-30")["txt"]
    assert "Synthesis" not in txt and not re.search(r"(Categories|Date): *$", txt, re.M)
    assert "Synthesis" not in site and "<td><strong></strong></td>" not in site
    html = outputs(tmp_path, "2026-11-30")["html"]
    assert not re.search(r"</th>(<td[^>]*></td>)+</tr>", site + html)
    # A seed whose note is Chinese alone waits for its English: it was a bare title, counted
    # and marked shown, so it never came back translated.
    shelf = md.split("## From the reading list", 1)[1]
    assert "Beyond Negative Rollouts" not in shelf and shelf.count("\n- **") == 1 and "📌" not in shelf
    assert "· Curated: 3 ·" in md  # the featured pair and the one entry listed


def test_the_glossary_check_flags_a_term_and_status_counts_it(tmp_path, cli):
    def reply(request):
        if request.task != "paper_summary":
            return None
        return ok({"title_zh": "奖赏模型的强化学习", "summary_zh": "本文用奖赏模型训练策略。",
                   "summary_en": "This paper trains a policy with a reward model.",
                   "why_zh": "它改进了奖励模型。", "why_en": "It improves reward models.",
                   "kind": "method", "key_points_zh": ["一", "二"], "key_points_en": ["one", "two"]})

    with ArxivServer([rl_paper(1, DAY)]) as arxiv, OpenAIServer(script=reply) as llm:
        config = full_config(tmp_path, arxiv, llm)
        run = cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        request = next(r for r in llm.requests if r.task == "paper_summary")
    # The glossary goes once into the system prompt, not into each item's text.
    assert "- reward model: 奖励模型\n" in request.system and request.system.count("- reward model:") == 1
    assert "奖励模型" not in request.user and len(re.findall(r"^- .+: ", request.system, re.M)) >= 40
    assert ("glossary: 1 term(s) in the LLM's Chinese differ from templates/glossary.yaml, "
            "e.g. reward model: 奖赏模型 (glossary: 奖励模型)") in run.stderr
    status = cli("--config", str(config), "status").stdout
    assert "glossary flags 1" in status


def test_every_relevant_paper_is_listed_seeds_in_their_place_and_offline_is_a_preview(tmp_path, cli):
    from tests.servers.smtp_server import SmtpServer, refused_port

    papers = [rl_paper(i, DAY) for i in range(1, 6)]
    port = refused_port()
    with ArxivServer(papers) as arxiv, SmtpServer(port=port) as smtp:
        config = full_config(tmp_path, arxiv, smtp_port=port, digest={"max_papers": 2, "featured": 1},
                             seeds={"paths": [], "builtin": True})
        # A preview first: files, no email, nothing recorded.
        cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
        assert not smtp.messages
        assert "digests 0" in cli("--config", str(config), "status").stdout
        site = tmp_path / "out" / "site"  # the preview's page, not announced to the feed's subscribers
        assert (site / "digests" / "2026-11-02.html").exists()
        assert "digests/2026-11-02.html" not in (site / "feed.xml").read_text(encoding="utf-8")
        assert "预览，未发送" in (site / "index.html").read_text(encoding="utf-8")  # said a preview
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        assert "digests/2026-11-02.html" in (site / "feed.xml").read_text(encoding="utf-8")
        assert "预览，未发送" not in (site / "index.html").read_text(encoding="utf-8")  # published now
        assert "预览，未发送" not in (site / "digests" / "2026-11-02.html").read_text(encoding="utf-8")
        first = outputs(tmp_path, "2026-11-02")
        sent = len(smtp.messages)
        arxiv.papers = papers + [rl_paper(9, DAY + timedelta(days=7)), rl_paper(10, DAY + timedelta(days=14))]
        cli("--config", str(config), "run", "--as-of", "2026-11-16")  # no run on 11-09: a week skipped
        second = outputs(tmp_path, "2026-11-16")
    assert sent == 2  # the online run mailed each reader once
    md = first["md"]
    week = md.split("## 本周论文 · This week's papers", 1)[1].split("\n## ", 1)[0]
    for i in range(1, 6):  # every relevant paper: featured, full or one line
        assert f"GRPO variant {i} for" in md
    assert week.count("- **[") == 3 and week.count("\n- [") == 2  # 2 full, 2 one-line, 1 featured
    assert week.count("↑ 见上文精选解读 read in Featured above") == 1  # named under its topic too
    assert "📌" not in week  # no seed under this week's papers
    curated = md.split("## 收录 · From the reading list", 1)[1].split("\n---\n", 1)[0]
    assert 1 <= curated.count("\n- **") <= 5  # at most digest.max_curated seed entries
    assert "📌" not in curated  # the heading says what they are
    # The contract's reading order, in every format.
    for fmt, text in first.items():
        heads = ["本周看点 · Highlights", "精选解读 · Featured", "本周论文 · This week's papers",
                 "收录 · From the reading list"]
        spots = [text.index(h) for h in heads]
        assert spots == sorted(spots), fmt
    # After a skipped week: nothing from week 1 again, the papers of both weeks since, and a
    # window (and the coverage counted in it) from the last digest's end, not lookback_days.
    assert "GRPO variant 9 for" in second["md"] and "GRPO variant 10 for" in second["md"]
    for i in range(1, 6):
        assert f"GRPO variant {i} for" not in second["md"]
    assert "Window: 2026-11-02 23:59 → 2026-11-16 23:59 (Asia/Shanghai)" in second["md"]
    assert "10/10 arXiv announcements read (11-02 → 11-15)" in second["md"]


def test_two_weeks_with_the_default_digest_and_an_llm_list_every_relevant_paper_once(tmp_path, cli):
    """The default digest settings (30 full entries, 2 featured, 5 curated) with the LLM on:
    a week of 40 relevant papers lists all of them, a week later only the new ones and the
    revised one under Updates."""
    from tests.servers.smtp_server import SmtpServer, refused_port

    week1 = [rl_paper(i, DAY) for i in range(1, 41)]
    port = refused_port()
    with ArxivServer(week1) as arxiv, OpenAIServer() as llm, SmtpServer(port=port) as smtp:
        config = full_config(tmp_path, arxiv, llm, smtp_port=port, seeds={"paths": [], "builtin": True})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        first = outputs(tmp_path, "2026-11-02")
        later = DAY + timedelta(days=7)
        arxiv.papers = [*week1[1:], replace(week1[0], version=2, updated=later, announce_type="replace"),
                        rl_paper(41, later), rl_paper(42, later)]
        cli("--config", str(config), "run", "--as-of", "2026-11-09", env={"OPENAI_API_KEY": KEY})
        second = outputs(tmp_path, "2026-11-09")
        mailed = len(smtp.messages)
    assert mailed == 4  # two readers, two digests
    md = first["md"]
    featured = md.split("## 精选解读 · Featured", 1)[1].split("\n## ", 1)[0]
    week = md.split("## 本周论文 · This week's papers", 1)[1].split("\n## ", 1)[0]
    for i in range(1, 41):  # every relevant paper, once: full entry, one line or featured above
        assert week.count(f"abs/2611.{i:05d})") == 1, i
    assert featured.count("📄") == 2 and week.count("↑ 见上文精选解读") == 2
    assert week.count("- **[") == 32 and week.count("\n- [") == 8
    assert "📌" not in week
    curated = md.split("## 收录 · From the reading list", 1)[1].split("\n---\n", 1)[0]
    assert 1 <= curated.count("\n- **") <= 5 and "📌" not in curated
    assert "对比 · Comparison" in md and "综合洞察 · Synthesis" in md  # the LLM wrote them
    for fmt, text in first.items():
        heads = ["本周看点 · Highlights", "精选解读 · Featured", "本周论文 · This week's papers",
                 "收录 · From the reading list"]
        spots = [text.index(h) for h in heads]
        assert spots == sorted(spots), fmt
    md2 = second["md"]
    updates = md2.split("## 更新 · Updates", 1)[1].split("\n## ", 1)[0]
    assert "abs/2611.00001)" in updates and md2.count("abs/2611.00001)") == 1
    for i in range(2, 41):
        assert f"abs/2611.{i:05d})" not in md2, i
    assert "GRPO variant 41 for" in md2 and "GRPO variant 42 for" in md2
    for fmt, text in second.items():  # both new papers are featured: the list names them, not "nothing new"
        words = " ".join(html.unescape(text).split())  # the text copy wraps, the HTML escapes
        assert words.count("read in Featured above") == 2 and "Nothing new" not in words, fmt


def test_the_llm_summarises_the_full_entries_first_not_the_one_line_ones(tmp_path, cli):
    """enrich.max_papers is spent in the digest's order (importance), not by relevance alone:
    a summary of a one-line entry shows nowhere, a full entry without one waits a week."""
    week = [rl_paper(i, DAY) for i in range(1, 7)]
    coded = {"2611.00005", "2611.00006"}  # relevant, no more than the others, and with code
    week = [replace(p, abstract="A large language model is fine-tuned with reinforcement learning. "
                                "Code: https://github.com/example/grpo.") if p.id in coded else p
            for p in week]
    with ArxivServer(week) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm, digest={"max_papers": 2, "featured": 0,
                                                           "importance": {"code": 5.0}},
                             enrich={"provider": "openai", "base_url": llm.url, "max_papers": 2,
                                     "timeout_seconds": 5, "deadline_seconds": 10, "concurrency": 1})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        asked = {t for r in llm.requests if r.task == "paper_summary" for t in r.titles}
    assert asked == {p.title for p in week if p.id in coded}
    md = outputs(tmp_path, "2026-11-02")["md"]
    for paper in week:
        full = f"**[{paper.title}]" in md or f"**{paper.title}**" in md
        assert full == (paper.id in coded), paper.id  # the two with code are the full entries
        if full:
            assert f"English summary of {paper.title}." in md


@pytest.mark.slow  # make test's margin under 5 minutes: it runs in make test-slow (CI)
def test_a_token_budget_goes_to_the_featured_papers_and_highlights_before_one_line_entries(tmp_path, cli):
    """enrich.max_tokens_per_run is spent in reading order: the summaries of the entries shown
    in full, then the digest's own calls, then the one-line entries' summaries. Spent on the
    week's summaries first, it left the digest without a featured reading, comparison or
    highlights while summarising papers the digest shows in one line."""
    week = [rl_paper(i, DAY) for i in range(1, 9)]
    with ArxivServer(week) as arxiv, OpenAIServer() as llm:  # each call 150 tokens: 9 fit
        config = full_config(tmp_path, arxiv, llm, digest={"max_papers": 2, "featured": 2},
                             enrich={"provider": "openai", "base_url": llm.url, "max_tokens_per_run": 1350,
                                     "timeout_seconds": 5, "deadline_seconds": 10, "concurrency": 1})
        ran = cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        summarised = {t for r in llm.requests if r.task == "paper_summary" for t in r.titles}
        tasks = llm.tasks()
    assert tasks == ["paper_summary"] * 4 + ["featured_pick", "featured_reading", "featured_reading",
                                             "comparison", "highlights"]
    assert "the token budget of 1350 (enrich.max_tokens_per_run) is spent" in ran.stderr
    md = outputs(tmp_path, "2026-11-02")["md"]
    assert md.count("finds a core problem.") == 2 and "综合洞察" in md  # the readings, the synthesis
    assert md.count("Takeaway: GRPO variant") >= 3  # the highlights
    for paper in week:  # the summaries went to the featured and full entries; one-line ones wait
        shown_in_full = f"### {paper.title}" in md or f"**[{paper.title}]" in md or f"**{paper.title}**" in md
        assert (paper.title in summarised) == shown_in_full, paper.id
        assert (f"English summary of {paper.title}." in md) == (shown_in_full and f"### {paper.title}" not in md)


@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
@pytest.mark.slow  # make test-slow: a long scenario beside faster ones on the same path
def test_a_venue_without_a_new_version_reaches_updates_weeks_after_the_paper_was_listed(tmp_path, cli, db_url):
    """A journal reference comes with no new version (OAI-PMH restamps the record), in a later
    week than the paper's digest and after another digest: a run reads only the listed papers
    that changed since the last digest, and this one did."""
    week1 = [rl_paper(i, DAY) for i in range(1, 4)]
    with ArxivServer(week1) as arxiv:
        config = full_config(tmp_path, arxiv, db_url=db_url, sources={
            "arxiv": {"api_url": arxiv.api_url, "categories": CATS, "page_size": 50, "overlap_hours": 0,
                      "retries": 1},
            "rss": {"urls": [arxiv.rss_url(CATS)]}, "oai": {"url": arxiv.oai_url}})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        arxiv.papers = [*week1, rl_paper(4, DAY + timedelta(days=7))]
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
        arxiv.papers = [week1[0], replace(week1[1], journal_ref="ICLR 2027"), week1[2],
                        rl_paper(5, DAY + timedelta(days=14))]
        arxiv.datestamps[week1[1].id] = (DAY + timedelta(days=13)).date()
        cli("--config", str(config), "run", "--as-of", "2026-11-16")
        arxiv.papers.append(rl_paper(6, DAY + timedelta(days=21)))
        cli("--config", str(config), "run", "--as-of", "2026-11-23")
    assert "更新 · Updates" not in outputs(tmp_path, "2026-11-09")["md"]
    md = outputs(tmp_path, "2026-11-16")["md"]
    updates = md.split("## 更新 · Updates", 1)[1].split("\n## ", 1)[0]
    assert "GRPO variant 2 for" in updates and "accepted at ICLR 2027" in updates
    assert "GRPO variant 1 for" not in md and "GRPO variant 3 for" not in md
    assert "更新 · Updates" not in outputs(tmp_path, "2026-11-23")["md"]  # said once


@pytest.mark.slow  # three runs, 3.5 s
def test_a_rerun_of_a_published_day_keeps_its_digest_and_a_paper_found_since_waits(tmp_path, cli):
    """Running a published day again after a paper of that week arrived made its digest anew
    of that paper alone, since the others were listed: the day's digest is the one made."""
    with ArxivServer([rl_paper(i, DAY) for i in range(2)]) as arxiv:
        config = full_config(tmp_path, arxiv, enrich={"provider": "none"})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        arxiv.papers = [rl_paper(i, DAY) for i in range(3)]
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
    again, later = outputs(tmp_path, "2026-11-02")["md"], outputs(tmp_path, "2026-11-09")["md"]
    assert "GRPO variant 0 for" in again and "GRPO variant 1 for" in again
    assert "GRPO variant 2 for" not in again and "GRPO variant 2 for" in later
