"""A year of weekly use: how run time, database and out/ grow, and whether the digests stay right.

    RL_DIGEST_SHARED=../shared .venv/bin/python benchmarks/year.py [--weeks 52] [--readers 3] [--scale 1]
        [--outages] [--keep] [--probe FILE]

Users run rl-digest every week for years, so this drives the installed `rl-digest` (beside
sys.executable) as cron would: `collect` on Wednesday and Friday at 14:00 and `run` on Monday
at 08:00 (Asia/Shanghai, the default schedule), each with --as-of, for the weeks up to Monday
2026-11-30. The arXiv it reads is the tests' stand-in given a clock: the dev corpus (--scale
copies of it) is submitted evenly over the weeks and announced by arXiv's rules (14:00 New York
cutoff, Sunday to Thursday 20:00, holidays from the project's calendar, or written for years
it does not know); the API and OAI-PMH show what was announced by the last New York midnight,
the RSS feeds that evening's batch. 8 % of the labelled-relevant papers get a second version
weeks later. Summaries come from the local OpenAI stand-in, mail goes to --readers readers through
aiosmtpd; nothing leaves 127.0.0.1. --outages takes arXiv down for one week's commands and
SMTP for a later Monday's run.

The checks at the end: every announced paper the query matches was stored; every relevant
paper is in exactly one digest's paper list; each reader got each digest exactly once; one
digest per Monday that had something new to publish; no command failed outside an outage.
The script exits 1 when one fails; --keep leaves the folder to look into.

--probe FILE also times, after each Monday's run, what a reader or operator does between runs
(`status`, `readers`, `export --format bibtex`, `serve` loading the site's index, the newest
digest and the papers page) and counts each table's rows, each state/ file and each out/
folder, every fourth week and the last, one JSON line a week into FILE, and prints them as a
table: for the long horizons, what grows faster than the papers it keeps.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from datetime import time as clock
from pathlib import Path
from zoneinfo import ZoneInfo

import yaml
from _common import SRC, dev_rows, machine, table, write_config

from pipeline.calendar import Calendar, load_calendar
from pipeline.config import load
from pipeline.models import Paper
from pipeline.sources.arxiv_api import build_query
from tests.helpers import MEASURE_PEAK, ids_in
from tests.servers import oai_server
from tests.servers.arxiv_server import OAI_TYPE, ArxivServer, _listed, _sorted, _stamp, compile_query
from tests.servers.openai_server import OpenAIServer
from tests.servers.smtp_server import SmtpServer

LAST_MONDAY = date(2026, 11, 30)  # fixed, so every run simulates the same weeks and holidays
SHANGHAI = ZoneInfo("Asia/Shanghai")
CLI = Path(sys.executable).with_name("rl-digest")


# --- the simulated arXiv --------------------------------------------------------------------

@dataclass(frozen=True)
class Version:
    paper: Paper
    day: date  # the New York evening that announced it
    at: datetime  # that announcement, 20:00 New York


def timeline(rows: list[dict], cal: Calendar, start: datetime, end: datetime,
             categories: list[str]) -> list[list[Version]]:
    """Each paper's versions: the rows submitted evenly over (start, end) in shuffled order, plus
    one off-topic paper per category each evening (so no feed looks stale), ids in submission order."""
    rng = random.Random(7)
    rows = rows[:]
    rng.shuffle(rows)
    span = (end - start) / len(rows)
    drafts = [(start + span * (k + 0.5), row) for k, row in enumerate(rows)]
    day = cal.announced_on(start)
    while cal.at(day).at < end:
        deadline = cal.cutoff(day)
        drafts += [(deadline - timedelta(hours=1), {"title": f"Mesh simplification of point clouds ({cat})",
                                                    "abstract": "We simplify triangle meshes faster.",
                                                    "authors": ["Filler Author"], "categories": [cat]})
                   for cat in categories]
        day = cal.announced_on(deadline + timedelta(minutes=1))
    counters: Counter[str] = Counter()
    items = []
    for submitted, row in sorted(drafts, key=lambda draft: draft[0]):
        submitted = submitted.astimezone(UTC).replace(microsecond=0)
        month = f"{submitted:%y%m}"
        counters[month] += 1
        first = Paper(id=f"{month}.{counters[month]:05d}", title=row["title"], abstract=row["abstract"],
                      authors=tuple(row["authors"][:50]) or ("Anonymous",),
                      categories=tuple(row["categories"]), submitted=submitted, updated=submitted)
        day = cal.announced_on(submitted)
        versions = [Version(first, day, cal.at(day).at)]
        if row.get("label") == 1 and rng.random() < 0.08:  # a revision with a venue and code
            later = submitted + timedelta(days=rng.uniform(14, 35))
            second = replace(first, version=2, updated=later, journal_ref="Proceedings of ICML 2026",
                             comment=f"Code: https://github.com/example/{first.id.replace('.', '-')}")
            day = cal.announced_on(later)
            versions.append(Version(second, day, cal.at(day).at))
        items.append(versions)
    return items


class SimArxiv(ArxivServer):
    """The tests' stand-in with a clock, set between commands: the API and OAI-PMH show each
    paper's newest version announced by the last New York midnight (when arXiv rebuilds its
    feeds); the RSS feeds, rendered by the stock server from self.papers, that evening's batch."""

    def __init__(self, items: list[list[Version]], cal: Calendar):
        super().__init__()
        self.items, self.cal = items, cal
        self.down = False  # every request answers 503
        self.shown: list[Paper] = []

    def set_clock(self, now: datetime) -> None:
        fed = self.cal.fed_by(now)
        batch_day = fed.date() - timedelta(days=1)
        self.announced = fed  # the feed's date, which is how the stock server dates it
        self.shown, self.datestamps, self.papers = [], {}, []
        for versions in self.items:
            out = [v for v in versions if v.at <= fed]
            if out:
                self.shown.append(out[-1].paper)
                self.datestamps[out[-1].paper.id] = out[-1].day
            self.papers += [replace(v.paper, announce_type="new" if v.paper.version == 1 else "replace")
                            for v in out if v.day == batch_day]

    def answer(self, path, query, fault):
        if self.down:
            return 503, "text/plain", b"HTTP 503 Service Unavailable\n"
        if path == "/oai":
            return 200, OAI_TYPE, oai_server.answer(self.shown, query, self.oai_url, self.oai_page_size,
                                                    lambda paper: self.datestamps[paper.id])
        return super().answer(path, query, fault)

    def _select(self, query):
        """The stock selection over self.shown, narrowed first to the query's submission dates:
        trying every phrase of the query on every paper takes 6 s at 7,000 papers."""
        text = query.get("search_query", "")
        ids = [i for i in query.get("id_list", "").split(",") if i]
        papers = self.shown
        if span := re.search(r"submittedDate:\[(\d+) TO (\d+)\]", text):
            low, high = (_stamp(s) for s in span.groups())
            margin = timedelta(minutes=1)  # the query's range is in whole minutes
            papers = [p for p in papers if low - margin <= p.submitted <= high + margin]
        matches = compile_query(text) if text else (lambda paper: True)
        found = [p for p in papers if matches(p) and (not ids or _listed(p, ids))]
        return _sorted(found, query.get("sortBy", "relevance"), query.get("sortOrder", ""))


