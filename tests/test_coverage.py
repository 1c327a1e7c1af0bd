"""Never miss a paper, and say so: per-category feeds, the calendar, stale feeds, OAI-PMH catch-up.

Everything runs through the real CLI against the local arXiv stand-in (RSS with
the 2000-item cap in arXiv's item order, frozen per-category feeds, OAI-PMH).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml

from pipeline import coverage, templating
from pipeline.calendar import load_calendar
from pipeline.config import load
from pipeline.errors import ConfigError
from pipeline.models import Paper
from tests.helpers import write_config
from tests.servers.arxiv_server import EASTERN, EMPTY, ArxivServer, http_error

DEFAULT_CATS = load(None).sources.arxiv.categories
LABELLED = Path(__file__).parent / "data" / "gap_labelled.jsonl"


def noise(n: int, cats: tuple[str, ...], kind: str = "new") -> Paper:
    day = datetime(2026, 11, 23, 15, tzinfo=UTC)
    return Paper(id=f"2611.{n:05d}", title=f"A study of graph colouring number {n}",
                 abstract="We bound the chromatic number of sparse graphs.", authors=("A. B.",),
                 categories=cats, submitted=day, updated=day, announce_type=kind)


def relevant(n: int, cats: tuple[str, ...], kind: str = "new", day=None) -> Paper:
    day = day or datetime(2026, 11, 23, 15, tzinfo=UTC)
    return Paper(id=f"2611.{n:05d}", title=f"GRPO variant {n} for reinforcement learning of large language models",
                 abstract="We train a large language model with reinforcement learning from verifiable rewards.",
                 authors=("Ada Lovelace",), categories=cats, submitted=day, updated=day, announce_type=kind)


def config_for(tmp_path, server, cats=DEFAULT_CATS, api=False, oai=False, lookback=1, **rss):
    return write_config(tmp_path, {
        "sources": {
            "arxiv": {"api_url": server.api_url, "categories": list(cats), "enabled": api,
                      "overlap_hours": 0, "lookback_days": lookback},
            "rss": {"urls": [server.rss_url(list(cats))], "poll_minutes": 0, **rss},
            "oai": {"enabled": oai, "url": server.oai_url},
        },
        "seeds": {"paths": []},
    }, seeds=False)


def stored_ids(tmp_path) -> set[str]:
    conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
    return {row[0] for row in conn.execute("SELECT id FROM papers")}


def collect(cli, config, as_of, check=0):
    return cli("--config", str(config), "collect", "--as-of", as_of, check=check)


# Tuesday 2026-11-24 09:00 New York: the feeds carry Monday evening's announcement.
TUESDAY = "2026-11-24T14:00:00+00:00"


def busy_day() -> list[Paper]:
    """2600 items over the default categories; the relevant ones sit where a cut feed loses them."""
    cats = [c for c in DEFAULT_CATS if c != "cs.LG"]
    papers = [noise(n, ("cs.LG",)) for n in range(1200)]
    papers += [noise(n, (cats[n % len(cats)],)) for n in range(1200, 2560)]
    papers += [relevant(n, ("cs.CV", "cs.LG")) for n in range(2560, 2580)]  # cross-listed to cs.LG
    papers += [relevant(n, (cats[n % len(cats)],)) for n in range(2580, 2600)]
    return papers


def test_a_day_of_2600_items_keeps_every_relevant_paper(tmp_path, cli):
    papers = busy_day()
    wanted = {p.id for p in papers if "GRPO" in p.title}
    with ArxivServer(papers) as server:
        config = config_for(tmp_path, server)
        result = collect(cli, config, TUESDAY)
        feeds = [r for r in server.requests if r.path.startswith("/rss/")]
    assert len(feeds) == len(DEFAULT_CATS)  # one feed per category, none cut
    assert all("+" not in r.path for r in feeds)
    assert wanted <= stored_ids(tmp_path) and len(wanted) == 40
    assert "cut" not in result.stderr
    assert "coverage: 1 of 1 arXiv announcements read (11-23 → 11-23)" in result.stdout
    assert "cs: 1/1 read, ids " in result.stdout and "stat: 1/1 read" in result.stdout
    assert " 20 cross" in result.stdout  # the cs.CV papers cross-listed to cs.LG


def test_one_feed_for_every_category_is_cut_at_2000_and_says_so(tmp_path, cli):
    with ArxivServer(busy_day()) as server:
        config = config_for(tmp_path, server, categories_per_feed=len(DEFAULT_CATS))
        result = collect(cli, config, TUESDAY)
    assert "2000 items, arXiv's cap: the feed was cut" in result.stderr
    assert "feed cut at 2000 items, NOT recovered yet" in result.stdout


def test_a_cut_feed_is_backfilled_through_oai_pmh_when_it_is_on(tmp_path, cli):
    """The coverage said 'ids 2000 new, 0 matched the query' beside 'recovered through OAI-PMH':
    the cut feed's counts; the harvest counted the whole evening."""
    papers = busy_day()
    wanted = {p.id for p in papers if "GRPO" in p.title}
    with ArxivServer(papers) as server:
        config = config_for(tmp_path, server, oai=True, categories_per_feed=len(DEFAULT_CATS))
        result = collect(cli, config, TUESDAY)
        harvested = [r for r in server.requests if r.path == "/oai"]
    assert "2000 items, arXiv's cap: the feed was cut" in result.stderr
    assert harvested
    assert wanted <= stored_ids(tmp_path)  # the ones the cut lost came through OAI-PMH
    assert "feed cut at 2000 items, recovered through OAI-PMH" in result.stdout
    assert "cs: 1/1 read, ids 2600 new · 0 cross · 0 replaced, 40 matched the query" in result.stdout


