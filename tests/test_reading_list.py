"""The reading list: streamed from the store as the digest's own entries, written as a small
index with per-topic and per-month files that GitHub renders, that never break a table,
and that a weekly run rewrites only where something changed."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipeline import config as cfg
from pipeline import reading_list, reading_list_markdown, store_readers, store_reading_list, store_seeds
from pipeline.models import Enrichment, Entry, Paper, Scored, SeedEntry, paper_key, seed_key
from pipeline.store import Store
from pipeline.week import digest_entries, load_week
from tests import fixtures_digest as fx
from tests.helpers import write_config
from tests.test_render import golden

UPDATED = "2026-11-30"
OURS = ("https://arxiv.org/", "reading-list/", "../READING_LIST.md", "#", "https://github.com/example-lab/")


def fixture_entries() -> list[Entry]:
    """The render tests' hostile entries (|, *, <script>, TeX, newlines), a seed among them."""
    found = fx.reading_entries()
    return sorted([replace(e, origin="004_page.txt") if e.curated else e for e in found],
                  key=reading_list.order)


def write(out: Path, found: list[Entry], settings=None) -> dict[str, Path]:
    return reading_list.write_markdown(settings or fx.config(), fx.TOPICS,
                                       sorted(found, key=reading_list.order), out, UPDATED)


def many(n: int, topic: str = "algorithms", start: datetime = datetime(2026, 11, 27, tzinfo=UTC),
         step: timedelta = timedelta(days=1)) -> list[Entry]:
    return [Entry(key=f"arxiv:2611.{k:05d}", title=f"Paper number {k}", topic=topic,
                  url=f"https://arxiv.org/abs/2611.{k:05d}", date=(start - k * step).date().isoformat(),
                  summary_zh=f"第 {k} 篇论文的摘要。", summary_en=f"Summary of paper {k}.")
            for k in range(n)]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| ---")]


# --- the files --------------------------------------------------------------------------------

def test_golden_reading_list_index_and_month(tmp_path):
    write(tmp_path, fixture_entries())
    golden("reading_list.md", read(tmp_path / "READING_LIST.md"))
    golden("reading_list_month.md", read(tmp_path / "reading-list" / "2026-11.md"))


def test_the_months_add_up_to_the_total_with_the_undated_seeds_in_a_row_of_their_own(tmp_path):
    undated = [Entry(key=f"seed:undated{k}", title=f"Undated seed {k}", topic="algorithms", curated=True,
                     summary_zh="人工挑选。") for k in range(3)]
    text = read(write(tmp_path, [*many(5), *undated])["READING_LIST.md"])
    total = int(re.search(r"(\d+) 篇 papers", text).group(1))
    months = text.split('<a id="by-month"></a>', 1)[1]
    rows = [row for row in table_rows(months)[1:]]
    assert sum(int(row.rsplit("|", 2)[1]) for row in rows) == total == 8
    assert rows[-1] == "| 无日期 undated | 3 |"


def test_an_english_summary_standing_in_for_the_chinese_one_is_marked_pending(tmp_path):
    waiting = replace(many(2)[1], summary_zh=None, summary_en="Summary in English for now.")
    text = read(write(tmp_path, [many(1)[0], waiting])["READING_LIST.md"])
    assert "| ⏳ Summary in English for now. |" in text and "| 第 0 篇论文的摘要。 |" in text


