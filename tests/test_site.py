"""The web edition in out/site/ (issue 20): built by every run from the stored digests,
each digest untrimmed in both languages, an index by month, the digests' Atom feed."""

from __future__ import annotations

import gc
import itertools
import json
import os
import re
import socket
import tracemalloc
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from pipeline import bilingual, site
from pipeline.models import seed_key
from tests import fixtures_digest as fx
from tests.helpers import (
    DAY,
    KEY,
    ROOT,
    broken_links,
    chinese_left,
    chromium,
    full_config,
    in_frame,
    in_frames,
    rl_paper,
    run_cli,
    site_pages,
    start_warm_cli,
    write_config,
)
from tests.processes import wait_for
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer
from tests.servers.smtp_server import free_port

ATOM = "{http://www.w3.org/2005/Atom}"
ARTIFACTS = ROOT / "tests" / "artifacts"
HOSTILE = "<script>alert(1)</script> R|L *bold* $\\alpha_t$ <b>x</b>\nline two"
SHOWN = "<script>alert(1)</script> R|L *bold* α_t <b>x</b> line two"  # TeX made readable


def test_a_papers_href_is_its_topic_page_of_its_month_and_a_safe_anchor():
    assert site.paper_href("arxiv:2611.00001", "algorithms", "2026-11-02") == \
        "papers/topic/algorithms-2026-11.html#p-arxiv-2611.00001"
    assert site.paper_href("seed:<x> y", "a b", None) == "papers/topic/a-b-undated.html#p-seed--x--y"
    assert site.paper_href("seed:Über <x> y", "a b", "2024-01-01").startswith(
        "papers/topic/a-b-2024-01.html#p-seed-Uber--x--y-")
    # Two Chinese seed titles of one length were one anchor (and one citation key): no more.
    first, second = site.anchor(seed_key("强化学习综述")), site.anchor(seed_key("大模型的推理"))
    assert first != second and first.isascii() and re.fullmatch(r"p-seed-[0-9a-f]{8}", first)
    assert site.anchor(seed_key("强化学习综述")) == first  # stable


def test_a_second_build_of_the_same_digests_rewrites_nothing(tmp_path):
    digests = [fx.digest(), replace(fx.many(10), id="2026-11-23")]
    first = site.build(fx.config(), tmp_path, digests, "2026-11-30T08:00:00+08:00")
    assert {p.relative_to(tmp_path).as_posix() for p in first} == {
        "index.html", "feed.xml", "assets/site.css", "assets/site.js",
        "digests/2026-11-30.html", "digests/2026-11-23.html"}
    assert site.build(fx.config(), tmp_path, digests, "2026-11-30T08:00:00+08:00") == []
    later = digests + [replace(fx.many(3), id="2026-12-07")]
    changed = site.build(fx.config(), tmp_path, later, "2026-12-07T08:00:00+08:00")
    assert {p.relative_to(tmp_path).as_posix() for p in changed} == {
        "index.html", "feed.xml", "digests/2026-12-07.html",
        "digests/2026-11-30.html"}  # which now links the new week; the older weeks' pages stay
    pages = {d: HTMLParser((tmp_path / "digests" / f"{d}.html").read_text("utf-8"))
             for d in ("2026-11-23", "2026-11-30", "2026-12-07")}
    pager = {d: {a.attributes["rel"]: a.attributes["href"] for a in page.css("nav.pager a")}
             for d, page in pages.items()}
    assert pager == {"2026-11-23": {"next": "2026-11-30.html"},
                     "2026-11-30": {"prev": "2026-11-23.html", "next": "2026-12-07.html"},
                     "2026-12-07": {"prev": "2026-11-30.html"}}


def test_a_weekly_build_renders_only_the_digest_pages_whose_makings_changed(tmp_path, monkeypatch):
    """Every page rendered every week took a run 0.1 s more per digest kept: an old week
    whose stored digest, neighbours, templates and settings are as the last build's is not
    rendered again (bilingual.shown, called once a page, is watched; the feed lists each of its
    digests' sections too), and the site comes out as a whole build's."""
    rendered, shown = [], bilingual.shown
    monkeypatch.setattr(bilingual, "shown", lambda d, languages: rendered.append(d.id) or shown(d, languages))

    def build(digests, stored, folder="a", languages=("zh", "en")):
        rendered.clear()
        site.build(fx.config(languages), tmp_path / folder / "site", digests, "2026-11-30T08:00:00+08:00",
                   stored=stored)
        return set(rendered)

    digests = [replace(fx.many(2), id=f"2026-11-{day:02d}") for day in (2, 9, 16)]
    stored = {d.id: "v1" for d in digests}
    assert build(digests, stored) == set(stored)  # the first build renders each page
    assert build(digests, stored) == set()
    stored["2026-11-02"] = "v2"  # readers --forget scrubbed it
    assert build(digests, stored) == {"2026-11-02"}
    assert build(digests[:2], stored) == {"2026-11-09"}  # its newer neighbour is gone
    (tmp_path / "a" / "site" / "digests" / "2026-11-02.html").write_text("cut short", encoding="utf-8")
    assert build(digests, stored) == set(stored)  # a page not as written, a neighbour back, a new page
    assert build(digests, None, folder="b") == set(stored)  # no fingerprints: every page
    whole, weekly = ({p.relative_to(tmp_path / f / "site"): p.read_bytes() for p in (tmp_path / f / "site").rglob("*.*")}
                     for f in "ba")
    assert weekly == whole and len(whole) == 7  # 3 digests, the index, the feed, 2 assets
    assert build(digests, stored, languages=("en",)) == set(stored)  # the settings changed


