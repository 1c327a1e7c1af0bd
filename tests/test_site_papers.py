"""The reading list on the web edition (issue 20): papers/ pages per topic and month, each
paper with its summaries in both languages, key points, links, topic, its digest and its
updates; the search index and page; papers.xml; the exports. Through the real CLI over two
weeks, and in headless Chromium: a query narrows the list, so does the topic filter."""

from __future__ import annotations

import html
import json
import re
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

import pytest

from pipeline import models, site
from tests.helpers import (
    DAY,
    KEY,
    broken_links,
    chinese_left,
    chromium,
    full_config,
    in_frame,
    in_frames,
    loaded_pages,
    rl_paper,
    run_cli,
    site_pages,
    write_config,
)
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer

ATOM = "{http://www.w3.org/2005/Atom}"
ARTIFACTS = Path(__file__).parent / "artifacts"
HOSTILE = "<script>alert(1)</script> GRPO & $\\alpha$-rewards | for {LLMs}"


def two_weeks(tmp_path: Path, cli) -> Path:
    """Week one: three papers, one with a hostile title. Week two: five new papers, and the
    first paper revised with a venue (an update)."""
    first = [rl_paper(1, DAY, title=HOSTILE), rl_paper(2, DAY), rl_paper(3, DAY)]
    later = DAY + timedelta(days=7)
    second = [rl_paper(n, later, title=f"Agentic multi-turn RL for web agents, study {n}" if n % 2 else None)
              for n in (4, 5, 6, 7, 8)]
    with ArxivServer(first) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm)
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        arxiv.papers = [replace(first[0], version=2, updated=later, announce_type="replace",
                                journal_ref="ICLR 2027"), *first[1:], *second]
        cli("--config", str(config), "run", "--as-of", "2026-11-09", env={"OPENAI_API_KEY": KEY})
    return tmp_path / "out" / "site"


# The tests that use the module fixtures below are one xdist group ("site_papers"), run first and
# together (tests/conftest.py), on one xdist worker: each fixture is built once, not once a worker.
@pytest.fixture(scope="module")
def weeks(tmp_path_factory) -> Path:
    """two_weeks' site, built once for the tests that only read it."""
    return two_weeks(tmp_path_factory.mktemp("weeks"), run_cli)


@pytest.fixture(scope="module")
def seeds_site(tmp_path_factory) -> Path:
    """The site of an offline run on the bundled seeds (entries with a date and without)."""
    folder = tmp_path_factory.mktemp("seeds")
    run_cli("--config", str(write_config(folder)), "run", "--offline", "--as-of", "2026-11-02")
    return folder / "out" / "site"


@pytest.fixture(scope="module")
def browsed(weeks, seeds_site, tmp_path_factory) -> dict[str, list]:
    """What the tests below see of `weeks` and `seeds_site` in Chromium, all in one (a launch
    is about 0.5 s): each test's frames (CASES: its name -> the frames of in_frames) and what
    each frame's script reported, by the test's name. The language switch's test has a
    Chromium of its own (the choice is remembered: it would change the other frames)."""
    tmp = tmp_path_factory.mktemp("browsed")
    cases = {name: make(weeks, seeds_site, tmp) for name, make in CASES.items()}
    found = iter(in_frames(tmp, [case for frames in cases.values() for case in frames]))
    return {name: [next(found) for _ in frames] for name, frames in cases.items()}


DOM = "done(d.documentElement.outerHTML);"  # a frame's page once its load event has fired


def index_data(folder: Path) -> dict:
    """search-index.js and the file of each year it names, as the index page loads them."""
    text = (folder / "search-index.js").read_text(encoding="utf-8")
    assert text.startswith("window.RL_DIGEST_INDEX = ") and text.rstrip().endswith(";")
    data = json.loads(text.removeprefix("window.RL_DIGEST_INDEX = ").rstrip().rstrip(";"))
    for year in data["years"]:
        shard = (folder / f"search-index-{year}.js").read_text(encoding="utf-8")
        head = "window.RL_DIGEST_INDEX.papers = window.RL_DIGEST_INDEX.papers.concat("
        assert shard.startswith(head) and shard.rstrip().endswith(");")
        data["papers"] += json.loads(shard.removeprefix(head).rstrip().removesuffix(");"))
    return data