def test_every_file_parses_as_tables_that_keep_their_columns_and_only_our_links(tmp_path):
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options

    files = write(tmp_path, fixture_entries())
    assert set(files) == {"READING_LIST.md", "reading-list/2026-11.md", "reading-list/algorithms.md",
                          "reading-list/rewards.md", "reading-list/agentic.md", "reading-list/multimodal.md",
                          "reading-list/analysis.md"}
    for name, path in files.items():
        html = cmarkgfm.github_flavored_markdown_to_html(read(path), options=Options.CMARK_OPT_UNSAFE)
        tags = set(re.findall(r"<([a-z][a-z0-9]*)", html))
        assert tags <= {"a", "h1", "h2", "li", "p", "table", "tbody", "td", "th", "thead", "tr", "ul"}, (name, tags)
        for table in re.findall(r"<table>.*?</table>", html, re.S):
            widths = {len(re.findall(r"<t[hd]\b", row)) for row in re.findall(r"<tr>.*?</tr>", table, re.S)}
            assert len(widths) == 1, (name, widths)  # no title or summary broke its row
        hrefs = re.findall(r'href="([^"]*)"', html)
        assert hrefs and all(h.startswith(OURS) for h in hrefs), (name, hrefs)
        assert "<script" not in html and "evil" not in "".join(hrefs)
    text = read(tmp_path / "reading-list" / "algorithms.md")
    html = cmarkgfm.github_flavored_markdown_to_html(text)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; Policy Optimisation" in html  # shown, never run
    assert "a | b: Pipes in Titles Break Tables" in html  # the escaped pipe is a pipe again
    assert "**bold** claims and [x](http://evil)" in html
    row = next(r for r in table_rows(text) if "Eligibility" in r)  # code and venue in their cells
    assert "| [Code](https://github.com/example-lab/grpo-lambda) | NeurIPS 2026 |" in row


def test_the_index_holds_every_paper_while_it_fits_in_one_file(tmp_path):
    papers = many(45) + [replace(e, key=e.key + "b", topic="agentic") for e in many(3)]
    write(tmp_path, papers)
    index = read(tmp_path / "READING_LIST.md")
    algorithms = index.split('<a id="algorithms"></a>', 1)[1].split("<a id=", 1)[0]
    assert "the newest" not in algorithms
    assert re.findall(r"\[Paper number (\d+)\]", algorithms) == [str(k) for k in range(45)]
    assert len(table_rows(index)) == 2 * 2 + 48 + 1  # two topics' headers and every row; the months' header


def test_past_one_file_the_index_shows_the_newest_twenty_per_topic_and_files_hold_every_paper(tmp_path, monkeypatch):
    papers = many(45) + [replace(e, key=e.key + "b", topic="agentic") for e in many(3)]
    monkeypatch.setattr(reading_list_markdown, "LIMIT", 5_400)  # a topic fits in a file, the two do not
    monkeypatch.setattr(reading_list_markdown, "ROOM", 500)
    write(tmp_path, papers)
    index = read(tmp_path / "READING_LIST.md")
    algorithms = index.split('<a id="algorithms"></a>', 1)[1].split("<a id=", 1)[0]
    assert "## 算法与目标 · Algorithms and objectives (45)" in algorithms
    assert "[reading-list/algorithms.md](reading-list/algorithms.md) (45)" in algorithms
    assert "最新 20 篇 · the newest 20:" in algorithms
    shown = re.findall(r"\[Paper number (\d+)\]", algorithms)
    assert shown == [str(k) for k in range(20)]  # the newest 20, newest first
    topic = read(tmp_path / "reading-list" / "algorithms.md")
    assert re.findall(r"\[Paper number (\d+)\]", topic) == [str(k) for k in range(45)]
    months = sorted((tmp_path / "reading-list").glob("20*.md"))
    assert [p.stem for p in months] == ["2026-10", "2026-11"]
    listed = [row for p in months for row in table_rows(read(p))[1:]]
    assert len(listed) == 48  # every paper in its month, the topic column added
    assert "| [2026-11](reading-list/2026-11.md) | 30 |" in index


def test_a_topic_past_the_limit_is_split_by_year_and_the_old_file_goes(tmp_path, monkeypatch):
    papers = many(60, step=timedelta(days=12))  # two years
    write(tmp_path, papers)
    assert (tmp_path / "reading-list" / "algorithms.md").exists()
    monkeypatch.setattr(reading_list_markdown, "LIMIT", 6_000)
    monkeypatch.setattr(reading_list_markdown, "ROOM", 500)
    files = write(tmp_path, papers)
    years = sorted(p.name for p in (tmp_path / "reading-list").glob("algorithms*.md"))
    assert years == ["algorithms-2024.md", "algorithms-2025.md", "algorithms-2026.md"]
    assert not (tmp_path / "reading-list" / "algorithms.md").exists()  # the old layout is gone
    assert all(path.stat().st_size < 6_000 for path in files.values() if "algorithms" in path.name)
    index = read(tmp_path / "READING_LIST.md")
    assert "按年份（或日期）分为多个文件，每个不超过 6 KB / split by year (or days) so that each file stays under 6 KB" in index
    assert "[2026](reading-list/algorithms-2026.md)" in index
    rows = [r for name in years for r in table_rows(read(tmp_path / "reading-list" / name))[1:]]
    assert len(rows) == 60


