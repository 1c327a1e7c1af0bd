"""A weekly build renders only the months that changed (issue 20's scale): the others are
replayed from what the last build wrote, and what it publishes is byte for byte what a
build from scratch writes, on SQLite and PostgreSQL; a changed output file or template
makes it render everything again."""

from __future__ import annotations

import logging
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipeline import config as cfg
from pipeline import months, reading_list, reading_list_markdown, render, site_papers, store_readers
from pipeline.errors import DigestError
from pipeline.models import Enrichment, Paper, Scored, paper_key
from pipeline.store import Store
from tests.helpers import write_config

UPDATED = "2026-11-30"


def paper(k: int, when: datetime, title: str | None = None) -> Paper:
    return Paper(id=f"2611.{k:05d}", title=title or f"GRPO study {k} with $\\alpha$ | <b>bold</b>",
                 abstract=f"We train LLMs with GRPO, study {k}. Code: https://github.com/lab/p{k}",
                 authors=("Ada Lovelace", f"Author {k}"), categories=("cs.LG",), submitted=when, updated=when)


def stock(store: Store, found: list[Paper]) -> None:
    store.upsert_papers(found)
    store.set_scores([Scored(p.id, 2.0, True, ("grpo",), ("algorithms", "agentic")[int(p.id[-1]) % 2])
                      for p in found])
    store.put_many([Enrichment(f"s:{p.id}", paper_key(p.id), "paper_summary",
                               {"summary_zh": f"摘要 {p.id}", "summary_en": f"Summary {p.id}."})
                    for p in found])


def build(config_path: Path, split: int = reading_list.SPLIT) -> None:
    """What `rl-digest run` does for the reading list and the web edition's papers."""
    config = cfg.load(config_path)
    store = Store.open(config.storage.url)
    with ExitStack() as stack:
        papers = stack.enter_context(site_papers.Papers(config, store, render.Settings.of(config),
                                                        config.outputs.dir / "site", [], UPDATED))
        reading_list.publish(config, store, UPDATED, also=[papers], split=split)
    store.close()


def published(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*")
            if p.is_file() and months.FOLDER not in p.parts}


START = datetime(2026, 11, 25, 12, tzinfo=UTC)


def two_outputs(tmp_path: Path, db_url: str) -> tuple[Path, Path, Store, list[Paper]]:
    """Two configs (outputs in a/ and b/) on one database of 240 papers, late July to November."""
    configs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        configs.append(write_config(tmp_path / name, {"storage": {"url": db_url}}, seeds=False))
    store = Store.open(db_url)
    found = [paper(k, START - timedelta(hours=12 * k)) for k in range(240)]
    stock(store, found)
    return configs[0], configs[1], store, found


@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
def test_a_weekly_build_replays_the_months_that_did_not_change_and_writes_a_fresh_builds_bytes(db_url, tmp_path):
    weekly, fresh, store, found = two_outputs(tmp_path, db_url)
    build(weekly)
    cache = tmp_path / "a" / "out" / months.FOLDER
    pieces = {p.stem: p.stat().st_mtime_ns for p in cache.glob("20*.json")}
    assert {"2026-11", "2026-10", "2026-09", "2026-08", "2026-07"} <= set(pieces)

    # a week later: new papers, an August paper revised, a September paper summarised again
    august = next(p for p in found if p.submitted and p.submitted.month == 8)
    september = next(p for p in found if p.submitted and p.submitted.month == 9)
    stock(store, [paper(1000 + k, START + timedelta(days=1, hours=k)) for k in range(5)])
    store.upsert_papers([replace(august, version=2, title="A revised title")])
    store.put_many([Enrichment("s:again", paper_key(september.id), "paper_summary",
                               {"summary_zh": "新的摘要", "summary_en": "A newer summary."})])
    store.close()
    build(weekly)
    after = {p.stem: p.stat().st_mtime_ns for p in cache.glob("20*.json")}
    assert after["2026-07"] == pieces["2026-07"]  # replayed, not rendered
    assert after["2026-08"] != pieces["2026-08"] and after["2026-09"] != pieces["2026-09"]
    build(fresh)
    got, want = published(tmp_path / "a" / "out"), published(tmp_path / "b" / "out")
    assert got.keys() == want.keys() and got == want
    assert "A revised title" in (tmp_path / "a" / "out" / "site" / "exports" / "reading-list.bib").read_text()

    # an output or a piece of the cache changed by hand: every month is rendered again
    jsonl = tmp_path / "a" / "out" / "site" / "exports" / "reading-list.jsonl"
    jsonl.write_bytes(jsonl.read_bytes()[:-200])
    build(weekly)
    assert published(tmp_path / "a" / "out") == want
    again = {p.stem: p.stat().st_mtime_ns for p in cache.glob("20*.json")}
    assert again["2026-07"] != after["2026-07"]
    (cache / "2026-08.json").write_text("[", encoding="utf-8")
    build(weekly)
    assert published(tmp_path / "a" / "out") == want
    last = {p.stem: p.stat().st_mtime_ns for p in cache.glob("20*.json")}
    assert last["2026-07"] != again["2026-07"]
    # a replayed month keeps its Markdown file and web page as they are, so one edited by
    # hand is noticed
    for july in (tmp_path / "a" / "out" / reading_list_markdown.FOLDER / "2026-07.md",
                 tmp_path / "a" / "out" / "site" / "papers" / "month" / "2026-07.html"):
        july.write_text(july.read_text(encoding="utf-8").replace("GRPO", "PPO"), encoding="utf-8")
        build(weekly)
        assert published(tmp_path / "a" / "out") == want
        now = {p.stem: p.stat().st_mtime_ns for p in cache.glob("20*.json")}
        assert now["2026-07"] != last["2026-07"], july
        last = now