def test_each_navigation_landmark_is_named_in_the_shown_languages(tmp_path):
    """A screen reader lists a page's landmarks: the site menu and the pager were two
    'navigation' alike; a lone week's pager, with nowhere to go, is no landmark at all."""
    digests = [fx.digest(), replace(fx.many(3), id="2026-11-23")]
    site.build(fx.config(), tmp_path, digests, "2026-11-30T08:00:00+08:00")
    site.build(fx.config(languages=["en"]), tmp_path / "en", digests[:1], "2026-11-30T08:00:00+08:00")
    named = {folder: [nav.attributes.get("aria-label") for nav in HTMLParser(
        (tmp_path / folder / "digests" / "2026-11-30.html").read_text("utf-8")).css("nav")]
        for folder in (".", "en")}
    assert named == {".": ["网站 Site", "上一期与下一期 Previous and next digest"], "en": ["Site"]}


def test_a_featured_paper_without_a_reading_shows_its_abstract_whatever_the_languages(tmp_path):
    """Without the LLM's reading a featured paper shows its abstract, the paper's own text,
    as the email and the Markdown copy do; with languages: [zh] its web page had the
    title and links alone (an abstract showed only where English was shown)."""
    paper = replace(fx.digest().sections[0].entries[0], parts=())
    digest = replace(fx.digest(), featured=(paper,))
    for languages, label, other in ((["zh"], "摘要：", "Abstract"), (["en"], "Abstract: ", "摘要"),
                                    (["zh", "en"], "Abstract: ", "摘要：")):
        folder = tmp_path / "-".join(languages)
        site.build(fx.config(languages=languages), folder, [digest], "2026-11-30T08:00:00+08:00")
        page = HTMLParser((folder / "digests" / f"{digest.id}.html").read_text("utf-8"))
        shown = page.css_first("article.feature").text()
        assert f"{label}We propose <b>X</b>. It works." in shown and other not in shown, (languages, shown)


@pytest.mark.slow  # years of digests, measured: make test-slow (in .ci/run)
def test_a_build_keeps_one_digest_page_in_memory_at_a_time(tmp_path):
    """Years of weekly digests: each page is written as it is rendered, not all of them kept
    until the end (at 130 weeks the pages alone added 45 MB to a run's peak)."""
    week = fx.many(40)
    digests = [replace(week, id=(date(2024, 1, 1) + timedelta(weeks=n)).isoformat()) for n in range(130)]

    def peak(shown) -> int:
        tracemalloc.start()
        site.build(fx.config(), tmp_path / str(len(shown)), shown, "2026-11-30T08:00:00+08:00")
        found = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return found

    peak(digests[:1])  # the templates compiled
    few, all_weeks = peak(digests[:10]), peak(digests)
    assert all_weeks < few * 3, (few, all_weeks)  # the index's rows grow, not the pages (8 times)


