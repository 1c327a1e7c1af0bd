"""Generated hostile text through every output, each read back by a real parser.

Titles, abstracts, summaries, author names, seed entries and topic names made of markup
characters, TeX, newlines, invisible and right-to-left characters, mentions and links:
no element, attribute, table cell or link comes from them, every paper links where it
should, and what a reader sees still holds all of the title.
"""

from __future__ import annotations

import html
import json
import re
import string
import tempfile
import xml.etree.ElementTree as ET
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from pipeline import compose, escape, reading_list, render, site, site_papers, text, text_wrap
from pipeline import config as cfg
from pipeline.deliver import chat, chat_split, compact
from pipeline.models import Digest, Enrichment, Entry, Highlight, Paper, Part, Row, Scored, paper_key
from pipeline.store import Store
from tests import fixtures_digest as fx
from tests.helpers import write_config

cmarkgfm = pytest.importorskip("cmarkgfm", reason="GitHub's parser (test extra cmarkgfm)")
from cmarkgfm.cmark import Options  # noqa: E402

FRAGMENTS = ["<", ">", "&", '"', "'", "|", "*", "_", "[", "]", "(", ")", "`", "\\", "$", "~", "#", ":",
             "$\\mathcal{O}(n^2)$", "\\textbf{x}", "$\\alpha_t$", "``code``", "\n", "\n\n", "\t", "\r\n",
             "\u200b", "\u202e", "\u200f", "\u2066", "😀", "强化学习", "｜", "＊", "＞", "：", "，", "）",
             "# ", "> ", "- ", "1. ", "| ", "+ ", "=", "---", "<!channel>", "@here", "@channel",
             "](javascript:alert(1))", "[x](javascript:alert(1))", "http://evil.example/x",
             "https://evil.example", "www.evil.example", "a@b.org", "<script>alert(1)</script>",
             "<b>", "</a>", "<img src=x onerror=alert(1)>", "&amp;", "&lt;", "&#60;", "&copy", "<!--",
             "-->", "]]>", "{{ x }}", "{% if %}", ":fire:", "/start", "#tag", "$USD", "<@U123>",
             "<https://evil.example|click>", "~~x~~", "**b**", "__u__", "||spoiler||", "\\\\", "\\|",
             "W" * 80]
WORD = st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=10)
RAW = st.lists(st.one_of(st.sampled_from(FRAGMENTS), WORD, st.just(" ")), min_size=1, max_size=10).map("".join)
# Each field as the source stage stores it (pipeline/text.py): a title one line, prose with its lines.
TITLE = RAW.map(text.title).filter(lambda t: bool(t.strip()))
PROSE = RAW.map(text.prose).filter(lambda t: bool(t.strip()))
NAME = RAW.map(text.clean_name).filter(bool)
# Topic names come from config.yaml as written
TOPIC_NAME = RAW.map(lambda t: " ".join(t.split())).filter(bool)

OURS = ("https://arxiv.org/", "https://github.com/example-lab/", "https://huggingface.co/example-lab/",
        "https://huggingface.co/datasets/example-lab/", "../READING_LIST.md", "READING_LIST.md",
        "reading-list/", "#", "https://example.org/")
# A digest renders in about 0.1 s: no shrinking, which took five minutes and more on a failure
# (the failing digest is printed whole, its hostile texts easy to pick out)
_GENERATED = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                     phases=[Phase.explicit, Phase.reuse, Phase.generate])


def PROPERTY(test):  # noqa: N802 (a decorator, read as a settings object)
    """Generated cases take seconds a property: they run in make test-slow, and what they
    found stays in make test as the explicit cases at the end of this file."""
    return pytest.mark.slow(_GENERATED(test))
INVISIBLE = str.maketrans("", "", "\u2060\u00ad")  # what our escaping adds: a word joiner, a soft hyphen


def seen(value: str) -> str:
    """Text as a reader sees it: whitespace runs as one space, our invisible characters gone."""
    return " ".join(value.translate(INVISIBLE).split())


