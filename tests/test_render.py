"""Rendering: golden files for every output, escaping of hostile text, the email size cap,
the 72-column text, template overrides, and a look at the HTML in headless Chromium.

UPDATE_GOLDEN=1 rewrites tests/golden/ from the fixture in tests/fixtures_digest.py.
"""

from __future__ import annotations

import gc
import json
import os
import re
import struct
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from functools import partial
from html import escape, unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import jinja2
import pytest

from pipeline import bilingual, compose, links, render, site
from pipeline.config_email import Email, Reader
from pipeline.deliver.email import EmailChannel
from pipeline.deliver.email_message import WIRE_POLICY, build_message, message_bytes
from pipeline.escape import md_escape
from pipeline.models import Paper, paper_key
from pipeline.text_wrap import display_width, wrap
from tests import fixtures_digest as fx
from tests.helpers import chromium, untagged, voiced

GOLDEN = Path(__file__).parent / "golden"
ARTIFACTS = Path(__file__).parent / "artifacts"
READING = 215
UPDATED = "2026-11-30"


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")
        return
    assert path.exists(), f"{path} is missing: run with UPDATE_GOLDEN=1 to create it"
    expected = path.read_bytes().decode("utf-8")
    assert text == expected, f"{name} differs from its golden file (UPDATE_GOLDEN=1 rewrites it)"


def test_the_readmes_digest_samples_are_lines_of_the_golden_digest():
    """README quotes tests/golden/digest.md, cut short with '…': every line it quotes whole is
    one of the golden file's (its header had lost the Updates count, edited by hand)."""
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    lines = set((GOLDEN / "digest.md").read_text(encoding="utf-8").splitlines())
    samples = [block for block in re.findall(r"```markdown\n(.*?)```", readme, re.S)
               if "tests/golden/digest.md" in readme.split(block, 1)[0][-400:]]
    quoted = [line.strip() for block in samples for line in block.splitlines()
              if line.strip() and "…" not in line and "←" not in line]
    assert len(samples) == 2 and len(quoted) > 15
    assert [line for line in quoted if line not in {x.strip() for x in lines}] == []


@pytest.fixture(scope="module")
def cfg():
    return fx.config()


@pytest.fixture(scope="module")
def digest():
    return fx.digest()


@pytest.fixture(scope="module")
def md(cfg, digest):
    return render.digest_markdown(cfg, digest, READING)


@pytest.fixture(scope="module")
def html(cfg, digest):
    return render.digest_html(cfg, digest, READING)


@pytest.fixture(scope="module")
def txt(cfg, digest):
    return render.digest_text(cfg, digest, READING)


# Links an output may carry: arXiv pages and PDFs, the reading list, and the code and
# Hugging Face links read from the fixture's abstract (never its javascript: ones).
OURS = ("https://arxiv.org/abs/", "https://arxiv.org/pdf/", "https://github.com/example-lab/",
        "https://huggingface.co/example-lab/", "https://huggingface.co/datasets/example-lab/",
        "../READING_LIST.md")


INTRO_START = fx.INTRO_ZH[:20]


def entries(digest):
    return [e for s in digest.sections for e in s.entries] + list(digest.featured)


# --- golden files ------------------------------------------------------------------------

def test_golden_markdown(md):
    golden("digest.md", md)


def test_golden_html(html):
    golden("digest.html", html)


def test_golden_text(txt):
    golden("digest.txt", txt)


def test_golden_subject(cfg, digest):
    golden("subject.txt", render.digest_subject(cfg, digest) + "\n")




def test_golden_feed(cfg, digest):
    golden("feed.xml", render.feed_xml(cfg, [digest, fx.plain_digest()], "2026-12-07T08:00+08:00"))


def test_golden_message(cfg, digest):
    """The whole message a reader is sent, as it goes on the wire (rss2email keeps one): its
    headers, their encoding and folding, the MIME parts and their transfer encodings. The
    Date and the MIME boundary are normalised, and each part's body is a line saying what it
    is: the bodies are the golden digest.txt and digest.html, with this reader's links."""
    email = Email(enabled=True, smtp_host="127.0.0.1", smtp_port=25, security="none", timeout_seconds=5,
                  from_="强化学习周报 <digest@example.org>", to=[],
                  unsubscribe_url="https://example.org/unsubscribe?u={recipient}")
    channel = EmailChannel(email, [Reader.parse("Ada Lovelace <ada@example.org>")], lambda d, languages: (
        render.digest_subject(cfg, d), render.digest_text(cfg, d, READING, personal=True),
        render.digest_html(cfg, d, READING, personal=True)), ["zh", "en"])
    message = channel.build(digest, "ada@example.org", message_id="<2026-11-30.golden@example.org>").body
    wire = message_bytes(message).decode("ascii").replace("\r\n", "\n")
    for n, boundary in enumerate(dict.fromkeys(re.findall(r'boundary="([^"]+)"', wire))):
        wire = wire.replace(boundary, f"BOUNDARY-{n}")
    wire = re.sub(r"^Date: .*$", "Date: (when it is built)", wire, flags=re.M)
    bodies = iter(part for part in message.walk() if not part.is_multipart())
    wire = re.sub(r"(Content-Transfer-Encoding: [\w-]+\n\n)(.*?)(?=\n--BOUNDARY-)", lambda found: (
        f"{found[1]}({(part := next(bodies)).get_content_type()}: {len(part.get_content())} "
        f"characters)"), wire, flags=re.S)
    assert next(bodies, None) is None
    golden("message.eml", wire)


def test_golden_english_only_and_plain_digest():
    en = fx.config(languages=["en"], base_url="https://digest.example.org/rl",
                   unsubscribe_url="https://digest.example.org/unsubscribe?u=1")
    golden("digest.en.md", render.digest_markdown(en, fx.digest(), READING))
    golden("digest.en.txt", render.digest_text(en, fx.digest(), READING))
    golden("digest.plain.md", render.digest_markdown(fx.config(), fx.plain_digest(), 3))


# --- the digest's shape ------------------------------------------------------------------

def test_markdown_follows_the_seed_page(md, digest):
    assert md.startswith("# 强化学习 · Reinforcement Learning for LLMs — 周报 Weekly · 2026-11-30\n")
    assert "本期时间窗 Window: 2026-11-23 08:00 → 2026-11-30 08:00 (Asia/Shanghai)" in md
    # The contract's reading order.
    order = ["## 本周看点 · Highlights", INTRO_START, "## 精选解读 · Featured", "## 对比 · Comparison",
             "## 综合洞察 · Synthesis", "## 本周论文 · This week's papers", "## 更新 · Updates",
             "## 收录 · From the reading list", "\n---\n"]
    positions = [md.index(heading) for heading in order]
    assert positions == sorted(positions)
    # **Title**（date） `kind`, the Chinese title, a line per language, why it matters, links.
    assert ("- **[GRPO-λ: Eligibility Traces for α-RL](https://arxiv.org/abs/2611.00008)**（2026-11-27）"
            " `方法 method`  \n  GRPO-λ：用资格迹为 α-RL 分配信用  \n  本文提出了 GRPO-λ") in md
    assert "  *GRPO-λ spreads each reward over tokens with eligibility traces.*  \n" in md
    assert ("  为何值得读 · Why it matters：它让 GRPO 不再对整条回答使用同一个优势值。 / "
            "*It stops GRPO from giving every token of a response the same advantage.*") in md
    assert ("  [PDF](https://arxiv.org/pdf/2611.00008) · "
            "[Code](https://github.com/example-lab/grpo-lambda) · "
            "[HF model](https://huggingface.co/example-lab/grpo-lambda-7b) · "
            "[HF dataset](https://huggingface.co/datasets/example-lab/traces) · 发表于 Venue：NeurIPS 2026") in md
    assert "(https://arxiv.org/abs/2611.00005)**（2026-11-26）  \n  我们引入了递归代理优化" in md
    assert "  *RAO trains agents" in md
    assert "Ada Lovelace, Alan Turing, Grace Hopper et al." in md and "Edsger" not in md
    assert "`v3 revised`" in md and "📌 精选收录 Curated" in md
    # No Chinese summary: one line in the header, no mark on the entry, its English line.
    assert "> ⏳ 2 篇论文的中文摘要待生成 · Chinese summaries pending: 2  \n> 本周变化" in md  # the movers follow
    assert md.count("⏳") == 1
    assert "（2026-11-24）  \n  We study credit" in md
    assert "（2026-11-26）  \n  We show that verifier drift explains most reward hacking" in md
    # Updates: what changed, once.
    assert ("- **[Sparse $\\beta$-Rewards for Long Agents](https://arxiv.org/abs/2610.00042)**"
            "（面向长程智能体的稀疏 β 奖励）：v1 → v3 · 已被 ICLR 2027 \\<b\\> 接收 / accepted at ICLR 2027 "
            "\\<b\\> · 已发布代码 / code released：[Code](https://github.com/example-lab/sparse-beta)") in md
    assert "- **解决方案 · Approach**：在 SFT 和 RLVR 之间插入分布对齐阶段。 / An alignment stage" in md
    assert "📄 查看论文 · [Read the paper](https://arxiv.org/abs/2611.00006)" in md
    # Nothing relevant is left out: a paper beyond max_papers gets one line under its topic.
    assert ("- [Rubric Rewards \\| for Open-Ended Writing](https://arxiv.org/abs/2611.00010)（2026-11-25）"
            " · 面向开放式写作的评分细则奖励\n") in md
    assert "… +" not in md  # the Markdown copy never trims
    # Seeds are never this week's papers: their own section, after the updates.
    papers = md.split("## 本周论文 · This week's papers", 1)[1].split("## 更新", 1)[0]
    assert "Pipes in Titles" not in papers
    assert "Pipes in Titles" in md.split("## 收录 · From the reading list", 1)[1]
    assert "回复 “unsubscribe”" in md and "[READING_LIST.md](../READING_LIST.md)" in md
    assert md.count("**[") == (sum(len(s.entries) for s in digest.sections) + len(digest.updates)
                               + len(digest.curated) + 1)  # + Exploration Hacking's line under its topic
    # A featured paper of the week is named under its topic too, which counts it.
    assert ("### 综述与分析 · Surveys and analyses (1)\n\n- **[Exploration Hacking: Can LLMs Learn to Resist "
            "RL Training?](https://arxiv.org/abs/2611.00007)**（2026-11-21） · ↑ 见上文精选解读 read in "
            "Featured above\n") in md