@pytest.mark.slow  # years of digests, measured: make test-slow (in .ci/run)
def test_a_run_reads_the_stored_digests_one_at_a_time(tmp_path):
    """Years of weekly digests in the database: publishing (the site, its papers' Updates,
    the feeds) reads each digest as it needs it and lets it go, not every digest first (at
    26 weeks of about 70 papers that was 9 MB a run held, growing every week), nor each
    page's digest kept in a reference cycle until the cyclic collector ran (the templates
    imported their macro files `with context`: templating.new_env).
    Measured with that collector off, so what a cycle holds counts however its thresholds
    fall (they moved a reading from 4 to 7.5 MB); the least of three runs, each rendering
    every page, so a one-off of the interpreter's (a table of its own grown, 1.9 MB) does
    not count either. 60 more weeks may add their ids and index lines, not their digests."""
    from datetime import UTC, datetime

    from pipeline import compose, publish
    from pipeline.config import load
    from pipeline.models import Options, RunReport
    from pipeline.store import Store

    config = load(write_config(tmp_path, {"outputs": {"dir": str(tmp_path / "out")}}, seeds=False))
    store = Store.open(config.storage.url)
    week, first = fx.many(40), date(2024, 1, 1)
    as_of = datetime(2026, 11, 30, tzinfo=UTC)

    def peak(weeks: int) -> list[int]:
        for n in range(len(store.digest_ids()), weeks):
            day = datetime.combine(first + timedelta(weeks=n), datetime.min.time(), UTC)
            store.save_digest(day.date().isoformat(), (day, day),
                              compose.digest_to_dict(replace(week, id=day.date().isoformat())), [], [])
        found = []
        for _ in range(3):
            (tmp_path / "out" / ".rl-digest-cache" / site.PAGES).unlink(missing_ok=True)  # every page
            gc.collect()
            gc.disable()
            tracemalloc.start()
            try:
                publish.publish(config, store, Options(as_of, offline=True), None,
                                RunReport(as_of=as_of.isoformat()))
                found.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
                gc.enable()
        return found

    few, all_weeks = peak(20), peak(80)  # the feeds hold 20 either way
    tracemalloc.start()
    digest = publish.stored_digest(store, store.digest_ids()[0])
    size = tracemalloc.get_traced_memory()[0]  # one stored digest read
    tracemalloc.stop()
    print(f"20 weeks {few}, 80 weeks {all_weeks}, a digest {size}")
    assert digest.id and min(all_weeks) - min(few) < 60 * size / 5, (few, all_weeks, size)
    assert len(list((tmp_path / "out" / "site" / "digests").glob("*.html"))) == 80
    ledger = json.loads((tmp_path / "out" / ".rl-digest-cache" / site.PAGES).read_text("utf-8"))
    assert len(ledger["pages"]) == 80  # next week renders the new page and its neighbour
    store.close()


def test_a_seed_entry_without_a_url_is_a_title_not_a_link_to_nowhere(tmp_path):
    digest = fx.digest()
    bare = replace(digest.curated[0], url=None, title="Seed Entry Without a Link")
    site.build(fx.config(), tmp_path, [replace(digest, curated=(bare, *digest.curated[1:]))],
               "2026-11-30T08:00:00+08:00")
    page = HTMLParser((tmp_path / "digests" / f"{digest.id}.html").read_text("utf-8"))
    assert "Seed Entry Without a Link" in page.body.text()
    assert [a.attributes["href"] for a in page.css("a") if a.attributes.get("href") == "#"] == []


def test_a_seed_shown_before_its_paper_was_found_links_the_papers_entry_now(tmp_path):
    """The seed's entry on its topic page became its paper's (another anchor, maybe another
    topic): an old digest's "paper page" link follows it there."""
    digest = fx.digest()
    seed = digest.curated[0]
    site.build(fx.config(), tmp_path, [digest], "2026-11-30T08:00:00+08:00",
               moved={seed.key: ("arxiv:2606.00146", "agentic", "2026-06-01")})
    page = HTMLParser((tmp_path / "digests" / f"{digest.id}.html").read_text("utf-8"))
    hrefs = {a.attributes["href"] for a in page.css("a")}
    assert "../papers/topic/agentic-2026-06.html#p-arxiv-2606.00146" in hrefs
    assert "../" + site.paper_href(seed.key, seed.topic, seed.date) not in hrefs
    other = digest.sections[0].entries[0]
    assert "../" + site.paper_href(other.key, other.topic, other.date) in hrefs  # not moved


def test_without_a_model_the_facts_table_names_each_topic_in_both_languages_tagged(tmp_path):
    site.build(fx.config(), tmp_path, [fx.plain_digest()], "2026-12-07T08:00:00+08:00")
    page = HTMLParser((tmp_path / "digests" / "2026-12-07.html").read_text("utf-8"))
    rows = page.css("table.cmp tr")
    assert [th.attributes.get("scope") for th in rows[0].css("th")] == ["col"] * 3  # titles head the columns
    row = next(tr for tr in rows[1:] if "Topic" in tr.css_first("th").text())
    assert row.css_first("th").attributes.get("scope") == "row"  # each cell read with its row's name
    cells = row.css("td")
    assert len(cells) == 2  # the two featured papers, each cell one span per language
    for cell, key in zip(cells, ("multimodal", "analysis"), strict=True):
        names = {node.attributes["data-l"]: node.text() for node in cell.css("[data-l]")}
        assert names == {"zh": fx.NAMES[key].zh, "en": fx.NAMES[key].en}