@st.composite
def digests(draw) -> Digest:
    """The fixture digest with every outside text replaced by generated text."""
    base = fx.digest()

    def hostile(entry: Entry) -> Entry:
        return replace(entry, title=draw(TITLE), abstract=draw(PROSE),
                       authors=tuple(draw(st.lists(NAME, min_size=1, max_size=4))),
                       summary_zh=draw(PROSE), summary_en=draw(PROSE),
                       title_zh=draw(st.none() | TITLE), why_zh=draw(st.none() | PROSE),
                       why_en=draw(st.none() | PROSE), headline_zh=draw(st.none() | PROSE),
                       headline_en=draw(st.none() | PROSE), venue=draw(st.none() | NAME),
                       key_points_en=tuple(draw(st.lists(PROSE, max_size=2))),
                       key_points_zh=tuple(draw(st.lists(PROSE, max_size=2))),
                       parts=tuple(Part(draw(NAME), draw(NAME), draw(PROSE), draw(PROSE)) for _ in entry.parts),
                       categories=tuple(draw(st.lists(NAME, max_size=2))) or entry.categories)

    sections = tuple(replace(s, name_zh=draw(TOPIC_NAME), name_en=draw(TOPIC_NAME),
                             entries=tuple(hostile(e) for e in s.entries),
                             brief=tuple(hostile(e) for e in s.brief)) for s in base.sections)
    featured = tuple(hostile(e) for e in base.featured)
    curated = tuple(hostile(e) for e in base.curated)
    highlights = tuple(Highlight(e.key, e.title, e.url, draw(PROSE), draw(PROSE)) for e in featured)
    comparison = tuple(Row(draw(NAME), draw(NAME), tuple((draw(PROSE), draw(PROSE)) for _ in row.cells))
                       for row in base.comparison)
    updates = tuple(replace(u, title=draw(TITLE), title_zh=draw(st.none() | TITLE),
                            changes=(("version", "1", "3"), ("venue", "", draw(NAME)))) for u in base.updates)
    trends = replace(base.trends, topics=tuple(replace(t, name_zh=draw(TOPIC_NAME), name_en=draw(TOPIC_NAME))
                                               for t in base.trends.topics))
    return replace(base, sections=sections, featured=featured, curated=curated, highlights=highlights,
                   comparison=comparison, synthesis_zh=draw(PROSE), synthesis_en=draw(PROSE),
                   question_zh=draw(st.none() | PROSE), question_en=draw(st.none() | PROSE), updates=updates,
                   trends=trends, model=draw(NAME))


def papers(digest: Digest) -> list[Entry]:
    return [*digest.featured, *(e for s in digest.sections for e in (*s.entries, *s.brief)), *digest.curated]


def linked(digest: Digest) -> list:
    """What the digest links by its title: its papers, and the earlier ones with news."""
    return [*papers(digest), *digest.updates]


def config(digest: Digest, **more) -> render.Settings:
    """The fixture's settings, the digest's (hostile) topic names as config.yaml would hold them."""
    return replace(fx.config(**more), topic_names={s.topic: (s.name_zh, s.name_en) for s in digest.sections})


def gfm(markdown: str) -> LexborHTMLParser:
    return LexborHTMLParser(cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE))


def linked_titles(page: LexborHTMLParser, entries: list[Entry]) -> None:
    """Each paper is a link to its own URL whose text is the whole title."""
    links: dict[str, set[str]] = {}
    for a in page.css("a"):
        links.setdefault(a.attributes.get("href") or "", set()).add(seen(a.text()))
    for entry in entries:
        if entry.url:
            assert seen(entry.title) in links.get(entry.url, set()), (entry.title, links.get(entry.url))


def markdown_is_ours(page: LexborHTMLParser, tags: set[str]) -> None:
    found = {node.tag for node in page.root.traverse()} - {"html", "head", "body", "-text", "-comment"}
    assert found <= tags, found - tags
    hrefs = [a.attributes["href"] or "" for a in page.css("a[href]")]
    assert all(h.startswith(OURS) for h in hrefs), [h for h in hrefs if not h.startswith(OURS)]
    for table in page.css("table"):
        widths = {len(row.css("th, td")) for row in table.css("tr")}
        assert len(widths) == 1, widths


MD_TAGS = {"a", "blockquote", "br", "code", "em", "h1", "h2", "h3", "hr", "li", "p", "strong", "table",
           "tbody", "td", "th", "thead", "tr", "ul"}


