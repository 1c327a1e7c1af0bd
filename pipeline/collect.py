"""Collect: read the sources for the window (watermark, as_of] and keep a ledger.

RSS tells what arXiv announced today; the API backfills the whole window, so a
day the scheduler missed is caught up. Papers are stored by version-less id,
so a paper seen by both sources, in two categories or in a new version is one
record. The watermark is the end of the last window read completely: a failed
source raises SourceError before it moves, and the next run reads it all again.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from rapidfuzz import fuzz, process

from pipeline import __version__, calendar, coverage, progress, rank
from pipeline.config import Config
from pipeline.errors import SourceError
from pipeline.models import Paper
from pipeline.sources import arxiv_api, arxiv_oai, arxiv_rss
from pipeline.sources.http import Fetcher
from pipeline.stopping import pause
from pipeline.store import Store, merge_papers, now_iso, parse_dt, row_to_seed

log = logging.getLogger(__name__)


@dataclass
class SourceReport:
    requests: int = 0
    seen: int = 0
    new: int = 0
    revised: int = 0
    duplicates: int = 0
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what is normal but worth saying
    seconds: float = 0.0


@dataclass
class CollectReport:
    window: tuple[datetime, datetime]
    sources: dict[str, SourceReport] = field(default_factory=dict)
    new: list[Paper] = field(default_factory=list)
    revised: list[Paper] = field(default_factory=list)
    fetched: int = 0  # distinct papers the sources returned
    coverage: coverage.Summary | None = None

    @property
    def warnings(self) -> list[str]:
        return [w for s in self.sources.values() for w in s.warnings]

    @property
    def notes(self) -> list[str]:
        return [n for s in self.sources.values() for n in s.notes]


def make_fetcher(config: Config) -> Fetcher:
    arxiv = config.sources.arxiv
    agent = f"rl-digest/{__version__} (+https://github.com/rl-digest; mailto:{arxiv.contact})"
    return Fetcher(arxiv.delay_seconds, arxiv.timeout_seconds, arxiv.retries, agent,
                   deadline_seconds=arxiv.deadline_seconds,
                   max_bytes=int(config.sources.max_response_mb * 2**20))


def window(config: Config, store: Store, as_of: datetime,
           since: datetime | None = None) -> tuple[datetime, datetime]:
    """From `since`, else the watermark (less the overlap) or lookback_days, to as_of.

    The end is never past the present, so the watermark never is either.
    """
    arxiv = config.sources.arxiv
    mark = store.watermark()
    end = min(as_of, datetime.now(UTC).replace(microsecond=0))
    if since is not None:
        return min(since, end), end
    start = (mark - timedelta(hours=arxiv.overlap_hours)) if mark else (
        as_of - timedelta(days=arxiv.lookback_days))
    return min(start, end), end


def collect(config: Config, store: Store, fetcher: Fetcher, as_of: datetime,
            since: datetime | None = None) -> CollectReport:
    """Read every enabled source for the window (from `since` when given) and store what they found."""
    run_id = store.start_run("collect", as_of)
    report = CollectReport(window(config, store, as_of, since))
    first = fetcher.requests
    try:
        with progress.bar("fetching from arXiv", count=lambda: fetcher.requests - first, unit="requests"):
            found = _read_sources(config, store, fetcher, report, as_of)
    except SourceError as exc:
        store.finish_run(run_id, "failed", as_dict(report), error=str(exc))
        raise
    report.fetched = len(found)
    new, revised, same = store.upsert_papers(found)
    report.new, report.revised = new, revised
    for name, part in report.sources.items():
        part.new = sum(1 for p in new if name in p.sources)
        part.revised = sum(1 for p in revised if name in p.sources)
    store.finish_run(run_id, "ok", as_dict(report), window=report.window)
    return report


def _read_sources(config: Config, store: Store, fetcher: Fetcher, report: CollectReport,
                  as_of: datetime) -> list[Paper]:
    arxiv, rss = config.sources.arxiv, config.sources.rss
    cal = calendar.load_calendar(arxiv.calendar_files)
    ledger = coverage.Ledger.load(store)
    query = rank.Query.compile(arxiv.categories, arxiv.terms)
    groups = feed_groups(config)
    found: list[Paper] = []
    if rss.enabled:
        found += _read_feeds(config, store, fetcher, report, as_of, cal, ledger, query)
    first_run = store.watermark() is None
    missed = ledger.missed(cal, groups, report.window[0], as_of)
    for group, days in missed.items():
        for day in days:
            reading = ledger.get(day, group)
            if not reading.read and not reading.gap:
                reading.gap = "before the first collect" if first_run else "not collected"
    if config.sources.oai.enabled:
        found += _catch_up(config, fetcher, report, missed, ledger, query, cal)
    elif arxiv.enabled:
        part = report.sources.setdefault("api", SourceReport())
        began, before = time.monotonic(), fetcher.requests
        start, end = report.window
        papers, stats = arxiv_api.search_window(fetcher, arxiv.api_url, arxiv.categories,
                                                arxiv.terms, start, end, arxiv.page_size)
        part.seen += stats.seen
        part.requests += fetcher.requests - before
        part.seconds += time.monotonic() - began
        found += papers
        for group, days in missed.items():
            for day in days:
                ledger.get(day, group).recovered = "the API search"
    for year in cal.unknown_years(*report.window):
        report.sources.setdefault("calendar", SourceReport()).warnings.append(
            f"the arXiv calendar has no holidays for {year}: add a file to sources.arxiv.calendar_files")
    ledger.save(store, as_of.date())
    report.coverage = coverage.summarise(ledger, cal, groups, *report.window)
    unique: dict[str, Paper] = {}
    for paper in found:
        if paper.id in unique:
            report.sources["api" if "api" in paper.sources else paper.sources[0]].duplicates += 1
            unique[paper.id] = merge_papers(unique[paper.id], paper)
        else:
            unique[paper.id] = paper
    return list(unique.values())


def feed_groups(config: Config) -> list[str]:
    """The category groups coverage is kept for: one per feed, or per category without RSS."""
    if config.sources.rss.enabled:
        return [arxiv_rss.feed_spec(url) for url in _feed_urls(config)]
    return list(config.sources.arxiv.categories)


def _feed_urls(config: Config) -> list[str]:
    rss = config.sources.rss
    return arxiv_rss.split_feeds(rss.urls, rss.categories_per_feed)


def _read_feeds(config: Config, store: Store, fetcher: Fetcher, report: CollectReport,
                as_of: datetime, cal: calendar.Calendar, ledger: coverage.Ledger,
                query: rank.Query) -> list[Paper]:
    """Every feed once; the stale ones again every poll interval until the batch is out."""
    rss = config.sources.rss
    due, evening = cal.in_feed(as_of)
    part = report.sources.setdefault("rss", SourceReport())
    if due is None:
        part.notes.append(f"no announcement expected: {cal.why_not(evening)}")
    deadline = time.monotonic() + rss.poll_minutes * 60
    pending, feeds = _feed_urls(config), {}
    while True:
        began, before = time.monotonic(), fetcher.requests
        for url in pending:
            feeds[url] = arxiv_rss.fetch_feed(fetcher, url)
        part.requests += fetcher.requests - before
        part.seconds += time.monotonic() - began
        pending = [url for url in pending if due and _stale(store, url, feeds[url], due.day)]
        wait = rss.poll_interval_minutes * 60
        if not pending or time.monotonic() + wait > deadline:
            break
        log.info("%d feeds show no new announcement yet; looking again in %g min",
                 len(pending), rss.poll_interval_minutes)
        pause(wait)
    found: list[Paper] = []
    for url, feed in feeds.items():
        found += _take_feed(store, url, feed, part, due, ledger, query, stale=url in pending)
    return found


def _stale(store: Store, url: str, feed: arxiv_rss.FeedResult, day) -> bool:
    """No id newer than the newest of the last announcement read from this feed."""
    last = store.get_state(f"rss.seen:{url}") or {}
    if last.get("day") == day.isoformat():
        return False  # this announcement was read before: nothing newer is due
    newest = arxiv_rss.newest_id(feed)
    return newest is None or (last.get("newest") is not None
                              and arxiv_rss.id_order(newest) <= arxiv_rss.id_order(last["newest"]))


def _take_feed(store: Store, url: str, feed: arxiv_rss.FeedResult, part: SourceReport,
               due, ledger: coverage.Ledger, query: rank.Query, stale: bool) -> list[Paper]:
    group = arxiv_rss.feed_spec(url)
    part.seen += feed.items
    part.warnings += feed.warnings
    kept = [p for p in feed.papers if query.matches(p.title, p.abstract, p.categories)]
    if due is not None:
        reading = ledger.get(due.day, group)
        last = store.get_state(f"rss.seen:{url}") or {}
        if stale:
            was = f"the {last['day'][5:]} announcement's" if last.get("day") else "before"
            part.warnings.append(
                f"stale feed: {group} is empty although arXiv announced on {due.day}" if not feed.items
                else f"stale feed: {group} shows no id newer than {was} ({url})")
            reading.gap = reading.gap or "feed stale"
        else:
            counts = feed.counts()
            reading.read, reading.kept = "RSS", len(kept)
            reading.new, reading.cross, reading.replace = counts
            store.set_state(f"rss.seen:{url}", {"day": due.day.isoformat(),
                                                 "newest": arxiv_rss.newest_id(feed)})
            if feed.truncated:
                part.warnings.append(f"{url}: {feed.items} items, arXiv's cap: the feed was cut; "
                                     "the rest is read through the catch-up")
                reading.gap = f"feed cut at {feed.items} items"
    known = {p.id: p for p in store.papers(r.id for r in feed.replacements)}
    updates = [Paper(id=r.id, title="", version=r.version or known[r.id].version, updated=r.announced,
                     sources=("rss",)) for r in feed.replacements if r.id in known]
    return kept + updates  # a stale feed's papers were likely read before: dedupe sorts it


def _catch_up(config: Config, fetcher: Fetcher, report: CollectReport,
              missed: dict[str, list], ledger: coverage.Ledger, query: rank.Query,
              cal: calendar.Calendar) -> list[Paper]:
    """Harvest each group with a gap through OAI-PMH, from the first missed day on.

    Kept: papers whose first version falls in the missed window (from a day
    before the announcement preceding the first missed one) and that match the
    query. A missed day counts as recovered once the harvest reaches it.
    """
    part = report.sources.setdefault("oai", SourceReport())
    found: list[Paper] = []
    reach = None  # the newest datestamp of any set: how far OAI-PMH is up to date
    harvests: dict[str, list[arxiv_oai.Harvest]] = {}
    for group, days in missed.items():
        began, before = time.monotonic(), fetcher.requests
        first, last = cal.at(days[0]), cal.at(days[-1])
        earlier = cal.between(first.at - timedelta(days=10), first.at - timedelta(seconds=1))
        low = (earlier[-1].at if earlier else first.at) - timedelta(days=1)
        for category in group.split("+"):
            harvest = arxiv_oai.harvest(fetcher, config.sources.oai.url, category,
                                        days[0] - timedelta(days=1))
            part.seen += harvest.records
            kept = [p for p in harvest.papers if p.submitted and low <= p.submitted <= last.at
                    and query.matches(p.title, p.abstract, p.categories)]
            found += kept
            harvests.setdefault(group, []).append(harvest)
            reach = max(filter(None, (reach, harvest.latest)), default=None)
        part.requests += fetcher.requests - before
        part.seconds += time.monotonic() - began
    for group, days in missed.items():
        for day in days:
            if reach is None or reach < day:
                continue  # not in OAI-PMH yet: the next collect tries again
            reading = ledger.get(day, group)
            reading.recovered = "OAI-PMH"
            if not reading.read:
                for harvest in harvests[group]:
                    on_day = [p for p in harvest.papers if _announced_day(cal, p) == day]
                    reading.new += sum(1 for p in on_day if p.version == 1)
                    reading.replace += sum(1 for p in on_day if p.version > 1)
                    reading.kept += sum(1 for p in on_day
                                        if query.matches(p.title, p.abstract, p.categories))
        unrecovered = [d for d in days if ledger.get(d, group).open]
        if unrecovered:
            days_text = ", ".join(f"{d:%m-%d}" for d in unrecovered)
            part.warnings.append(f"{group}: OAI-PMH has nothing yet for {days_text}; "
                                 "the next collect tries again")
    return found


def _announced_day(cal: calendar.Calendar, paper: Paper):
    """The evening this version was announced: the first announcing day from its date
    (after the 14:00 New York cutoff, the next one)."""
    moment = paper.updated if paper.version > 1 else paper.submitted
    if moment is None:
        return None
    local = moment.astimezone(cal.zone)
    day = local.date() if local.hour < 14 else local.date() + timedelta(days=1)
    while not cal.announces(day):
        day += timedelta(days=1)
    return day


def complete_thin(config: Config, store: Store, fetcher: Fetcher, ids: list[str]) -> int:
    """RSS records lack the submission date and comment: one id_list request per batch."""
    if not ids or not config.sources.arxiv.enabled:  # disabled means no call at all
        return 0
    papers = arxiv_api.fetch_ids(fetcher, config.sources.arxiv.api_url, ids)
    store.upsert_papers(papers)
    return len(papers)


def resolve_seeds(config: Config, store: Store, fetcher: Fetcher | None) -> int:
    """Tie seed entries to arXiv papers by fuzzy title; return how many are newly tied.

    Stored papers first; then (online) the titles still unresolved, OR-ed into a
    few API searches and matched here, not repeated within seeds.resolve_retry_days.
    A weak match is not forced.
    """
    unresolved = [row for row in store.seed_rows() if not row["arxiv_id"]]
    if not unresolved:
        return 0
    threshold = config.seeds.match_threshold
    known = store.paper_titles()
    ids = [pid for pid, _ in known]
    normals = [normal_title(title) for _, title in known]
    retry_after = timedelta(days=config.seeds.resolve_retry_days)
    tied, to_search = 0, []
    for row in progress.track(unresolved, "resolving seeds", len(unresolved)):
        seed = row_to_seed(row)
        index = closest(seed.title, normals, threshold)
        tried = parse_dt(row["resolve_tried_at"])
        if index is not None:
            store.set_seed_resolution(row["key"], ids[index], now_iso())
            tied += 1
        elif fetcher is not None and config.sources.arxiv.enabled and (
                tried is None or datetime.now(UTC) - tried >= retry_after):
            to_search.append((row["key"], seed.title))
    if not to_search:
        return tied
    found = arxiv_api.search_titles(fetcher, config.sources.arxiv.api_url, [t for _, t in to_search])
    found_normals = [normal_title(p.title) for p in found]
    for key, title in to_search:
        index = closest(title, found_normals, threshold)
        if index is not None:
            store.upsert_papers([found[index]])
            tied += 1
        store.set_seed_resolution(key, found[index].id if index is not None else None, now_iso())
    return tied


def normal_title(title: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", title.casefold()).split())


def closest(title: str, normal_titles: list[str], threshold: float) -> int | None:
    """Index of the whole title closest to `title`; typos and punctuation are forgiven."""
    found = process.extractOne(normal_title(title), normal_titles, scorer=fuzz.ratio,
                               score_cutoff=threshold)
    return found[2] if found else None


def as_dict(report: CollectReport) -> dict:
    return {
        "window": [report.window[0].isoformat(), report.window[1].isoformat()],
        "sources": {name: vars(part) for name, part in report.sources.items()},
        "new": len(report.new), "revised": len(report.revised),
        "coverage": asdict(report.coverage) if report.coverage else None,
    }
