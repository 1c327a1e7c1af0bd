"""Collecting end to end through the real CLI against the local arXiv stand-in."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pipeline import collect, store_seeds
from pipeline.config import load
from pipeline.models import Paper
from pipeline.run import resolve_seeds
from pipeline.store import Store
from tests.helpers import CATS, config_for, rl_paper, write_config
from tests.servers.arxiv_server import ArxivServer, api_error, http_error


def papers_in_db(tmp_path) -> dict[str, dict]:
    conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
    conn.row_factory = sqlite3.Row
    return {r["id"]: dict(r) for r in conn.execute("SELECT * FROM papers")}


def test_two_weeks_repeat_nothing_and_a_revision_is_not_new(tmp_path, cli):
    week1 = datetime(2026, 11, 18, 12, tzinfo=UTC)
    week2 = datetime(2026, 11, 25, 12, tzinfo=UTC)
    with ArxivServer([rl_paper(i, week1) for i in range(5)]) as server:
        config = config_for(tmp_path, server, rss=False)
        first = cli("--config", str(config), "collect", "--as-of", "2026-11-20T00:00:00+00:00")
        assert "fetched 5, new 5, revised 0" in first.stdout
        server.papers = [rl_paper(i, week1) for i in range(5)] + [rl_paper(i, week2) for i in range(5, 9)]
        server.papers[0] = rl_paper(0, week1, version=2)
        second = cli("--config", str(config), "collect", "--as-of", "2026-11-27T00:00:00+00:00")
    assert "new 4, revised 0" in second.stdout  # week 1's papers are outside week 2's window
    stored = papers_in_db(tmp_path)
    assert len(stored) == 9


def test_a_newer_version_seen_by_rss_is_revised_not_new(tmp_path, cli):
    day = datetime(2026, 11, 18, 12, tzinfo=UTC)
    with ArxivServer([rl_paper(1, day)]) as server:
        config = config_for(tmp_path, server)
        cli("--config", str(config), "collect", "--as-of", "2026-11-19T00:00:00+00:00")
        server.papers = [replace(rl_paper(1, day, version=2), announce_type="replace")]
        second = cli("--config", str(config), "collect", "--as-of", "2026-11-19T06:00:00+00:00")
    assert "new 0, revised 1" in second.stdout
    assert papers_in_db(tmp_path)["2611.00001"]["version"] == 2


def test_the_same_paper_in_rss_api_and_two_categories_is_one_record(tmp_path, cli):
    day = datetime(2026, 11, 18, 12, tzinfo=UTC)
    with ArxivServer([rl_paper(7, day, cats=("cs.LG", "cs.CL"))]) as server:
        config = config_for(tmp_path, server)
        result = cli("--config", str(config), "collect", "--as-of", "2026-11-19T00:00:00+00:00")
    assert "new 1" in result.stdout
    row = papers_in_db(tmp_path)["2611.00007"]
    assert sorted(json.loads(row["sources"])) == ["api", "rss"]
    assert json.loads(row["categories"]) == ["cs.LG", "cs.CL"]


@pytest.mark.parametrize("count", [7, 9])
def test_requests_are_ceil_n_over_page_size_plus_the_feeds(tmp_path, cli, count):
    day = datetime(2026, 11, 18, 12, tzinfo=UTC)
    with ArxivServer([rl_paper(i, day) for i in range(count)]) as server:
        config = config_for(tmp_path, server, page_size=3)
        cli("--config", str(config), "collect", "--as-of", "2026-11-19T00:00:00+00:00")
        api = [r for r in server.requests if r.path == "/api/query"]
        rss = [r for r in server.requests if r.path.startswith("/rss/")]
    assert len(api) == math.ceil(count / 3)
    assert sorted(r.path for r in rss) == ["/rss/cs.CL", "/rss/cs.LG"]  # one feed per category


def test_failed_source_exits_3_naming_the_url_and_keeps_the_watermark(tmp_path, cli):
    day = datetime(2026, 11, 18, 12, tzinfo=UTC)
    with ArxivServer([rl_paper(1, day)]) as server:
        config = config_for(tmp_path, server, rss=False)
        cli("--config", str(config), "collect", "--as-of", "2026-11-19T00:00:00+00:00")
        server.script("/api/query", http_error(503), http_error(503))
        failed = cli("--config", str(config), "collect", "--as-of", "2026-11-26T00:00:00+00:00",
                     check=3)
        assert failed.stderr.count("\n") == 1
        assert server.api_url in failed.stderr and "HTTP 503 after 1 retry" in failed.stderr
        store = Store.open(load(config).storage.url)
        assert store.watermark() == datetime(2026, 11, 19, tzinfo=UTC)
        retry = cli("--config", str(config), "collect", "--as-of", "2026-11-26T00:00:00+00:00")
    assert "2026-11-19 08:00 → 2026-11-26 08:00" in retry.stdout  # the whole window again, in Shanghai


def test_an_api_error_entry_exits_3_quoting_it_and_keeps_the_watermark(tmp_path, cli):
    day = datetime(2026, 11, 18, 12, tzinfo=UTC)
    with ArxivServer([rl_paper(1, day)]) as server:
        config = config_for(tmp_path, server, rss=False)
        server.script("/api/query", api_error("malformed query"))
        failed = cli("--config", str(config), "collect", "--as-of", "2026-11-19T00:00:00+00:00",
                     check=3)
    (line,) = failed.stderr.strip().splitlines()
    assert server.api_url in line and line.endswith("answered with an error: malformed query")
    assert Store.open(load(config).storage.url).watermark() is None


def test_an_oai_page_cut_after_a_record_exits_3_and_keeps_the_watermark(tmp_path, cli):
    from tests.servers.arxiv_server import EMPTY, Fault

    day = datetime(2026, 11, 24, 12, tzinfo=UTC)
    with ArxivServer([rl_paper(i, day) for i in range(5)]) as server:
        config = write_config(tmp_path, {"sources": {
            "arxiv": {"api_url": server.api_url, "categories": ["cs.LG"], "lookback_days": 1},
            "rss": {"urls": [server.rss_url(["cs.LG"])]},
            "oai": {"enabled": True, "url": server.oai_url}}, "seeds": {"paths": []}}, seeds=False)
        server.script("/rss/", EMPTY)  # a stale feed: the day is left to the catch-up
        server.script("/oai", *[Fault(cut_after_records=2)] * 2)  # a proxy passing on a cut page
        failed = cli("--config", str(config), "collect", "--as-of", "2026-11-25T20:00:00+00:00",
                     check=3)
    (line,) = failed.stderr.strip().splitlines()
    assert server.oai_url + "?verb=ListRecords" in line and "malformed XML from OAI-PMH" in line
    assert Store.open(load(config).storage.url).watermark() is None


def test_since_reads_days_the_ledger_closed_again_through_the_catch_up(tmp_path, cli):
    day = datetime(2026, 11, 16, 12, tzinfo=UTC)
    with ArxivServer([rl_paper(i, day) for i in range(3)]) as server:
        config = write_config(tmp_path, {"sources": {
            "arxiv": {"api_url": server.api_url, "categories": ["cs.LG"]},
            "rss": {"urls": [server.rss_url(["cs.LG"])]},
            "oai": {"enabled": True, "url": server.oai_url}}, "seeds": {"paths": []}}, seeds=False)
        cli("--config", str(config), "collect", "--as-of", "2026-11-19T06:00:00+00:00")
        server.freeze("cs.LG")  # the feed shows the 11-18 announcement it showed before
        server.add(rl_paper(50, day + timedelta(hours=1)))  # a paper of 11-16 this install never got
        again = cli("--config", str(config), "collect", "--since", "2026-11-12",
                    "--as-of", "2026-11-19T07:00:00+00:00")
    assert "2611.00050" in papers_in_db(tmp_path) and "new 1" in again.stdout
    after = cli("--config", str(config), "collect", "--since", "2026-11-20", "--as-of", "2026-11-19", check=2)
    assert after.stderr == ("rl-digest: --since: 2026-11-20 is after the window's end (2026-11-19 23:59) "
                            "(it reads again from that day up to --as-of, or up to now)\n")
    ahead = cli("--config", str(config), "collect", "--since", "2099-01-01", check=2)  # it spoke of digests
    today = f"{datetime.now(load(config).zone):%Y-%m-%d}"
    assert re.fullmatch(f"rl-digest: --since: 2099-01-01 is in the future \\(today is {today}, "
                        r"\d\d:\d\d in Asia/Shanghai\) \(collect reads again from that day up to now: "
                        r"give today or a day before\)\n", ahead.stderr), ahead.stderr


def test_run_offline_of_network_is_exit_3_with_one_line(tmp_path, cli):
    config = write_config(tmp_path, {"sources": {"arxiv": {"api_url": "http://127.0.0.1:9/api/query"},
                                                 "rss": {"urls": ["http://127.0.0.1:9/rss/cs.LG"]}}})
    result = cli("--config", str(config), "run", check=3)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "127.0.0.1:9" in lines[0]
    assert not (tmp_path / "out" / "digests").exists()


def test_an_api_search_that_fails_names_the_address_without_its_whole_query(tmp_path, cli):
    config = write_config(tmp_path, {"sources": {"arxiv": {"api_url": "http://127.0.0.1:9/api/query",
                                                           "retries": 0},
                                                 "rss": {"enabled": False}, "oai": {"enabled": False}}})
    (line,) = cli("--config", str(config), "run", check=3).stderr.strip().splitlines()
    assert line.startswith("rl-digest: http://127.0.0.1:9/api/query?search_query=") and "…&" in line
    assert "&start=0&" in line and len(line) < 300, line  # the search alone runs to 1,000 characters


def test_seed_with_a_typo_resolves_to_the_stored_paper(tmp_path):
    config = load(write_config(tmp_path, {"seeds": {"paths": []}}, seeds=False))
    store = Store.open(config.storage.url)
    real = Paper(id="2510.00001", title="Online Process Reward Learning for Agentic Reinforcement Learning",
                 abstract="x", submitted=datetime(2025, 10, 1, tzinfo=UTC))
    decoy = Paper(id="2510.00002", title="Online Process Reward Models", abstract="y")
    store.upsert_papers([real, decoy])
    from pipeline.models import SeedEntry

    store_seeds.save_seeds(store, [SeedEntry(title="Online Process Reward Leanring for Agentic Reinforcement Learning",
                                source="s.txt", line=1),
                      SeedEntry(title="PRISM", source="s.txt", line=3)])
    assert _tied(resolve_seeds(config, store, None, store_seeds.all_seeds(store))) == 1
    ids = {seed.title: seed.arxiv_id for seed in store_seeds.all_seeds(store)}
    assert ids["Online Process Reward Leanring for Agentic Reinforcement Learning"] == "2510.00001"
    assert ids["PRISM"] is None  # a weak match is not forced


def test_unresolved_seed_is_searched_once_within_the_retry_period(tmp_path):
    title = "BroRL: Scaling Reinforcement Learning via Broadened Exploration"
    with ArxivServer([Paper(id="2510.01180", title=title, abstract="RL for LLMs",
                            submitted=datetime(2025, 10, 1, tzinfo=UTC), categories=("cs.LG",))]) as server:
        config = load(config_for(tmp_path, server))
        store = Store.open(config.storage.url)
        from pipeline.models import SeedEntry

        store_seeds.save_seeds(store, [SeedEntry(title=title, source="s.txt", line=1),
                          SeedEntry(title="A paper arXiv does not have", source="s.txt", line=3)])
        fetcher = collect.make_fetcher(config)
        assert _tied(resolve_seeds(config, store, fetcher, store_seeds.all_seeds(store))) == 1
        resolve_seeds(config, store, fetcher, store_seeds.all_seeds(store))  # nothing new to tie
        searches = [r for r in server.requests if "ti:" in r.query.get("search_query", "")]
    assert len(searches) == 1  # both titles in one query, never repeated
    assert {seed.arxiv_id for seed in store_seeds.all_seeds(store)} == {"2510.01180", None}


def _tied(seeds):
    return sum(1 for seed in seeds if seed.arxiv_id)


def _collect(cli, config, as_of):
    return cli("--config", str(config), "collect", "--as-of", as_of)


def test_empty_weekend_feed_is_quiet_but_an_empty_weekday_feed_is_a_warning(tmp_path, cli):
    from tests.servers.arxiv_server import EMPTY

    with ArxivServer([]) as server:
        config = config_for(tmp_path, server)
        server.script("/rss/", *[EMPTY] * 4)
        saturday = _collect(cli, config, "2026-11-28T20:00:00+00:00")
        wednesday = _collect(cli, config, "2026-11-25T20:00:00+00:00")
    assert "stale" not in saturday.stderr
    assert "no announcement expected: arXiv does not announce on Friday evenings" in saturday.stdout
    assert "stale feed: cs.LG is empty although arXiv announced on 2026-11-24" in wednesday.stderr
    status = cli("--config", str(config), "status").stdout
    assert "warning: stale feed: cs.CL is empty although arXiv announced on 2026-11-24" in status
    assert "rss: 2 requests" in status and "api: 1 requests" in status


def test_feed_error_and_a_stale_feed_are_warnings_not_failures(tmp_path, cli):
    from tests.servers.arxiv_server import FEED_ERROR

    day = datetime(2026, 11, 24, 12, tzinfo=UTC)
    with ArxivServer([rl_paper(1, day)], announced=datetime(2026, 11, 25, tzinfo=UTC)) as server:
        config = config_for(tmp_path, server)
        first = _collect(cli, config, "2026-11-25T20:00:00+00:00")
        stale = _collect(cli, config, "2026-11-26T20:00:00+00:00")  # the feed was not rebuilt
        server.script("/rss/", FEED_ERROR)
        broken = _collect(cli, config, "2026-11-27T20:00:00+00:00")  # after Thanksgiving evening
    assert "stale feed: cs.LG" not in first.stderr
    assert "stale feed: cs.LG shows no id newer than the 11-24 announcement's" in stale.stderr
    assert "arXiv reports a feed error" in broken.stderr and "stale" not in broken.stderr


def test_a_feed_error_is_a_gap_asked_once_not_polled_as_stale(tmp_path, cli):
    from tests.servers.arxiv_server import FEED_ERROR

    with ArxivServer([rl_paper(1, datetime(2026, 11, 24, 12, tzinfo=UTC))]) as server:
        bad = server.rss_url(["cs.LGG"])
        config = write_config(tmp_path, {"sources": {
            "arxiv": {"api_url": server.api_url, "categories": CATS, "lookback_days": 1},
            "rss": {"urls": [server.rss_url(["cs.LG"]), bad], "poll_minutes": 0.05,
                    "poll_interval_minutes": 0.005}}, "seeds": {"paths": []}}, seeds=False)
        server.script("/rss/cs.LGG", *[FEED_ERROR] * 20)
        result = _collect(cli, config, "2026-11-25T20:00:00+00:00")
        asked = [r.path for r in server.requests if r.path.startswith("/rss/")]
    assert asked.count("/rss/cs.LGG") == 1 and asked.count("/rss/cs.LG") == 1
    assert (f"{bad}: arXiv reports a feed error for cs.LGG (check sources.rss.urls): "
            "Bad archive 'cs.LGG'.") in result.stderr
    assert "stale" not in result.stderr
    assert "feed error: Bad archive 'cs.LGG'." in result.stdout  # the gap, in the coverage line
    gap = next(line for line in result.stdout.splitlines() if line.startswith("gap: cs.LGG on 11-24: feed error"))
    assert gap.endswith("NOT recovered yet")  # the API search cannot mend a category arXiv lacks


def test_the_38_built_in_seeds_resolve_in_at_most_5_api_requests(tmp_path):
    from pipeline.run import seed_documents

    with ArxivServer() as server:
        config = load(write_config(tmp_path, {"sources": {"arxiv": {"api_url": server.api_url}},
                                              "seeds": {"paths": [], "builtin": True}}, seeds=False))
        seeds = [e for doc in seed_documents(config) for e in doc.entries]
        assert len(seeds) == 38
        server.add(*(Paper(id=f"2510.{n:05d}", title=seed.title.upper(), abstract="RL for LLMs",
                           categories=("cs.LG",), submitted=datetime(2025, 10, 1, tzinfo=UTC))
                     for n, seed in enumerate(seeds)))
        store = Store.open(config.storage.url)
        store_seeds.save_seeds(store, seeds)
        tied = _tied(resolve_seeds(config, store, collect.make_fetcher(config), store_seeds.all_seeds(store)))
        searches = [r for r in server.requests if r.path == "/api/query"]
    assert tied == 38
    assert 1 <= len(searches) <= 5
    assert all(seed.arxiv_id for seed in store_seeds.all_seeds(store))


def test_an_as_of_later_today_expects_of_the_feeds_only_what_arxiv_has_announced_by_now(tmp_path):
    """`run --as-of <today>` means the end of today; the feeds cannot show tonight's batch yet,
    so no source waits for it (sources.rss.poll_minutes) or calls it missing."""
    from pipeline.run import collect_and_rank
    from pipeline.sources import Found, SourceReport

    class Recorder:
        name, label, online = "recorder", "recorder", True
        seen: list = []

        def fetch(self, window, fetcher):
            self.seen.append(window)
            return Found(report=SourceReport())

    config = load(write_config(tmp_path, {"seeds": {"paths": []}}, seeds=False))
    store = Store.open(config.storage.url)
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=23)
    report, _, _ = collect_and_rank(config, store, [Recorder()], collect.make_fetcher(config), later)
    (window,) = Recorder.seen
    now = datetime.now(UTC)
    assert window.as_of <= now and window.as_of == window.end == report.window[1]
    due, _ = window.calendar.in_feed(window.as_of)
    assert due is None or due.at <= now
    assert not [day for days in window.missed().values() for day in days
                if window.calendar.at(day).at > now]


def test_with_oai_off_a_paper_the_api_had_only_after_the_weekly_run_is_read_the_week_after(tmp_path, cli):
    """Submitted Thursday 15:00 New York time (after the cut-off), announced Sunday, in the
    API from Monday: a Saturday's window must reach back past Thursday the week after."""
    from tests.servers.arxiv_server import EMPTY

    late = rl_paper(77, datetime(2026, 11, 19, 20, 0, tzinfo=UTC))
    with ArxivServer([rl_paper(1, datetime(2026, 11, 18, 12, tzinfo=UTC))]) as server:
        config = config_for(tmp_path, server, sources={
            "arxiv": {"api_url": server.api_url, "categories": ["cs.LG"], "retries": 1},
            "rss": {"urls": [server.rss_url(["cs.LG"])]}, "oai": {"enabled": False}})
        _collect(cli, config, "2026-11-22T00:00:00+00:00")
        server.add(late)  # only now in the API
        server.script("/rss/", EMPTY)  # Saturday's feed: Friday has no batch
        _collect(cli, config, "2026-11-29T00:00:00+00:00")
    shown = cli("--config", str(config), "status", "--paper", late.id, check=None)
    assert shown.returncode == 0 and late.title in shown.stdout, shown.stdout + shown.stderr