# --- the weekly digest ------------------------------------------------------------------

@PROPERTY
@given(digests())
def test_the_markdown_digest_keeps_outside_text_as_text(digest):
    md = render.digest_markdown(config(digest), digest, 9)
    page = gfm(md)
    markdown_is_ours(page, MD_TAGS)
    linked_titles(page, linked(digest))


def tags(page: LexborHTMLParser) -> set[str]:
    return {node.tag for node in page.root.traverse() if not node.tag.startswith("-")}


def html_is_ours(page_html: str, own: str, digest: Digest) -> LexborHTMLParser:
    """Only the elements the same template makes of the fixture digest (whose hostile titles
    the render tests check by hand); no event handler or script link; each paper linked by its title."""
    page = LexborHTMLParser(page_html)
    assert tags(page) <= tags(LexborHTMLParser(own)), tags(page) - tags(LexborHTMLParser(own))
    assert len(page.css("script")) == len(LexborHTMLParser(own).css("script"))
    names = {name for node in LexborHTMLParser(own).root.traverse() for name in node.attributes}
    assert {name for node in page.root.traverse() for name in node.attributes} <= names
    for node in page.root.traverse():
        if node.tag.startswith("-"):
            continue
        for name, value in node.attributes.items():
            assert not name.startswith("on"), (node.tag, name, value)
            if name in ("href", "src", "action") and value not in own:
                assert not (value or "").lower().startswith(("javascript", "data", "vbscript")), value
    linked_titles(page, [e for e in linked(digest) if e.key not in digest.left_out])
    return page


@PROPERTY
@given(digests())
def test_the_html_email_keeps_outside_text_as_text(digest):
    html_is_ours(render.digest_html(config(digest), digest, 9), render.digest_html(fx.config(), fx.digest(), 9),
                 digest)


@PROPERTY
@given(digests())
def test_the_text_email_and_subject_keep_every_title_and_stay_one_line(digest):
    settings_ = config(digest)
    body = render.digest_text(settings_, digest, 9)
    flat = "".join(body.split())  # a word longer than a line is cut across lines
    for entry in papers(digest):
        assert "".join(entry.title.split()) in flat, entry.title
    subject = render.digest_subject(settings_, digest)
    assert "\n" not in subject and "\r" not in subject


@settings(max_examples=300, deadline=None)
@given(RAW)
@example("x }}G＊r")  # found: read "x }}G ＊r"
@example("GRPO ：强化学习")
def test_wrapping_text_that_fits_changes_nothing(value):
    """The text email's wrap adds line breaks only: a line wide enough is the text as it is."""
    assert text_wrap.wrap(value, width=10**6) == escape.one_line(value)


@PROPERTY
@given(digests())
def test_the_atom_feed_is_xml_whose_links_and_titles_are_the_papers(digest):
    feed = render.feed_xml(config(digest), [digest], "2026-11-30T08:00:00+08:00")
    root = ET.fromstring(feed)
    xhtml = "{http://www.w3.org/1999/xhtml}"
    links = {}
    for a in root.iter(f"{xhtml}a"):
        links.setdefault(a.get("href"), set()).add(seen("".join(a.itertext())))
    tags = {el.tag.split("}")[1] for el in root.iter()}
    assert tags <= {"feed", "title", "subtitle", "id", "link", "updated", "author", "name", "generator",
                    "entry", "summary", "content", "div", "h2", "ul", "li", "a", "br", "p", "strong",
                    "table", "tr", "td", "th", "em", "span"}, tags
    for entry in papers(digest):
        if entry.url and entry in digest.featured:
            assert seen(entry.title) in links.get(entry.url, set()), entry.title


@PROPERTY
@given(digests())
def test_the_web_edition_pages_keep_outside_text_as_text(digest):
    pages = [site_pages(config(digest), digest), site_pages(fx.config(), fx.digest())]
    for name in pages[1]:
        html_is_ours(pages[0][name], pages[1][name], digest if name != "index.html" else replace(digest, sections=(), featured=(), curated=(), updates=()))


