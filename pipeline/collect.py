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
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

from rapidfuzz import fuzz, process

from pipeline import __version__, rank
from pipeline.config import Config
from pipeline.errors import SourceError
from pipeline.models import Paper
from pipeline.sources import arxiv_api, arxiv_rss
from pipeline.sources.http import Fetcher
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
    seconds: float = 0.0


@dataclass
class CollectReport:
    window: tuple[datetime, datetime]
    sources: dict[str, SourceReport] = field(default_factory=dict)
    new: list[Paper] = field(default_factory=list)
    revised: list[Paper] = field(default_factory=list)
    fetched: int = 0  # distinct papers the sources returned

    @property
    def warnings(self) -> list[str]:
        return [w for s in self.sources.values() for w in s.warnings]


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
    try:
        found = _read_sources(config, store, fetcher, report, as_of)
    except SourceError as exc:
        store.finish_run(run_id, "failed", _as_dict(report), error=str(exc))
        raise
    report.fetched = len(found)
    new, revised, same = store.upsert_papers(found)
    report.new, report.revised = new, revised
    for name, part in report.sources.items():
        part.new = sum(1 for p in new if name in p.sources)
        part.revised = sum(1 for p in revised if name in p.sources)
    store.finish_run(run_id, "ok", _as_dict(report), window=report.window)
    return report


def _read_sources(config: Config, store: Store, fetcher: Fetcher, report: CollectReport,
                  as_of: datetime) -> list[Paper]:
    arxiv = config.sources.arxiv
    found: list[Paper] = []
    if config.sources.rss.enabled:
        for url in config.sources.rss.urls:
            found += _read_feed(store, fetcher, url, report, as_of, arxiv.categories, arxiv.terms)
    if arxiv.enabled:
        part = report.sources.setdefault("api", SourceReport())
        began, before = time.monotonic(), fetcher.requests
        start, end = report.window
        papers, stats = arxiv_api.search_window(fetcher, arxiv.api_url, arxiv.categories,
                                                arxiv.terms, start, end, arxiv.page_size)
        part.seen += stats.seen
        part.requests += fetcher.requests - before
        part.seconds += time.monotonic() - began
        found += papers
    unique: dict[str, Paper] = {}
    for paper in found:
        if paper.id in unique:
            report.sources["api" if "api" in paper.sources else "rss"].duplicates += 1
            unique[paper.id] = merge_papers(unique[paper.id], paper)
        else:
            unique[paper.id] = paper
    return list(unique.values())


def _read_feed(store: Store, fetcher: Fetcher, url: str, report: CollectReport, as_of: datetime,
               categories: list[str], terms: list[str]) -> list[Paper]:
    part = report.sources.setdefault("rss", SourceReport())
    began, before = time.monotonic(), fetcher.requests
    feed = arxiv_rss.fetch_feed(fetcher, url)
    part.requests += fetcher.requests - before
    part.seen += feed.items
    part.warnings += feed.warnings
    eastern = as_of.astimezone(timezone(timedelta(hours=-5))).date()
    if not feed.items and arxiv_rss.is_arxiv_announcement_day(eastern):
        part.warnings.append(f"{url}: empty feed on an announcement day ({eastern})")
    key = f"rss.last_build:{url}"
    if feed.last_build is not None and arxiv_rss.is_arxiv_announcement_day(eastern):
        previous = parse_dt(store.get_state(key))
        if previous is not None and previous >= feed.last_build:
            part.warnings.append(f"{url}: lastBuildDate has not moved since {previous.isoformat()}")
        store.set_state(key, feed.last_build.isoformat())
    known = {p.id: p for p in store.papers(r.id for r in feed.replacements)}
    updates = [Paper(id=r.id, title="", version=r.version or known[r.id].version, updated=r.announced,
                     sources=("rss",)) for r in feed.replacements if r.id in known]
    part.seconds += time.monotonic() - began
    query = rank.Query.compile(categories, terms)
    kept = [p for p in feed.papers if query.matches(p.title, p.abstract, p.categories)]
    return kept + updates


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
    for row in unresolved:
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


def _as_dict(report: CollectReport) -> dict:
    return {
        "window": [report.window[0].isoformat(), report.window[1].isoformat()],
        "sources": {name: vars(part) for name, part in report.sources.items()},
        "new": len(report.new), "revised": len(report.revised),
    }
