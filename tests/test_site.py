"""The web edition in out/site/ (issue 20): built by every run from the stored digests,
each digest untrimmed in both languages, an index by month, the digests' Atom feed."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from pipeline import site
from tests import fixtures_digest as fx
from tests.helpers import DAY, KEY, broken_links, full_config, rl_paper, site_pages
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer

ATOM = "{http://www.w3.org/2005/Atom}"


def test_a_papers_href_is_its_topic_page_and_a_safe_anchor():
    assert site.paper_href("arxiv:2611.00001", "algorithms") == "papers/topic/algorithms.html#p-arxiv-2611.00001"
    assert site.paper_href("seed:Über <x> y", "a b") == "papers/topic/a-b.html#p-seed--ber--x--y"


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
        "index.html", "feed.xml", "digests/2026-12-07.html"}  # the older weeks' pages stay


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


def test_two_weekly_runs_build_a_site_with_no_broken_link(tmp_path, cli):
    folder = two_weeks(tmp_path, cli)
    pages = site_pages(folder)
    assert set(pages) == {"index.html", "digests/2026-11-02.html", "digests/2026-11-09.html"}
    assert broken_links(folder) == []
    week2 = pages["digests/2026-11-09.html"]
    listed = {node.attributes["id"] for node in week2.css("article[id], .brief[id]")}
    assert listed == {f"p-arxiv-2611.0000{n}" for n in (4, 5, 6, 7, 8)}
    assert len(week2.css("article.feature")) == 2 and len(week2.css(".brief")) == 2
    for key in listed:  # each entry links arXiv and its paper page
        hrefs = [a.attributes.get("href") for a in week2.css(f"#{key.replace('.', chr(92) + '.')} a")]
        assert f"https://arxiv.org/abs/{key[len('p-arxiv-'):]}" in hrefs
        assert any(h and h.startswith("../papers/topic/") and h.endswith(f"#{key}") for h in hrefs)
    feed = ET.parse(folder / "feed.xml").getroot()
    links = [e.find(f"{ATOM}link").get("href") for e in feed.iter(f"{ATOM}entry")]
    assert links == ["digests/2026-11-09.html", "digests/2026-11-02.html"]
    assert (tmp_path / "out" / "feed.xml").exists()  # the feed of the email copies stays

    # A third week rewrites the index, the feed and its own page, not the older weeks'.
    old = folder / "digests" / "2026-11-02.html"
    os.utime(old, (1_000_000, 1_000_000))
    with ArxivServer([rl_paper(9, DAY + timedelta(days=14))]) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", "2026-11-16")
    assert old.stat().st_mtime == 1_000_000
    assert (folder / "digests" / "2026-11-16.html").exists()
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