@pytest.mark.skipif(not months.Helper.usable(), reason="one core, or no fork: builds never split")
@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
def test_a_big_full_build_leaves_the_older_months_to_a_second_process_and_writes_the_same_bytes(
        db_url, tmp_path, caplog):
    helped, alone, store, _ = two_outputs(tmp_path, db_url)
    with caplog.at_level(logging.INFO, logger="pipeline.reading_list"):
        build(helped, split=100)
    assert "a second process renders 2026-07 to 2026-08" in caplog.text
    build(alone, split=0)
    out = tmp_path / "a" / "out"
    assert published(out) == published(tmp_path / "b" / "out")
    assert not (out / months.FOLDER / months.HELPER).exists()

    # everything rendered again (no ledger): the helper's months whose bytes are the same
    # are not put in place again, so a weekly git diff stays empty
    july = [out / reading_list_markdown.FOLDER / "2026-07.md", out / "site" / "papers" / "month" / "2026-07.html"]
    stamps = [path.stat().st_mtime_ns for path in july]
    (out / months.FOLDER / months.LEDGER).unlink()
    build(helped, split=100)
    assert [path.stat().st_mtime_ns for path in july] == stamps
    assert published(out) == published(tmp_path / "b" / "out")

    # the next week replays the months the helper rendered, as those of any last build
    stock(store, [paper(1000 + k, START + timedelta(days=1, hours=k)) for k in range(5)])
    store.close()
    pieces = {p.stem: p.stat().st_mtime_ns for p in (out / months.FOLDER).glob("20*.json")}
    build(helped, split=100)
    after = {p.stem: p.stat().st_mtime_ns for p in (out / months.FOLDER).glob("20*.json")}
    assert after["2026-07"] == pieces["2026-07"] and after["2026-11"] != pieces["2026-11"]
    build(alone, split=0)
    assert published(out) == published(tmp_path / "b" / "out")


@pytest.mark.skipif(not months.Helper.usable(), reason="one core, or no fork: builds never split")
def test_a_big_full_build_on_a_thread_pool_s_thread_as_the_scheduler_runs_a_publish_splits_too(tmp_path):
    """`rl-digest schedule` runs each publish on a worker thread of a thread pool: the helper
    forked from it ran the pool's exit hook at its end, which joins that very thread, and
    ended with status 1, its months done; every publish of a first build (or one after a
    template changed) of 10,000 entries or more failed, and so did each retry."""
    helped, alone, _, _ = two_outputs(tmp_path, f"sqlite:///{tmp_path}/digest.sqlite3")
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(build, helped, 100).result()
    build(alone, split=0)
    assert published(tmp_path / "a" / "out") == published(tmp_path / "b" / "out")