def holidays(year: int) -> dict[date, str]:
    """The US holidays arXiv usually skips, for a year the bundled calendar does not list."""
    def nth(weekday: int, month: int, n: int) -> date:
        first = date(year, month, 1)
        return first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))

    return {date(year, 1, 1): "New Year's Day", nth(0, 1, 3): "Martin Luther King Jr. Day",
            date(year, 6, 19): "Juneteenth", date(year, 7, 4): "Independence Day",
            nth(0, 9, 1): "Labor Day", nth(3, 11, 4): "Thanksgiving",
            date(year, 12, 25): "Christmas", date(year, 12, 31): "New Year's Eve"}


def calendar_files(folder: Path, years: range) -> list[Path]:
    """A calendar file (sources.arxiv.calendar_files) for each year the bundled one lacks."""
    known = load_calendar().years
    files = []
    for year in years:
        if year not in known:
            files.append(folder / f"arxiv-{year}.yaml")
            files[-1].write_text(yaml.safe_dump({"years": [year], "no_announcement": holidays(year)}))
    return files


# --- the weeks ------------------------------------------------------------------------------

@dataclass
class Week:
    monday: date
    run: float = 0.0
    collects: tuple[float, ...] = ()
    db_mb: float = 0.0
    out_mb: float = 0.0
    papers: int = 0
    peak_mb: float = 0.0  # the run's peak resident memory