def test_an_evening_its_feed_read_keeps_its_ids_when_collect_since_reads_it_again(tmp_path, cli):
    """collect --since has the API search read every evening again, those a feed read whole
    too: it must not take such an evening as one the search read, whose ids are not counted."""
    with ArxivServer([relevant(1, ("cs.LG",)), noise(2, ("cs.LG",))]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"], api=True)
        collect(cli, config, TUESDAY)
        again = cli("--config", str(config), "collect", "--as-of", TUESDAY,
                    "--since", "2026-11-23T12:00:00+00:00").stdout
    assert "cs: 1/1 read, ids 2 new · 0 cross · 0 replaced, 1 matched the query" in again, again


@pytest.mark.slow
def test_a_cut_feed_backfilled_through_the_api_search_gives_no_ids_as_the_evening_s(tmp_path, cli):
    """The coverage said 'ids 2000 new, 0 matched the query' beside 'recovered through the API
    search': the cut feed's counts, as if they were the evening's. The search counts the matches;
    it reads no other ids, so the ids are not counted."""
    with ArxivServer(busy_day()) as server:
        config = config_for(tmp_path, server, api=True, categories_per_feed=len(DEFAULT_CATS))
        result = collect(cli, config, TUESDAY)
    assert "feed cut at 2000 items, recovered through the API search" in result.stdout
    assert ("cs: 1/1 read, ids not counted (the API search reads only the papers that match the query), "
            "40 matched the query") in result.stdout, result.stdout


def test_a_revision_during_downtime_updates_the_held_paper_through_oai_pmh(tmp_path, cli):
    held = relevant(7, ("cs.LG",), day=datetime(2026, 10, 28, 15, tzinfo=UTC))
    with ArxivServer([held]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"], oai=True, lookback=22)
        server.script("/rss/", *[EMPTY] * 40)
        cli("--config", str(config), "run", "--as-of", "2026-10-30T14:00:00+00:00", "--no-email")
        revised = replace(held, version=2, updated=datetime(2026, 11, 10, 15, tzinfo=UTC),
                          journal_ref="NeurIPS 2026")  # v1 published; the feeds go quiet
        server.papers[server.papers.index(held)] = revised
        cli("--config", str(config), "run", "--as-of", "2026-11-24T14:00:00+00:00", "--no-email")
    digest = (tmp_path / "out" / "digests" / "2026-11-24.md").read_text(encoding="utf-8")
    updates = digest[digest.index("Updates"):]
    assert "v1 → v2" in updates and "GRPO variant 7" in updates
    conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
    version, journal_ref = conn.execute("SELECT version, journal_ref FROM papers WHERE id = ?",
                                        (held.id,)).fetchone()
    assert (version, journal_ref) == (2, "NeurIPS 2026")


def test_a_holiday_is_expected_not_a_warning(tmp_path, cli):
    with ArxivServer([]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG", "cs.CL"])
        server.script("/rss/", EMPTY, EMPTY)
        # Friday after Thanksgiving, 09:00 New York: no announcement on Thursday 11-26 evening
        friday = collect(cli, config, "2026-11-27T14:00:00+00:00")
        server.script("/rss/", EMPTY, EMPTY)
        tuesday = collect(cli, config, TUESDAY)
    assert "stale" not in friday.stderr and "WARNING" not in friday.stderr
    assert friday.stdout.count("no announcement expected: 11-26 is an arXiv holiday (Thanksgiving)") == 1
    assert "stale feed: cs.LG is empty although arXiv announced on 2026-11-23" in tuesday.stderr


def test_a_holiday_is_named_in_the_window_its_evening_falls_in(tmp_path, cli):
    """A holiday was named by its date alone: a collect on the morning of New Year's Eve in
    New York (14:00 in Beijing) said 'no announcement expected: 12-31 is an arXiv holiday'
    beside announcements read up to 12-30, and the next day's collect said it again; a Monday
    digest made in New York on Labor Day named the holiday, and so did the next week's, whose
    window holds that evening. Now a holiday is named where its evening would have been read,
    as an announcement is: once, in the week it falls in."""
    with ArxivServer([]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"])
        server.script("/rss/", EMPTY, EMPTY)
        thursday = collect(cli, config, "2026-11-26T14:00:00+08:00")  # 01:00 in New York
        friday = collect(cli, config, "2026-11-27T14:00:00+08:00")
    assert "11-26 is an arXiv holiday" not in thursday.stdout, thursday.stdout
    assert "no announcement expected: 11-26 is an arXiv holiday (Thanksgiving)" in friday.stdout

    labor_day = [relevant(1, ("cs.LG",), day=datetime(2026, 9, 2, 15, tzinfo=UTC)),
                 relevant(2, ("cs.LG",), day=datetime(2026, 9, 9, 15, tzinfo=UTC))]
    folder = tmp_path / "new-york"
    folder.mkdir()
    with ArxivServer(labor_day[:1]) as server:
        config = write_config(folder, {
            "sources": {"arxiv": {"api_url": server.api_url, "categories": ["cs.LG"], "overlap_hours": 0},
                        "rss": {"enabled": False}, "oai": {"enabled": False}},
            "seeds": {"paths": []}, "schedule": {"timezone": "America/New_York"}}, seeds=False)
        for monday in ("2026-09-07", "2026-09-14"):
            cli("--config", str(config), "run", "--as-of", f"{monday}T08:00:00")
            server.add(labor_day[1])
    lines = {monday: next(line for line in (folder / "out" / "digests" / f"{monday}.md")
                          .read_text(encoding="utf-8").splitlines() if "Coverage" in line)
             for monday in ("2026-09-07", "2026-09-14")}
    assert "09-07" not in lines["2026-09-07"], lines["2026-09-07"]
    assert "4/4 arXiv announcements read (09-08 → 09-13)" in lines["2026-09-14"], lines["2026-09-14"]
    assert "no announcement expected: 09-07 is an arXiv holiday (Labor Day)" in lines["2026-09-14"]
    assert "arXiv 假期不发布：09-07（劳动节）" in lines["2026-09-14"]


def test_a_batch_on_an_evening_the_calendar_skips_is_not_lost(tmp_path, cli):
    """A calendar file gives New Year's Eve 2025 as a holiday, and arXiv announced that
    evening after all. Weekly runs on Monday morning in Beijing read the catch-up: the first
    kept papers submitted up to the last evening it expected (12-30), the next harvested from
    the day before its first (01-04), after the 12-31 record's datestamp; the paper was in no
    digest, no reading list, nowhere. Now the harvest starts where the kept papers do."""
    (tmp_path / "arxiv-2025.yaml").write_text(
        "years: [2025]\nno_announcement:\n  2025-12-25: Christmas\n  2025-12-31: New Year's Eve\n",
        encoding="utf-8")
    eve = replace(relevant(1, ("cs.LG",), day=datetime(2025, 12, 31, 15, tzinfo=UTC)), id="2512.00001")
    later = replace(relevant(2, ("cs.LG",), day=datetime(2026, 1, 6, 15, tzinfo=UTC)), id="2601.00002")
    with ArxivServer([eve]) as server:
        server.datestamps = {eve.id: date(2025, 12, 31), later.id: date(2026, 1, 6)}  # their evenings
        config = config_for(tmp_path, server, cats=["cs.LG"], oai=True, lookback=7)
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        data["sources"]["arxiv"]["calendar_files"] = ["arxiv-2025.yaml"]
        config.write_text(yaml.safe_dump(data), encoding="utf-8")
        server.script("/rss/", *[EMPTY] * 4)  # Monday morning in Beijing: Saturday's feed, empty
        cli("--config", str(config), "run", "--as-of", "2026-01-05T08:00:00+08:00")
        server.add(later)
        cli("--config", str(config), "run", "--as-of", "2026-01-12T08:00:00+08:00")
    assert eve.id in stored_ids(tmp_path)
    digests = {path.stem: path.read_text(encoding="utf-8") for path in (tmp_path / "out" / "digests").glob("*.md")}
    assert [day for day, text in digests.items() if f"arxiv.org/abs/{eve.id}" in text] == ["2026-01-12"], digests
    assert f"arxiv.org/abs/{eve.id}" in (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")


def test_a_chinese_digest_names_the_holidays_of_its_window(tmp_path, cli):
    """languages: [zh]: the coverage line named a holiday in English only ('no announcement
    expected: 11-26 is an arXiv holiday (Thanksgiving)'), so a Chinese reader got no reason
    for an evening without papers. The Chinese line names it, in Chinese where the calendar
    file does."""
    with ArxivServer([relevant(1, ("cs.LG",))]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"], lookback=7)
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        data["languages"] = ["zh"]
        config.write_text(yaml.safe_dump(data), encoding="utf-8")
        cli("--config", str(config), "run", "--as-of", "2026-11-27T14:00:00+00:00")
    digest = " ".join((tmp_path / "out" / "digests" / "2026-11-27.md").read_text(encoding="utf-8").split())
    assert "；arXiv 假期不发布：11-26（感恩节）" in digest, digest
    assert "Thanksgiving" not in digest


def test_a_week_of_two_holidays_names_them_once_in_either_language(tmp_path, cli):
    """The week of New Year's Eve and New Year's Day: the English line said 'no announcement
    expected: 12-31 is an arXiv holiday (New Year's Eve); no announcement expected: 01-01 is
    an arXiv holiday (New Year's Day)'. Now it says it once and lists the days, as the
    Chinese line does."""
    (tmp_path / "arxiv-2025.yaml").write_text(
        "years: [2025]\nno_announcement:\n  2025-12-31: {en: New Year's Eve, zh: 新年前夜}\n", encoding="utf-8")
    paper = replace(relevant(1, ("cs.LG",), day=datetime(2025, 12, 29, 15, tzinfo=UTC)), id="2512.00001")
    with ArxivServer([paper]) as server:
        config = write_config(tmp_path, {
            "sources": {"arxiv": {"api_url": server.api_url, "categories": ["cs.LG"], "lookback_days": 7,
                                  "calendar_files": ["arxiv-2025.yaml"]},
                        "rss": {"enabled": False}, "oai": {"enabled": False}},
            "seeds": {"paths": []}}, seeds=False)
        cli("--config", str(config), "run", "--as-of", "2026-01-05T08:00:00+08:00")
    digest = " ".join((tmp_path / "out" / "digests" / "2026-01-05.md").read_text(encoding="utf-8").split())
    assert "3/3 arXiv announcements read (12-28 → 12-30); cs: 3/3," in digest, digest
    assert ("1 relevant; no announcement expected: 12-31 (New Year's Eve) and 01-01 (New Year's Day) are "
            "arXiv holidays; cs.LG on") in digest, digest
    assert "；arXiv 假期不发布：12-31（新年前夜）、01-01（元旦）；" in digest, digest
    assert "is an arXiv holiday" not in digest and digest.count("no announcement expected") == 1


def test_a_calendar_file_may_name_a_holiday_in_chinese(tmp_path):
    extra = tmp_path / "arxiv-2027.yaml"
    extra.write_text("years: [2027]\nno_announcement:\n  2027-01-18: {en: Martin Luther King Jr. Day, "
                     "zh: 马丁·路德·金纪念日}\n  2027-02-15: Presidents' Day\n", encoding="utf-8")
    cal = load_calendar([extra])
    summary = coverage.summarise(coverage.Ledger(), cal, ["cs.LG"], datetime(2027, 1, 17, tzinfo=UTC),
                                 datetime(2027, 2, 17, tzinfo=UTC))
    assert summary.no_announcement == ("01-18 is an arXiv holiday (Martin Luther King Jr. Day)",
                                       "02-15 is an arXiv holiday (Presidents' Day)")
    assert summary.holidays == (coverage.Holiday("01-18", "马丁·路德·金纪念日", "Martin Luther King Jr. Day"),
                                coverage.Holiday("02-15", "", "Presidents' Day"))
    extra.write_text("years: [2027]\nno_announcement:\n  2027-01-18: {name: MLK}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="arxiv-2027.yaml: no_announcement: 2027-01-18 gives a reason"):
        load_calendar([extra])


@pytest.mark.slow  # make test's margin under 5 minutes: it runs in make test-slow (CI)
def test_a_stale_feed_is_polled_then_warned_and_recovered_through_oai_pmh(tmp_path, cli):
    monday = datetime(2026, 11, 23, 15, tzinfo=UTC)
    tuesday = datetime(2026, 11, 24, 15, tzinfo=UTC)
    with ArxivServer([relevant(1, ("cs.CL",), day=monday - timedelta(days=1)),
                      relevant(2, ("cs.LG",), day=monday - timedelta(days=1))]) as server:
        # 3 s to wait: a first read slowed by a busy CI machine must leave time to poll again
        config = config_for(tmp_path, server, cats=["cs.LG", "cs.CL"], oai=True,
                            poll_minutes=0.05, poll_interval_minutes=0.002)
        first = collect(cli, config, TUESDAY)
        assert "stale" not in first.stderr
        server.freeze("cs.CL")  # the CDN keeps serving Monday's cs.CL feed
        server.add(relevant(3, ("cs.CL",), day=tuesday - timedelta(hours=3)),
                   relevant(4, ("cs.LG",), day=tuesday - timedelta(hours=3)))
        second = collect(cli, config, "2026-11-25T14:00:00+00:00")
        cl_reads = [r for r in server.requests if r.path == "/rss/cs.CL"]
        oai = [r for r in server.requests if r.path == "/oai"]
        status = cli("--config", str(config), "status").stdout
    assert len(cl_reads) >= 3  # read, then polled again before giving up
    assert "RSS: cs.CL not yet rebuilt for the 2026-11-24 announcement; looking again in" in second.stderr
    assert "(sources.rss.poll_minutes)" in second.stderr
    assert "stale feed: cs.CL shows no id newer than the 11-23 announcement's" in second.stderr
    assert {"2611.00003", "2611.00004"} <= stored_ids(tmp_path)
    assert [r.query.get("set") for r in oai][:1] == ["cs:cs:CL"]
    assert "gap: cs.CL on 11-24: feed stale, recovered through OAI-PMH" in second.stdout
    assert "gap: cs.CL on 11-24: feed stale, recovered through OAI-PMH" in status


@pytest.mark.slow
def test_the_ids_of_evenings_the_api_search_read_are_not_given_as_zero(tmp_path, cli):
    """OAI-PMH off, weekly runs on Monday morning in Beijing (Saturday's feed, empty): the API
    search read every evening, and the digest said 'cs: 4/4, ids 0 new · 0 cross · 0 replaced'
    and status '0 matched the query' beside the papers it read. The search returns only the
    papers that match the query: the line says the ids were not counted, status counts the
    matches, and where a feed read some evenings, the ids are those evenings'."""
    papers = [relevant(1, ("cs.LG",), day=datetime(2026, 11, 23, 15, tzinfo=UTC)),
              relevant(2, ("cs.LG",), day=datetime(2026, 11, 24, 15, tzinfo=UTC))]
    lines = {}
    for case in ("weekly", "tuesday"):
        folder = tmp_path / case
        folder.mkdir()
        with ArxivServer(papers[:1]) as server:
            config = config_for(folder, server, cats=["cs.LG"], api=True, lookback=7)
            if case == "tuesday":  # Monday evening's batch read from its feed
                collect(cli, config, TUESDAY)
            server.add(papers[1])
            server.script("/rss/", EMPTY)
            cli("--config", str(config), "run", "--as-of", "2026-11-30T08:00:00+08:00")
            status = cli("--config", str(config), "status").stdout
        digest = " ".join((folder / "out" / "digests" / "2026-11-30.md").read_text(encoding="utf-8").split())
        lines[case] = (digest, status)
    digest, status = lines["weekly"]
    assert ("4/4 arXiv announcements read (11-22 → 11-25); cs: 4/4, ids not counted (the API search reads "
            "only the papers that match the query), 2 relevant;") in digest, digest
    assert "cs：4/4，未计 id（API 检索只读与检索式匹配的论文），相关 2；" in digest, digest
    assert "ids 0 new" not in digest and "新 0" not in digest
    assert ("cs: 4/4 read, ids not counted (the API search reads only the papers that match the query), "
            "2 matched the query") in status, status
    digest, status = lines["tuesday"]
    assert ("cs: 4/4, ids 1 new · 0 cross · 0 replaced in 1 of 4 (the API search, which read the rest, "
            "reads only the papers that match the query), 2 relevant;") in digest, digest
    assert "cs：4/4，新 1 · 交叉 0 · 替换 0（4 次中的 1 次：其余经 API 检索补读，它只读与检索式匹配的论文），相关 2；" \
        in digest, digest


def test_a_back_dated_run_does_not_wait_for_a_feed_that_moved_past_its_announcement(tmp_path, cli):
    """Collected Tuesday and Wednesday, then Tuesday's missed digest made on Wednesday: the
    feed carries only Wednesday's batch, so it is not polled for Monday's (sources.rss.
    poll_minutes) nor called stale; the coverage keeps what Tuesday's collect read."""
    with ArxivServer([relevant(1, ("cs.LG",))]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"], api=True,
                            poll_minutes=0.2, poll_interval_minutes=0.005)
        collect(cli, config, TUESDAY)
        server.add(relevant(2, ("cs.LG",), day=datetime(2026, 11, 24, 15, tzinfo=UTC)))
        collect(cli, config, "2026-11-25T14:00:00+00:00")
        before = len([r for r in server.requests if r.path.startswith("/rss/")])
        late = cli("--config", str(config), "run", "--as-of", TUESDAY, "--no-email")
        feeds = len([r for r in server.requests if r.path.startswith("/rss/")]) - before
        status = cli("--config", str(config), "status").stdout
    digest = (tmp_path / "out" / "digests" / "2026-11-24.md").read_text(encoding="utf-8")
    assert feeds == 0
    assert "not yet rebuilt" not in late.stderr and "stale" not in late.stderr + digest
    assert "1/1 arXiv announcements read (11-23 → 11-23)" in digest
    assert "RSS not read for cs.LG: the feed was read for a later announcement than 11-23's" in status



@pytest.mark.slow
def test_a_back_dated_digest_after_downtime_reads_its_evening_not_todays_feed(tmp_path, cli):
    """Down from 10-30 to December, then Monday 11-09's digest made by hand: the feed, never read
    since, carries the 11-30 batch. It was read as Sunday 11-08's: the ledger had that evening
    read ('1/1 arXiv announcements read (11-08 → 11-08); ids 1 new', the id of 11-30), the
    catch-up never harvested it, and its paper was lost. The present run reads the feed after."""
    before = relevant(1, ("cs.LG",), day=datetime(2026, 10, 29, 15, tzinfo=UTC))
    sunday = relevant(2, ("cs.LG",), day=datetime(2026, 11, 6, 15, tzinfo=UTC))  # Fri 10:00 ET: Sunday's
    today = relevant(3, ("cs.LG",), day=datetime(2026, 11, 30, 15, tzinfo=UTC))  # Monday 11-30's
    with ArxivServer([before], announced=datetime(2026, 10, 30, tzinfo=EASTERN)) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"], oai=True, api=True)
        collect(cli, config, "2026-10-30T14:00:00+00:00")
        server.papers, server.announced = [today], datetime(2026, 12, 1, tzinfo=EASTERN)
        server.freeze("cs.LG")  # the feed holds 11-30's batch alone; OAI-PMH has every paper
        server.papers = [before, sunday, today]
        cli("--config", str(config), "run", "--as-of", "2026-11-09", "--no-email")
        kept, status = stored_ids(tmp_path), cli("--config", str(config), "status").stdout
        collect(cli, config, "2026-12-01T14:00:00+00:00")
    digest = " ".join((tmp_path / "out" / "digests" / "2026-11-09.md").read_text(encoding="utf-8").split())
    assert kept == {"2611.00001", "2611.00002"}
    assert "cs.LG on 11-08: not collected, recovered through OAI-PMH" in digest, digest
    assert "RSS not read for cs.LG: the feed carries a later announcement (dated 12-01) than 11-08's" in status
    assert "2611.00003" in stored_ids(tmp_path)

def test_an_evening_before_every_collect_s_window_is_before_the_first_collect_and_not_retried():
    """A digest made by hand whose window starts before the first collect's: the evening no
    collect looked for was 'not collected, NOT recovered … (the next run tries again)'."""
    ledger = coverage.Ledger()
    for day in (17, 18):
        ledger.get(date(2026, 11, day), "cs.LG").read = "RSS"
    ledger.get(date(2026, 11, 19), "cs.LG").gap = "not collected"  # in a window: tried again
    window = (datetime(2026, 11, 12, 12, tzinfo=UTC), datetime(2026, 11, 21, 12, tzinfo=UTC))
    found = asdict(coverage.summarise(ledger, load_calendar(), ["cs.LG"], *window))
    assert [(g["day"], g["cause"], g["since"]) for g in found["gaps"]] == [
        ("11-12 → 11-16 (3 announcements)", "before the first collect", "2026-11-12"),
        ("11-19", "not collected", "")]
    lines = {lang: templating.text_env(languages=("zh", "en")).from_string(
        '{% import "partials/labels.j2" as lab %}{{ lab.coverage_in(c, lang) }}').render(c={**found, "relevant": {}},
                                                                                        lang=lang)
        for lang in ("en", "zh")}
    assert ("cs.LG on 11-12 → 11-16 (3 announcements): before the first collect, NOT recovered: papers "
            "announced that day may be missing from this digest (no later run reads it; rl-digest collect "
            "--since 2026-11-12 does); cs.LG on 11-19: not collected, NOT recovered: papers announced that "
            "day may be missing from this digest (the next run tries again)") in lines["en"], lines
    assert ("（下次运行会再试；11-12 → 11-16 早于首次采集，之后的运行不会再读，rl-digest collect --since "
            "2026-11-12 可补读）") in lines["zh"], lines


@pytest.mark.slow
def test_an_evening_before_the_first_collect_s_window_says_only_collect_since_reads_it(tmp_path, cli):
    """The first collect on 11-24 (lookback_days 7), then 11-23's digest made by hand: its window
    starts with 11-16's evening, a day before the collect's did. The digest said 'cs.LG on 11-16:
    not collected, NOT recovered … (the next run tries again)': no run ever looked for it, nor
    would; collect --since does."""
    with ArxivServer([relevant(1, ("cs.LG",))]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"], oai=True, lookback=7)
        collect(cli, config, "2026-11-24")
        cli("--config", str(config), "run", "--as-of", "2026-11-23", "--no-email")
        again = cli("--config", str(config), "collect", "--as-of", "2026-11-24", "--since", "2026-11-16")
    digest = " ".join((tmp_path / "out" / "digests" / "2026-11-23.md").read_text(encoding="utf-8").split())
    assert ("cs.LG on 11-16: before the first collect, NOT recovered: papers announced that day may be "
            "missing from this digest (no later run reads it; rl-digest collect --since 2026-11-16 does)"
            ) in digest, digest
    assert ("未补回的 1 处（11-16）：当天发布的论文可能不在本期（11-16 早于首次采集，之后的运行不会再读，"
            "rl-digest collect --since 2026-11-16 可补读）") in digest, digest
    assert "gap: cs.LG on 11-15 → 11-16 (2 announcements): not collected, recovered through OAI-PMH" \
        in again.stdout, again.stdout


def labelled_gap() -> tuple[list[Paper], set[str]]:
    """The labelled rows of tests/data, submitted one by one over three weeks of downtime."""
    rows = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines()]
    start = datetime(2026, 11, 2, 12, tzinfo=UTC)
    papers = [Paper(id=f"2611.{n + 100:05d}", title=row["title"], abstract=row["abstract"],
                    authors=tuple(row["authors"]), categories=tuple(row["categories"]),
                    submitted=start + timedelta(hours=3 * n), updated=start + timedelta(hours=3 * n))
              for n, row in enumerate(rows)]
    positives = {p.id for p, row in zip(papers, rows, strict=True) if row["label"] == 1}
    return papers, positives


def test_an_evening_oai_pmh_recovered_counts_its_ids_as_the_feed_would(tmp_path, cli):
    """A stale feed's evening recovered through OAI-PMH said 'ids 5 new · 0 cross' where the
    feed said '3 new · 1 cross': a paper cross-listed to cs.LG counted as new, and one in both
    sets of the feed (cs.LG+cs.CL) counted twice. arXivRaw lists the primary category first.
    Read again (collect --since, the feed still stale), the evening's ids were added to those
    of the first reading: 'ids 6 new · 2 cross, 6 matched the query'; read again with OAI-PMH
    off, the API search marked it as its own: 'ids not counted'."""
    papers = [relevant(1, ("cs.LG",)), relevant(2, ("cs.CL", "cs.LG")), relevant(3, ("cs.CV", "cs.LG")),
              noise(4, ("cs.LG",))]
    lines = {}
    for how in ("RSS", "OAI-PMH"):
        folder = tmp_path / how
        folder.mkdir()
        with ArxivServer(papers) as server:
            config = config_for(folder, server, cats=["cs.LG", "cs.CL"], oai=True, categories_per_feed=2)
            if how == "OAI-PMH":
                server.script("/rss/", EMPTY, EMPTY)
            lines[how] = collect(cli, config, TUESDAY).stdout
            if how == "OAI-PMH":
                lines["again"] = cli("--config", str(config), "collect", "--as-of", TUESDAY,
                                     "--since", "2026-11-23T12:00:00+00:00").stdout
                config = config_for(folder, server, cats=["cs.LG", "cs.CL"], api=True, categories_per_feed=2)
                lines["searched"] = cli("--config", str(config), "collect", "--as-of", TUESDAY,
                                        "--since", "2026-11-23T12:00:00+00:00").stdout
    assert "cs: 1/1 read, ids 3 new · 1 cross · 0 replaced, 3 matched the query" in lines["RSS"], lines
    assert "cs: 1/1 read, ids 3 new · 1 cross · 0 replaced, 3 matched the query" in lines["OAI-PMH"], lines
    assert "feed stale, recovered through OAI-PMH" in lines["OAI-PMH"]
    assert "cs: 1/1 read, ids 3 new · 1 cross · 0 replaced, 3 matched the query" in lines["again"], lines
    # read again with OAI-PMH off, the API search took over the evening: 'ids not counted'
    assert "cs: 1/1 read, ids 3 new · 1 cross · 0 replaced, 3 matched the query" in lines["searched"], lines
    assert "feed stale, recovered through OAI-PMH" in lines["searched"], lines


def test_a_paper_two_feeds_of_an_archive_list_matched_the_query_once(tmp_path, cli):
    """With a feed per category (the default), a paper in cs.LG and cs.CL matched once per
    feed, here cs.LG's read by its feed and cs.CL's through OAI-PMH: '4 matched the query' for
    3 papers. Each feed still counts the ids it lists: paper 2 is cross in cs.LG, new in cs.CL."""
    papers = [relevant(1, ("cs.LG",)), relevant(2, ("cs.CL", "cs.LG")), relevant(3, ("cs.CV", "cs.LG")),
              noise(4, ("cs.LG",))]
    with ArxivServer(papers) as server:
        config = config_for(tmp_path, server, cats=["cs.LG", "cs.CL"], oai=True)
        server.script("/rss/cs.CL", EMPTY)
        out = collect(cli, config, TUESDAY).stdout
    assert "cs: 1/1 read, ids 3 new · 2 cross · 0 replaced, 3 matched the query" in out, out
    assert "gap: cs.CL on 11-23: feed stale, recovered through OAI-PMH" in out, out


@pytest.mark.slow
def test_three_weeks_of_downtime_are_caught_up_through_oai_pmh(tmp_path, cli):
    papers, positives = labelled_gap()
    with ArxivServer(papers) as server:
        server.oai_page_size = 7  # several pages: resumption tokens are followed
        # the digest's window reaches back to the start of the gap (no digest before it)
        config = config_for(tmp_path, server, oai=True, lookback=22)
        server.script("/rss/", *[EMPTY] * 40)
        collect(cli, config, "2026-10-30T14:00:00+00:00")  # the last collect before the gap
        server.add(relevant(999, ("cs.LG",), day=datetime(2026, 11, 23, 15, tzinfo=UTC)))  # Monday's batch
        server.script("/oai", http_error(503, retry_after=0))
        result = cli("--config", str(config), "run", "--as-of", "2026-11-24T14:00:00+00:00",
                     "--no-email")
        digest = (tmp_path / "out" / "digests" / "2026-11-24.md").read_text(encoding="utf-8")
        tokens = [r for r in server.requests if "resumptionToken" in r.query]
    found = stored_ids(tmp_path) & positives
    assert len(found) / len(positives) >= 0.95
    assert tokens
    assert "17 feeds on 11-02 → 11-22 (15 announcements): not collected, recovered through OAI-PMH" in digest
    assert "17 feeds on 11-23: feed stale, recovered through OAI-PMH" in digest
    assert "NOT recovered" not in result.stdout + digest


def test_the_calendar_knows_2026_and_daylight_saving():
    cal = load_calendar()
    week = cal.between(datetime(2026, 11, 22, tzinfo=UTC), datetime(2026, 11, 29, tzinfo=UTC))
    assert [a.day for a in week] == [date(2026, 11, d) for d in (22, 23, 24, 25)]  # Thanksgiving: none
    assert cal.at(date(2026, 7, 1)).at.astimezone(UTC).hour == 0  # 20:00 EDT
    assert cal.at(date(2026, 12, 1)).at.astimezone(UTC).hour == 1  # 20:00 EST
    assert cal.unknown_years(datetime(2026, 12, 30, tzinfo=UTC), datetime(2027, 1, 5, tzinfo=UTC)) == [2027]


def test_a_user_calendar_file_extends_it_to_2027(tmp_path):
    extra = tmp_path / "arxiv-2027.yaml"
    extra.write_text("years: [2027]\nno_announcement:\n  2027-01-18: Martin Luther King Jr. Day\n")
    cal = load_calendar([extra])
    assert not cal.announces(date(2027, 1, 18)) and cal.announces(date(2027, 1, 19))
    assert cal.unknown_years(datetime(2027, 1, 1, tzinfo=UTC), datetime(2027, 2, 1, tzinfo=UTC)) == []


def test_a_year_the_calendar_lacks_is_asked_for_once_one_of_its_evenings_is_due():
    """2027 is not known: the collect on New Year's Day (14:00 in Beijing) and the Monday run
    of 01-04 (08:00 in Beijing, Sunday evening in New York) asked for a 2027 file, though
    neither reads a 2027 evening (the first is 01-03, read from the next midnight on): the
    window's dates reached 2027. The collect that reads 01-03 asks."""
    cal = load_calendar()
    beijing = ZoneInfo("Asia/Shanghai")

    def asks(start: str, end: str) -> list[int]:
        return cal.unknown_years(datetime.fromisoformat(start).replace(tzinfo=beijing),
                                 datetime.fromisoformat(end).replace(tzinfo=beijing))

    assert asks("2026-12-31T14:00", "2027-01-01T14:00") == []  # New Year's Day collect
    assert asks("2026-12-28T08:00", "2027-01-04T08:00") == []  # the Monday run
    assert asks("2027-01-01T14:00", "2027-01-04T14:00") == [2027]  # reads Sunday 01-03's batch
    assert asks("2025-12-26T14:00", "2026-01-02T14:00") == [2025]  # 12-28 → 12-30 of 2025


@pytest.mark.parametrize(("text", "says"), [
    ("years: 2027\nno_announcement:\n  2027-01-18: Martin Luther King Jr. Day\n",
     "arxiv-2027.yaml: years lists the years whose holidays the file gives, e.g. [2027]"),
    ("years: [twenty-seven]\n", "arxiv-2027.yaml: years lists the years"),
    ("years: [2027]\ntimezone:\n", "arXiv calendar: timezone, time (HH:MM) and weekdays are needed"),
    ("years: [2027]\nno_announcement:\n  2027-01-18 00:00:00: Martin Luther King Jr. Day\n",
     "arxiv-2027.yaml: no_announcement: 2027-01-18 00:00:00 is not a date (YYYY-MM-DD)"),
    # a day no month has: 'unexpected error: ValueError: month must be in 1..12', exit 1
    ("years: [2027]\nno_announcement:\n  2027-13-01: Martin Luther King Jr. Day\n",
     "arxiv-2027.yaml: cannot read the arXiv calendar (month must be in 1..12)"),
    (None, "arxiv-2027.yaml: cannot read the arXiv calendar (No such file or directory)"),
])
def test_a_calendar_file_of_the_wrong_shape_is_exit_2_in_one_line(tmp_path, cli, text, says):
    """The 2027 file a user writes in January: `years: 2027` (no list) was 'unexpected error:
    TypeError: 'int' object is not iterable', exit 1, naming no file. config check refuses it
    too (it said ok)."""
    if text is not None:
        (tmp_path / "arxiv-2027.yaml").write_text(text, encoding="utf-8")
    with ArxivServer() as server:
        config = config_for(tmp_path, server, cats=["cs.LG"])
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        data["sources"]["arxiv"]["calendar_files"] = ["arxiv-2027.yaml"]
        config.write_text(yaml.safe_dump(data), encoding="utf-8")
        result = collect(cli, config, TUESDAY, check=2)
        checked = cli("--config", str(config), "config", "check", check=2)
    assert says in result.stderr and "unexpected" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert checked.stderr.splitlines() == [
        f"rl-digest: {config}: sources.arxiv.calendar_files: {result.stderr.removeprefix('rl-digest: ').strip()}"]


@pytest.mark.parametrize(("text", "says"), [
    ("years: ['²']\n", "{path}: years lists the years whose holidays the file gives"),
    ("time: '25:00'\n", "arXiv calendar: timezone, time (HH:MM) and weekdays are needed "
                        "(hour must be in 0..23)"),
], ids=["year-int-cannot-read", "hour-25"])
def test_a_calendar_value_python_refuses_late_is_a_config_error(tmp_path, text, says):
    """Found by fuzzing: both passed the file's checks, then every command said 'unexpected
    error: ValueError' (invalid literal for int(); hour must be in 0..23)."""
    path = tmp_path / "arxiv-2027.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_calendar([path])
    assert str(caught.value).startswith(says.format(path=path))


def test_a_calendar_day_written_without_a_reason_is_a_plain_holiday(tmp_path, cli):
    """`2025-11-27:` alone in a user's file read as the holiday 'None': 'no announcement
    expected: 11-27 is an arXiv holiday (None)'."""
    (tmp_path / "arxiv-2025.yaml").write_text("years: [2025]\nno_announcement:\n  2025-11-27:\n",
                                              encoding="utf-8")
    with ArxivServer([]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"])
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        data["sources"]["arxiv"]["calendar_files"] = ["arxiv-2025.yaml"]
        config.write_text(yaml.safe_dump(data), encoding="utf-8")
        server.script("/rss/", EMPTY)
        result = collect(cli, config, "2025-11-28T14:00:00+00:00")
    assert "no announcement expected: 11-27 is an arXiv holiday\n" in result.stdout, result.stdout
    assert "None" not in result.stdout and "WARNING" not in result.stderr, result.stderr


def test_a_collect_into_a_year_the_calendar_lacks_says_what_to_add_where(tmp_path, cli):
    """The bundled calendar knows 2026: a window reaching back into 2025 warns once, naming
    the year, the file's key and README's section, as doctor does (it said only 'add a
    file to sources.arxiv.calendar_files', with no word of which file or what is in it)."""
    with ArxivServer([relevant(1, ("cs.LG",), day=datetime(2025, 12, 31, 15, tzinfo=UTC))]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"], lookback=7)
        result = collect(cli, config, "2026-01-02T14:00:00+00:00")
    warnings = [line for line in result.stderr.splitlines() if "holidays for" in line]
    assert len(warnings) == 1, result.stderr
    assert warnings[0].endswith("arXiv's holidays for 2025 are not known (known: 2026): a holiday evening "
                                "looks like a stale feed; add a file for 2025 (years: [2025] and its "
                                "no_announcement days) to sources.arxiv.calendar_files (README: The calendar)"), warnings


def test_a_digest_says_a_day_not_recovered_in_a_year_the_calendar_lacks_may_be_a_holiday(tmp_path, cli):
    """2025 is not in the bundled calendar: an empty feed on a Monday evening arXiv may have
    skipped is a gap, and the digest told its readers papers 'may be missing', in either
    language, without a word that the calendar cannot tell a holiday that year."""
    paper = replace(relevant(1, ("cs.LG",), day=datetime(2025, 11, 24, 15, tzinfo=UTC)), id="2511.00001")
    with ArxivServer([paper]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG", "cs.CL"])  # the cs.CL feed is empty
        cli("--config", str(config), "run", "--as-of", "2025-11-25T14:00:00+00:00")
    digest = " ".join((tmp_path / "out" / "digests" / "2025-11-25.md").read_text(encoding="utf-8").split())
    assert "cs.CL on 11-24: feed stale, NOT recovered" in digest
    assert ("; arXiv's holidays for 2025 are not in the calendar yet: a day NOT recovered may be a "
            "holiday") in digest
    assert "（11-24）：当天发布的论文可能不在本期（下次运行会再试）；日历尚未收录 2025 年的 arXiv 假期：" \
           "未补回的那天也可能是假期" in digest


def test_a_calendar_file_without_years_leaves_its_days_year_unknown(tmp_path, cli):
    """A file that gives Thanksgiving 2025 but no `years` made all of 2025 known: the Monday
    evening whose feed stayed empty no longer 'may be a holiday' in the digest, and no
    collect warned. A year is known when a file lists it in `years` (README: The calendar)."""
    (tmp_path / "arxiv-2025.yaml").write_text("no_announcement:\n  2025-11-27: Thanksgiving\n",
                                              encoding="utf-8")
    paper = replace(relevant(1, ("cs.LG",), day=datetime(2025, 11, 24, 15, tzinfo=UTC)), id="2511.00001")
    with ArxivServer([paper]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG", "cs.CL"])  # the cs.CL feed is empty
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        data["sources"]["arxiv"]["calendar_files"] = ["arxiv-2025.yaml"]
        config.write_text(yaml.safe_dump(data), encoding="utf-8")
        result = cli("--config", str(config), "run", "--as-of", "2025-11-25T14:00:00+00:00")
    digest = " ".join((tmp_path / "out" / "digests" / "2025-11-25.md").read_text(encoding="utf-8").split())
    assert "cs.CL on 11-24: feed stale, NOT recovered" in digest
    assert "arXiv's holidays for 2025 are not in the calendar yet: a day NOT recovered may be a holiday" in digest
    assert "arXiv's holidays for 2025 are not known" in result.stderr
    assert load_calendar([tmp_path / "arxiv-2025.yaml"]).years == {2026}  # the bundled file's
    (tmp_path / "arxiv-2025.yaml").write_text("years: [2025]\n", encoding="utf-8")
    assert load_calendar([tmp_path / "arxiv-2025.yaml"]).years == {2025, 2026}


def test_a_quiet_evening_in_a_year_the_calendar_lacks_is_read_once_not_polled(tmp_path, cli):
    """Thanksgiving 2025 (a Thursday) is in no calendar file: every feed was empty the next
    morning, and a collect polled each for sources.rss.poll_minutes (90 by default) for a
    batch arXiv never announced, then warned 'stale feed' and 'OAI-PMH has nothing yet' once
    a feed. Now each feed is read once, one line says why, and the next collect's catch-up
    settles the day."""
    with ArxivServer([]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG", "cs.CL"], oai=True,
                            poll_minutes=0.2, poll_interval_minutes=0.005)
        friday = collect(cli, config, "2025-11-28T14:00:00+00:00")
        feeds = [r for r in server.requests if r.path.startswith("/rss/")]
        server.add(relevant(1, ("cs.LG", "cs.CL"), day=datetime(2025, 12, 1, 15, tzinfo=UTC)))
        collect(cli, config, "2025-12-02T14:00:00+00:00")
    conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
    (ledger,) = conn.execute("SELECT value FROM state WHERE key = 'coverage.ledger'").fetchone()
    thursday = json.loads(ledger)["2025-11-27"]
    assert len(feeds) == 2, [r.path for r in feeds]  # each feed once, no polling
    warnings = [line for line in friday.stderr.splitlines() if "WARNING" in line]
    assert "not yet rebuilt" not in friday.stderr and "stale feed:" not in friday.stderr
    assert sum("RSS: 2 feeds show nothing new for the 2025-11-27 announcement; arXiv's holidays "
               "for 2025 are not known, so it may be one: read once, not polled" in w for w in warnings) == 1
    assert sum("2 feeds (cs.LG, cs.CL): OAI-PMH has nothing yet for 11-27" in w for w in warnings) == 1
    assert len(warnings) == 3, warnings  # and the calendar's own: which year's file to add
    assert "gap: 2 feeds on 11-27: feed stale or a holiday, NOT recovered yet" in friday.stdout
    assert {group: (r["gap"], r["recovered"]) for group, r in thursday.items()} == {
        "cs.LG": ("feed stale or a holiday", "OAI-PMH"), "cs.CL": ("feed stale or a holiday", "OAI-PMH")}


def test_an_evening_no_feed_showed_in_a_year_the_calendar_lacks_is_not_called_an_announcement(tmp_path, cli):
    """2025's holidays are not in the calendar, and a weekly run on Monday morning in Beijing
    reads no feed of the week (Saturday's is empty): the API search read every evening, and
    the digest said '5/5 arXiv announcements read (11-23 → 11-27)', Thanksgiving (11-27)
    among them, though arXiv announced nothing that evening. It is not knowable without the
    calendar: the digest says which evenings no feed showed and that they may have been
    holidays, and calls no gap."""
    papers = [replace(relevant(n, ("cs.LG",), day=datetime(2025, 11, 20 + n, 15, tzinfo=UTC)), id=f"2511.0000{n}")
              for n in (3, 4, 5)]  # the Sunday, Monday and Tuesday evenings'
    with ArxivServer(papers) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"], api=True, lookback=7)
        server.script("/rss/", EMPTY)
        cli("--config", str(config), "run", "--as-of", "2025-12-01T08:00:00+08:00")
        status = cli("--config", str(config), "status").stdout
    digest = " ".join((tmp_path / "out" / "digests" / "2025-12-01.md").read_text(encoding="utf-8").split())
    assert "5/5 expected arXiv announcements read (11-23 → 11-27);" in digest, digest
    assert ("; no feed showed these evenings and arXiv's holidays for 2025 are not in the calendar: any of "
            "them may have been a holiday, with nothing announced;") in digest, digest
    assert "已读 5/5 次预期的 arXiv 发布（11-23 → 11-27）" in digest, digest
    assert "；这几天没有 RSS 显示发布，日历也尚未收录 2025 年的 arXiv 假期：其中可能有假期，并无发布；" in digest
    assert "NOT recovered" not in digest and "未补回" not in digest
    assert "; cs.LG on 11-23 → 11-27 (5 evenings): before the first collect, recovered through the API search" \
        in digest, digest
    assert "coverage: 5 of 5 expected arXiv announcements read (11-23 → 11-27)" in status, status
    assert "gap: cs.LG on 11-23 → 11-27 (5 evenings): before the first collect" in status, status
    assert ("no feed showed these evenings and arXiv's holidays for 2025 are not in the calendar: any of "
            "them may have been a holiday, with nothing announced") in status


def test_an_evening_every_feed_showed_nothing_for_is_named_beside_those_read():
    """Weekday collects: the feeds read 01-17 and 01-19 of 2027, a year the calendar lacks, and
    showed nothing new for 01-18 (Martin Luther King Jr. Day), which the catch-up then read:
    the summary counted it as an announcement read. It is named as one that may have been a
    holiday; an evening a feed showed stays an announcement."""
    cal, ledger = load_calendar(), coverage.Ledger()
    for day in (date(2027, 1, 17), date(2027, 1, 19)):
        for group in ("cs.LG", "cs.CL"):
            ledger.get(day, group).read = "RSS"
    for group in ("cs.LG", "cs.CL"):
        quiet = ledger.get(date(2027, 1, 18), group)
        quiet.gap, quiet.recovered = "feed stale or a holiday", "the API search"
    stale = ledger.get(date(2027, 1, 20), "cs.CL")  # one feed late, the other showed the batch
    stale.gap, stale.recovered = "feed stale", "the API search"
    ledger.get(date(2027, 1, 20), "cs.LG").read = "RSS"
    window = (datetime(2027, 1, 17, 12, tzinfo=UTC), datetime(2027, 1, 21, 12, tzinfo=UTC))
    summary = coverage.summarise(ledger, cal, ["cs.LG", "cs.CL"], *window)
    assert (summary.expected, summary.read) == (4, 4)
    assert (summary.unsure, summary.unsure_years) == (("01-18",), (2027,))


def test_a_gap_s_span_counts_as_announcements_only_the_evenings_known_to_be_ones():
    """A span of evenings the API search read, the last three in 2027, a year the calendar
    lacks, which no feed showed: the gap said '12-27 → 01-05 (6 announcements)' beside the
    line's words that those of 2027 may have been holidays, with nothing announced."""
    cal, ledger = load_calendar(), coverage.Ledger()
    window = (datetime(2026, 12, 27, 12, tzinfo=UTC), datetime(2027, 1, 6, 12, tzinfo=UTC))
    for day in ("2026-12-27", "2026-12-28", "2026-12-30", "2027-01-03", "2027-01-04", "2027-01-05"):
        for group in ("cs.LG", "cs.CL"):
            reading = ledger.get(date.fromisoformat(day), group)
            reading.gap, reading.recovered = "not collected", "the API search"
    summary = coverage.summarise(ledger, cal, ["cs.LG", "cs.CL"], *window)
    assert summary.unsure == ("01-03", "01-04", "01-05")
    assert [gap.day for gap in summary.gaps] == [
        "12-27 → 01-05 (3 announcements, 3 evenings that may have been holidays)"]
    for day in ("2026-12-27", "2026-12-28", "2027-01-04", "2027-01-05"):  # the feeds showed these
        ledger.days[day] = {group: coverage.Reading(read="RSS") for group in ("cs.LG", "cs.CL")}
    spans = [gap.day for gap in coverage.summarise(ledger, cal, ["cs.LG", "cs.CL"], *window).gaps]
    assert spans == ["12-30 → 01-03 (1 announcement, 1 evening that may have been a holiday)"], spans


@pytest.mark.slow
def test_a_late_feed_in_a_year_the_calendar_lacks_is_still_polled(tmp_path, cli):
    """The cs.LG feed shows the 2025-11-27 batch, so arXiv announced that evening: the
    empty cs.CL feed is late, polled for sources.rss.poll_minutes and warned as stale."""
    with ArxivServer([relevant(1, ("cs.LG",), day=datetime(2025, 11, 27, 15, tzinfo=UTC))]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG", "cs.CL"],
                            poll_minutes=0.05, poll_interval_minutes=0.002)
        result = collect(cli, config, "2025-11-28T14:00:00+00:00")
        cl_reads = [r for r in server.requests if r.path == "/rss/cs.CL"]
    assert len(cl_reads) >= 2
    assert "RSS: cs.CL not yet rebuilt for the 2025-11-27 announcement" in result.stderr
    assert "stale feed: cs.CL is empty although arXiv announced on 2025-11-27" in result.stderr
    assert "may be one" not in result.stderr


def test_status_lists_the_sources_read_not_the_calendar_as_one(tmp_path, cli):
    """A collect into a year the calendar lacks keeps its warning under the report key
    'calendar'; status listed it among the sources ('calendar: 0 requests, 0 seen, 0 new,
    ...') on every collect of that year."""
    with ArxivServer([relevant(1, ("cs.LG",), day=datetime(2025, 12, 31, 15, tzinfo=UTC))]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"], lookback=7)
        collect(cli, config, "2026-01-02T14:00:00+00:00")
        status = cli("--config", str(config), "status").stdout
    run = next(line for line in status.splitlines() if " collect as of " in line)
    assert "rss: 1 requests" in run and "calendar" not in run, run
    assert "    warning: arXiv's holidays for 2025 are not known" in status, status


def test_status_gives_the_calendar_advice_once_and_not_once_followed(tmp_path, cli):
    """Each collect into a year the calendar lacks warns, and status repeated the advice on
    every such collect of its recent runs (four times in a January of weekday collects); with
    the year's file added, doctor's calendar row read OK while status still told the user to
    add it. Now status gives it once, on the newest run that did, until the year is known."""
    with ArxivServer([relevant(1, ("cs.LG",), day=datetime(2025, 12, 24, 15, tzinfo=UTC))]) as server:
        config = config_for(tmp_path, server, cats=["cs.LG"], lookback=7)
        for day in ("2025-12-29", "2025-12-30", "2025-12-31"):
            collect(cli, config, f"{day}T14:00:00+00:00")
        status = cli("--config", str(config), "status").stdout
        (tmp_path / "arxiv-2025.yaml").write_text("years: [2025]\nno_announcement:\n  2025-12-25: Christmas\n",
                                                  encoding="utf-8")
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        data["sources"]["arxiv"]["calendar_files"] = ["arxiv-2025.yaml"]
        config.write_text(yaml.safe_dump(data), encoding="utf-8")
        known = cli("--config", str(config), "status").stdout
    advice = [line for line in status.splitlines() if "add a file for 2025" in line]
    assert len(advice) == 1, status
    newest = status.splitlines().index(advice[0])
    assert " collect as of 2025-12-31T" in next(line for line in status.splitlines()[newest::-1]
                                                if line.startswith("  #")), status
    assert "add a file for 2025" not in known, known
    assert known.count(" collect as of 2025-12-") == 3, known  # the runs are still listed


def test_feed_order_and_cap_match_arxiv():
    with ArxivServer([replace(noise(n, ("cs.LG",)), announce_type="replace") for n in range(1500)]
                     + [noise(n, ("cs.LG",)) for n in range(1500, 2200)]) as server:
        import requests

        body = requests.get(server.rss_url(["cs.LG"]), timeout=10).text
    assert body.count("<item>") == 2000
    kinds = [line.strip() for line in body.splitlines() if "<arxiv:announce_type>" in line]
    assert kinds[0] == "<arxiv:announce_type>new</arxiv:announce_type>"
    assert kinds.count("<arxiv:announce_type>new</arxiv:announce_type>") == 700  # new first, replacements cut


def test_status_names_a_day_of_stale_feeds_once_and_briefly(tmp_path, cli):
    """Every category's feed frozen warns once per feed: status lists a run's first five,
    counts the rest, and does not repeat under the publish what its collect said."""
    cats = [c for c in DEFAULT_CATS if c.startswith("cs.")][:8]
    monday = datetime(2026, 11, 23, 15, tzinfo=UTC)
    with ArxivServer([relevant(n, (cat,), day=monday - timedelta(days=1))
                      for n, cat in enumerate(cats, 1)]) as server:
        config = config_for(tmp_path, server, cats=cats)
        collect(cli, config, TUESDAY)
        for cat in cats:
            server.freeze(cat)
        cli("--config", str(config), "run", "--as-of", "2026-11-25T14:00:00+00:00")
        status = cli("--config", str(config), "status").stdout
        whole = json.loads(cli("--config", str(config), "status", "--json").stdout)
    stale = [line for line in status.splitlines() if "warning: stale feed:" in line]
    assert len(stale) == 5, status
    assert status.count("… and 3 more warnings (rl-digest status --json lists them all)") == 1
    collected = next(r for r in whole["runs"] if r["kind"] == "collect")
    assert sum("stale feed:" in w for s in collected["report"]["sources"].values()
               for w in s["warnings"]) == len(cats)


def test_an_announcement_made_as_the_digest_goes_out_counts_next_week_not_as_a_gap():
    """Monday 08:00 in Beijing is Sunday 20:00 in New York in summer: the announcement of
    that minute reaches no feed before midnight, so the next digest counts it."""
    beijing, ledger = ZoneInfo("Asia/Shanghai"), coverage.Ledger()
    for day in (31, 1, 2, 3, 4):
        ledger.get(date(2026, 5 if day == 31 else 6, day), "cs.LG").read = "RSS"
    week = [datetime(2026, 6, d, 8, tzinfo=beijing) for d in (1, 8, 15)]
    first = coverage.summarise(ledger, load_calendar(), ["cs.LG"], week[0], week[1])
    assert (first.first, first.last, first.expected, first.read, first.gaps) == ("05-31", "06-04", 5, 5, ())
    ledger.get(date(2026, 6, 7), "cs.LG").read = "RSS"
    second = coverage.summarise(ledger, load_calendar(), ["cs.LG"], week[1], week[2])
    assert (second.first, second.expected) == ("06-07", 5)
    assert [g.day for g in second.gaps] == ["06-08 → 06-11 (4 announcements)"]  # not read here


def test_the_announcement_a_window_counts_is_one_collecting_looks_for():
    """A first run at Monday 08:00 in Beijing in summer starts at the very minute of
    Sunday's announcement (20:00 in New York): the header counts it in this window, so
    collecting must look for it too, or it reads as a gap nothing ever fills."""
    beijing = ZoneInfo("Asia/Shanghai")
    start, end = datetime(2026, 6, 1, 8, tzinfo=beijing), datetime(2026, 6, 8, 8, tzinfo=beijing)
    calendar = load_calendar()
    counted = coverage.summarise(coverage.Ledger(), calendar, ["cs.LG"], start, end)
    looked_for = coverage.Ledger().missed(calendar, ["cs.LG"], start, end)["cs.LG"]
    assert counted.first == "05-31" and looked_for[0] == date(2026, 5, 31)
    assert len(looked_for) == counted.expected == 5


def test_an_evening_one_feed_of_an_archive_read_gives_its_ids_beside_the_search_s_reading():
    """cs.LG's feed listed the evening's ids, cs.CL's was stale and the API search read it:
    the line said 'ids not counted', as if no feed had listed any, where it had said
    'ids 8 new'; the ids shown are those the feed counted, on the evenings a feed did."""
    beijing = ZoneInfo("Asia/Shanghai")
    start, end = datetime(2026, 6, 1, 8, tzinfo=beijing), datetime(2026, 6, 2, 20, tzinfo=beijing)
    read_by_feed = coverage.Reading(read="RSS", new=8, cross=2, replace=1, kept=3)
    stale = coverage.Reading(gap="feed stale", recovered="the API search", kept=1)
    ledger = coverage.Ledger({"2026-05-31": {"cs.LG": read_by_feed, "cs.CL": stale}})
    summary = coverage.summarise(ledger, load_calendar(), ["cs.LG", "cs.CL"], start, end)
    (cs,) = summary.groups
    assert (cs.read, cs.counted, cs.new, cs.cross, cs.replace) == (1, 1, 8, 2, 1)
    # a feed cut at arXiv's cap lists only some of the evening's ids: the search read the rest
    cut = coverage.Reading(read="RSS", new=2000, gap="feed cut at 2000 items", recovered="the API search",
                           kept=5)
    ledger.days["2026-05-31"]["cs.LG"] = cut
    (cs,) = coverage.summarise(ledger, load_calendar(), ["cs.LG", "cs.CL"], start, end).groups
    assert (cs.read, cs.counted, cs.new, cs.kept) == (1, 0, 0, 6)
    # the previous release's collect --since marked an evening its feed read whole as the
    # search's too: the feed's ids still count
    ledger.days["2026-05-31"]["cs.LG"] = replace(read_by_feed, recovered="the API search")
    (cs,) = coverage.summarise(ledger, load_calendar(), ["cs.LG", "cs.CL"], start, end).groups
    assert (cs.read, cs.counted, cs.new, cs.cross, cs.replace) == (1, 1, 8, 2, 1)


def test_a_gap_s_span_joins_only_announcements_next_to_each_other():
    """The same gap on 11-02 and 11-04, 11-03 read fine between them: the line read
    '11-02 → 11-04 (2 announcements)'. 11-05 and 11-08 (Thursday, Sunday) are next to each
    other; the Chinese line lists the days not recovered without the English counts."""
    from dataclasses import asdict

    from pipeline import render
    from tests import fixtures_digest as fx

    ledger = coverage.Ledger()
    for day in range(1, 12):
        ledger.get(date(2026, 11, day), "cs.LG").read = "RSS"
    for day in (2, 4, 5, 8, 10, 11):
        reading = ledger.get(date(2026, 11, day), "cs.LG")
        reading.gap, reading.recovered = "feed stale", ("the API search" if day < 8 else "")
    window = (datetime(2026, 11, 1, 12, tzinfo=UTC), datetime(2026, 11, 12, 12, tzinfo=UTC))
    summary = coverage.summarise(ledger, load_calendar(), ["cs.LG"], *window)
    assert [(gap.day, gap.recovered) for gap in summary.gaps] == [
        ("11-02, 11-04 → 11-05 (2 announcements)", "the API search"),
        ("11-08, 11-10 → 11-11 (2 announcements)", "")]
    ledger.get(date(2026, 11, 5), "cs.LG").recovered = ""
    summary = coverage.summarise(ledger, load_calendar(), ["cs.LG"], *window)
    assert [gap.day for gap in summary.gaps] == ["11-02, 11-04", "11-05 → 11-08 (2 announcements), 11-10 → 11-11 "
                                                                "(2 announcements)"]
    digest = replace(fx.digest(), coverage={**asdict(summary), "relevant": {}})
    text = render.digest_markdown(fx.config(), digest, 3)
    assert "; cs.LG on 11-02, 11-04: feed stale, recovered through the API search;" in text
    assert "未补回的 1 处（11-05 → 11-08、11-10 → 11-11）" in text


def test_the_catch_up_of_a_monday_reads_the_papers_sent_after_fridays_cutoff(tmp_path, cli):
    """arXiv announces on Monday what came in from Friday 14:00 to Monday 14:00 (New York), and
    on Sunday only Thursday 14:00 to Friday 14:00. Sunday's feed read, Monday's stale: the
    catch-up kept papers from a day before Sunday's announcement, Saturday 20:00, so those sent
    on Friday afternoon and Saturday were in no digest, and the calendar counted them under
    Sunday's announcement."""
    eastern = ZoneInfo("America/New_York")
    thursday, friday, saturday, monday = (
        replace(relevant(n, ("cs.LG",), day=datetime(2026, 11, d, h, tzinfo=eastern).astimezone(UTC)))
        for n, d, h in ((1, 19, 16), (2, 20, 16), (3, 21, 12), (4, 23, 10)))
    with ArxivServer([thursday]) as server:
        server.datestamps = {p.id: date(2026, 11, 23) for p in (friday, saturday, monday)}
        config = config_for(tmp_path, server, cats=["cs.LG"], oai=True)
        collect(cli, config, "2026-11-23T07:00:00+00:00")  # Monday 02:00 in New York: Sunday's feed
        server.freeze("cs.LG")  # the CDN keeps serving Sunday's feed on Tuesday
        server.add(friday, saturday, monday)
        tuesday = collect(cli, config, "2026-11-24T07:00:00+00:00")
    assert "cs.LG on 11-23: feed stale, recovered through OAI-PMH" in tuesday.stdout, tuesday.stdout
    assert "cs: 1/1 read, ids 3 new · 0 cross · 0 replaced, 3 matched the query" in tuesday.stdout
    assert {"2611.00001", "2611.00002", "2611.00003", "2611.00004"} <= stored_ids(tmp_path)
    cal = load_calendar()
    assert [cal.announced_on(p.submitted) for p in (thursday, friday, saturday, monday)] == [
        date(2026, 11, 22), date(2026, 11, 23), date(2026, 11, 23), date(2026, 11, 23)]