def test_a_link_in_the_text_is_underlined_only_the_menus_stand_apart():
    """A link told from the text by its colour alone fails WCAG 1.4.1 (under 3:1 against the
    text, in light and dark): only the header's menu drops the underline."""
    css = (ROOT / "templates" / "site" / "assets" / "site.css").read_text("utf-8")
    rules = re.findall(r"([^{}]+)\{([^{}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S))
    plain = [sel.strip() for sel, body in rules if re.search(r"text-decoration:\s*none", body)]
    assert plain and all(s.startswith("header.top nav") for p in plain for s in p.split(",")), plain


def test_a_link_named_differently_in_each_language_follows_the_switch(tmp_path):
    """代码 / Code, 项目主页 / Project page: tagged per language like every other label (they
    stayed English when a reader chose 中文); arXiv and PDF read the same in both."""
    digest = fx.digest()
    linked = replace(digest.sections[0].entries[0], links=(("code", "https://github.com/foo/bar"),))
    section = replace(digest.sections[0], entries=(linked, *digest.sections[0].entries[1:]))
    site.build(fx.config(), tmp_path, [replace(digest, sections=(section, *digest.sections[1:]))],
               "2026-11-30T08:00:00+08:00")
    page = HTMLParser((tmp_path / "digests" / f"{digest.id}.html").read_text("utf-8"))
    code = next(a for a in page.css("a") if a.attributes.get("href") == "https://github.com/foo/bar")
    assert {node.attributes["data-l"]: node.text() for node in code.css("[data-l]")} == {"zh": "代码", "en": "Code"}
    pdf = next(a for a in page.css("a") if a.attributes.get("href", "").startswith("https://arxiv.org/pdf/"))
    assert pdf.text() == "PDF" and not pdf.css("[data-l]")
    english = tmp_path / "en"
    site.build(fx.config(languages=["en"]), english, [replace(digest, sections=(section, *digest.sections[1:]))],
               "2026-11-30T08:00:00+08:00")
    page = HTMLParser((english / "digests" / f"{digest.id}.html").read_text("utf-8"))
    code = next(a for a in page.css("a") if a.attributes.get("href") == "https://github.com/foo/bar")
    assert code.text() == "Code" and not code.css("[data-l]")


def two_weeks(tmp_path: Path, cli, title: str | None = None, **extra) -> Path:
    """Two weekly runs through the real CLI with the LLM stand-in; out/site/. Week two has
    two featured papers, one full entry and two one-line entries."""
    first = [rl_paper(1, DAY, title=title), rl_paper(2, DAY), rl_paper(3, DAY)]
    second = [rl_paper(n, DAY + timedelta(days=7)) for n in (4, 5, 6, 7, 8)]
    with ArxivServer(first) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm, digest={"max_papers": 1}, **extra)
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        arxiv.papers = first + second
        cli("--config", str(config), "run", "--as-of", "2026-11-09", env={"OPENAI_API_KEY": KEY})
    return tmp_path / "out" / "site"


def test_the_papers_pages_take_the_stored_digests_updates_without_decoding_each_digest(tmp_path, monkeypatch):
    """The papers' pages name the Updates later digests listed: every stored digest was
    decoded whole for them every week (5.7 s a run at 300 digests); now only their Updates
    are read, this run's digest in place of its stored copy."""
    from datetime import UTC, datetime

    from pipeline import compose, publish, site_papers
    from pipeline.config import load
    from pipeline.store import Store

    config = load(write_config(tmp_path, {"outputs": {"dir": str(tmp_path / "out")}}, seeds=False))
    store = Store.open(config.storage.url)
    moment = datetime(2026, 11, 30, tzinfo=UTC)
    for day in ("2026-11-16", "2026-11-23"):
        store.save_digest(day, (moment, moment), compose.digest_to_dict(replace(fx.digest(), id=day)), [], [])
    shown = publish.StoredDigests(store, replace(fx.digest(), id="2026-11-23", updates=()))  # this run's
    decoded, whole = [], publish.stored_digest
    monkeypatch.setattr(publish, "stored_digest", lambda s, did: decoded.append(did) or whole(s, did))
    news = {fx.UPDATE.key: [{"digest": "2026-11-16", "changes": fx.UPDATE.changes}]}
    assert site_papers._updates(shown) == news and decoded == []
    assert site_papers._updates([shown[d] for d in shown]) == news  # as the digests read whole say
    store.close()