def schedule(mondays: list[date]):
    """(week, command, moment): the week's Wednesday and Friday collects, then Monday's run."""
    for week, monday in enumerate(mondays):
        if week:
            for back in (5, 3):
                yield week, "collect", datetime.combine(monday - timedelta(days=back), clock(14), SHANGHAI)
        yield week, "run", datetime.combine(monday, clock(8), SHANGHAI)


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def rows_of(folder: Path, sql: str) -> list[tuple]:
    """A read-only look at the database between commands."""
    with closing(sqlite3.connect(f"file:{folder}/state/digest.sqlite3?mode=ro", uri=True)) as db:
        return db.execute(sql).fetchall()


def digest_lists(out: Path) -> dict[str, list[str]]:
    """Each digest's paper list from its Markdown copy: ids_in without the Updates section,
    which names papers of earlier weeks again. A paper that is also a built-in seed is listed
    under From the reading list (收录) instead of this week's papers, so that section counts."""
    lists = {}
    for path in sorted((out / "digests").glob("*.md")):
        text = re.sub(r"^## 更新 · .*?(?=^## |^---$)", "", path.read_text(encoding="utf-8"),
                      flags=re.S | re.M)
        lists[path.stem] = ids_in(text)
    return lists


@dataclass(frozen=True)
class Year:
    """What a simulated year runs on: its Mondays (the last one LAST_MONDAY), a fresh folder
    with the calendar files and readers.txt, and arXiv's timeline of `rows` from
    lookback_days before the first Monday's 08:00 publish to the last one's."""

    mondays: list[date]
    first_run: datetime
    folder: Path
    files: list[Path]
    cal: Calendar
    items: list
    readers: list[str]

    @classmethod
    def of(cls, rows: list[dict], weeks: int, readers: int, prefix: str) -> Year:
        mondays = [LAST_MONDAY - timedelta(weeks=weeks - 1 - k) for k in range(weeks)]
        defaults = load(None).sources.arxiv
        first_run, last_run = (datetime.combine(m, clock(8), SHANGHAI) for m in (mondays[0], mondays[-1]))
        start = first_run - timedelta(days=defaults.lookback_days)
        folder = Path(tempfile.mkdtemp(prefix=prefix))
        files = calendar_files(folder, range(start.year, last_run.year + 1))
        cal = load_calendar(files)
        items = timeline(rows, cal, start, last_run, defaults.categories)
        addresses = [f"reader{n}@example.org" for n in range(readers)]
        (folder / "readers.txt").write_text("".join(
            f"Reader {n} <{a}> lang={('zh', 'en', 'zh,en')[n % 3]}\n" for n, a in enumerate(addresses)))
        return cls(mondays, first_run, folder, files, cal, items, addresses)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=52)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--scale", type=int, default=1, help="copies of the dev corpus over the weeks")
    parser.add_argument("--outages", action="store_true", help="arXiv down one week, SMTP another")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print its path")
    parser.add_argument("--probe", type=Path, help="time status, readers, export, serve (JSON lines)")
    args = parser.parse_args()
    if args.weeks < (5 if args.outages else 1):
        parser.error("--weeks: at least 1, and 5 with --outages")
    if not CLI.exists():
        sys.exit(f"{CLI} is not here: install the project into this venv (pip install .)")
    corpus = dev_rows()
    rows = [row if k == 0 else {**row, "title": f"{row['title']} (part {k + 1})"}
            for k in range(args.scale) for row in corpus]
    outages = (args.weeks // 3, 2 * args.weeks // 3) if args.outages else (None, None)
    year = Year.of(rows, args.weeks, args.readers, "rl-digest-year-")
    mondays, folder, files, cal, items, readers = (year.mondays, year.folder, year.files, year.cal,
                                                   year.items, year.readers)
    defaults = load(None).sources.arxiv
    print(machine())
    print(f"CLI: {CLI}; {args.weeks} weeks to {LAST_MONDAY}, {len(rows)} dev rows, {args.readers} readers"
          + (f"; arXiv down in week {outages[0] + 1}, SMTP in week {outages[1] + 1}'s run"
             if args.outages else ""))
    began = time.perf_counter()
    with SimArxiv(items, cal) as arxiv, OpenAIServer() as llm, SmtpServer() as smtp:
        config = write_config(folder, {
            "sources": {"arxiv": {"api_url": arxiv.api_url, "calendar_files": [str(f) for f in files]},
                        "rss": {"enabled": True, "urls": [arxiv.rss_url(defaults.categories)],
                                "poll_minutes": 0},
                        "oai": {"enabled": True, "url": arxiv.oai_url}},
            "enrich": {"provider": "openai", "base_url": llm.url, "timeout_seconds": 10,
                       "deadline_seconds": 30},
            "email": {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": smtp.port,
                      "security": "none", "timeout_seconds": 10, "recipients_file": "readers.txt"},
        })
        weeks, failed = simulate(folder, config, mondays, arxiv, smtp, outages, args.probe)
        messages = list(smtp.messages)
    total = time.perf_counter() - began

    shown = [[w + 1, f"{k.monday}", f"{k.run:.1f}", f"{k.peak_mb:.0f}",
              " + ".join(f"{c:.1f}" for c in k.collects) or "-", f"{k.db_mb:.1f}", f"{k.out_mb:.1f}",
              k.papers]
             for w, k in enumerate(weeks) if w == 0 or (w + 1) % 13 == 0 or w == len(weeks) - 1]
    print(f"\n## {args.weeks} weeks of two collects and a run, {len(rows)} dev rows, "
          f"{args.readers} readers\n")
    print(table(["week", "Monday", "run s", "run peak MB", "collects s", "database MB", "out/ MB",
                 "papers stored"], shown))
    print(f"\n{total:.0f} s in all: runs {sum(k.run for k in weeks):.0f} s, "
          f"collects {sum(sum(k.collects) for k in weeks):.0f} s (the stand-ins share the machine)\n")
    if args.probe:
        print(probe_table(args.probe) + "\n")
    checks = invariants(folder, cal, items, mondays, messages, readers, outages[0], failed)
    print(table(["check", "result", "detail"], checks))
    if args.keep:
        print(f"\nkept: {folder}")
    else:
        shutil.rmtree(folder)
    if any(result != "ok" for _, result, _ in checks):
        sys.exit(1)


def simulate(folder: Path, config: Path, mondays: list[date], arxiv: SimArxiv, smtp: SmtpServer,
             outages: tuple[int | None, int | None], probe: Path | None = None
             ) -> tuple[list[Week], list[str]]:
    """Every command of every week, timed (its output goes to commands.log); sizes after each
    run; the commands that failed outside an outage, with their last line on stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RL_DIGEST")}
    env["OPENAI_API_KEY"] = "benchmark"
    if os.environ.get("RL_DIGEST_SRC"):
        env["PYTHONPATH"] = str(SRC)  # the installed script then imports that copy's pipeline
    weeks, failed = [Week(monday) for monday in mondays], []
    for week, command, moment in schedule(mondays):
        arxiv.set_clock(moment)
        arxiv.down = week == outages[0]
        smtp_down = week == outages[1] and command == "run"
        if smtp_down:
            smtp.stop()
        started = time.perf_counter()
        peak = folder / "peak"  # the go-between writes the command's peak memory there (KiB)
        done = subprocess.run([sys.executable, "-c", MEASURE_PEAK, str(peak), str(CLI),
                               "--config", str(config), command, "--as-of", moment.isoformat()],
                              cwd=folder, env=env, capture_output=True, text=True, timeout=600)
        seconds = time.perf_counter() - started
        if smtp_down:
            smtp.start()
        with (folder / "commands.log").open("a", encoding="utf-8") as log:  # for --keep
            log.write(f"$ rl-digest {command} --as-of {moment.isoformat()}: exit {done.returncode}, "
                      f"{seconds:.1f} s\n{done.stdout}{done.stderr}\n")
        if done.returncode and not (arxiv.down or smtp_down):
            failed.append(f"{moment:%Y-%m-%d} {command} exit {done.returncode}: "
                          + (done.stderr.strip().splitlines() or ["(no stderr)"])[-1])
        if command == "collect":
            weeks[week].collects += (seconds,)
            continue
        this = weeks[week]
        this.run, this.db_mb, this.out_mb = seconds, folder_mb(folder / "state"), folder_mb(folder / "out")
        this.peak_mb = int(peak.read_text()) / 1024
        this.papers = rows_of(folder, "select count(*) from papers")[0][0]
        if probe and (week % 4 == 0 or week == len(mondays) - 1):  # every fourth week, and the last
            with probe.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"week": week + 1, "monday": f"{this.monday}",
                                         "run": round(seconds, 2), "peak_mb": round(this.peak_mb),
                                         **probed(folder, config, env)}) + "\n")
        print(f"week {week + 1}/{len(mondays)} {this.monday}: run {seconds:.1f} s, exit {done.returncode}: "
              f"{done.stdout.strip()[:100]}", file=sys.stderr, flush=True)
    return weeks, failed


def probed(folder: Path, config: Path, env: dict[str, str]) -> dict:
    """Seconds of the commands a user runs between runs, rows per table, bytes per file and folder."""
    def timed(*args: str) -> float:
        started = time.perf_counter()
        subprocess.run([str(CLI), "--config", str(config), *args], cwd=folder, env=env,
                       capture_output=True, timeout=600, check=True)
        return round(time.perf_counter() - started, 2)

    found: dict = {"status": timed("status"), "readers": timed("readers"),
                   "export": timed("export", "--format", "bibtex", "-o", str(folder / "export.bib"))}
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    server = subprocess.Popen([str(CLI), "--config", str(config), "serve", "--port", str(port)], cwd=folder,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        server.stdout.readline()  # "serving on ..."
        site = folder / "out" / "site"
        newest = max(site.rglob("20*.html"), default=None)
        pages = ["", "papers/index.html"] + ([str(newest.relative_to(site))] if newest else [])
        started = time.perf_counter()
        for page in pages:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/{page}", timeout=60) as answer:
                answer.read()
        found["serve"] = round(time.perf_counter() - started, 2)
    finally:
        server.terminate()
        server.wait()
    tables = [name for (name,) in rows_of(folder, "select name from sqlite_master where type = 'table'")]
    found["rows"] = {name: rows_of(folder, f"select count(*) from {name}")[0][0] for name in tables}
    found["table_kb"] = {name: round(n / 1024) for name, n in rows_of(
        folder, "select name, sum(pgsize) from dbstat group by name")} if _has_dbstat(folder) else {}
    found["state_kb"] = {p.name: round(p.stat().st_size / 1024)
                         for p in (folder / "state").rglob("*") if p.is_file()}
    out = folder / "out"
    found["out_kb"] = {p.name: round(folder_mb(p) * 1024) if p.is_dir() else round(p.stat().st_size / 1024)
                       for p in out.iterdir()}
    found["site_files"] = sum(1 for p in (out / "site").rglob("*") if p.is_file())
    return found


def probe_table(path: Path) -> str:
    """The probed weeks: the commands' seconds and the rows and sizes that grow."""
    weeks = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    names = ["papers", "runs", "enrichments", "digest_items", "deliveries"]
    return table(["week", "run s", "status s", "readers s", "export s", "serve s",
                  *(f"{n} rows" for n in names), "database KB", "out/site KB", "site files"],
                 [[w["week"], w["run"], w["status"], w["readers"], w["export"], w["serve"],
                   *(w["rows"].get(n, 0) for n in names), w["state_kb"].get("digest.sqlite3", 0),
                   w["out_kb"].get("site", 0), w["site_files"]] for w in weeks])


def _has_dbstat(folder: Path) -> bool:
    try:
        rows_of(folder, "select 1 from dbstat limit 1")
        return True
    except sqlite3.Error:
        return False


def invariants(folder: Path, cal: Calendar, items: list[list[Version]], mondays: list[date], messages,
               readers: list[str], arxiv_down: int | None, failed: list[str]) -> list[list[str]]:
    """The checks, each a row: what, ok or FAIL, and the figures (with the first offenders)."""
    def row(name: str, bad: list, detail: str) -> list[str]:
        return [name, "FAIL" if bad else "ok",
                detail + (f"; e.g. {', '.join(map(str, bad[:5]))}" if bad else "")]

    feds = [cal.fed_by(datetime.combine(monday, clock(8), SHANGHAI)) for monday in mondays]
    arxiv = load(None).sources.arxiv
    query = compile_query(build_query(arxiv.categories, arxiv.terms, datetime(1991, 8, 14, tzinfo=UTC),
                                      datetime(2100, 1, 1, tzinfo=UTC)))
    wanted = {v[0].paper.id for v in items if v[0].at <= feds[-1] and query(v[0].paper)}
    stored = {pid for (pid,) in rows_of(folder, "select id from papers")}
    relevant = {pid for (pid,) in rows_of(folder, "select id from papers where relevant = 1")}
    seen_as_seed = {pid for (pid,) in rows_of(  # a built-in seed shown before arXiv had its paper
        folder, "select arxiv_id from seeds join digest_items on item_key = key where arxiv_id is not null")}
    lists = digest_lists(folder / "out")
    listed = Counter(pid for ids in lists.values() for pid in ids)

    announced = {v[0].paper.id: [x.at for x in v] for v in items}
    expected, pending = [], False
    for n, fed in enumerate(feds):  # a Monday publishes once a relevant paper or its revision is out
        low = feds[n - 1] if n else datetime.min.replace(tzinfo=UTC)
        pending |= any(low < at <= fed for pid in relevant for at in announced[pid])
        if pending and n != arxiv_down:
            expected.append(f"{mondays[n]}")
            pending = False

    mail: Counter[tuple[str, str]] = Counter()
    for message in messages:  # the Message-ID ends with the digest id: <...2026-11-30@example.org>
        found = re.search(r"\.(\d{4}-\d{2}-\d{2})@", str(message.message["Message-ID"]))
        mail.update((rcpt, found[1] if found else "?") for rcpt in message.rcpt_tos)
    wrong_mail = [f"{r} {d} ×{mail[(r, d)]}" for d in lists for r in readers if mail[(r, d)] != 1]
    wrong_mail += [f"{r} {d} (no such digest)" for r, d in mail if d not in lists]
    return [
        row("announced papers the query matches are stored", sorted(wanted - stored),
            f"{len(wanted)} announced and matching, {len(wanted & stored)} stored"),
        row("each relevant paper in exactly one digest",
            sorted(f"{pid} ×{listed[pid]}" for pid in relevant
                   if listed[pid] != 1 and not (pid in seen_as_seed and not listed[pid])),
            f"{len(relevant)} relevant, {sum(1 for pid in relevant if listed[pid] == 1)} listed once, "
            f"{len(seen_as_seed - set(listed))} shown as a seed before; "
            f"{len(set(listed) - relevant)} listed but not relevant now"),
        row("each reader got each digest once", wrong_mail,
            f"{len(messages)} messages, {len(lists)} digests × {len(readers)} readers"),
        row("one digest per Monday with something new", sorted(set(lists) ^ set(expected)),
            f"{len(lists)} digests, {len(expected)} expected"),
        row("no command failed outside an outage", failed, f"{len(failed)} failed"),
    ]


if __name__ == "__main__":
    main()