def test_no_synthesis_is_invented_and_facts_table_without_a_model():
    md = render.digest_markdown(fx.config(), fx.plain_digest(), 3)
    assert "综合洞察" not in md and "Synthesis" not in md
    assert "| 主题 Topic | 多模态强化学习 · Multimodal RL | 综述与分析 · Surveys and analyses |" in md
    assert "| 日期 Date | 2026-11-20 | 2026-11-21 |" in md
    assert "未使用大模型 no LLM" in md


def test_english_only_digest_reads_in_english():
    cfg = fx.config(languages=["en"], base_url="https://digest.example.org/rl/")
    md = render.digest_markdown(cfg, fx.digest(), READING)
    for chinese in ("本周论文", "精选解读", "对比", "本期窗口", "周报", "强化学习 ·"):
        assert chinese not in md
    assert "## This week's papers" in md and "## Synthesis" in md
    assert "(https://arxiv.org/abs/2611.00005)** (2026-11-26)  \n  RAO trains agents" in md
    assert "Why it matters: It stops GRPO" in md and "`method`" in md and "[Code](" in md
    assert not re.search(r"[\u3000-\u9fff\uff00-\uffef]", md.replace("$\\alpha_t$", ""))
    assert "📄 [Read the paper](https://arxiv.org/abs/2611.00006)" in md
    assert "https://digest.example.org/rl/READING_LIST.md" in md
    subject = render.digest_subject(cfg, fx.digest())
    assert subject == "Reinforcement Learning for LLMs Weekly · 2026-11-30 · 8 papers"


def test_subject_is_one_line_with_the_date(cfg, digest):
    subject = render.digest_subject(cfg, digest)
    # the week's 7 listed papers and Exploration Hacking; PRISM, featured too, is a seed
    assert subject == "强化学习周报 Reinforcement Learning for LLMs Weekly · 2026-11-30 · 8 papers"
    assert "\n" not in subject


def test_a_week_of_seeds_alone_counts_no_paper_of_the_week(cfg):
    """A week with no paper of its own said "· 0 papers" in its subject; it says what it holds."""
    seeds_only = replace(fx.plain_digest(), sections=(), featured=(fx.PRISM, replace(fx.HACKING, curated=True)),
                         new=0, seeds=2)
    assert render.digest_subject(cfg, seeds_only).endswith(" · 2 from the reading list")
    news = replace(seeds_only, featured=(), updates=(fx.UPDATE,), seeds=0)
    for languages, end in ((["zh", "en"], "· 1 update"), (["en"], "· 1 update"), (["zh"], "· 1 条更新")):
        assert render.digest_subject(fx.config(languages=languages), news).endswith(end), languages
    assert render.digest_subject(cfg, replace(news, updates=(fx.UPDATE,) * 3, seeds=1)).endswith(
        "· 3 updates · 1 from the reading list")
    assert render.digest_subject(cfg, replace(news, updates=())).endswith("· 0 papers")  # nothing at all


def test_english_counts_one_paper_in_the_singular_and_more_in_the_plural():
    one = re.compile(r"(?<![\d.])1 papers\b")
    for languages in (["en"], ["zh", "en"]):
        settings = fx.config(languages=languages)
        single = replace(fx.plain_digest(), featured=())  # one paper under one topic
        subject = render.digest_subject(settings, single)
        assert subject.endswith("· 1 paper"), subject
        for text in (render.digest_markdown(settings, single, 1), render.digest_text(settings, single, 1),
                     render.digest_html(settings, single, 1)):
            assert not one.search(text)
            assert re.search(r"\b1 (篇 )?paper\b", text)
        assert render.digest_subject(settings, replace(fx.many(2), featured=())).endswith("· 2 papers")


def test_highlights_without_the_llm_name_a_featured_paper_once():
    """A quiet week without the LLM: its one featured paper, then its topic as "1 paper", the
    same paper twice. A topic whose papers are all featured has no line of its own."""
    quiet = replace(fx.plain_digest(), sections=(), featured=(fx.HACKING,))
    cfg = fx.config(languages=["en"])
    for text in (render.digest_markdown(cfg, quiet, 1), render.digest_text(cfg, quiet, 1),
                 render.digest_html(cfg, quiet, 1)):
        block = text.split("Highlights", 1)[1].split(fx.INTRO_EN[:20], 1)[0]
        assert "Featured: Exploration Hacking" in unescape(untagged(block)) and "1 paper" not in block


def test_an_email_with_neither_highlights_nor_featured_papers_still_has_an_inbox_preview():
    """Without the LLM's takeaways and with no featured paper (digest.featured: 0) the email had
    no preheader: the inbox previewed the header's window line. It previews the first line of
    its Highlights, as it does a takeaway; with none (a week of updates alone), the counts."""
    from tests.test_outline_cli import PREHEADER

    week = replace(fx.plain_digest(), featured=())
    for languages, first in ((["zh", "en"], "智能体与多轮强化学习 · Agentic and multi-turn RL：1 篇 paper"),
                             (["en"], "Agentic and multi-turn RL: 1 paper")):
        found = PREHEADER.search(render.digest_html(fx.config(languages=languages), week, 1))
        assert found and found.group(1) == first, languages
    news = replace(week, sections=(), updates=(fx.UPDATE,), new=0, seeds=0)
    found = PREHEADER.search(render.digest_html(fx.config(languages=["en"]), news, 1))
    assert found and found.group(1) == "New: 0 · Updates: 1"
    # "Curated: 0 · Featured: 0" every week said nothing: those two, as Revised and Updates, when any
    cfg = fx.config(languages=["en"])
    for text in (render.digest_markdown(cfg, news, 1), render.digest_text(cfg, news, 1),
                 render.feed_xml(cfg, [news], "2026-12-07")):
        assert "New: 0 · Updates: 1" in text and "Curated:" not in text and "Featured:" not in text


def test_a_later_emails_intro_line_reads_alike_in_each_language_and_voices_its_own():
    """After the first digest the topic's intro is one small grey line per language; the
    English one took the style of an English summary line, larger and darker than the Chinese
    it follows, and no lang, so a screen reader read it in a Chinese voice."""
    for languages in (["zh", "en"], ["en", "zh"]):
        html = render.digest_html(fx.config(languages=languages), fx.plain_digest(), 1)
        zh = re.search(r"<p ([^>]*)>" + re.escape(fx.INTRO_ZH[:12]), html).group(1)
        en = re.search(r"<p ([^>]*)>" + re.escape(fx.INTRO_EN[:12]), html).group(1)
        first, second = (zh, en) if languages[0] == "zh" else (en, zh)
        assert second.replace(f' lang="{"en" if languages[0] == "zh" else "zh-CN"}"', "") == first, languages


def test_digest_as_every_format(cfg, digest, md, html, txt):
    assert render.digest_as(cfg, digest, "md", READING) == md
    assert render.digest_as(cfg, digest, "html", READING) == html
    assert render.digest_as(cfg, digest, "txt", READING) == txt
    with pytest.raises(ValueError):
        render.digest_as(cfg, digest, "pdf", READING)


def test_bundled_config_renders_everything():
    from pipeline.config import load

    config = render.Settings.of(load(None))
    d = fx.digest()
    for fmt in ("md", "html", "txt"):
        assert d.id in render.digest_as(config, d, fmt, READING)
    assert d.id in render.digest_subject(config, d)
    ET.fromstring(render.feed_xml(config, [d], UPDATED).encode("utf-8"))


def test_a_feed_entry_without_a_url_is_its_title_not_a_link_to_nowhere():
    from pipeline.config import load

    config = render.Settings.of(load(None))
    d = fx.digest()
    d = replace(d, curated=tuple(replace(e, url=None) for e in d.curated))
    feed = render.feed_xml(config, [d], UPDATED)
    assert 'href="#"' not in feed
    assert all(e.title.split()[0] in feed for e in d.curated)


# --- Markdown safety ---------------------------------------------------------------------

@pytest.mark.parametrize("raw, escaped", [
    ("$\\alpha_t$ & <b>", "$\\alpha_t$ & \\<b\\>"),
    ("a | b", "a \\| b"),
    ("**bold**", "\\*\\*bold\\*\\*"),
    ("[x](http://evil)", "\\[x\\](http\\:\\/\\/evil)"),
    ("<script>alert(1)</script>", "\\<script\\>alert(1)\\</script\\>"),
    ("x__init__ and a_{t}", "x\\_\\_init\\_\\_ and a\\_{t}"),
    ("`code` ~~gone~~", "\\`code\\` \\~\\~gone\\~\\~"),
    ("&lt;b&gt; & co", "\\&lt;b\\&gt; & co"),
    ("# not a heading", "\\# not a heading"),
    ("- not an item", "\\- not an item"),
    ("1. not a list", "1\\. not a list"),
    ("see www.evil.com", "see www\\.evil.com"),
    ("trailing \\", "trailing \\\\"),
    ("two\nlines", "two lines"),
    ("RLHF (PPO) costs 5$!", "RLHF (PPO) costs 5$!"),
    ("Learning in C #", "Learning in C \\#"),  # as a heading's end, a closing sequence: lost
    ("Rank #1 ## ", "Rank #1 \\##"),
    ("C# and F# for RL", "C# and F# for RL"),
])
def test_md_escape(raw, escaped):
    assert md_escape(raw) == escaped


def test_md_escape_leaves_no_mail_autolink():
    assert md_escape("a@b.org") == "a@\u2060b.org"


def _pipes(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row))