def test_two_weekly_runs_build_a_site_with_no_broken_link(tmp_path, cli):
    folder = two_weeks(tmp_path, cli)
    pages = site_pages(folder)
    assert {n for n in pages if not n.startswith("papers/")} == {
        "index.html", "digests/2026-11-02.html", "digests/2026-11-09.html"}  # papers/: test_site_papers.py
    assert broken_links(folder) == []
    for name, page in pages.items():  # no browser asks the server for a /favicon.ico it has not
        assert page.css_first("link[rel=icon]").attributes["href"].startswith("data:"), name
    for name, page in pages.items():  # headings go down one level at a time (screen readers)
        levels = [int(h.tag[1]) for h in page.css("h1, h2, h3, h4, h5, h6")]
        assert levels[0] == 1 and all(b <= a + 1 for a, b in itertools.pairwise(levels)), (name, levels)
    chart = pages["index.html"].css_first("#trends svg.trends")  # week 2 has a week before it
    assert chart is not None and len(chart.css("rect title")) == 2  # one bar a week, one topic
    # its legend is HTML: legible on a phone, each name tagged for the language switch
    legend = pages["index.html"].css("#trends ul.legend li")
    assert len(legend) == 1 and {n.attributes["data-l"] for n in legend[0].css("[data-l]")} == {"zh", "en"}
    assert "3, 5" in chart.css_first("desc").text()
    week2 = pages["digests/2026-11-09.html"]
    assert "New: 5" in week2.css_first("p.meta").text() and "Revised" not in week2.css_first("p.meta").text()
    listed = {node.attributes["id"] for node in week2.css("article[id], .brief[id]")}
    assert listed == {f"p-arxiv-2611.0000{n}" for n in (4, 5, 6, 7, 8)}
    assert len(week2.css("article.feature")) == 2 and len(week2.css(".brief")) == 2
    # each featured paper is named under its topic too, pointing up to its reading
    ups = {a.attributes["href"] for a in week2.css("p.up a[href^='#']")}
    assert ups == {f"#{node.attributes['id']}" for node in week2.css("article.feature")}
    for key in listed:  # each entry links arXiv and its paper page
        hrefs = [a.attributes.get("href") for a in week2.css(f"#{key.replace('.', chr(92) + '.')} a")]
        assert f"https://arxiv.org/abs/{key[len('p-arxiv-'):]}" in hrefs
        assert any(h and h.startswith("../papers/topic/") and h.endswith(f"#{key}") for h in hrefs)
    assert "👍" not in week2.html  # no serve.base_url: no vote links (test_readers_cli.py has them)
    titled = {name: [a for a in page.css("a") if a.text().startswith("GRPO variant")]
              for name, page in pages.items()}
    assert all(titled[name] for name in ("index.html", "digests/2026-11-09.html", "papers/month/2026-10.html")
               if name in titled), {n: len(t) for n, t in titled.items()}
    for name, titles in titled.items():  # an arXiv title on a zh-CN page is read in an English voice
        for a in titles:
            node = a
            while "lang" not in node.attributes:
                node = node.parent
            assert node.attributes["lang"] == "en", (name, a.html)
    for name, page in pages.items():  # the switch's 中文 and English each in their own voice
        voiced = []
        for node in page.css_first(".langs").traverse(include_text=True):
            if node.tag == "-text" and node.text_content.strip():
                up = node.parent
                while "lang" not in up.attributes:
                    up = up.parent
                voiced.append((node.text_content, up.attributes["lang"]))
        assert voiced == [("中文", "zh-CN"), ("English", "en"), ("中英", "zh-CN"), ("Both", "en")], (name, voiced)
    feed = ET.parse(folder / "feed.xml").getroot()
    links = [e.find(f"{ATOM}link").get("href") for e in feed.iter(f"{ATOM}entry")]
    assert links == ["digests/2026-11-09.html", "digests/2026-11-02.html"]
    home = [link.get("href") for link in feed.findall(f"{ATOM}link")]  # back to the site, relative
    papers_home = [link.get("href") for link in ET.parse(folder / "papers.xml").getroot().findall(f"{ATOM}link")]
    assert home == ["index.html"] and papers_home == ["papers/index.html"]
    assert (folder / "index.html").exists() and (folder / "papers" / "index.html").exists()
    assert (tmp_path / "out" / "feed.xml").exists()  # the feed of the email copies stays

    # A third week rewrites the index, the feed and its own page, not the older weeks'.
    old = folder / "digests" / "2026-11-02.html"
    os.utime(old, (1_000_000, 1_000_000))
    with ArxivServer([rl_paper(9, DAY + timedelta(days=14))]) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", "2026-11-16")
    assert old.stat().st_mtime == 1_000_000
    assert (folder / "digests" / "2026-11-16.html").exists()
    pages = json.loads((tmp_path / "out" / ".rl-digest-cache" / site.PAGES).read_text("utf-8"))["pages"]
    assert sorted(pages) == ["2026-11-02", "2026-11-09"]  # this run's own page is rendered each time
    assert broken_links(folder) == []