@pytest.mark.xdist_group("site_papers")
def test_every_digest_paper_has_a_page_with_its_summaries_digest_and_updates(weeks):
    folder = weeks
    pages = site_pages(folder)
    assert broken_links(folder, elsewhere=()) == []  # papers/ included
    index = (folder / "papers" / "index.html").read_text(encoding="utf-8")
    for target in ("papers.xml", "exports/reading-list.bib", "exports/reading-list.ris",
                   "exports/reading-list.json", "exports/reading-list.jsonl"):  # a reader finds them
        assert f'href="../{target}"' in index and (folder / target).exists(), target
    papers = {name: tree for name, tree in pages.items() if name.startswith("papers/")}
    assert "papers/index.html" in papers and any(n.startswith("papers/month/2026-") for n in papers)
    on_topics = {node.attributes["id"]: name for name, tree in papers.items() if "/topic/" in name
                 for node in tree.css("article[id]")}
    for digest in ("2026-11-02", "2026-11-09"):  # every paper a digest lists has its entry
        for node in pages[f"digests/{digest}.html"].css("article[id], .brief[id]"):
            assert node.attributes["id"] in on_topics, node.attributes["id"]
    article = papers[on_topics["p-arxiv-2611.00001"]].css_first("#p-arxiv-2611\\.00001")
    html = article.html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; GRPO &amp; α-rewards | for {LLMs}" in html
    langs = {node.attributes.get("lang") for node in article.css("p[lang], ul[lang]")}
    assert langs == {"zh-CN", "en"}  # both summaries and key points, tagged for the switch
    assert article.css("ul.points li")  # key points
    hrefs = [a.attributes.get("href") for a in article.css("a")]
    assert "https://arxiv.org/abs/2611.00001" in hrefs and "https://arxiv.org/pdf/2611.00001" in hrefs
    assert "../../digests/2026-11-02.html" in hrefs  # the digest it appeared in
    assert "../../digests/2026-11-09.html" in hrefs  # its update, listed in week two
    assert "v1 → v2" in article.text() and "ICLR 2027" in article.text()
    # The month pages list every paper once, a line linking to its entry on its topic page;
    # the index lists topics and months with counts.
    months = [tree for name, tree in papers.items() if "/month/" in name]
    lines = [a.attributes["href"] for t in months for a in t.css("ul.lines > li > a")]
    assert len(lines) == len(on_topics) == 8 and not any(t.css("article") for t in months)
    assert {href.rsplit("#", 1)[1] for href in lines} == set(on_topics)
    assert all(href.startswith("../../papers/topic/") for href in lines)
    counts = papers["papers/index.html"].css("ul.counts li")
    assert sum(int(re.search(r"\((\d+)\)", li.text()).group(1)) for li in counts) == 2 * 8


