"""Deep reading from the paper: the featured reading is written from the main text of
arXiv's HTML page (served here by the local arXiv stand-in), never its navigation; a
paper without HTML is read from its abstract; the page is fetched once."""

from __future__ import annotations

from pathlib import Path

from pipeline import fulltext
from pipeline.config import load
from tests.helpers import CATS, DAY, KEY, full_config, rl_paper, write_config
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer
from tests.test_entries_cli import outputs

PAGE = (Path(__file__).parent / "data" / "arxiv_fulltext.html").read_text(encoding="utf-8")
CHROME = ("NAVIGATION-MENU-TEXT", "TABLE-OF-CONTENTS-TEXT", "PACKAGE-ALERT-TEXT", "AUTHOR-BLOCK",
          "BIBLIOGRAPHY-TEXT", "APPENDIX-TEXT", "FOOTER-TEXT", "SITE-FOOTER-TEXT", "RELATED-WORK-TEXT")


def test_the_main_text_keeps_the_sections_that_matter_first_and_nothing_around_them():
    text = fulltext.main_text(PAGE, 6000)
    assert text is not None
    for part in ("INTRODUCTION-TEXT", "METHOD-SECTION-TEXT", "PROBE-TRAINING-TEXT", "RESULTS-SECTION-TEXT"):
        assert part in text
    assert text.index("INTRODUCTION-TEXT") < text.index("METHOD-SECTION-TEXT") < text.index("RESULTS-SECTION-TEXT")
    for chrome in CHROME:
        assert chrome not in text, chrome
    assert "r_{\\phi}" not in text  # the TeX source of formulas is not read twice
    short = fulltext.main_text(PAGE, 10)
    assert short and len(short) <= 40 and short.startswith("1 Introduction")
    assert fulltext.main_text("<html><body><p>No article here.</p></body></html>", 6000) is None


def test_a_method_section_whose_heading_holds_reference_or_preference_is_read():
    """Only a heading that names the reference list drops a section: "Preference" and
    "Reference-free" name the method of many RLHF papers."""
    def section(number: int, heading: str, body: str) -> str:
        return (f'<section id="S{number}" class="ltx_section"><h2 class="ltx_title ltx_title_section">'
                f'<span class="ltx_tag ltx_tag_section">{number} </span>{heading}</h2>'
                f'<p class="ltx_p">{body}</p></section>')
    page = "<html><body><article>" + "".join((
        section(1, "Introduction", "INTRO-TEXT"),
        section(2, "Direct Preference Optimization", "DPO-TEXT"),
        section(3, "Reference-free Reward Models", "REFERENCE-FREE-TEXT"),
        section(4, "Ethical Considerations", "ETHICS-TEXT"),
        section(5, "References", "REFERENCE-LIST-TEXT"))) + "</article></body></html>"
    text = fulltext.main_text(page, 6000)
    assert text is not None
    assert "DPO-TEXT" in text and "REFERENCE-FREE-TEXT" in text
    assert "ETHICS-TEXT" not in text and "REFERENCE-LIST-TEXT" not in text


def test_the_featured_reading_is_written_from_the_html_page_or_else_the_abstract(tmp_path, cli):
    with_html, without = rl_paper(1, DAY), rl_paper(2, DAY)
    with ArxivServer([with_html, without]) as arxiv, OpenAIServer() as llm:
        arxiv.html[f"{with_html.id}v1"] = PAGE
        config = full_config(tmp_path, arxiv, llm, sources={
            "arxiv": {"api_url": arxiv.api_url, "categories": CATS,
                      "page_size": 50, "overlap_hours": 0, "retries": 0},
            "rss": {"urls": [arxiv.rss_url(CATS)]},
            "fulltext": {"url": arxiv.html_url + "/{id}v{version}"}})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        readings = {r.titles[0]: r.user for r in llm.requests if r.task == "featured_reading"}
        fetched = [r.path for r in arxiv.requests if r.path.startswith("/html/")]
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        again = [r.path for r in arxiv.requests if r.path.startswith("/html/")]
    assert len(readings) == 2
    read = readings[with_html.title]
    assert "METHOD-SECTION-TEXT" in read and "RESULTS-SECTION-TEXT" in read
    assert not any(chrome in read for chrome in CHROME)
    fallback = readings[without.title]
    assert without.abstract in fallback and "METHOD-SECTION-TEXT" not in fallback
    assert sorted(fetched) == [f"/html/{with_html.id}v1", f"/html/{without.id}v1"]
    assert again == fetched  # cached: each page asked for once
    for fmt, text in outputs(tmp_path, "2026-11-02").items():  # the reading, never the paper's text
        assert "METHOD-SECTION-TEXT" not in text, fmt


def test_with_the_full_text_off_no_page_is_asked_for_and_the_abstract_is_read(tmp_path, cli):
    paper = rl_paper(1, DAY)
    with ArxivServer([paper]) as arxiv, OpenAIServer() as llm:
        arxiv.html[f"{paper.id}v1"] = PAGE
        config = full_config(tmp_path, arxiv, llm, sources={
            "arxiv": {"api_url": arxiv.api_url, "categories": CATS, "page_size": 50, "overlap_hours": 0},
            "rss": {"urls": [arxiv.rss_url(CATS)]}, "fulltext": {"enabled": False}})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        readings = [r.user for r in llm.requests if r.task == "featured_reading"]
    assert not [r for r in arxiv.requests if r.path.startswith("/html/")]
    assert readings and paper.abstract in readings[0] and "METHOD-SECTION-TEXT" not in readings[0]


def test_the_full_text_url_names_the_paper_and_the_older_key_still_counts(tmp_path, cli):
    bad = write_config(tmp_path, {"sources": {"fulltext": {"url": "https://mirror.example.org/html/"}}})
    result = cli("--config", str(bad), "config", "check", check=2)
    assert "sources.fulltext.url" in result.stderr and "{id}" in result.stderr
    older = write_config(tmp_path, {"sources": {"arxiv": {"html_url": "https://mirror.example.org/html/"}}})
    assert load(older).sources.fulltext.url == "https://mirror.example.org/html/{id}v{version}"


def test_a_page_in_another_charset_reads_as_it_says():
    from pipeline.sources.http import Fetched

    latin = "Schrödinger, naïve café".encode("latin-1")
    assert Fetched("u", 200, "text/html; charset=ISO-8859-1", latin).text == "Schrödinger, naïve café"
    assert Fetched("u", 200, "text/html", "强化学习".encode()).text == "强化学习"  # none named: UTF-8
    assert Fetched("u", 200, "text/html; charset=x-unknown", "强化".encode()).text == "强化"