@pytest.mark.slow  # make test's margin under 5 minutes: it runs in make test-slow (CI)
def test_a_renamed_topic_takes_its_older_papers_and_old_digests_still_find_them(tmp_path, cli):
    """A user renames a topic's key (algorithms -> policy-opt) after two weeks: its older
    papers were listed under a ghost topic named by the old key, and after the fix of
    that, the older digests' links went to a topic page no longer written."""
    folder = two_weeks(tmp_path, cli)
    config = tmp_path / "config.yaml"
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    topics = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))["topics"]
    data["topics"] = [{**t, "key": "policy-opt"} if t["key"] == "algorithms" else t for t in topics]
    config.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with ArxivServer([rl_paper(9, DAY + timedelta(days=14))]) as arxiv:
        data["sources"]["arxiv"]["api_url"] = arxiv.api_url
        data["sources"]["rss"]["urls"] = [arxiv.rss_url(["cs.LG", "cs.CL"])]
        config.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        cli("--config", str(config), "run", "--as-of", "2026-11-16")
    index = (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")
    assert re.findall(r"^## (.*)$", index, flags=re.M) == [
        "目录 · Contents", "算法与目标 · Algorithms and objectives (9)", "按月 · By month"]
    assert not (tmp_path / "out" / "reading-list" / "algorithms.md").exists()
    # The old key's page and its months' stay (a feed reader's copy of papers.xml, a bookmark,
    # a shared link name them): they say where its papers are now. They were deleted as stale.
    assert sorted(p.name for p in (folder / "papers" / "topic").iterdir()) == [
        "algorithms-2026-10.html", "algorithms-2026-11.html", "algorithms.html",
        "policy-opt-2026-10.html", "policy-opt-2026-11.html", "policy-opt.html"]
    assert broken_links(folder) == []
    old = HTMLParser((folder / "papers" / "topic" / "algorithms.html").read_text(encoding="utf-8"))
    assert [a.text() for a in old.css("main a") if a.attributes["href"] == "policy-opt.html"] == [
        "算法与目标 · Algorithms and objectives"]
    assert "本主题现为 · This topic is now:" in old.body.text()
    for month in ("2026-10", "2026-11"):  # its months' pages say the same
        assert (folder / "papers" / "topic" / f"algorithms-{month}.html").read_text(encoding="utf-8") == \
            (folder / "papers" / "topic" / "algorithms.html").read_text(encoding="utf-8")
    # In a browser: an old link to a paper on the old key's page lands on the paper's entry;
    # without a paper in the link the page stays, naming the new topic.
    paper = "arxiv:2611.00001"
    found, bare = in_frames(tmp_path, [(folder, "papers/topic/algorithms.html#" + site.anchor(paper), 1024, f"""
      var entry = d.getElementById('{site.anchor(paper)}');
      setTimeout(function () {{ done({{page: w.location.pathname.split('/site/').pop(), hash: w.location.hash,
        text: entry ? entry.innerText : ''}}); }}, 300);"""), (folder, "papers/topic/algorithms.html", 1024, """
      setTimeout(function () { done({page: w.location.pathname.split('/site/').pop(),
        links: [].map.call(d.querySelectorAll('a[href="policy-opt.html"]'), function (a) { return a.innerText; })}); }, 300);""")])
    assert (found["page"], found["hash"]) == ("papers/topic/policy-opt-2026-10.html", "#" + site.anchor(paper)), found
    assert found["text"], found
    assert bare["page"] == "papers/topic/algorithms.html" and bare["links"] == ["算法与目标 · Algorithms and objectives"], bare


@pytest.mark.slow
def test_a_renamed_topics_old_page_is_headed_by_its_old_name(tmp_path, cli):
    """algorithms (算法与目标 · Algorithms and objectives) becomes policy-opt (策略优化 ·
    Policy optimisation): the old key's page was headed 'algorithms', a key its readers never
    saw; the old digests name the topic, and so does the page now."""
    folder = two_weeks(tmp_path, cli)
    config = tmp_path / "config.yaml"
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    topics = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))["topics"]
    renamed = {"key": "policy-opt", "name": {"zh": "策略优化", "en": "Policy optimisation"}}
    data["topics"] = [{**t, **renamed} if t["key"] == "algorithms" else t for t in topics]
    with ArxivServer([rl_paper(9, DAY + timedelta(days=14))]) as arxiv:
        data["sources"]["arxiv"]["api_url"] = arxiv.api_url
        data["sources"]["rss"]["urls"] = [arxiv.rss_url(["cs.LG", "cs.CL"])]
        config.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        cli("--config", str(config), "run", "--as-of", "2026-11-16")
    for page in ("algorithms.html", "algorithms-2026-11.html"):
        old = HTMLParser((folder / "papers" / "topic" / page).read_text(encoding="utf-8"))
        assert old.css_first("h1").text() == "算法与目标 · Algorithms and objectives", page
        assert old.css_first("title").text().startswith("算法与目标 · Algorithms and objectives — "), page
        assert [a.text() for a in old.css("main a") if a.attributes["href"] == "policy-opt.html"] == [
            "策略优化 · Policy optimisation"]
    assert broken_links(folder) == []