def test_a_weekly_run_rewrites_only_the_files_that_changed(tmp_path):
    papers = many(40, step=timedelta(days=3))
    write(tmp_path, papers)
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.rglob("*.md")}
    write(tmp_path, papers)
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.rglob("*.md")} == before
    newer = Entry(key="arxiv:2611.99999", title="A new one", topic="agentic", date="2026-11-28",
                  url="https://arxiv.org/abs/2611.99999")
    write(tmp_path, [*papers, newer])
    after = {p.name: p.stat().st_mtime_ns for p in tmp_path.rglob("*.md")}
    changed = sorted(name for name in after if after[name] != before.get(name))
    assert changed == ["2026-11.md", "READING_LIST.md", "agentic.md"]


def test_curated_entries_say_so_with_their_origin(tmp_path):
    write(tmp_path, fixture_entries())
    row = next(r for r in table_rows(read(tmp_path / "reading-list" / "algorithms.md")) if "Pipes" in r)
    assert "📌 精选收录 Curated (004_page.txt)" in row
    english = fx.config(languages=("en",))
    write(tmp_path / "en", fixture_entries(), english)
    text = read(tmp_path / "en" / "READING_LIST.md")
    assert "📌 Curated" in text and "精选" not in text and "算法" not in text


def test_a_built_in_seed_is_curated_without_its_file_name(tmp_path):
    builtin = sorted(p.name for p in cfg.bundled("seeds").glob("*.txt"))[0]  # 000_fba6f3c0aaa545ca.txt
    found = [replace(e, origin=builtin) if e.curated else e for e in fixture_entries()]
    write(tmp_path, found)
    row = next(r for r in table_rows(read(tmp_path / "reading-list" / "algorithms.md")) if "Pipes" in r)
    assert "📌 精选收录 Curated |" in row and builtin not in row


# --- from the store ---------------------------------------------------------------------------

def day(n: int) -> datetime:
    return datetime(2026, 11, 1, 12, tzinfo=UTC) - timedelta(days=n)