def test_search_index_feed_and_exports(tmp_path, cli):
    folder = two_weeks(tmp_path, cli)
    data = index_data(folder)
    assert len(data["papers"]) == 8
    first = next(p for p in data["papers"] if p[0] == "p-arxiv-2611.00001")
    anchor, title, title_zh, summary_zh, summary_en, authors, topic, year = first
    assert (folder / data["topics"][topic][year]).is_file() and title.startswith("<script>")  # data, not markup
    assert data["years"] == ["2026"] and (folder / "search-index-2026.js").is_file()
    assert title_zh and summary_zh and summary_en.startswith("English summary of")
    assert authors == "Ada Lovelace, Alan Turing" and year == DAY.strftime("%Y-%m")  # its page's month
    feed = ET.parse(folder / "papers.xml").getroot()
    # its language, as feed.xml says it: a reader shows the Chinese in Chinese glyphs
    assert feed.get("{http://www.w3.org/XML/1998/namespace}lang") == "zh-CN"
    entries = list(feed.iter(f"{ATOM}entry"))
    assert len(entries) == 8 and entries[0].find(f"{ATOM}title").text
    assert {e.find(f"{ATOM}category").get("term") for e in entries} <= {t for t in data["topics"]}
    exports = sorted(p.name for p in (folder / "exports").iterdir())
    assert exports == ["reading-list.bib", "reading-list.json", "reading-list.jsonl", "reading-list.ris"]
    assert len(json.loads((folder / "exports" / "reading-list.json").read_text(encoding="utf-8"))) == 8
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    with ArxivServer([]) as arxiv:  # a week with nothing new rewrites nothing of the reading list
        quiet = cli("--config", str(full_config(tmp_path, arxiv)), "run", "--as-of", "2026-11-16")
    assert quiet.stdout.rstrip().endswith("; no digest: nothing relevant is waiting for one")
    assert not (tmp_path / "out" / "digests" / "2026-11-16.md").exists()
    after = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    assert [p.relative_to(folder).as_posix() for p in after if after[p] != before.get(p)
            and "papers" in p.as_posix()] == []


def typing_queries(folder: Path) -> list[str]:
    chosen = next(p[6] for p in index_data(folder)["papers"] if p[0] == "p-arxiv-2611.00005")
    return ["", "?q=variant+2", "?q=english+summary+variant+2", "?q=L%C3%B6velace+variant+2",
            "?q=LOVELACE+variant+2", *("?" + urlencode({"q": pasted}) for pasted in PASTES),
            "?q=web+agents", f"?topic={chosen}", f"?q=variant&topic={chosen}"]


PASTES = ("2611.00002", "arXiv:2611.00002v2", "https://arxiv.org/abs/2611.00002")


@pytest.mark.xdist_group("site_papers")
def test_typing_a_query_or_choosing_a_topic_narrows_the_list_in_chromium(tmp_path, weeks, browsed):
    folder = weeks
    data = index_data(folder)
    chosen = next(p[6] for p in data["papers"] if p[0] == "p-arxiv-2611.00005")
    pages = dict(zip(typing_queries(folder), browsed["typing"], strict=True))  # one Chromium for all

    def results(query: str) -> list[str]:
        listed = re.search(r'<ol class="results" id="results"[^>]*>(.*?)</ol>', pages[query], re.S)
        return re.findall(r'href="\.\./papers/topic/[^"]*#p-arxiv-(2611\.\d+)"', listed.group(1) if listed else "")

    assert results("") == []  # nothing asked, nothing listed
    zh, en = next(p[3:5] for p in data["papers"] if p[0] == "p-arxiv-2611.00002")
    for lang, summary in (("zh-CN", zh), ("en", en)):  # why it matched, in each language
        assert f'<div class="snippet" lang="{lang}" data-l="{lang[:2]}">{html.escape(summary, quote=False)}</div>' in pages["?q=variant+2"]
    assert results("?q=variant+2") == ["2611.00002"]
    assert results("?q=english+summary+variant+2") == ["2611.00002"]  # words of the second language's summary
    assert results("?q=L%C3%B6velace+variant+2") == results("?q=LOVELACE+variant+2") == ["2611.00002"]
    # an id pasted from arXiv finds its paper (the hint names no ids, yet it is what one has in hand)
    for pasted in PASTES:
        assert results("?" + urlencode({"q": pasted})) == ["2611.00002"], pasted
    agents = results("?q=web+agents")
    assert agents and set(agents) == {"2611.00005", "2611.00007"}
    of_topic = {p[0].removeprefix("p-arxiv-") for p in data["papers"] if p[6] == chosen}
    assert set(results(f"?topic={chosen}")) == of_topic and len(of_topic) < 8
    assert set(results(f"?q=variant&topic={chosen}")) <= of_topic
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "papers-search-375.png"
    chromium(tmp_path, "--virtual-time-budget=3000", f"--screenshot={shot}", "--window-size=375,1400",
             (folder / "papers" / "index.html").as_uri() + "?q=web+agents")
    assert shot.exists() and shot.stat().st_size > 1000