def test_markdown_table_keeps_its_columns_with_a_pipe_in_a_title(digest):
    piped = replace(digest.featured[0], title="a | b: Pipes | everywhere")
    d = replace(digest, featured=(piped, digest.featured[1]), question_zh=None, question_en=None)
    for doc in (d, replace(d, comparison=())):
        md = render.digest_markdown(fx.config(), doc, READING)
        table = md.split("## 对比 · Comparison\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert table[0].startswith("| 维度 Dimension | a \\| b |")
        assert len(table) >= 4 and {_pipes(row) for row in table} == {4}


def test_markdown_has_no_live_markup_from_outside_text(md):
    assert not re.search(r"(?<!\\)<(?!a id=)", md)  # no raw HTML but the reading list's anchors
    assert "http://evil" not in md and "www.evil" not in md
    # The only links are ours: arXiv pages, links read from abstracts, the reading list.
    targets = re.findall(r"(?<!\\)\]\(([^)]*)\)", md)
    assert targets and all(t.startswith(OURS) for t in targets)
    assert "javascript" not in "".join(targets)
    # A list item cannot be broken: every entry is one item and its indented lines.
    body = md.split("## 本周论文 · This week's papers", 1)[1].split("## 更新", 1)[0]
    for line in body.splitlines():
        assert not line or line.startswith(("- **[", "  ", "### ", "- [")), line


def test_markdown_through_githubs_parser(md, cfg):
    """Optional (pip install cmarkgfm): GitHub's own parser finds only our markup and links."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options

    for text in (md,):
        out = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
        tags = set(re.findall(r"<([a-z][a-z0-9]*)", out))
        assert tags <= {"a", "blockquote", "br", "code", "em", "h1", "h2", "h3", "hr", "li", "p",
                        "strong", "table", "tbody", "td", "th", "thead", "tr", "ul"}, tags
        hrefs = set(re.findall(r'href="([^"]*)"', out))
        assert all(h.startswith(OURS) for h in hrefs), hrefs
        assert "<script" not in out and "evil" not in "".join(hrefs)
    assert md.count("<table>") == 0 and "<table>" in cmarkgfm.github_flavored_markdown_to_html(md)


# --- HTML ---------------------------------------------------------------------------------

ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "table", "tbody", "tr", "td", "th",
                "h1", "h2", "h3", "p", "a", "strong", "span", "br", "div"}  # div: the preheader


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        self.comments.append(data)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


def test_html_has_only_the_templates_own_tags(html):
    page = parse(html)
    names = {tag for tag, _ in page.tags}
    assert names <= ALLOWED_TAGS, names - ALLOWED_TAGS
    assert "script" not in names and "img" not in names and "link" not in names
    for tag, attrs in page.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        assert not str(attrs.get("src", "")), (tag, attrs)
    text = "".join(page.text)
    for hostile in ("<script>alert(1)</script> Policy", "a | b: Pipes", "**bold** claims and [x](http://evil)",
                    "$\\alpha_t$ & <b> Advantage: Multi-turn", "Jane Doe <jane@example.org>",
                    "<img src=x onerror=alert(1)>"):
        assert hostile in text, hostile


def test_html_links_every_paper_to_arxiv(html, digest):
    hrefs = [attrs.get("href") for tag, attrs in parse(html).tags if tag == "a"]
    for entry in entries(digest):
        assert entry.url in hrefs, entry.title
    assert all(h.startswith(OURS) for h in hrefs)
    assert "https://github.com/example-lab/grpo-lambda" in hrefs and "javascript:" not in html


def test_html_english_lines_and_titles_in_a_chinese_email_are_tagged_english(html, digest):
    """A screen reader reads the zh-CN message's titles and English lines in an English voice."""
    from selectolax.lexbor import LexborHTMLParser

    page = LexborHTMLParser(html)
    assert page.css_first("html").attributes["lang"] == "zh-CN"
    # webmail drops <html>: the message's wrapper says its language again, and what it is
    wrapper = page.css_first("body > div[role=article]")
    assert wrapper.attributes["lang"] == "zh-CN" and wrapper.attributes["aria-roledescription"] == "email"
    assert wrapper.attributes["aria-label"] == render.digest_subject(fx.config(), digest)
    assert wrapper.css_first("table.outer") and not page.css("body > table")

    def lang_of(node):
        while "lang" not in node.attributes:
            node = node.parent
        return node.attributes["lang"]

    titled = [a for a in page.css("a") if a.attributes.get("href") in {e.url for e in entries(digest)}
              and a.text().strip() in {e.title for e in entries(digest)}]
    assert titled and {lang_of(a) for a in titled} == {"en"}
    assert page.css(".en") and {lang_of(node) for node in page.css(".en")} == {"en"}


@pytest.mark.parametrize("languages", [("zh", "en"), ("en", "zh")])
def test_the_emails_headings_and_labels_voice_each_language_as_itself(digest, languages):
    """本周看点 · Highlights: the half in the message's other language carries its lang (the
    English of a zh-CN message was read in a Chinese voice, the Chinese of an en one skipped),
    in the headings, the comparison's header cells, "why it matters", a reading's parts, the trends' topics."""
    from selectolax.lexbor import LexborHTMLParser

    html = render.digest_html(fx.config(languages=languages), digest, READING)
    page = LexborHTMLParser(html)
    assert page.css_first("html").attributes["lang"] == {"zh": "zh-CN", "en": "en"}[languages[0]]
    read = voiced(page.css("h1, h2, h3, th, .why > strong, .btn, .en > strong, .trend-row, .feature p > strong"))
    assert len(read) > 40
    for words, lang in read:
        assert lang == ("zh-CN" if re.search(r"[\u4e00-\u9fff]", words) else "en"), words


@pytest.mark.parametrize("languages", [("zh", "en"), ("en", "zh")])
def test_the_emails_intro_readings_and_synthesis_voice_each_language_as_itself(digest, languages):
    """The topic's intro, a featured reading's headline and the synthesis tagged only an
    English second line: in an en message their Chinese carried no lang and was read in an
    English voice."""
    from selectolax.lexbor import LexborHTMLParser

    page = LexborHTMLParser(render.digest_html(fx.config(languages=languages), digest, READING))
    texts = {fx.INTRO_ZH: "zh-CN", fx.INTRO_EN: "en", digest.synthesis_zh: "zh-CN", digest.synthesis_en: "en"}
    for e in digest.featured:
        texts.update({e.headline_zh: "zh-CN", e.headline_en: "en"})
    read = {escape(words, quote=False): lang for words, lang in voiced(page.css("td > p"))}
    assert {text: read.get(escape(text, quote=False)) for text in texts} == texts
    # a featured paper read without a reading: its summary lines and key points
    plain = replace(digest.featured[1], parts=(), headline_zh=None, headline_en=None, summary_zh="中文的一句摘要。",
                    summary_en="An English line.", key_points_zh=("中文要点。",), key_points_en=("A key point.",))
    page = LexborHTMLParser(render.digest_html(fx.config(languages=languages),
                                               replace(digest, featured=(digest.featured[0], plain)), READING))
    read = dict(voiced(page.css("td.feature > p")))
    assert [read.get(text) for text in ("中文的一句摘要。", "• 中文要点。", "An English line.", "• A key point.")] == [
        "zh-CN", "zh-CN", "en", "en"]


@pytest.mark.parametrize("languages", [("zh", "en"), ("en", "zh")])
def test_the_emails_header_and_footer_voice_each_language_of_a_composite_label(digest, languages):
    """新论文 New: 7 · 精选收录 Curated: 2, the sources (精选清单 curated list), 未使用大模型 no LLM,
    the pending Chinese, the coverage, 在线阅读 View online, a paper's marks (方法 method, v2
    revised), the trends' movers, an update's 已发布代码 / code released: these labels carried
    no lang, so a zh-CN message read their English in a Chinese voice (an en one its Chinese)."""
    from selectolax.lexbor import LexborHTMLParser

    coverage = {"first": "06-01", "last": "06-07", "expected": 5, "read": 4, "groups": [],
                "gaps": [{"group": "cs.LG", "day": "06-05", "cause": "feed stale", "recovered": ""}],
                "no_announcement": [], "relevant": {}}
    digest = replace(digest, coverage=coverage, model="")
    settings = fx.config(languages=languages, base_url="https://example.org/out/")
    page = LexborHTMLParser(render.digest_html(settings, digest, READING, limit=40_000))
    assert "本邮件为节选" in page.css_first(".head .meta").text()  # "View online" for the whole digest
    updates = [p for p in page.css("p") if "已发布代码" in p.text()]
    read = voiced([*page.css(".head .meta, .small, .tag, table.trend + p"), *updates])
    for words, lang in read:
        words = re.sub(r"arXiv|RSS|API|Asia/Shanghai|cs\.LG|rl-digest|“unsubscribe”|ICLR", "", words)  # names, in either
        chinese, english = re.search(r"[\u4e00-\u9fff]", words), re.search(r"[A-Za-z]{3,}", words)
        assert not (chinese and english), words  # one voice for both
        if chinese or english:
            assert lang == ("zh-CN" if chinese else "en"), words
    said = " ".join(words for words, _ in read)
    assert all(label in said for label in ("Curated", "curated list", "no LLM", "Chinese summaries pending",
                                           "NOT recovered", "View online", "未使用大模型", "篇", "Movers",
                                           "本周变化", "revised", "method", "方法", "code released"))
    titles = voiced(page.css(".zh-title"))  # a paper's Chinese title (GRPO-λ：用资格迹…), as Chinese
    assert titles and {lang for _, lang in titles} == {"zh-CN"}



def test_the_comparison_is_a_data_table_a_screen_reader_can_walk(html, digest):
    """Each cell is announced with its paper and its row's name: the titles head their
    columns, the dimensions their rows; every other table is layout, and says so."""
    from selectolax.lexbor import LexborHTMLParser

    page = LexborHTMLParser(html)
    tables = page.css("table")
    assert [t.attributes.get("class") for t in tables if t.attributes.get("role") != "presentation"] == ["cmp"]
    rows = page.css("table.cmp tr")
    assert [th.attributes.get("scope") for th in rows[0].css("th")] == ["col"] * (1 + len(digest.featured))
    assert not rows[0].css("td")
    for row in rows[1:]:
        cells = row.css("th, td")
        assert cells[0].tag == "th" and cells[0].attributes.get("scope") == "row", cells[0].html
        assert [c.tag for c in cells[1:]] == ["td"] * len(digest.featured)


def test_a_comparison_cell_or_label_alike_in_both_languages_is_shown_once(cfg, digest):
    """A method's name is the same in Chinese and English ('GRPO' / 'GRPO'): each cell and
    label printed it twice, 'GRPO · GRPO'; texts alike but for case and spacing are one."""
    from pipeline.models import Row

    names = replace(digest, comparison=(Row("方法", "Method", (("GRPO", "GRPO"), ("DAPO ", "dapo"))),
                                        Row("PPO", "ppo", (("更稳", "steadier"), ("x", "x")))))
    table = [line for line in render.digest_markdown(cfg, names, READING).splitlines() if line.startswith("| ")]
    assert table[1:] == ["| 方法 Method | GRPO | DAPO |", "| PPO | 更稳 · steadier | x |"], table
    text = render.digest_text(cfg, names, READING)
    assert "  PRISM：GRPO\n" in text and "GRPO · GRPO" not in text and "DAPO · dapo" not in text
    page = render.digest_html(cfg, names, READING, whole=True)
    assert ">GRPO</td>" in page and "<span lang=\"en\">ppo</span>" not in page
    assert bilingual.texts(["zh", "en"], "−3%", "3%") == [("zh", "−3%"), ("en", "3%")]  # a sign is no spacing


def test_a_link_in_the_email_is_underlined_not_told_by_its_colour_alone(html):
    """Blue #1d4ed8 against the text's #18181b is 2.6:1, under WCAG 1.4.1's 3:1: a link in a
    line of text keeps its underline; only the bordered "read the paper" button drops it."""
    from selectolax.lexbor import LexborHTMLParser

    links = LexborHTMLParser(html).css("a")
    plain = [a.attributes.get("class") for a in links if "text-decoration: none" in (a.attributes.get("style") or "")]
    assert len(links) > 20 and set(plain) == {"btn"}


def contrast(fore: str, back: str) -> float:
    """WCAG 2's contrast ratio of two #rrggbb colours."""
    def lum(colour: str) -> float:
        rgb = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    high, low = sorted((lum(fore), lum(back)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_every_text_colour_of_the_email_and_the_site_reads_at_wcag_aa_light_and_dark():
    """4.5:1 for each text colour on the card or the page, and for the text on the shaded
    header cells, in light and in the dark palette (12-13 px text: no large-text allowance)."""
    templates = Path(__file__).parents[1] / "templates"
    light, dark = (templates / "partials" / "email.css").read_text("utf-8").split("prefers-color-scheme: dark")

    def rule(css: str, selector: str, prop: str) -> str:
        body = re.search(r"(?m)^\s*" + re.escape(selector) + r" \{([^}]*)\}", css)
        assert body, selector
        return re.search(rf"(?<![-\w]){prop}: (#[0-9a-f]{{6}})", body.group(1)).group(1)

    texts = {"light": [rule(light, sel, "color") for sel in ("td", ".meta", ".en", ".zh-title", ".tag", "a",
                                                             ".small", ".trend-before", "h3")],
             "dark": [rule(dark, sel, "color") for sel in ("td, h1, h2, h3, p, strong", "a", ".tag",
                                                           ".meta, .small, .en, .zh-title", ".trend-before")]}
    backs = {"light": [rule(light, ".card", "background"), rule(light, ".cmp th", "background")],
             "dark": [rule(dark, ".card", "background"), rule(dark, ".cmp th", "background")]}
    # every colour on the card; the shaded header cells hold the plain text colour only
    found = {(scheme, fore, back): round(contrast(fore, back), 2) for scheme in texts
             for n, fore in enumerate(texts[scheme]) for back in backs[scheme][:1 if n else 2]}
    site = (templates / "site" / "assets" / "site.css").read_text("utf-8")
    for scheme, block in zip(("light", "dark"), re.findall(r":root \{([^}]*)\}", site), strict=True):
        var = dict(re.findall(r"--(\w+): (#[0-9a-f]{6})", block))
        for fore in ("text", "muted", "soft", "link", "tag"):
            for back in ("bg", "card"):
                found[(f"site {scheme}", fore, back)] = round(contrast(var[fore], var[back]), 2)
        found[(f"site {scheme}", "text", "accent")] = round(contrast(var["text"], var["accent"]), 2)
    assert len(found) > 30 and {k: v for k, v in found.items() if v < 4.5} == {}


def test_html_is_an_email_layout(html):
    assert "<style>" in html and "@media only screen and (max-width: 520px)" in html
    assert "max-width: 640px" in html and "<!--[if mso]>" in html
    assert "'PingFang SC'" in html and "'Microsoft YaHei'" in html and "'Noto Sans CJK SC'" in html
    assert 'class="paper" style="' in html  # inlined
    assert "<link" not in html and "<img" not in html and "url(" not in html  # nothing remote


def test_html_refuses_unsafe_link_schemes(cfg, digest):
    bad = replace(digest.sections[0].entries[0], url="javascript:alert(1)")
    d = replace(digest, sections=(replace(digest.sections[0], entries=(bad,)),))
    assert "javascript:" not in render.digest_html(cfg, d, READING)
    assert "javascript:" not in render.digest_markdown(cfg, d, READING)


def test_a_week_of_thirty_papers_fits_in_one_gmail_message():
    """digest.max_papers' 30 full entries in both languages, whole, under the limit as
    sent (quoted-printable Chinese is three times its UTF-8)."""
    html = render.digest_html(fx.config(), fx.many(30), 500)
    assert render.as_sent(html) < 100_000, render.as_sent(html)
    assert html.count('class="paper"') == 30 and "篇论文见阅读清单" not in html and "…" not in html


def test_a_busy_week_keeps_the_best_one_line_entries_that_fit_not_none():
    d = fx.many(30)
    sections = tuple(replace(s, brief=tuple(
        fx.Entry(key=f"arxiv:2612.{k:05d}", title=f"One-line paper {k} on reward models for RLHF",
                 topic=s.topic, url=f"https://arxiv.org/abs/2612.{k:05d}", date="2026-11-20",
                 score=1000.0 - k)
        for k in range(n * 1000, n * 1000 + 120))) for n, s in enumerate(d.sections))
    d = replace(d, sections=sections)
    html = render.digest_html(fx.config(base_url="https://example.org/out/"), d, 500)
    assert render.as_sent(html) <= 100_000
    assert html.count('class="paper"') == 30  # every full entry stays
    kept = [int(k) for k in re.findall(r"One-line paper (\d+) on", html)]
    assert 0 < len(kept) < 600  # some of the one-line entries, not all, not none
    for n in range(len(sections)):  # each topic's best first: no gap in what stays
        mine = sorted(k for k in kept if k // 1000 == n)
        assert mine == list(range(n * 1000, n * 1000 + len(mine)))
    more = sum(int(m) for m in re.findall(r"\+(\d+) 篇本主题论文见完整版", html))
    assert more == 600 - len(kept)


def with_one_liners(d: fx.Digest, each: int) -> fx.Digest:
    """`d` with `each` more one-line entries in each topic (a week past digest.max_papers)."""
    return replace(d, sections=tuple(replace(s, brief=tuple(
        fx.Entry(key=f"arxiv:2612.{k:05d}", topic=s.topic, url=f"https://arxiv.org/abs/2612.{k:05d}",
                 title=f"Paper {k}: Scalable Group-Relative Policy Optimisation with Verifiable Rewards",
                 title_zh="可验证奖励的可扩展组相对策略优化", date="2026-11-20", score=1000.0 - k)
        for k in range(n * 1000, n * 1000 + each))) for n, s in enumerate(d.sections)))


def test_a_one_line_entry_costs_the_email_its_text_not_a_table_cell_of_styles():
    """A topic's one-line entries share one cell: each in a cell of its own carried the
    cell's inlined font list and padding, 760 bytes as sent for a title, its link, date and
    Chinese title, and a week of 200 papers could not list them all in 100 KB."""
    settings = fx.config(base_url="https://example.org/out/")
    sizes = [render.as_sent(render.digest_html(settings, with_one_liners(fx.many(30), each), 500, whole=True))
             for each in (0, 40)]
    assert (sizes[1] - sizes[0]) / 200 < 500, sizes


def listed_under_topics(html: str, d: fx.Digest) -> dict[str, str]:
    """Each paper of the week the email names, by key: the topic it is under (its name)."""
    found: dict[str, str] = {}
    html = untagged(html)
    papers = html.split("本周论文 · This week's papers</h2>", 1)[1].split("<h2", 1)[0]
    for part in papers.split("<h3")[1:]:
        heading = part.split("</h3>", 1)[0].split(">", 1)[1].split(" (", 1)[0]
        lines = [line for line in part.split("<p")[1:] if "↑" not in line]  # not a featured paper's
        for e in (e for s in d.sections for e in (*s.entries, *s.brief)):
            if any(f'<a href="{e.url}"' in line for line in lines):
                found[e.key] = heading
    return found


def test_an_oversized_email_is_trimmed_and_points_to_the_whole_digest():
    """The full entries that do not fit are one-line linked entries under their topic, as
    the week's other papers are: every paper of the week is in the email (34 of these 40
    were a line '… +34 more papers in the whole digest')."""
    d = fx.many(40, scale=12)
    full = render.digest_markdown(fx.config(), d, 500)
    assert len(full.encode("utf-8")) > 150_000
    html = render.digest_html(fx.config(), d, 500)
    assert len(html.encode("utf-8")) <= render.EMAIL_LIMIT
    shown = html.count('class="paper"')
    assert 0 < shown < 40
    assert listed_under_topics(html, d) == {e.key: f"{s.name_zh} · {s.name_en}"
                                            for s in d.sections for e in s.entries}
    assert "篇论文见完整版" not in html and "篇本主题论文见完整版" not in html
    header = untagged(html).split('class="head"', 1)[1].split("</td>", 1)[0]
    assert ("本邮件为节选，完整文字见完整版 This email is shortened; the whole digest has every text in full"
            f'</strong>: <a href="{d.id}.md"') in header
    assert "PRISM: Distribution Alignment" in html and "综合洞察" in html  # featured stay
    # Past what fits even on one line each, the lowest-ranked papers give way, counted.
    busy = fx.many(300)
    html = render.digest_html(fx.config(), busy, 500)
    assert render.as_sent(html) <= render.EMAIL_LIMIT
    named = listed_under_topics(html, busy)
    ranked = [e.key for e in sorted((e for s in busy.sections for e in s.entries), key=lambda e: -(e.score or 0))
              if not e.curated]
    assert 100 < len(named) < 300 and set(ranked[:len(named) - 40]) <= set(named)
    assert f'… +{300 - len(named)} 篇论文见完整版 more papers in the whole digest: <a href="{d.id}.md"' in untagged(html)
    # Clipping comes first: a little too big only loses English text.
    clipped = render.digest_html(fx.config(), fx.many(28, scale=2), 500)
    assert clipped.count('class="paper"') == 28 and "…" in clipped
    assert len(clipped.encode("utf-8")) < render.as_sent(clipped) <= render.EMAIL_LIMIT


def test_a_trimmed_email_keeps_the_updates_that_fit_and_counts_the_rest():
    """Updates give way after this week's full entries, the last first, and a line counts
    those left to the whole digest, linking it (all went at once, unsaid, and the header's
    'Updates: 300' with them)."""
    news = tuple(fx.Update(key=f"arxiv:2610.{k:05d}", title=f"Update {k:03d}: an earlier paper on reward models",
                           url=f"https://arxiv.org/abs/2610.{k:05d}", title_zh="奖励模型的早期论文",
                           changes=(("version", "1", "2"),)) for k in range(300))
    d = replace(fx.many(60), updates=news)
    html = untagged(render.digest_html(fx.config(), d, 500))
    assert render.as_sent(html) <= render.EMAIL_LIMIT
    shown = [int(k) for k in re.findall(r"Update (\d+): an earlier", html)]
    assert 0 < len(shown) < 300 and shown == list(range(len(shown)))
    assert (f"… +{300 - len(shown)} 条更新见完整版 more updates in the whole digest: "
            f'<a href="{d.id}.md"') in html
    assert "更新 Updates: 300" in html.split('class="head"', 1)[1].split("</td>", 1)[0]
    assert len(listed_under_topics(html, d)) == 60  # every paper of the week, on one line


def test_a_trimmed_email_drops_new_versions_before_a_withdrawal():
    """Updates give way from the last: a paper withdrawn comes first, whatever its title
    (by title, 'Zero-shot…' came after 300 version bumps, and the email dropped it)."""
    papers = [Paper(id=f"2610.{k:05d}", version=2, title=f"Update {k:03d}: an earlier paper on reward models")
              for k in range(300)]
    papers.append(Paper(id="2610.99999", version=2, title="Zero-shot reward models, withdrawn",
                        comment="This paper has been withdrawn"))
    ledger: dict[str, dict | None] = {paper_key(p.id): {"version": 1, "venue": None, "code": None}
                                      for p in papers}
    d = replace(fx.many(60), updates=tuple(compose.updates(papers, ledger, {})))
    html = render.digest_html(fx.config(), d, 500)
    shown = re.findall(r"Update (\d+): an earlier", html)
    assert 0 < len(shown) < 300 and "条更新见完整版" in html  # updates had to go
    assert "Zero-shot reward models, withdrawn" in html and "withdrawn by its authors" in html


def test_a_trimmed_email_keeps_every_topic_with_its_whole_count():
    """The text part is whole; the HTML one must not read as a different week: each topic
    keeps its heading and full count, and says how many of its papers the whole digest has."""
    d = fx.many(300)
    html = untagged(render.digest_html(fx.config(), d, 500))
    text = render.digest_text(fx.config(), d, 500)
    left = 0
    for s in d.sections:
        whole = len(s.entries) + len(s.brief) + sum(1 for e in d.featured if e.topic == s.topic and not e.curated)
        assert f"{s.name_zh} · {s.name_en} ({whole})" in html, s.topic
        assert f"({whole})" in text
    for n in re.findall(r"\+(\d+) 篇本主题论文见完整版 more on this topic in the whole digest", html):
        left += int(n)
    assert left == 300 - len(listed_under_topics(html, d)) > 0
    header = html.split('class="head"', 1)[1].split("</td>", 1)[0]  # said at the top, too
    assert "本邮件为节选，部分论文见完整版 This email is shortened; some papers are only in the whole digest" in header
    assert "This email is shortened" not in render.digest_html(fx.config(), fx.many(5), 500)


def test_a_trimmed_emails_papers_line_counts_the_papers_it_left_out_not_the_reading_lists():
    """The line after the topics counts this week's papers the whole digest has; the papers
    past digest.max_papers are in the reading list, not the whole digest, and keep their own
    line (they were added in: '+N more papers in the whole digest', N 7 too many)."""
    d = replace(fx.many(300), left_out=tuple(f"arxiv:2612.{k:05d}" for k in range(7)))
    html = untagged(render.digest_html(fx.config(), d, 500))
    more = re.search(r"… \+(\d+) 篇论文见完整版 more papers in the whole digest", html)
    assert more and int(more.group(1)) == 300 - len(listed_under_topics(html, d))
    assert "… +7 篇论文见阅读清单 more papers in the reading list" in html


def test_a_trimmed_email_links_the_digests_web_copy_when_the_site_is_served():
    """Issue 14: with outputs.site_url (or serve.base_url) known, the "more" line and "view
    online" go to the digest's page of the web edition; else to its Markdown copy."""
    d = fx.many(300)
    web = replace(fx.config(base_url="https://example.org/out/"), site_url="https://example.org/site/")
    page = f"https://example.org/site/digests/{d.id}.html"
    for settings, whole, online in ((web, page, page),
                                    (fx.config(base_url="https://example.org/out/"),
                                     f"https://example.org/out/digests/{d.id}.md",
                                     f"https://example.org/out/digests/{d.id}.html")):
        html = untagged(render.digest_html(settings, d, 500))
        more = re.search(r'… \+(\d+) 篇论文见完整版 more papers in the whole digest: <a href="([^"]+)"[^>]*>([^<]+)<', html)
        assert more and int(more.group(1)) == 300 - len(listed_under_topics(html, d)) and more.group(2) == whole
        assert more.group(3) == "在线阅读 View online"  # not its file name, a host in .md (Moldova)
        assert f'<a href="{online}"' in html and "在线阅读 View online" in html
        # the header's "View online" once: the shortened line's, where it is the same page
        head = html.split('class="head"', 1)[1].split("</td>", 1)[0]
        assert head.count("View online") == (1 if online == whole else 2), head
        assert f'<a href="{whole}"' in head.split("本邮件为节选", 1)[1]
    whole = render.digest_html(web, fx.many(5), 500)  # nothing left out: no "more" line
    assert "more papers" not in whole and f'<a href="{page}"' in whole


def test_the_html_file_copy_is_whole_where_the_email_is_trimmed():
    """out/digests/ID.html (and `render --format html`) is the digest, which "view online"
    opens: only the email is cut to its size."""
    d = fx.many(40, scale=12)
    settings = fx.config(base_url="https://example.org/out/")
    mailed = render.digest_html(settings, d, 500)
    copy = render.digest_as(settings, d, "html", 500)
    listed = sum(len(s.entries) + len(s.brief) for s in d.sections)
    assert mailed.count('class="paper"') < listed  # the email had to leave papers out
    assert copy.count('class="paper"') + copy.count('class="brief"') >= listed
    assert "This email is shortened" not in copy and "more papers in the whole digest" not in copy
    for e in (e for s in d.sections for e in (*s.entries, *s.brief)):
        assert escape(e.title, quote=False) in copy, e.title


# --- plain text ---------------------------------------------------------------------------

def test_text_lines_fit_72_columns(txt):
    for line in txt.splitlines():
        assert display_width(line) <= 72, line


def test_text_sets_each_section_two_blank_lines_apart_and_its_items_one(cfg, digest):
    """The plain text put three blank lines before Featured (the intro's own and two more),
    four before This week's papers after one featured paper, and two between the LLM's
    highlights and the intro: each section heading comes after two, the lines of a list after
    one at most."""
    plain = fx.plain_digest()
    for week in (digest, plain, replace(plain, featured=plain.featured[:1]), replace(plain, featured=())):
        text = render.digest_text(cfg, week, 1)
        assert "\n\n\n\n" not in text, week.id
        lines = text.splitlines()
        rules = [n for n, line in enumerate(lines) if line and set(line) == {"="}]
        for n in rules[2:]:  # after the title's and the first section's, under the header
            assert lines[n - 3:n - 1] == ["", ""] and lines[n - 4], (week.id, lines[n - 1])
    highlights = render.digest_text(cfg, digest, 1).split("Highlights\n", 1)[1]
    assert "\n\n\n" not in highlights.split(fx.INTRO_ZH[:10], 1)[0]


def test_text_has_full_urls_and_plain_text(txt, digest):
    for entry in entries(digest):
        assert entry.url in txt
    assert "<script>alert(1)</script> Policy Optimisation" in txt
    assert "\\|" not in txt and "](" not in txt.replace("[x](http://evil)", "")
    flat = re.sub(r"\s*\n\s*", "", txt)  # Chinese may wrap between any two characters
    assert "⏳ 2 篇论文的中文摘要待生成 · Chinese summaries pending: 2" in flat
    assert txt.count("⏳") == 1
    assert "Code:\nhttps://github.com/example-lab/grpo-lambda" in txt.replace("Code: ", "Code:\n  ").replace("\n  ", "\n")
    assert "为何值得读 · Why it matters：它让 GRPO" in flat


def test_wrap_counts_cjk_as_two_columns():
    zh = "强化学习是通过与环境交互、根据奖励信号优化策略的机器学习范式。" * 4
    lines = wrap(zh, width=20).splitlines()
    assert all(display_width(line) <= 20 for line in lines)
    assert all(not line.startswith(("，", "。", "、")) for line in lines)
    assert "".join(lines) == zh  # Chinese breaks between characters, nothing lost


def test_wrap_breaks_english_at_spaces_and_keeps_urls():
    text = "A long English sentence with words that must not be split " * 3
    lines = wrap(text, width=30, indent="  ", first="* ").splitlines()
    assert lines[0].startswith("* ") and all(line.startswith("  ") for line in lines[1:])
    assert " ".join(line[2:] for line in lines) == " ".join(text.split())
    url = "https://example.org/" + "x" * 80
    assert url in wrap("see " + url, width=30).splitlines()
    for held in (f"({url}).", f"<{url}>", f"（{url}）。"):  # in brackets, as an abstract's \\href reads
        assert held in wrap("see " + held, width=30).splitlines()
    lines = wrap(f"代码见{url}，数据见下文" + "很长" * 20, width=30).splitlines()  # Chinese goes on after it
    assert f"{url}，" in lines and all(display_width(line) <= 30 for line in lines if url not in line)
    assert wrap("two\nlines") == "two lines"


def test_the_text_email_keeps_a_long_mailto_unsubscribe_link_whole_for_each_reader(digest):
    """A mailto: unsubscribe link longer than a line was cut as a word is: the reader's
    address, which delivery puts in for {recipient} once rendered, was put in nowhere, and
    the reader got half a link ending in 'rl-digest-reader-ad' / 'dress-…'."""
    url = "mailto:leave@lists.example.org?subject=unsubscribe%20{recipient}"
    text = render.digest_text(fx.config(unsubscribe_url=url), digest, READING, personal=True)
    assert url.replace(links.RECIPIENT, links.ADDRESS) in text.splitlines()


def test_the_text_email_keeps_a_link_with_chinese_in_it_whole(digest):
    """An unsubscribe URL with Chinese in its path (which config takes, and List-Unsubscribe
    sends encoded) was cut between two of its Chinese characters, as Chinese text is, and
    the reader's text part linked 'https://lists.example.org/退'."""
    url = "https://lists.example.org/退订?u={recipient}&list=rl-digest"
    text = render.digest_text(fx.config(unsubscribe_url=url), digest, READING, personal=True)
    assert url.replace(links.RECIPIENT, links.ADDRESS) in text.splitlines()


def test_wrap_keeps_a_count_with_its_label():
    line = "新论文 New: 7 · 修订 Revised: 3 · 更新 Updates: 1 · 精选收录 Curated: 2 · 精选 Featured: 12"
    for width in range(20, 80):
        for row in wrap(line, width=width).splitlines():
            assert not row.split()[0].isdigit(), (width, row)
    assert " ".join(wrap(line, width=30).split()) == line


# --- templates: strictness and overrides --------------------------------------------------

def test_strict_undefined_catches_a_missing_variable(tmp_path, digest):
    (tmp_path / "digest.md.j2").write_text("{{ d.id }} {{ no_such_variable }}\n", encoding="utf-8")
    with pytest.raises(jinja2.UndefinedError):
        render.digest_markdown(fx.config(templates_dir=tmp_path), digest, READING)
    (tmp_path / "email.html.j2").write_text("<p>{{ d.nope }}</p>", encoding="utf-8")
    with pytest.raises(jinja2.UndefinedError):
        render.digest_html(fx.config(templates_dir=tmp_path), digest, READING)


def test_a_user_override_replaces_one_template_only(tmp_path, digest, md):
    (tmp_path / "subject.txt.j2").write_text("My digest {{ d.id }} ({{ paper_count }})\n",
                                             encoding="utf-8")
    cfg = fx.config(templates_dir=tmp_path)
    assert render.digest_subject(cfg, digest) == "My digest 2026-11-30 (8)"
    assert render.digest_markdown(cfg, digest, READING) == md


def older_copy(text: str) -> str:
    """A template as a copy made before the macro files were imported without context reads:
    its imports `with context`, its calls without what the pages now pass them."""
    text = re.sub(r'(\{% import "[^"]+" as \w+) %\}', r"\1 with context %}", text)
    for new, old in [("lab.topic_total(s, featured_in)", "lab.topic_total(s)"),
                     ("tx.entry(e, feedback)", "tx.entry(e)"), ("tx.votes(e, vote=feedback)", "tx.votes(e)"),
                     (", top=root, href=paper_href, vote=feedback)", ")"),
                     ("(e, top=root, href=paper_href, vote=feedback)", "(e)")]:
        text = text.replace(new, old)
    return text


def test_a_page_copied_from_an_older_release_still_renders_as_the_built_in_one(tmp_path, digest):
    """templates.dir may hold copies of the pages from before the macro files were imported
    without context: they import them `with context` and call their macros without what the
    pages now pass them (featured_in, feedback, root): each still renders as the built-in page."""
    shipped = Path(__file__).parents[1] / "templates"
    for name in ("digest.md.j2", "email.txt.j2", "site/base.html.j2", "site/digest.html.j2"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        copy = older_copy((shipped / name).read_text(encoding="utf-8"))
        assert copy != (shipped / name).read_text(encoding="utf-8")
        (tmp_path / name).write_text(copy, encoding="utf-8")
    served = replace(fx.config(), serve_url="https://digest.example.org/rl/")
    mine = replace(served, templates=tmp_path)
    assert render.digest_markdown(mine, digest, READING) == render.digest_markdown(served, digest, READING)
    text = render.digest_text(mine, digest, READING, personal=True)
    assert "👍 https://digest.example.org/rl/" in text
    assert text == render.digest_text(served, digest, READING, personal=True)
    for settings, folder in ((served, "built-in"), (mine, "mine")):
        site.build(settings, tmp_path / folder, [digest], "2026-11-30T08:00:00+08:00",
                   feedback=partial(links.placeholder, served.serve_url))
    page = f"digests/{digest.id}.html"
    assert 'class="vote"' in (tmp_path / "mine" / page).read_text("utf-8")
    assert (tmp_path / "mine" / page).read_text("utf-8") == (tmp_path / "built-in" / page).read_text("utf-8")


def test_rendering_a_digest_leaves_no_jinja_context_in_a_reference_cycle(tmp_path, digest):
    """A page's macro files are imported without its context: an import `with context` made a
    module per render whose macros refer back to it, a cycle that held the page and its digest
    until the cyclic collector's next full pass (site.build held tens of digests at once). So
    is each page's own macro: its arguments and filters only, or in a macro file."""
    from pipeline.deliver import compact

    served = replace(fx.config(), serve_url="https://digest.example.org/rl/")
    renders = [lambda: render.digest_markdown(served, digest, READING),
               lambda: render.digest_text(served, digest, READING, personal=True),
               lambda: render.digest_html(served, digest, READING),
               lambda: render.digest_subject(served, digest),
               lambda: render.feed_xml(served, [digest], "2026-11-30T08:00:00+08:00"),
               lambda: site.build(served, tmp_path, [digest], "2026-11-30T08:00:00+08:00"),
               *(partial(compact.compact, served, digest, name, name.endswith(".html.j2"), 3)
                 for name in ("slack.txt.j2", "telegram.html.j2", "markdown.md.j2"))]
    gc.collect()
    gc.disable()
    try:
        for make in renders:
            make()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [getattr(o, "name", None) for o in gc.garbage if isinstance(o, jinja2.runtime.Context)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []


def test_a_template_changed_between_two_runs_of_one_process_is_the_next_runs(tmp_path, digest):
    """`rl-digest schedule` makes many runs in one process, and keeps their template
    environments: a template of templates.dir added, edited or taken out between two of them
    (a built-in one replaced, the built-in one back) is what the next run renders."""
    cfg = fx.config(templates_dir=tmp_path)
    built_in = render.digest_subject(cfg, digest)
    subject = tmp_path / "subject.txt.j2"
    subject.write_text("Mine {{ d.id }}\n", encoding="utf-8")
    assert render.digest_subject(cfg, digest) == "Mine 2026-11-30"
    subject.write_text("Edited {{ d.id }}\n", encoding="utf-8")
    os.utime(subject, (1, 1))  # another time than the copy read: within a clock tick
    assert render.digest_subject(cfg, digest) == "Edited 2026-11-30"
    subject.unlink()
    assert render.digest_subject(cfg, digest) == built_in


def test_html_env_autoescapes_user_templates(tmp_path, digest):
    (tmp_path / "email.html.j2").write_text("<p>{{ d.sections[0].entries[0].title }}</p>", encoding="utf-8")
    out = render.digest_html(fx.config(templates_dir=tmp_path), digest, READING)
    assert "&lt;script&gt;" in out and "<script>" not in out


# --- the feed -----------------------------------------------------------------------------

def test_feed_is_atom_with_one_entry_per_digest(cfg, digest):
    xml = render.feed_xml(cfg, [digest, fx.plain_digest()], "2026-12-07")
    root = ET.fromstring(xml.encode("utf-8"))
    ns = {"a": "http://www.w3.org/2005/Atom"}
    items = root.findall("a:entry", ns)
    assert [e.find("a:link", ns).get("href") for e in items] == ["digests/2026-12-07.html",
                                                                 "digests/2026-11-30.html"]
    assert len({e.find("a:id", ns).text for e in items}) == 2
    assert root.find("a:updated", ns).text == "2026-12-07T00:00:00+08:00"
    text = "".join(items[1].itertext())
    assert "<script>alert(1)</script> Policy" in text
    tags = {el.tag.split("}")[1] for el in root.iter()}
    assert "script" not in tags and "img" not in tags
    with_base = render.feed_xml(fx.config(base_url="https://x.example/rl"), [digest], UPDATED)
    assert '<link rel="self" type="application/atom+xml" href="https://x.example/rl/feed.xml"/>' in with_base
    assert "<id>https://x.example/rl/digests/2026-11-30.html</id>" in with_base
    # a topic's name is escaped once (its label macro's Markup was escaped again: "Tools &amp;amp; Agents")
    tools = replace(digest, sections=(replace(digest.sections[0], name_en="Tools & 'agents'"), *digest.sections[1:]))
    heads = ["".join(h.itertext()) for h in ET.fromstring(render.feed_xml(cfg, [tools], UPDATED).encode("utf-8"))
             .iter("{http://www.w3.org/1999/xhtml}h2")]
    assert any(h.endswith(" · Tools & 'agents' (3)") for h in heads), heads
    # a topic counts and names its featured papers, as the digest does; one whose papers are
    # all featured has its heading (Surveys and analyses was left out, Exploration Hacking with it)
    assert heads[-4:-3] == ["综述与分析 · Surveys and analyses (1)"], heads
    survey = ET.fromstring(xml.encode("utf-8")).findall(".//{http://www.w3.org/1999/xhtml}ul")
    assert any("".join(u.itertext()).strip().startswith("Exploration Hacking: Can LLMs Learn to Resist RL Training? "
                                                        "(2026-11-21) · ↑ 见上文精选解读 read in Featured above")
               for u in survey)


def test_the_feed_holds_the_newest_twenty_digests_however_long_the_history(cfg):
    """A feed reader fetches the whole file each time: a year of weekly digests stays out."""
    start = date(2026, 1, 5)
    year = [replace(fx.plain_digest(), id=(start + timedelta(weeks=n)).isoformat()) for n in range(52)]
    root = ET.fromstring(render.feed_xml(cfg, year, "2026-12-28").encode("utf-8"))
    links = [e.find("{http://www.w3.org/2005/Atom}link").get("href")
             for e in root.iter("{http://www.w3.org/2005/Atom}entry")]
    assert len(links) == 20 and links[0] == "digests/2026-12-28.html" and links[-1] == "digests/2026-08-17.html"


# --- a look in a real browser -------------------------------------------------------------

def _png_size(path: Path) -> tuple[int, int]:
    with path.open("rb") as fh:
        head = fh.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


PHONE_SCREEN = 812  # px: the height of a phone's screen (iPhone 13 mini, 375 × 812)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [375, 1024])
def test_html_screenshot_in_headless_chromium(tmp_path, html, width, scheme):
    """Kept in tests/artifacts/ (email-375-dark.png ...) for a look by eye."""
    ARTIFACTS.mkdir(exist_ok=True)
    page = tmp_path / "digest.html"
    page.write_text(html, encoding="utf-8")
    shot = ARTIFACTS / f"email-{width}-{scheme}.png"
    shot.unlink(missing_ok=True)
    dark = ["--force-dark-mode"] if scheme == "dark" else []
    chromium(tmp_path, *dark, f"--screenshot={shot}", f"--window-size={width},2400", page.as_uri())
    if not shot.exists():
        pytest.skip(f"chromium made no screenshot at {width} px")
    assert _png_size(shot) == (width, 2400)
    assert shot.stat().st_size > 20_000  # a page was drawn, not a blank


def _measure(tmp_path: Path, emails: list[str], width: int, dark: bool) -> list[dict[str, str]]:
    """Lay each email out in a `width` px frame (headless windows are at least 500 px
    wide), all in one Chromium (a launch is about 0.5 s), and read where the featured
    section starts and the page's colours."""
    from selectolax.lexbor import LexborHTMLParser

    data = json.dumps(emails).replace("</", "<\\/")  # no </script> inside the script
    script = f"var emails = {data}, width = {width}, height = {PHONE_SCREEN};" + """
var results = emails.map(function () { return null; });
emails.forEach(function (email, n) {
  var f = document.createElement('iframe');
  f.width = String(width);
  f.height = String(height);
  f.style.position = 'absolute';  // laid over one another, each on the screen
  f.style.left = f.style.top = '0';
  f.addEventListener('load', function () {  // added before the frame loads
    var d = f.contentDocument, w = f.contentWindow;
    results[n] = {width: String(w.innerWidth),
                  featured: String(d.getElementById('featured').getBoundingClientRect().top),
                  bg: w.getComputedStyle(d.body).backgroundColor,
                  text: w.getComputedStyle(d.querySelector('h2')).color,
                  overflow: String(d.documentElement.scrollWidth - d.documentElement.clientWidth)};
    document.body.setAttribute('data-result', JSON.stringify(results));
  });
  f.srcdoc = email;
  document.body.appendChild(f);
});"""
    host = tmp_path / "host.html"
    host.write_text(f"<html><body><script>{script}</script></body></html>", encoding="utf-8")
    done = chromium(tmp_path, *(["--force-dark-mode"] if dark else []), "--window-size=1024,900",
                    "--dump-dom", host.as_uri())
    found = LexborHTMLParser(done.stdout).css_first("body[data-result]")
    if found is None:
        pytest.skip("chromium laid out no page")
    results = json.loads(found.attributes["data-result"] or "[]")
    assert None not in results, f"no measure of the emails {[n for n, r in enumerate(results) if r is None]}"
    return results


# The emails measured on a 375 px phone, all in one Chromium (`on_a_phone`): each test's
# email, by its name, made of the module's cfg, digest and html.

def _featured_far_down(cfg, digest, html):
    return render.digest_html(cfg, replace(fx.many(40), first=False), READING)


def _long_cells(cfg, digest, html):
    long = ("GRPO/DAPO/GSPO/Dr.GRPO/REINFORCE++", "Memory-Augmented/Test-Time-Reinforcement/Learning")
    rows = tuple(replace(r, cells=((long[0], long[1]), (long[1], long[0]))) for r in digest.comparison)
    return render.digest_html(cfg, replace(digest, comparison=rows), READING)


def _long_title(cfg, digest, html):
    long = "Scaling GRPO/DAPO/GSPO/Dr.GRPO/REINFORCE++/RLOO/ReMax/VAPO/KTO/ORPO/SimPO for reasoning"
    first, *rest = digest.sections
    section = replace(first, entries=(replace(first.entries[0], title=long), *first.entries[1:]))
    return render.digest_html(cfg, replace(digest, sections=(section, *rest)), READING)


PHONE = {"featured": _featured_far_down, "comparison": _long_cells, "long title": _long_title,
         "reader links": lambda cfg, digest, html: _email(cfg, digest), "light": lambda cfg, digest, html: html}


# The tests that use the module fixtures below are one xdist group ("render_phone"), run first and
# together (tests/conftest.py), on one xdist worker: each fixture is built once, not once a worker.
@pytest.fixture(scope="module")
def on_a_phone(cfg, digest, html, tmp_path_factory) -> dict[str, dict[str, str]]:
    emails = {name: make(cfg, digest, html) for name, make in PHONE.items()}
    return dict(zip(emails, _measure(tmp_path_factory.mktemp("phone"), list(emails.values()), 375, dark=False),
                    strict=True))


@pytest.mark.xdist_group("render_phone")
def test_on_a_phone_the_featured_section_starts_within_two_screens(on_a_phone):
    found = on_a_phone["featured"]
    assert found["width"] == "375"
    assert 0 < float(found["featured"]) < 2 * PHONE_SCREEN, found


@pytest.mark.xdist_group("render_phone")
def test_on_a_phone_the_comparison_table_does_not_widen_the_email(on_a_phone):
    """Cells an LLM fills with slashed lists and long compounds have no break point: the
    table must wrap them, not push the whole email past the screen (_long_cells)."""
    found = on_a_phone["comparison"]
    assert found["overflow"] == "0", found


@pytest.mark.xdist_group("render_phone")
def test_on_a_phone_a_title_with_a_long_unbroken_word_does_not_widen_the_email(on_a_phone):
    """A title (or a summary) may hold a word with no break point, a slashed list of
    methods (_long_title): it wraps, where it pushed the whole email 257 px past a 375 px screen."""
    found = on_a_phone["long title"]
    assert found["overflow"] == "0", found


SERVED = "https://digest.example.org/rl-digest/"  # serve.base_url: the site and the reader links


def _email(cfg, digest, address="bob.long.name@example.org"):
    """The HTML part of `address`'s email when `serve.base_url` is set: tokens in every link."""
    served = replace(cfg, serve_url=SERVED, site_url=SERVED)
    html = render.digest_html(served, digest, READING, personal=True)
    return links.Links(SERVED, "a-test-secret").personal(html, address)


@pytest.mark.xdist_group("render_phone")
def test_on_a_phone_the_reader_links_do_not_widen_the_email(on_a_phone):
    """An unsubscribe URL with its token has no break point: it must not be the link's text."""
    found = on_a_phone["reader links"]
    assert found["overflow"] == "0", found


def test_an_email_links_only_where_a_mail_client_can_go(cfg, digest):
    """A relative link or `#` goes nowhere from an inbox; a seed entry without a URL is text."""
    bare = replace(digest.curated[0], url=None, title="Seed Entry Without a Link")
    digest = replace(digest, curated=(bare, *digest.curated[1:]))
    page = parse(_email(cfg, digest))
    anchors = [attrs["href"] for tag, attrs in page.tags if tag == "a"]
    assert anchors and all(h.startswith(("https://", "mailto:")) for h in anchors), anchors
    assert f"{SERVED}papers/index.html" in anchors  # the reading list, on the web
    assert "Seed Entry Without a Link" in "".join(page.text)
    alone = parse(render.digest_html(cfg, digest, READING, personal=True))  # no URL configured
    assert all(h.startswith(("https://", "mailto:")) for t, a in alone.tags if t == "a" for h in [a["href"]])
    text = render.digest_text(cfg, digest, READING, personal=True)
    assert "READING_LIST.md" not in text and "../" not in text and f"{READING} " in text


def test_the_text_email_puts_each_vote_link_on_a_line_of_its_own(cfg, digest):
    served = replace(cfg, serve_url=SERVED, site_url=SERVED)
    text = links.Links(SERVED, "a-test-secret").personal(
        render.digest_text(served, digest, READING, personal=True), "bob@example.org")
    votes = [line for line in text.splitlines() if "/f/" in line]
    full = [e for s in digest.sections for e in s.entries] + [*digest.featured, *digest.curated]
    assert len(votes) == 2 * len({e.key for e in full if e.key.startswith("arxiv:")})  # no seed's
    assert all(re.fullmatch(r" *(👍|👎) https://\S+/f/\S+", line) for line in votes), votes
    assert not [line for line in text.splitlines() if line.strip() in ("👍", "👎", "·")]


@pytest.mark.xdist_group("render_phone")
def test_dark_mode_turns_the_page_dark_and_keeps_it_readable(tmp_path, html, on_a_phone):
    light, [dark] = on_a_phone["light"], _measure(tmp_path, [html], 375, dark=True)  # a Chromium forced dark

    def brightness(css: str) -> int:
        return sum(int(v) for v in re.findall(r"\d+", css)[:3])

    assert brightness(light["bg"]) > 600 and brightness(light["text"]) < 200  # dark on light
    assert brightness(dark["bg"]) < 150 and brightness(dark["text"]) > 600  # light on dark


def test_after_the_first_digest_the_topic_intro_is_its_first_sentence(cfg, digest):
    """A reminder that reads as a sentence, not a stub cut inside a parenthesis; in each
    language shown, as everything else of a bilingual digest."""
    later = replace(digest, first=False)
    zh_first, zh_rest = fx.INTRO_ZH.split("。", 1)
    en_first, en_rest = fx.INTRO_EN.split(". ", 1)
    english = replace(cfg, languages=("en",))
    for make in (render.digest_markdown, render.digest_text, render.digest_html):
        first, after = make(cfg, digest, READING), make(cfg, later, READING)
        assert fx.INTRO_ZH in first.replace("\n", "") or fx.INTRO_ZH[:30] in first
        assert fx.INTRO_EN[:60] in " ".join(first.split())
        assert zh_first + "。" in after.replace("\n", "")
        assert zh_rest[:10] not in after.replace("\n", "") and en_rest[:20] not in " ".join(after.split())
        assert en_first + "." in " ".join(after.split())
        shown = " ".join(make(english, later, READING).split())
        assert en_first + "." in shown and en_rest[:20] not in shown


def test_a_reader_of_chinese_alone_is_told_papers_may_be_missing():
    """The coverage line in Chinese, as in English, names the gaps not recovered."""
    gaps = [{"group": "9 feeds", "day": "06-07", "cause": "feed stale", "recovered": ""},
            {"group": "cs.CL", "day": "06-02 → 06-04 (3 announcements)", "cause": "not collected",
             "recovered": ""},
            {"group": "cs.LG", "day": "06-05", "cause": "feed stale", "recovered": "OAI-PMH"}]
    coverage = {"first": "06-01", "last": "06-07", "expected": 5, "read": 4, "groups": [],
                "gaps": gaps, "no_announcement": [], "relevant": {}}
    digest = replace(fx.digest(), coverage=coverage)
    for text in (render.digest_markdown(fx.config(languages=("zh",)), digest, READING),
                 render.digest_text(fx.config(languages=("zh",)), digest, READING)):
        line = "".join(text.split())  # the text part wraps Chinese between any two characters
        assert "缺口3处，已补回1处；未补回的2处（06-07、06-02→06-04）：当天发布的论文可能不在本期" in line
    english = render.digest_markdown(fx.config(languages=("en",)), digest, READING)
    assert english.count("NOT recovered") == 2 and "未补回" not in english
    both = "".join(render.digest_markdown(fx.config(), digest, READING).split())
    assert "未补回的2处" in both and both.count("NOTrecovered") == 2  # each reader of a bilingual digest


@pytest.mark.parametrize("languages", [["zh", "en"], ["zh"], ["en"]])
def test_a_trimmed_email_stays_under_the_limit_once_each_readers_links_are_in(languages):
    """The size is checked with the tokens' length, not the placeholders': a trimmed email
    fills the limit, and 100-odd 👍/👎 links each growing by some 40 bytes (and by the
    quoted-printable line breaks they add) would push it over (Gmail then clips it,
    unsubscribe link and all)."""
    settings = replace(fx.config(languages=languages), serve_url="https://digest.example.org/rl/",
                       site_url="https://digest.example.org/rl/")  # as Config.site_url derives it
    week = with_one_liners(fx.many(30), 120)  # 30 full entries, each with its 👍/👎 links
    html = render.digest_html(settings, week, 500, personal=True)
    assert len(links.sized(html)) - len(html) > 500  # links to fill in
    mine = links.Links("https://digest.example.org/rl/", "a-secret").personal(html, "ada.lovelace@example.org")
    assert len(html.encode("utf-8")) < len(mine.encode("utf-8")) <= render.EMAIL_LIMIT
    # as mail carries it: the HTML part's body in the message put on the wire, encoded
    message = build_message(sender="d@example.org", recipient="ada.lovelace@example.org", subject="s",
                            text="t", html=mine, digest_id="2026-11-30", list_id="l.example.org",
                            unsubscribe_mailto="d@example.org", unsubscribe_url=None,
                            date=datetime(2026, 11, 30, tzinfo=UTC), message_id=None)
    part = message.get_body(("html",)).as_bytes(policy=WIRE_POLICY).split(b"\r\n\r\n", 1)[1]
    assert 0.9 * render.EMAIL_LIMIT < len(part) <= render.EMAIL_LIMIT, len(part)


def test_an_email_with_no_whole_copy_to_link_keeps_every_paper():
    """No outputs.site_url or base_url: the email cannot say where the rest is, so it is
    not trimmed (Gmail's "View entire message" still reaches a clipped one's end)."""
    week = fx.many(150)
    html = render.digest_html(fx.config(), week, 500, personal=True)
    assert len(html.encode("utf-8")) > render.EMAIL_LIMIT
    assert all(e.title in html for s in week.sections for e in s.entries)
    assert "篇论文见完整版" not in html and "完整版" not in html
    site = replace(fx.config(), site_url="https://digest.example.org/rl/")
    trimmed = render.digest_html(site, week, 500, personal=True)
    assert len(trimmed.encode("utf-8")) <= render.EMAIL_LIMIT
    assert 'href="https://digest.example.org/rl/digests/2026-11-30.html"' in trimmed


def test_a_featured_paper_shows_its_code_and_venue_in_every_edition(cfg):
    """A featured paper is listed nowhere else: its code link and venue are read there."""
    digest = fx.digest()
    hacking = replace(fx.HACKING, links=(("code", "https://github.com/foo/bar"),), venue="ICLR 2027")
    digest = replace(digest, featured=(fx.PRISM, hacking))
    for text in (render.digest_markdown(cfg, digest, 1), render.digest_text(cfg, digest, 1),
                 render.digest_html(cfg, digest, 1)):
        featured = text.split("Exploration Hacking", 1)[1].split("Comparison", 1)[0]
        assert "https://github.com/foo/bar" in featured and "ICLR 2027" in featured


def test_a_links_line_never_starts_with_a_separator():
    """A seed entry has no arXiv, PDF or code link: its line is its venue alone, not '· ICLR'."""
    settings = replace(fx.config(), serve_url="https://digest.example.org/rl/")
    digest = fx.digest()
    bare = replace(digest.curated[0], url=None, links=(), venue="ICLR 2027")
    html = render.digest_html(settings, replace(digest, curated=(bare, *digest.curated[1:])), 5,
                              personal=True)
    lines = re.findall(r'<p class="links"[^>]*>(.*?)</p>', html)
    assert any("ICLR 2027" in line and "href" not in line for line in lines), lines
    assert [line for line in lines if line.lstrip().startswith("·")] == []


def test_an_entry_of_no_arxiv_paper_offers_no_votes_in_any_edition(tmp_path):
    """A seed entry shown by its title: a 👍/👎 on it got a thank-you page, but no model learns
    from it, `status --paper` cannot show it, and its paper found later does not get it."""
    served = replace(fx.config(), serve_url=SERVED, site_url=SERVED)
    digest = fx.digest()
    seeds = [e.key for e in digest.curated]
    assert seeds and all(key.startswith("seed:") for key in seeds)
    html = render.digest_html(served, digest, READING, personal=True)
    text = render.digest_text(served, digest, READING, personal=True)
    voted = {unquote(key) for key in re.findall(r"/f/" + re.escape(links.MARK) + r"\.(?:up|down)\.([^\s\"'<>]+)",
                                                html + text)}
    assert voted and all(key.startswith("arxiv:") for key in voted), voted
    site.build(served, tmp_path, [digest], "2026-11-30T08:00:00+08:00", lambda action, key: f"/f/{action}/{key}")
    page = (tmp_path / "digests" / "2026-11-30.html").read_text(encoding="utf-8")
    on_the_web = set(re.findall(r'href="/f/up/([^"]+)"', page))
    assert on_the_web and all(key.startswith("arxiv:") for key in on_the_web), on_the_web


def test_a_count_reads_in_each_order_of_the_two_languages(digest):
    """English first puts the number before each word ("215 papers / 215 篇"), never a
    measure word stranded after the English one ("215 papers 篇")."""
    for make in (render.digest_markdown, render.digest_text, render.digest_html):
        english_first = " ".join(untagged(make(fx.config(languages=("en", "zh")), digest, READING)).split())
        assert f"{READING} papers / {READING} 篇" in english_first and "papers 篇" not in english_first
        chinese_first = " ".join(untagged(make(fx.config(), digest, READING)).split())
        assert f"{READING} 篇 papers" in chinese_first


def test_a_chinese_only_reader_gets_the_english_line_of_a_paper_whose_chinese_is_pending(tmp_path):
    """Without an LLM a [zh] digest showed each new paper's title and links alone, in every
    edition and the reading list, under a header saying its Chinese is pending; it now shows
    the abstract's contribution sentence, the paper's own words as its title is."""
    from pipeline.reading_list_markdown import Rows

    claim = "We show that verifier drift explains most reward hacking in RLVR runs."
    zh = fx.config(languages=("zh",))
    digest = fx.digest()
    for text in (render.digest_markdown(zh, digest, READING), render.digest_text(zh, digest, READING),
                 render.digest_html(zh, digest, READING)):
        assert "".join(claim.split()) in "".join(text.split()), text[:300]
    site.build(zh, tmp_path, [digest], "2026-11-30T08:00:00+08:00")
    assert claim in (tmp_path / "digests" / f"{digest.id}.html").read_text("utf-8")
    assert claim[:60] in "".join(Rows(zh).rows([fx.OFFLINE]))
    papers = site.env(zh).get_template("site/papers_entries.html.j2")  # the site's papers pages
    assert claim in papers.render(entries=[fx.OFFLINE], listed={}, news={}, root="../../", feedback=None,
                                  **site.context(zh))
    chinese = render.digest_markdown(zh, replace(digest, sections=(
        replace(digest.sections[0], entries=(fx.LAMBDA,)),)), READING)
    assert fx.LAMBDA.summary_zh in chinese and fx.LAMBDA.summary_en not in chinese  # Chinese: as before


def test_the_reading_lists_entries_carry_no_mark_their_heading_says(tmp_path):
    """Every entry under 收录 · From the reading list repeated "📌 精选收录 Curated", which the
    heading says; a seed elsewhere (PRISM, featured) keeps it."""
    digest, cfg = fx.digest(), fx.config()
    assert digest.curated
    site.build(cfg, tmp_path, [digest], "2026-11-30T08:00:00+08:00")
    for text in (render.digest_markdown(cfg, digest, READING), render.digest_text(cfg, digest, READING),
                 untagged(render.digest_html(cfg, digest, READING)),
                 (tmp_path / "digests" / f"{digest.id}.html").read_text("utf-8")):
        before, shelf = re.sub(r"<[^>]+>", "", text).split("收录 · From the reading list", 1)
        assert "📌" in before and "📌" not in shelf and "Pipes in Titles" in shelf


def test_a_featured_paper_without_the_llms_reading_says_its_contribution_once(tmp_path):
    """Without an LLM a featured paper's line is its abstract's contribution sentence: it was
    shown in italics, then again inside the full abstract below. The abstract says it once,
    in every edition."""
    claim = "".join("We show that verifier drift explains most reward hacking in RLVR runs.".split())
    digest = replace(fx.digest(), featured=(fx.OFFLINE, fx.HACKING), sections=fx.digest().sections[:1],
                     highlights=())
    for languages in (("en",), ("zh", "en")):
        cfg = fx.config(languages=languages)
        editions = [render.digest_markdown(cfg, digest, READING), render.digest_text(cfg, digest, READING),
                    render.digest_html(cfg, digest, READING)]
        if languages == ("en",):
            site.build(cfg, tmp_path, [digest], "2026-11-30T08:00:00+08:00")
            editions.append((tmp_path / "digests" / f"{digest.id}.html").read_text("utf-8"))
        for text in editions:
            assert "".join(text.split()).count(claim) == 1, (languages, text[:300])