def test_a_dry_run_writes_no_site_and_outputs_site_false_turns_it_off(tmp_path, cli):
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = full_config(tmp_path, arxiv)
        dry = cli("--config", str(config), "run", "--as-of", "2026-11-02", "--dry-run")
        assert not (tmp_path / "out" / "site").exists()
        assert "would write the web edition" in dry.stderr
        config = full_config(tmp_path, arxiv, outputs={"dir": "out", "site": False})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
    assert (tmp_path / "out" / "digests" / "2026-11-02.md").exists()
    assert not (tmp_path / "out" / "site").exists()


# The tests that use the module fixtures below are one xdist group ("site_hostile"), run first and
# together (tests/conftest.py), on one xdist worker: each fixture is built once, not once a worker.
@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """A two-week site whose first paper's title (so its Chinese and English texts, which
    the LLM stand-in builds from it) carries markup, a pipe, stars, TeX and a newline."""
    return two_weeks(tmp_path_factory.mktemp("hostile"), run_cli, title=HOSTILE)


@pytest.mark.xdist_group("site_hostile")
def test_every_zh_and_en_text_from_outside_stays_text(hostile):
    pages = site_pages(hostile)
    week1 = pages["digests/2026-11-02.html"]
    for name, tree in pages.items():
        root = "../" * name.count("/")  # the search page alone adds the search index (a file a year) and its script
        search = [f"{root}search-index.js", f"{root}search-index-2026.js", f"{root}assets/search.js"
                  ] if name == "papers/index.html" else []
        if name.startswith("papers/topic/") and not re.search(r"-(\d{4}-\d\d|undated)\.html$", name):
            # a topic's own page, not one of its months': the script that takes an old link on
            search = [f"{root}assets/topic.js"]
        assert [n.attributes.get("src") for n in tree.css("script")] == [f"{root}assets/site.js", *search], name
        assert tree.css("b") == [], name
    for lang in ("zh", "en"):
        texts = [n.text() for n in week1.css(f"[data-l={lang}]") if "alert(1)" in n.text()]
        # the LLM stand-in echoes the title: its *emphasis* and <b> go (replies._plain), the rest is text
        assert texts and all("<script>alert(1)</script> R|L bold α_t x line two" in t for t in texts), lang
    titles = [a.text() for a in week1.css("a") if "alert(1)" in a.text()]
    assert titles and all(t == SHOWN for t in titles)
    assert broken_links(hostile) == []


def test_only_the_configured_language_appears(tmp_path, cli):
    folder = two_weeks(tmp_path, cli, languages=["en"])
    pages = site_pages(folder)
    for name, tree in pages.items():
        assert tree.css("[data-l=zh]") == [] and tree.css(".langs") == [], name
        assert not any("\u4e00" <= ch <= "\u9fff" for ch in tree.body.text()), name
    # the search box offers what its index holds: no Chinese titles to search
    assert pages["papers/index.html"].css_first("#q").attributes["placeholder"] == "titles, summaries, authors"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, ""


def _listening(url: str) -> bool:
    try:
        return _get(url)[0] == 200
    except OSError:
        return False