@pytest.mark.skipif(not months.Helper.usable(), reason="one core, or no fork: builds never split")
def test_a_stop_signal_to_the_process_group_is_left_to_the_parent_not_the_second_process(tmp_path):
    """systemd's stop or Ctrl-C reaches the helper too: it kept the run's handlers, so it
    said the stop message a second time (or, with none, died mid-work); the parent decides
    whether the step finishes, and its death ends the helper (parent-death signal)."""
    def work(folder: Path) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        (folder / "done").write_text("months", encoding="utf-8")

    with months.Helper(tmp_path, work) as helper:
        assert (helper.join() / "done").read_text(encoding="utf-8") == "months"


class FailsElsewhere(reading_list_markdown.Markdown):
    def elsewhere(self, out: Path, folder: Path) -> reading_list_markdown.Markdown:
        raise DigestError(f"{folder}: No space left on device")


class DiesElsewhere(reading_list_markdown.Markdown):
    def elsewhere(self, out: Path, folder: Path) -> reading_list_markdown.Markdown:
        os._exit(3)  # as if killed: no word back


@pytest.mark.skipif(not months.Helper.usable(), reason="one core, or no fork: builds never split")
@pytest.mark.parametrize(("sink", "why"), [(FailsElsewhere, ".*No space left on device"),
                                           (DiesElsewhere, "it ended with exit status 3")])
def test_a_second_process_that_fails_fails_the_build_with_why_and_the_next_build_renders_all(tmp_path, sink, why):
    config = cfg.load(write_config(tmp_path, {}, seeds=False))
    store = Store.open(config.storage.url)
    stock(store, [paper(k, START - timedelta(hours=12 * k)) for k in range(240)])
    with sink(render.Settings.of(config), config.topics, tmp_path / "elsewhere", UPDATED) as failing, \
            pytest.raises(DigestError, match=f"second process .* failed: {why}"):
        reading_list.publish(config, store, UPDATED, also=[failing], split=100)
    assert not (config.outputs.dir / months.FOLDER / months.LEDGER).exists()
    assert not (config.outputs.dir / months.FOLDER / months.HELPER).exists()
    reading_list.publish(config, store, UPDATED, split=100)
    assert "2026-07" in (config.outputs.dir / "READING_LIST.md").read_text(encoding="utf-8")


def test_fingerprints_change_with_a_month_s_papers_and_nothing_else(db_url, tmp_path):
    config = cfg.load(write_config(tmp_path, {"storage": {"url": db_url}}, seeds=False))
    store = Store.open(db_url)
    stock(store, [paper(k, START - timedelta(days=20 * k)) for k in range(4)])  # Nov, Nov, Oct, Sep
    markdown = reading_list_markdown.Markdown(render.Settings.of(config), config.topics, tmp_path, UPDATED)
    before = reading_list.fingerprints(config, store, [markdown]).of()
    store_readers.set_verdict(store, "2611.00002", False)  # the reader takes October's paper out
    after = reading_list.fingerprints(config, store, [markdown]).of()
    assert before.keys() == {"2026-11", "2026-10", "2026-09"} and after.keys() == {"2026-11", "2026-09"}
    assert after["2026-11"] == before["2026-11"] and after["2026-09"] == before["2026-09"]
    store.set_scores([Scored("2611.00003", 2.0, True, ("grpo",), "algorithms")])  # another topic
    assert reading_list.fingerprints(config, store, [markdown]).of()["2026-09"] != before["2026-09"]
    markdown.__exit__(None, None, None)
    store.close()


def test_an_upgraded_pylatexenc_renders_every_month_again(db_url, tmp_path, monkeypatch):
    """pylatexenc writes the BibTeX export's letters and signs ({$\\alpha$}) and
    reads TeX in titles: after an upgrade that writes them otherwise, a weekly build replayed
    the older months' records of reading-list.bib as the old version wrote them, beside the
    new version's (its version was no part of what the months' cache compares)."""
    import pylatexenc

    from pipeline import export

    weekly, fresh, store, _ = two_outputs(tmp_path, db_url)
    store.close()
    build(weekly)
    bib = tmp_path / "a" / "out" / "site" / "exports" / "reading-list.bib"
    assert "{$\\alpha$}" in bib.read_text(encoding="utf-8")
    monkeypatch.setattr(pylatexenc, "__version__", "2.99")  # a table that writes α as \textalpha
    monkeypatch.setattr(export, "_latex", lambda run: run.replace("α", "{\\textalpha}"))
    build(weekly)
    build(fresh)
    assert "{$\\alpha$}" not in bib.read_text(encoding="utf-8")
    assert published(tmp_path / "a" / "out") == published(tmp_path / "b" / "out")