@pytest.mark.slow
def test_a_week_later_only_the_pages_its_papers_are_on_are_rewritten(tmp_path, cli):
    folder = two_weeks(tmp_path, cli)
    before = {p.relative_to(folder).as_posix(): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    with ArxivServer([rl_paper(9, DAY + timedelta(days=14))]) as arxiv, OpenAIServer() as llm:
        cli("--config", str(full_config(tmp_path, arxiv, llm)), "run", "--as-of", "2026-11-16",
            env={"OPENAI_API_KEY": KEY})
    after = {p.relative_to(folder).as_posix(): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    rewritten = {name for name, stamp in after.items() if before.get(name) != stamp}
    data = index_data(folder)
    topic = next(p[6] for p in data["papers"] if p[0] == "p-arxiv-2611.00009")
    page, own = data["topics"][topic]["2026-11"], site.topic_href(topic)  # its month's, its count's
    assert {"papers/month/2026-11.html", page, own, "search-index-2026.js"} <= rewritten
    assert "p-arxiv-2611.00009" in (folder / page).read_text(encoding="utf-8")
    kept = {name for name in before if name.startswith(("papers/topic/", "papers/month/"))} - {
        page, own, "papers/month/2026-11.html"}
    assert "papers/month/2026-10.html" in kept and kept.isdisjoint(rewritten)  # older month, other topics


@pytest.mark.xdist_group("site_papers")
def test_chosen_english_the_reading_list_pages_read_in_english(tmp_path, weeks):
    """The switch reaches what cannot hold tagged text: the filters' options, the search
    box's hint, the count of results; and each paper line's topic name."""
    folder = weeks
    month = next(p for p in (folder / "papers" / "month").iterdir()).relative_to(folder).as_posix()
    topic = next(p for p in (folder / "papers" / "topic").iterdir()).relative_to(folder).as_posix()
    found = in_frame(tmp_path, folder, "papers/index.html", 1024, f"""
      function read() {{
        var q = d.getElementById('q');
        return {{text: d.body.innerText, hint: q ? q.placeholder : '',
                 options: Array.from(d.querySelectorAll('option'), o => o.textContent)}};
      }}
      step += 1;
      if (step === 1) {{
        seen.push(read());
        d.querySelector('[data-choose=en]').click();
        var q = d.getElementById('q');
        q.value = 'variant';
        q.dispatchEvent(new Event('input'));
        seen.push(read());
        d.querySelector('[data-choose=both]').click();
        seen.push(read());
        d.querySelector('[data-choose=en]').click();
        f.src = '{month}';
      }} else if (step === 2) {{
        seen.push(read());
        f.src = '{topic}';
      }} else {{
        seen.push(read());
        done(seen);
      }}""")
    both, english, both_again, on_month, on_topic = found
    assert "全部主题 All topics" in both["options"] and "搜索" in both["hint"]
    assert english["options"][:1] == ["All topics"] and "All years" in english["options"]
    assert not chinese_left("\n".join(english["options"])) and not chinese_left(english["hint"])
    assert re.search(r"\b\d+ papers\b", english["text"]) and chinese_left(english["text"]) == []
    assert both_again["options"] == both["options"] and both_again["hint"] == both["hint"]
    assert "Agentic and multi-turn RL" in on_month["text"]  # each line's topic, in English
    for page in (on_month, on_topic):
        assert chinese_left(page["text"]) == [], page["text"][:400]


def limited_to_one(weeks: Path, tmp: Path) -> Path:
    """A copy of the site whose search lists 1 result at most (its page says 200)."""
    folder = tmp / "limited"
    shutil.copytree(weeks, folder)
    index = folder / "papers" / "index.html"
    page = index.read_text(encoding="utf-8")
    assert 'data-limit="200"' in page
    index.write_text(page.replace('data-limit="200"', 'data-limit="1"'), encoding="utf-8")
    return folder


MORE_HITS = """
      var q = d.getElementById('q');
      q.value = 'variant';
      q.dispatchEvent(new Event('input'));
      done({hits: d.getElementById('hits').textContent, listed: d.querySelectorAll('#results li').length,
            capped: !d.getElementById('capped').hidden, text: d.getElementById('found').innerText});"""


@pytest.mark.xdist_group("site_papers")
def test_a_search_with_more_hits_than_it_lists_says_so(browsed):
    """The results stop at the page's limit (200); the count stays whole and a line says the
    rest is there to narrow to, never a silent cut. Here the limit is set to 1 (limited_to_one)."""
    [found] = browsed["more hits"]
    assert int(found["hits"]) >= 2 and found["listed"] == 1 and found["capped"], found
    assert "200" in found["text"]  # the page's own words; the limit was changed under them


def test_papers_xml_links_the_site_where_it_is_served_not_the_files(tmp_path, cli):
    """outputs.base_url is where out/ is published; the feed's pages live in out/site/,
    served at outputs.site_url: every link must open a page the site has."""
    with ArxivServer([rl_paper(1, DAY), rl_paper(2, DAY)]) as arxiv:
        config = full_config(tmp_path, arxiv, outputs={
            "base_url": "https://files.example.org/out/", "site_url": "https://digest.example.org/rl/"})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
    folder = tmp_path / "out" / "site"
    feed = ET.parse(folder / "papers.xml").getroot()
    links = [link.get("href") for link in feed.iter(f"{ATOM}link")]
    assert "https://digest.example.org/rl/papers.xml" in links and len(links) == 2 + 2
    for href in links:
        path, _, anchor = href.removeprefix("https://digest.example.org/rl/").partition("#")
        assert (folder / path).is_file(), href
        assert not anchor or f'id="{anchor}"' in (folder / path).read_text(encoding="utf-8"), href


@pytest.mark.xdist_group("site_papers")
def test_the_months_and_the_undated_add_up_to_the_whole_list(seeds_site):
    """Seed entries without a date have no month page; the index counts them all the same."""
    index = site_pages(seeds_site)["papers/index.html"]
    total = int(re.match(r"\d+", index.css_first("p.meta").text()).group())
    rows = index.css("ul.months li")
    undated = [li.text() for li in rows if not li.css("a")]
    assert len(undated) == 1 and "undated" in undated[0]
    assert sum(int(re.search(r"\((\d+)", li.text()).group(1)) for li in rows) == total
    lines = [p.text() for name, tree in site_pages(seeds_site).items()
             if name.startswith("papers/topic/") for p in tree.css("p.links")]
    assert lines and [line for line in lines if line.lstrip().startswith("·")] == []  # seeds lack arXiv


def single_title(folder: Path) -> str:
    """A title no other title holds: a search for it finds one paper."""
    titles = [p[1] for p in index_data(folder)["papers"]]
    return next(t for t in titles if sum(t in other for other in titles) == 1)


def year_filter_pages(seeds_site: Path, tmp: Path) -> list:
    return [(seeds_site, "papers/index.html?year=undated", 1024, DOM),
            (seeds_site, "papers/index.html?" + urlencode({"q": single_title(seeds_site)}), 1024, DOM)]


@pytest.mark.xdist_group("site_papers")
def test_the_year_filter_finds_the_undated_seeds_in_chromium(seeds_site, browsed):
    folder = seeds_site
    undated = sum(1 for p in index_data(folder)["papers"] if not p[7])
    options = [o.attributes.get("value") for o in site_pages(folder)["papers/index.html"].css("#year option")]
    assert options[0] == "" and options[-1] == "undated" and "2026" in options
    shown, searched = browsed["year filter"]
    hits = re.search(r'<span id="hits">(\d+)</span>', shown)
    assert hits and int(hits.group(1)) == undated > 0
    assert '<span id="one" hidden="">' in shown and '<span id="many">' in shown
    assert '<span id="hits">1</span>' in searched, single_title(folder)
    assert '<span id="one">' in searched and '<span id="many" hidden="">' in searched  # "1 paper"


SEARCH_FORM = """
      done({scroll: d.documentElement.scrollWidth,
            right: Array.from(d.querySelectorAll('form.search input, form.search select'),
                              n => Math.ceil(n.getBoundingClientRect().right)),
            box: d.getElementById('q').getBoundingClientRect().width});"""


@pytest.mark.xdist_group("site_papers")
def test_the_search_form_fits_a_phone(browsed):
    [found] = browsed["search form"]
    assert found["scroll"] <= 375 and found["right"] and max(found["right"]) <= 375, found
    assert found["box"] > 300  # the search box has the whole row, so its hint shows


def test_a_search_finds_a_paper_by_any_of_its_authors_in_chromium(tmp_path, cli):
    """A big team's senior author is named last: the search finds the paper by that name
    too (only the first eight names were in the index), and the result names six and 'et al.'
    as the paper's own entry does."""
    team = tuple(f"Author Number{n}" for n in range(1, 12)) + ("Sergey Röpke",)
    with ArxivServer([replace(rl_paper(1, DAY), authors=team), rl_paper(2, DAY)]) as arxiv:
        cli("--config", str(full_config(tmp_path, arxiv)), "run", "--as-of", "2026-11-02")
    page = (tmp_path / "out" / "site" / "papers" / "index.html").as_uri()
    done = chromium(tmp_path, "--virtual-time-budget=3000", "--dump-dom", page + "?q=ropke")
    assert done.returncode == 0, done.stderr
    listed = re.search(r'<ol class="results" id="results"[^>]*>(.*?)</ol>', done.stdout, re.S)
    assert listed and re.findall(r"#p-arxiv-(2611\.\d+)", listed.group(1)) == ["2611.00001"]
    meta = re.search(r'<div class="meta">([^<]*)</div>', listed.group(1)).group(1)
    assert meta == "2026 · " + ", ".join(team[:6]) + " et al."


def test_a_search_splits_its_words_at_commas_and_semicolons_in_chromium(tmp_path, cli):
    """"强化学习，推理" is two words, as "a,b" is (each was one word that no paper holds:
    0 papers); an arXiv id and a hyphenated word stay whole."""
    papers = [rl_paper(1, DAY, title="Multi-turn GRPO variant 1 for reinforcement learning"), rl_paper(2, DAY)]
    with ArxivServer(papers) as arxiv, OpenAIServer() as llm:
        cli("--config", str(full_config(tmp_path, arxiv, llm)), "run", "--as-of", "2026-11-02",
            env={"OPENAI_API_KEY": KEY})
    page = (tmp_path / "out" / "site" / "papers" / "index.html").as_uri()

    queries = ["强化学习，推理", "强化学习，推理、variant；2", "variant,2", "lovelace; variant;2",
               "multi-turn, arXiv:2611.00001v1", "GRPO，"]
    pages = loaded_pages(tmp_path, [page + "?" + urlencode({"q": query}) for query in queries])

    def results(query: str) -> list[str]:
        listed = re.search(r'<ol class="results" id="results"[^>]*>(.*?)</ol>',
                           pages[page + "?" + urlencode({"q": query})], re.S)
        return sorted(re.findall(r"#p-arxiv-(2611\.\d+)", listed.group(1) if listed else ""))

    assert results("强化学习，推理") == ["2611.00001", "2611.00002"]
    assert results("强化学习，推理、variant；2") == results("variant,2") == results("lovelace; variant;2") == ["2611.00002"]
    assert results("multi-turn, arXiv:2611.00001v1") == ["2611.00001"]
    assert results("GRPO，") == ["2611.00001", "2611.00002"]  # a separator at the end asks nothing more


def test_a_topics_papers_are_a_page_a_month_and_every_link_still_finds_its_paper(tmp_path, cli):
    """A topic's page held every paper it ever had: 2.8 MB after two and a half years of
    weekly runs, for a reader on a phone. Its papers are now a page a month, newest first,
    linked from the topic's own page and from each other; digests, month pages and search
    results link each paper on its month's page."""
    picks = tmp_path / "picks.yaml"
    picks.write_text("entries:\n" + "".join(
        f"  - title: Notes {name} on policy optimisation with GRPO for LLM reasoning\n"
        f"    summary_zh: 用 GRPO 训练大模型（{name}）。\n" + (f"    date: {day}\n" if day else "")
        for name, day in (("of 2024", "2024-05-06"), ("of 2025", "2025-03-02"), ("without a date", None))),
        encoding="utf-8")
    with ArxivServer([rl_paper(1, DAY), rl_paper(2, DAY)]) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm, seeds={"paths": [str(picks)], "builtin": False})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
    folder = tmp_path / "out" / "site"
    pages = site_pages(folder)
    assert broken_links(folder, elsewhere=()) == []  # digests, months, the index: each finds its paper
    data = index_data(folder)
    topic = next(p[6] for p in data["papers"] if p[0] == "p-arxiv-2611.00001")
    assert len([p for p in data["papers"] if p[6] == topic]) == 5
    months = {}  # every page of the topic's papers holds those of one month
    for name, tree in pages.items():
        if name.startswith("papers/topic/"):
            held = {(re.search(r"\((\d{4}-\d\d)-\d\d\)", a.css_first("h2").text()) or [None, "undated"])[1]
                    for a in tree.css("article")}
            assert len(held) <= 1, (name, held)
            months.update({held.pop(): name} if held else {})
    newest = DAY.strftime("%Y-%m")
    assert months == {month: site.part_href(topic, month) for month in (newest, "2025-03", "2024-05", "undated")}
    for paper in data["papers"]:  # a search result links its paper's month page
        assert f'id="{paper[0]}"' in (folder / data["topics"][paper[6]][paper[7] or "undated"]).read_text("utf-8")
    own = pages[site.topic_href(topic)]  # the topic's page names its months, newest first, undated last
    assert [a.text() for a in own.css("nav.months a")] == [newest, "2025-03", "2024-05", "无日期 · undated"]
    assert not own.css("article") and "5" in own.css("p.meta")[1].text()
    for month, beside in ((newest, ["2025-03"]), ("2025-03", [newest, "2024-05"])):  # a month: its neighbours
        assert [a.attributes["href"] for a in pages[site.part_href(topic, month)].css("nav.months a")] == [
            site.part_href(topic, m).removeprefix("papers/topic/") for m in beside]


def old_links(weeks: Path, seeds_site: Path) -> list[tuple[Path, list]]:
    """An arXiv paper of `weeks`, a dated and an undated seed entry: (site, its index record)."""
    seeds = index_data(seeds_site)["papers"]
    return [(weeks, next(p for p in index_data(weeks)["papers"] if p[0] == "p-arxiv-2611.00002")),
            (seeds_site, next(p for p in seeds if p[7])), (seeds_site, next(p for p in seeds if not p[7]))]


def old_link_pages(weeks: Path, seeds_site: Path, tmp: Path) -> list:
    return [(folder, f"{site.topic_href(topic)}#{anchor}", 1024, f"""
          var entry = d.getElementById('{anchor}');
          setTimeout(function () {{ done({{page: w.location.pathname.split('/site/').pop(), hash: w.location.hash,
            top: entry ? Math.round(entry.getBoundingClientRect().top) : null,
            text: entry ? entry.innerText : ''}}); }}, 300);""")
            for folder, (anchor, *_, topic, month) in old_links(weeks, seeds_site)]


@pytest.mark.xdist_group("site_papers")
def test_an_old_link_to_a_paper_on_its_topic_page_lands_on_the_paper_in_chromium(weeks, seeds_site, browsed):
    """Links made before a topic's papers were split by month (a feed reader's copy of
    papers.xml, a bookmark, a shared page) name papers/topic/<topic>.html#p-…: that page
    now names the months alone, so such a link opened a list without the paper. An arXiv
    paper (its id's month, 2611, is not its date's, 2026-10), a dated seed entry and an
    undated one (no year to guess: every file of the search index is tried)."""
    cases = old_links(weeks, seeds_site)
    for (folder, (anchor, title, *_, topic, month)), found in zip(cases, browsed["old links"], strict=True):
        assert anchor not in (folder / site.topic_href(topic)).read_text(encoding="utf-8")  # the months alone
        assert (found["page"], found["hash"]) == (site.paper_href(f"x:{anchor}", topic, month or None).split("#")[0],
                                                  f"#{anchor}"), found
        assert 0 <= found["top"] < 900 and title.split(" ")[0] in found["text"], found  # in view, the paper's entry


@pytest.mark.slow  # make test-slow: a long scenario beside faster ones on the same path
def test_an_old_link_to_a_seed_entry_lands_on_its_paper_once_found_in_chromium(tmp_path, cli):
    """A curated entry shown under its title (#p-seed-…) before its arXiv paper was found is
    that paper's entry now (#p-arxiv-…): an old link to it on its topic's page goes there."""
    title = "OpenSeeker-v2: agentic reinforcement learning for search agents"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "mine.yaml").write_text(
        f'entries:\n  - title: "{title}"\n    summary_zh: 人工挑选\n    date: 2026-10-20\n', encoding="utf-8")
    seeds = {"paths": [str(tmp_path / "mine")], "builtin": False}
    for as_of, papers in (("2026-11-02", [rl_paper(1, DAY)]),
                          ("2026-11-09", [rl_paper(1, DAY), replace(rl_paper(7, DAY), title=title)])):
        with ArxivServer(papers) as arxiv:
            cli("--config", str(full_config(tmp_path, arxiv, seeds=seeds)), "run", "--as-of", as_of)
    folder = tmp_path / "out" / "site"
    anchor, old = site.anchor("arxiv:2611.00007"), site.anchor(models.seed_key(title))
    (topic, month), = {(p[6], p[7]) for p in index_data(folder)["papers"] if p[0] == anchor}
    found = in_frame(tmp_path, folder, f"{site.topic_href(topic)}#{old}", 1024, f"""
      var entry = d.getElementById('{anchor}');
      setTimeout(function () {{ done({{page: w.location.pathname.split('/site/').pop(), hash: w.location.hash,
        text: entry ? entry.innerText : ''}}); }}, 300);""")
    assert (found["page"], found["hash"]) == (site.part_href(topic, month or site.UNDATED), f"#{anchor}"), found
    assert "OpenSeeker-v2" in found["text"], found


CASES = {  # the frames `browsed` loads in one Chromium: test -> make(weeks, seeds_site, tmp)
    "typing": lambda weeks, seeds_site, tmp: [(weeks, "papers/index.html" + query, 1024, DOM)
                                              for query in typing_queries(weeks)],
    "more hits": lambda weeks, seeds_site, tmp: [(limited_to_one(weeks, tmp), "papers/index.html", 1024,
                                                  MORE_HITS)],
    "year filter": lambda weeks, seeds_site, tmp: year_filter_pages(seeds_site, tmp),
    "search form": lambda weeks, seeds_site, tmp: [(weeks, "papers/index.html", 375, SEARCH_FORM)],
    "old links": old_link_pages,
}