@pytest.mark.parametrize("secret", ["a-long-test-secret-for-signing-links", None])
@pytest.mark.xdist_group("site_hostile")
def test_serve_answers_the_index_and_each_digest_page(hostile, secret):
    """Without serve.base_url and a secret, serve is the web edition alone: no link checks out."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = hostile.parent.parent / "config.yaml"
    server = start_warm_cli("--config", str(config), "serve", "--host", "127.0.0.1", "--port", str(port),
                            env={"RL_DIGEST_SECRET": secret} if secret else {})
    try:
        wait_for(lambda: _listening(base + "/"), what="serve to listen", proc=server)
        index, page, css = _get(base + "/"), _get(base + "/digests/2026-11-02.html"), _get(
            base + "/assets/site.css")
        missing = _get(base + "/digests/1999-01-01.html")
        assert _get(base + "/u/bm90aGluZw.c2lnbmVk")[0] == 403  # a made-up token changes nothing
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert index == (200, (hostile / "index.html").read_text(encoding="utf-8"))
    assert page == (200, (hostile / "digests" / "2026-11-02.html").read_text(encoding="utf-8"))
    assert css[0] == 200 and "prefers-color-scheme: dark" in css[1]
    assert missing[0] == 404


@pytest.mark.xdist_group("site_hostile")
def test_serve_on_a_port_another_server_holds_is_one_line_exit_1(hostile, cli):
    config = hostile.parent.parent / "config.yaml"
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        result = cli("--config", str(config), "serve", "--host", "127.0.0.1", "--port", str(port), check=1)
    assert result.stderr.strip().splitlines() == [
        f"rl-digest: serve: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(another server may hold the port: stop it, or pass --port)"]


# --- in headless Chromium ------------------------------------------------------------------

WIDTHS = (375, 1280)


@pytest.fixture(scope="module")
def index_laid_out(hostile, tmp_path_factory) -> dict[int, dict]:
    """The index in a frame of each width, measured in one Chromium."""
    found = in_frames(tmp_path_factory.mktemp("widths"), [(hostile, "index.html", width, """
      done({inner: w.innerWidth, scroll: d.documentElement.scrollWidth,
            h1: d.querySelector('h1').getBoundingClientRect().width,
            dates: Array.from(d.querySelectorAll('.nowrap'),
                              n => [n.getClientRects().length, w.getComputedStyle(n).whiteSpace])});""")
        for width in WIDTHS])
    return dict(zip(WIDTHS, found, strict=True))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.xdist_group("site_hostile")
def test_the_index_fits_the_screen_without_sideways_scrolling(tmp_path, hostile, index_laid_out, width):
    found = index_laid_out[width]
    assert found["inner"] == width
    assert found["scroll"] <= width, found
    assert found["dates"] and {tuple(d) for d in found["dates"]} == {(1, "nowrap")}, found  # never cut at a hyphen
    assert 0 < found["h1"] <= width
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"site-index-{width}.png"
    shot.unlink(missing_ok=True)
    chromium(tmp_path, f"--screenshot={shot}", f"--window-size={width},1600",
             (hostile / "index.html").as_uri())
    assert shot.exists() and shot.stat().st_size > 20_000  # a page was drawn, not a blank


@pytest.mark.xdist_group("site_hostile")
def test_the_language_switch_hides_the_other_language_and_survives_a_reload(tmp_path, hostile):
    found = in_frame(tmp_path, hostile, "digests/2026-11-09.html", 1024, """
      var zh = d.querySelector('p[data-l=zh]'), en = d.querySelector('p[data-l=en]');
      var pressed = d.querySelector('[aria-pressed=true]');
      seen.push({zh: shown(zh), en: shown(en), langs: shown(d.querySelector('.langs')),
                 pressed: pressed && pressed.getAttribute('data-choose'), lang: d.documentElement.lang});
      step += 1;
      if (step === 1) {  // choose English, then reload the page
        d.querySelector('[data-choose=en]').click();
        seen.push({zh: shown(zh), en: shown(en), text: d.body.innerText, lang: d.documentElement.lang});
        w.location.reload();
      } else {  // after the reload: back to Chinese
        d.querySelector('[data-choose=zh]').click();
        seen.push({zh: shown(zh), en: shown(en), lang: d.documentElement.lang});
        done(seen);
      }""")
    first, clicked, reloaded, chinese = found
    # the page's lang follows the choice: what is left untagged is voiced in the language read
    assert first == {"zh": True, "en": True, "langs": True, "pressed": "both", "lang": "zh-CN"}
    english = clicked.pop("text")
    assert clicked == {"zh": False, "en": True, "lang": "en"}
    # Chosen English, the page reads in English: tags, counts, curated marks, topic names
    # and the trends too; only the switch keeps its own 中文 button.
    assert chinese_left(english) == []
    assert reloaded == {"zh": False, "en": True, "langs": True, "pressed": "en", "lang": "en"}  # remembered
    assert chinese == {"zh": True, "en": False, "lang": "zh-CN"}



def test_the_comparison_fits_a_phone_whatever_its_words(tmp_path):
    """Long words in the cells (an LLM writes "Text-to-Visualization/Perspective") break
    on a phone rather than push the table past the screen behind a sideways scroll nobody
    sees; the row names stay whole."""
    digest = fx.digest()
    long = "Text-to-Visualization/Perspective-Alignment"
    rows = tuple(replace(r, cells=tuple((f"{zh}{long}", f"{en} {long}") for zh, en in r.cells))
                 for r in digest.comparison)
    built = tmp_path / "built"
    site.build(fx.config(), built, [replace(digest, comparison=rows)], "2026-11-30T08:00:00+08:00")
    found = in_frame(tmp_path, built, f"digests/{digest.id}.html", 375, """
      var table = d.querySelector('table.cmp'), name = table.querySelector('tr > :first-child');
      done({inner: w.innerWidth, scroll: d.documentElement.scrollWidth,
            right: table.getBoundingClientRect().right, box: table.parentNode.scrollWidth,
            shown: table.parentNode.clientWidth, nameLines: name.getClientRects().length,
            nameHeight: name.getBoundingClientRect().height,
            lineHeight: parseFloat(w.getComputedStyle(name).lineHeight)});""")
    assert found["inner"] == 375
    assert found["scroll"] <= 375 and found["right"] <= 375, found
    assert found["box"] <= found["shown"], found  # nothing hidden behind the sideways scroll
    # "维度 · Dimension" on at most three lines: the row names are not broken letter by letter
    assert found["nameHeight"] <= 3.5 * found["lineHeight"], found