def site_pages(settings_: render.Settings, digest: Digest) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as folder:
        site.build(settings_, Path(folder), [digest], "2026-11-30T08:00:00+08:00")
        return {name: (Path(folder) / name).read_text("utf-8") for name in (site.digest_href(digest.id), "index.html")}


# --- the reading list -------------------------------------------------------------------

@PROPERTY
@given(st.lists(st.tuples(TITLE, PROSE, NAME, st.booleans()), min_size=1, max_size=6))
def test_the_reading_list_tables_keep_their_columns_and_links(rows):
    found = [Entry(key=f"arxiv:2611.{k:05d}" if not seed else f"seed:s{k}", title=title, topic=fx.TOPICS[k % 3].key,
                   url=f"https://arxiv.org/abs/2611.{k:05d}", date=f"2026-11-{k + 1:02d}", authors=(name,),
                   summary_zh=summary, summary_en=summary, curated=seed, origin="004_page.txt" if seed else None)
             for k, (title, summary, name, seed) in enumerate(rows)]
    with tempfile.TemporaryDirectory() as folder:
        files = reading_list.write_markdown(fx.config(), fx.TOPICS, sorted(found, key=reading_list.order),
                                            Path(folder), "2026-11-30")
        for name, path in files.items():
            page = gfm(path.read_text("utf-8"))
            markdown_is_ours(page, {"a", "h1", "h2", "li", "p", "table", "tbody", "td", "th", "thead", "tr",
                                    "ul", "strong", "em", "br", "code"})
            if name.startswith("reading-list/20"):
                linked_titles(page, found)


# --- chat -------------------------------------------------------------------------------

def bodies(kind: str, digest: Digest, top: int = 3) -> list[dict]:
    platform = chat.PLATFORMS[kind]
    title, body, content = compact.compact(config(digest), digest, platform.template, platform.html, top)
    return platform.bodies(title, body, content)


@PROPERTY
@given(digests())
def test_a_feishu_or_dingtalk_post_is_markdown_of_our_own(digest):
    for kind in ("feishu", "dingtalk"):
        posts = bodies(kind, digest)
        md = "\n".join(p["card"]["elements"][0]["content"] if kind == "feishu" else p["markdown"]["text"]
                       for p in posts)
        page = gfm(md)
        # GFM's autolinks of a bare address are left out: no Feishu or DingTalk document says they make any
        bare = [a for a in page.css("a[href]") if unquote(a.attributes["href"] or "").split(":", 1)[-1].lstrip("/")
                == a.text().translate(INVISIBLE)]
        for a in bare:
            a.unwrap()
        markdown_is_ours(page, {"a", "li", "p", "strong", "ul", "br"})
        linked_titles(page, [e for e in papers(digest) if e in digest.featured])


_SLACK_LINK = re.compile(r"<([^<>|]*)\|([^<>]*)>")
_SLACK_BACK = str.maketrans({"\u2217": "*", "\u02cd": "_", "\u02cb": "`", "\u223c": "~", "\ufe61": "＊",
                             "\u2e0f": "＿", "\u2236": ":"})


@PROPERTY
@given(digests())
def test_a_slack_post_has_only_our_links_and_no_mention(digest):
    links: dict[str, set[str]] = {}
    for post in bodies("slack", digest):
        assert "<" not in post["text"] and ">" not in post["text"]
        for block in post["blocks"]:
            mrkdwn = block["text"]["text"]
            assert chat_split.utf16(mrkdwn) <= chat.SLACK_BLOCK  # an emoji 2, as Slack may count it
            for url, label in _SLACK_LINK.findall(mrkdwn):
                assert url.startswith(OURS), url
                links.setdefault(url, set()).add(seen(html.unescape(label).translate(_SLACK_BACK)))
            rest = _SLACK_LINK.sub("", mrkdwn)
            assert "<" not in rest and ">" not in rest, rest  # no <!channel>, <@U…>, <url>
            assert not re.search(r"&(?!amp;|lt;|gt;)", rest), rest
            for line in mrkdwn.splitlines():  # the template's *heading* lines are the only markup
                assert not re.search(r"[_~`＊＿｀]|:[\w+'-]+:", line), line
                assert "*" not in line or re.fullmatch(r"\*[^*]+\*", line), line
                assert not line.lstrip().startswith((">", "&gt;", "＞")), line
    for entry in digest.featured:
        if entry.url:
            got = links.get(entry.url, set())
            want = seen(entry.title).replace("＿", "\u2e0f")  # the fullwidth ones stay look-alikes
            assert any(want.translate(_SLACK_BACK) == g for g in got), (entry.title, got)