def stored(db_url: str, tmp_path: Path) -> tuple[cfg.Config, Store]:
    """Relevant papers on shared days, one dropped by the reader, one not relevant but tied to
    a seed, an untied seed, summaries cached (two for one paper: the newest counts)."""
    config = cfg.load(write_config(tmp_path, {"storage": {"url": db_url}}, seeds=False))
    store = Store.open(db_url)
    papers = [Paper(id=f"2610.{k:05d}", title=f"GRPO study {k}", abstract="We train with GRPO.",
                    authors=("Ada",), categories=("cs.LG",), submitted=day(k // 3), updated=day(k // 3))
              for k in range(12)]
    store.upsert_papers(papers)
    store.set_scores([Scored(p.id, 2.0, k != 5, (), "algorithms" if k % 2 else "agentic")
                      for k, p in enumerate(papers)])
    store_readers.set_verdict(store, papers[7].id, False)
    store_seeds.save_seeds(store, [SeedEntry("GRPO study 5", "mine.md", 3, summary_zh="人工挑选", arxiv_id=papers[5].id),
                      SeedEntry("A seed with no paper", "mine.md", 9, summary_zh="未关联")])
    store.put_many([Enrichment(f"s:{p.id}", paper_key(p.id), "paper_summary",
                               {"summary_zh": f"摘要 {p.id}", "summary_en": f"Summary {p.id}"})
                    for p in papers])
    store.put_many([Enrichment("s:newer", paper_key(papers[1].id), "paper_summary",
                               {"summary_zh": "更新的摘要", "summary_en": "The newer summary"})])
    return config, store


def test_streamed_entries_are_the_digests_entries_in_a_stable_order(db_url, tmp_path):
    config, store = stored(db_url, tmp_path)
    streamed = list(reading_list.entries(config, store, batch=2))
    week = load_week(config, store, store_seeds.all_seeds(store), None)
    assert streamed == sorted(digest_entries(config, week), key=reading_list.order)
    keys = [e.key for e in streamed]
    assert "arxiv:2610.00007" not in keys  # the reader said no
    assert "arxiv:2610.00005" in keys  # not relevant, but a seed entry is tied to it
    assert next(e for e in streamed if e.key == "arxiv:2610.00005").origin == "mine.md"
    assert keys[-1].startswith("seed:")  # undated last
    assert keys[:3] == ["arxiv:2610.00000", "arxiv:2610.00001", "arxiv:2610.00002"]  # one day, by key
    assert next(e for e in streamed if e.key == "arxiv:2610.00001").summary_en == "The newer summary"
    assert reading_list.count(store) == len(streamed) == 12
    store.close()


def test_the_store_hands_the_reading_list_over_in_batches(db_url, tmp_path):
    config, store = stored(db_url, tmp_path)
    sizes = [len(rows) for rows in store_reading_list.reading_rows(store, batch=4)]
    assert sizes == [4, 4, 3]
    store.close()


def test_a_month_past_the_limit_is_split_into_packs_of_days_that_keep_their_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(reading_list_markdown, "LIMIT", 3_000)
    monkeypatch.setattr(reading_list_markdown, "ROOM", 300)
    papers = many(40, step=timedelta(hours=15))  # 2026-11-27 back to 2026-11-03
    write(tmp_path, papers)
    packs = sorted((tmp_path / "reading-list").glob("2026-11-*.md"))
    assert len(packs) >= 3 and not (tmp_path / "reading-list" / "2026-11.md").exists()
    assert all(p.stat().st_size < 3_000 for p in packs)
    rows = [r for p in packs for r in table_rows(read(p))[1:]]
    assert sorted(rows) == sorted(set(rows)) and len(rows) == 40
    index = read(tmp_path / "READING_LIST.md")
    assert "| 2026-11: [" in index and "(reading-list/2026-11-1.md)" in index
    oldest = {p.name: p.read_bytes() for p in packs[:-1]}
    newer = Entry(key="arxiv:2611.99999", title="A new one", topic="algorithms", date="2026-11-27",
                  url="https://arxiv.org/abs/2611.99999")
    write(tmp_path, [*papers, newer])
    assert {name: (tmp_path / "reading-list" / name).read_bytes() for name in oldest} == oldest


def test_a_seed_shown_before_its_paper_was_found_is_not_shown_again(db_url, tmp_path):
    """A curated entry shown under its title, then tied to the arXiv paper that later
    carries that title, is still the entry shown before: not a second 收录 line, and its
    paper waits for no digest (nor a summary every run)."""
    config = cfg.load(write_config(tmp_path, {"storage": {"url": db_url}}, seeds=False))
    store = Store.open(db_url)
    paper = Paper(id="2606.00146", title="OpenSeeker-v2", abstract="We train a search agent with RL.",
                  authors=("Ada",), categories=("cs.CL",), submitted=day(0), updated=day(0))
    store.upsert_papers([paper])
    store.set_scores([Scored(paper.id, 2.0, True, (), "agentic")])
    store_seeds.save_seeds(store, [SeedEntry("OpenSeeker-v2", "mine.md", 3, summary_zh="人工挑选", arxiv_id=paper.id)])
    store.save_digest("2025-12-22", (day(30), day(23)), {"title": "t"}, [(seed_key("OpenSeeker-v2"), False)], [])
    week = load_week(config, store, store_seeds.all_seeds(store), None)
    assert digest_entries(config, week, week.published) == [] and week.waiting() == []
    assert [e.key for e in digest_entries(config, week)] == [paper_key(paper.id)]  # the reading list
    assert reading_list.tied(config, store) == {
        seed_key("OpenSeeker-v2"): (paper_key(paper.id), "agentic", day(0).date().isoformat(), None)}