# what Telegram makes a live entity of (test_chat_channels' check): @name, #tag, $TAG, /command, a domain
TELEGRAM_LIVE = re.compile(r"[@#][A-Za-z0-9_]|\$[A-Z]|(?<![\w/<>])/[A-Za-z]|\w\.[A-Za-z0-9]")


@PROPERTY
@given(digests())
def test_a_telegram_post_is_html_of_its_subset_only(digest):
    """core.telegram.org/bots/api#html-style: only its tags; every `<`, `>`, `&` outside one a tag or an entity."""
    links: dict[str, set[str]] = {}
    for post in bodies("telegram", digest):
        message = post["text"]
        assert chat_split.utf16(message) <= chat.TELEGRAM_LIMIT
        for tag in re.findall(r"<[^>]*>", message):
            assert re.fullmatch(r'</?(b|i)>|<a href="[^"<>]*">|</a>', tag), tag
        bare = re.sub(r"<[^>]*>", "", message)
        assert ">" not in bare and not re.search(r"&(?!(?:lt|gt|amp|quot|#[0-9]+|#x[0-9a-fA-F]+);)", bare), bare
        # no mention, hashtag, cashtag, command, link or address Telegram would find in the text itself
        live = TELEGRAM_LIVE.search(html.unescape(bare))
        assert not live, html.unescape(bare)[max(0, live.start() - 30):live.end() + 30]
        for url, label in re.findall(r'<a href="([^"]*)">(.*?)</a>', message, re.S):
            url = html.unescape(url)
            assert url.startswith(OURS), url
            assert "<" not in label
            links.setdefault(url, set()).add(seen(html.unescape(label)))
    for entry in digest.featured:
        if entry.url:
            assert seen(entry.title) in links.get(entry.url, set()), (entry.title, links.get(entry.url))


# --- what the properties found, kept as cases ------------------------------------------

def test_the_text_email_adds_no_space_inside_a_word_after_a_closing_mark():
    """Found: a title word that opens with a closing mark and goes on past a wide character
    ('x }}G＊r', 'GRPO ：强化学习') read 'x }}G ＊r', 'GRPO ： 强化学习' in the text email."""
    base = fx.digest()
    titles = ["x }}G＊r", "GRPO-λ ：强化学习的新方法", "Learning (RLHF) ,强化学习"]
    featured = tuple(replace(e, title=t) for e, t in zip(base.featured * 2, titles, strict=False))
    digest = replace(base, featured=featured, highlights=())
    body = render.digest_text(fx.config(), digest, 9)
    for title in titles:
        assert title in seen(body), title


def test_a_telegram_post_makes_no_mention_tag_or_link_of_a_topic_name():
    """Found: a topic's name went into Telegram's HTML escaped but live: 'RL @scale' mentioned
    the user scale, '#tag' was a hashtag, 'DeepSeek.ai' a link."""
    digest = fx.digest()
    digest = replace(digest, sections=tuple(replace(s, name_en="RL @scale #tag $USD /start DeepSeek.ai")
                                            for s in digest.sections))
    (post,) = bodies("telegram", digest)
    headings = [line for line in post["text"].splitlines() if "scale" in line]
    assert len(headings) == 3
    for line in headings:
        assert "RL @\u2060scale #\u2060tag $\u2060USD /\u2060start DeepSeek.\u2060ai</b>" in line


# --- the reading list and the web edition's paper pages, from stored papers ----------------

# the elements the web edition's templates write
SITE_TAGS = {tag for path in (cfg.bundled("templates") / "site").glob("*.j2")
             for tag in re.findall(r"<([a-z][a-z0-9]*)", path.read_text("utf-8"))} | {"html", "head", "body"}

@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(st.lists(st.tuples(RAW, RAW, RAW, RAW, PROSE), min_size=1, max_size=4))
def test_stored_papers_reach_the_reading_list_paper_pages_and_search_index_as_text(rows):
    """Papers as the sources store them (title, abstract with links, author, comment) and
    their summaries: the reading list's tables and the web edition's pages and search index."""
    found = [Paper(id=f"2611.{k:05d}", title=text.title(title) or "x", abstract=text.prose(abstract),
                   authors=text.names([name]) or ("A",), categories=("cs.LG",), comment=text.comment(comment),
                   submitted=datetime(2026, 11, 20 + k, tzinfo=UTC), updated=datetime(2026, 11, 20 + k, tzinfo=UTC))
             for k, (title, abstract, name, comment, _) in enumerate(rows)]
    with tempfile.TemporaryDirectory() as folder:
        config = cfg.load(write_config(Path(folder), {}, seeds=False))
        store = Store.open(config.storage.url)
        store.upsert_papers(found)
        store.set_scores([Scored(p.id, 2.0, True, ("grpo",), "algorithms") for p in found])
        store.put_many([Enrichment(f"s:{p.id}", paper_key(p.id), "paper_summary",
                                   {"summary_zh": summary, "summary_en": summary, "title_zh": p.title})
                        for p, (*_, summary) in zip(found, rows, strict=True)])
        with ExitStack() as stack:
            papers_ = stack.enter_context(site_papers.Papers(config, store, render.Settings.of(config),
                                                             config.outputs.dir / "site", [], "2026-11-30"))
            reading_list.publish(config, store, "2026-11-30", also=[papers_])
        store.close()
        out = config.outputs.dir
        entries = [compose.paper_entry(p, "algorithms", 2.0) for p in found]  # its TeX read as text
        for path in [out / "READING_LIST.md", *(out / "reading-list").glob("*.md")]:
            page = gfm(path.read_text("utf-8"))
            markdown_is_ours(page, {"a", "h1", "h2", "li", "p", "table", "tbody", "td", "th", "thead", "tr", "ul",
                                    "strong", "em", "br", "code"})
            if path.stem[:2] == "20":
                linked_titles(page, entries)
        own = set()
        for path in (out / "site" / "papers").rglob("*.html"):
            page = LexborHTMLParser(path.read_text("utf-8"))
            own |= tags(page)
            for node in page.root.traverse():
                assert not [name for name in node.attributes if name.startswith("on")], node.attributes
            if "topic" in path.parts and "-20" in path.name:
                linked_titles(page, entries)
        assert own <= SITE_TAGS, own - SITE_TAGS
        shard = (out / "site" / "search-index-2026.js").read_text("utf-8")
        records = json.loads(shard.split(".concat(", 1)[1].rsplit(");", 1)[0])
        assert sorted(r[1] for r in records) == sorted(escape.one_line(e.title) for e in entries)
        exported = json.loads((out / "site" / "exports" / "reading-list.json").read_text("utf-8"))
        assert exported


def test_a_stored_title_of_tex_that_reads_as_nothing_is_shown_as_sent():
    """Found: a title `\\\\` (TeX's line break) or `$\\,$` became a blank title, a link with
    nothing to click in the reading list, the digests and the web edition."""
    for title in ("\\\\", "$\\,$"):
        entry = compose.paper_entry(Paper(id="2611.00001", title=title), "algorithms", 1.0)
        assert entry.title == title
        page = gfm(render.digest_markdown(fx.config(), replace(fx.digest(), featured=(entry,), highlights=()), 9))
        assert title in {a.text() for a in page.css(f'a[href="{entry.url}"]')}


def test_a_telegram_topic_name_is_escaped_once():
    """Found with the filter above: a topic 'R&D <x>' read 'R&amp;D &lt;x&gt;' in the chat (the
    label macro's markup escaped a second time); an entity's '#' ('&#39;') is no hashtag."""
    digest = fx.digest()
    digest = replace(digest, sections=tuple(replace(s, name_en="R&D <x> O'Neil #tag", name_zh="研发&")
                                            for s in digest.sections))
    (post,) = bodies("telegram", digest)
    headings = [line for line in post["text"].splitlines() if "R&" in line]
    assert headings
    for line in headings:
        assert html.unescape(line) == "<b>研发& · R&D <x> O'Neil #\u2060tag</b>", line
