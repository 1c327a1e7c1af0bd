"""Collect: read the sources for the window (watermark, as_of] and keep a ledger.

RSS tells what arXiv announced today; the API (or the OAI-PMH catch-up) backfills the
whole window, so a day the scheduler missed is caught up. Papers are kept by
version-less id, so a paper seen by both sources, in two categories or in a new version
is one record. The watermark is the end of the last window read completely: a failed
source raises SourceError before it moves, and the next run reads it all again.

Everything here works on records: run.py reads the state before and keeps the results after.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from rapidfuzz import fuzz, process

from pipeline import __version__, calendar, coverage, lock, progress, text
from pipeline.config import Config
from pipeline.models import ARXIV_ID, Paper, SeedDocument, SeedEntry, merge_papers, seed_key, split_arxiv_id
from pipeline.sources import CALENDAR, REGISTRY, Source, SourceReport, Window, arxiv_rss
from pipeline.sources.http import Fetcher


@dataclass
class CollectReport:
    """What the sources found for one window, and what each of them did."""

    window: tuple[datetime, datetime]
    sources: dict[str, SourceReport] = field(default_factory=dict)
    papers: list[Paper] = field(default_factory=list)  # distinct papers found, merged
    updates: list[Paper] = field(default_factory=list)  # new versions of papers perhaps held
    documents: list[SeedDocument] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)  # source name -> what it keeps
    new: list[Paper] = field(default_factory=list)  # set once kept: what was not held before
    revised: list[Paper] = field(default_factory=list)
    coverage: coverage.Summary | None = None
    fetched: int = 0  # distinct papers the sources returned, new versions of held ones too

    @property
    def warnings(self) -> list[str]:
        return [w for s in self.sources.values() for w in s.warnings]

    @property
    def notes(self) -> list[str]:
        return [n for s in self.sources.values() for n in s.notes]


def make_fetcher(config: Config) -> Fetcher:
    arxiv = config.sources.arxiv
    agent = f"rl-digest/{__version__} (+https://github.com/rl-digest; mailto:{arxiv.contact})"
    pace = lock.lock_path(config).with_name("arxiv-pace")
    try:  # beside the run lock, which a server database keeps in a state/ folder of its own
        pace.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass  # not writable: this process still paces itself
    return Fetcher(arxiv.delay_seconds, arxiv.timeout_seconds, arxiv.retries, agent,
                   deadline_seconds=arxiv.deadline_seconds,
                   max_bytes=int(config.sources.max_response_mb * 2**20), pace_file=pace)


def window(config: Config, watermark: datetime | None, as_of: datetime,
           since: datetime | None = None) -> tuple[datetime, datetime]:
    """From `since`, else the watermark (less the overlap) or lookback_days, to as_of.

    The end is never past the present, so the watermark never is either, unless the clock
    went back: where the last window really ended is unknown then, and lookback_days are
    read as by a first collect (the window was empty until the clock caught up with it).
    Both ends are in as_of's zone (the present, in UTC, was shown beside a start there, and
    the next window started from it: "15:35 → 23:35" for a window of no time at all).
    """
    arxiv = config.sources.arxiv
    now = datetime.now(UTC).replace(microsecond=0)
    end = min(as_of, now).astimezone(as_of.tzinfo)
    if since is not None:
        return min(since, end).astimezone(as_of.tzinfo), end
    start = (watermark - timedelta(hours=arxiv.overlap_hours)) if watermark and watermark <= now else (
        as_of - timedelta(days=arxiv.lookback_days))
    return min(start, end).astimezone(as_of.tzinfo), end


def collect(config: Config, sources: Sequence[Source], report: CollectReport, fetcher: Fetcher,
            ledger: coverage.Ledger, memory: Mapping[str, Any],
            first_run: bool, reread: bool = False) -> None:
    """Read each source for the report's window, in order, into `report` (filled as it
    goes, so a failed source leaves what the others did); `ledger` takes what was read.
    `reread` (collect --since) has the catch-up read every announcement of the window again,
    those the ledger holds as read too."""
    cal = calendar.load_calendar(config.sources.arxiv.calendar_files)
    # as of the window's end, which is the present for an as-of later today or tomorrow:
    # what the feeds should show is what arXiv has announced by now, not by then
    span = Window(*report.window, report.window[1], cal, feed_groups(config), ledger, first_run,
                  reread=reread)
    found: list[Paper] = []
    first = fetcher.requests
    with progress.bar("fetching from arXiv", count=lambda: fetcher.requests - first, unit="requests"):
        for source in sources:
            got = source.fetch(replace(span, memory=memory.get(source.name)), fetcher)
            if got.report is not None:
                report.sources[source.name] = got.report
            if source.name in REGISTRY:
                found += got.papers
                report.updates += got.updates
                report.documents += got.documents
            else:  # a plug-in's text is outside text, as a feed's is
                found += plugin_papers(got.papers, source.name, report)
                report.updates += plugin_papers(got.updates, source.name, report)
                report.documents += map(cleaned_document, got.documents)
            if got.memory is not None:
                report.memory[source.name] = got.memory
    if any(s.online for s in sources):  # arXiv was read: what of its announcements?
        span.missed()  # the announcements no source read, with the cause of each gap
        for year in cal.unknown_years(*report.window):
            report.sources.setdefault(CALENDAR, SourceReport()).warnings.append(
                f"arXiv's holidays for {year} are not known (known: {cal.known()}): a holiday evening "
                f"looks like a stale feed; {calendar.how_to_add(year)}")
        report.coverage = coverage.summarise(ledger, cal, span.groups, *report.window)
    unique: dict[str, Paper] = {}
    for paper in found:
        if paper.id in unique:
            name = "api" if "api" in paper.sources else paper.sources[0] if paper.sources else ""
            if name in report.sources:
                report.sources[name].duplicates += 1
            unique[paper.id] = merge_papers(unique[paper.id], paper)
        else:
            unique[paper.id] = paper
    report.papers = list(unique.values())
    report.fetched = len(report.papers)


def plugin_papers(papers: Iterable[Paper], name: str, report: CollectReport) -> list[Paper]:
    """A plug-in source's papers, each by its version-less arXiv id (a version or an abs
    link is read as a feed's is) and cleaned; one whose id is no arXiv id is left out with
    a warning: it became a link to arxiv.org and an arXiv DOI that do not exist, and an id
    holding `}` broke its BibTeX entry."""
    kept, odd = [], []
    for paper in papers:
        ident, version = split_arxiv_id(paper.id)
        if ARXIV_ID.fullmatch(ident):
            kept.append(cleaned(replace(paper, id=ident, version=version or paper.version)))
        else:
            odd.append(paper.id)
    if odd:
        report.sources.setdefault(name, SourceReport()).warnings.append(
            f"{name}: left out {len(odd)} paper(s) whose id is not an arXiv id such as 2410.10110: "
            f"{text.clip(text.clean_name(repr(odd[0])), 80)}")
    return kept


def cleaned(paper: Paper) -> Paper:
    """A plug-in source's paper with its text cleaned and bounded as the built-in sources
    clean theirs where it enters (pipeline/text.py), its times in UTC as theirs are (the
    store orders them as text: 01:00+08:00 sorted after 20:00+00:00 the day before)."""
    return replace(paper, title=text.title(paper.title), abstract=text.prose(paper.abstract),
                   authors=text.names(paper.authors),
                   categories=tuple(c for c in map(text.clean_name, paper.categories) if c),
                   comment=text.comment(paper.comment),
                   journal_ref=text.journal_ref(paper.journal_ref),
                   submitted=_utc(paper.submitted), updated=_utc(paper.updated))


def _utc(moment: datetime | None) -> datetime | None:
    """A plug-in's time in UTC; one without a zone is taken as UTC, as arXiv's are."""
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def cleaned_document(doc: SeedDocument) -> SeedDocument:
    """A plug-in source's seed document with its text cleaned and bounded as the seeds
    source cleans a seed file's: names and titles one line, the rest prose; an entry left
    with no title is left out, as a seed file's is."""
    return replace(doc, source=_file_name(doc.source), intro_zh=text.prose(doc.intro_zh) or None,
                   comparison=tuple(tuple(map(text.prose, row)) for row in doc.comparison),
                   synthesis_zh=text.prose(doc.synthesis_zh) or None,
                   entries=tuple(e for e in map(cleaned_entry, doc.entries) if e.title),
                   warnings=tuple(replace(w, source=_file_name(w.source), message=text.title(w.message))
                                  for w in doc.warnings))


def cleaned_entry(entry: SeedEntry) -> SeedEntry:
    """A plug-in's seed entry, cleaned as cleaned_document says; an arxiv_id that is no
    arXiv id is none (it was a link to a page arxiv.org does not have)."""
    ident = split_arxiv_id(text.clean_name(entry.arxiv_id))[0]
    return replace(entry, title=text.title(entry.title), source=_file_name(entry.source),
                   summary_zh=text.prose(entry.summary_zh) or None,
                   summary_en=text.prose(entry.summary_en) or None,
                   arxiv_id=ident if ARXIV_ID.fullmatch(ident) else None,
                   topic=text.clean_name(entry.topic) or None,
                   headline_zh=text.prose(entry.headline_zh) or None,
                   parts_zh=tuple((text.title(label), text.prose(body)) for label, body in entry.parts_zh))


def _file_name(value: str) -> str:
    """A seed's file name, one line and short enough for its column (255)."""
    return text.clip(text.clean_name(value), text.NAME_MAX)


def with_versions(updates: Iterable[Paper], known: Mapping[str, Paper]) -> list[Paper]:
    """Replacements of papers held, with the version the feed did not say filled in."""
    return [replace(u, version=u.version or known[u.id].version) for u in updates if u.id in known]


def count_kept(report: CollectReport, new: list[Paper], revised: list[Paper]) -> None:
    """Once kept: what was new and what revised, per source."""
    report.new, report.revised = new, revised
    for name, part in report.sources.items():
        part.new = sum(1 for p in new if name in p.sources)
        part.revised = sum(1 for p in revised if name in p.sources)


def feed_groups(config: Config) -> list[str]:
    """The category groups coverage is kept for: one per feed, or per category without RSS."""
    rss = config.sources.rss
    if rss.enabled:
        return [arxiv_rss.feed_spec(url) for url in arxiv_rss.split_feeds(rss.urls, rss.categories_per_feed)]
    return list(config.sources.arxiv.categories)


@dataclass
class Resolution:
    """Seed entries tied to papers: seed key -> arXiv id (None: searched, not found)."""

    tied: dict[str, str | None] = field(default_factory=dict)
    papers: list[Paper] = field(default_factory=list)  # found by the title search

    def apply(self, seeds: Sequence[SeedEntry]) -> list[SeedEntry]:
        return [replace(s, arxiv_id=self.tied.get(seed_key(s.title)) or s.arxiv_id) for s in seeds]


def resolve_seeds(seeds: Sequence[SeedEntry], titles: Sequence[tuple[str, str]],
                  tries: Mapping[str, datetime | None], threshold: float,
                  search: Callable[[list[str]], list[Paper]] | None,
                  retry_after: timedelta, now: datetime) -> Resolution:
    """Tie seed entries to arXiv papers by fuzzy title.

    Known papers first (`titles`: id, title); then, with `search`, the titles still
    unresolved, OR-ed into a few API searches and matched here, not repeated within
    retry_after of the last try (`tries`). A weak match is not forced.
    """
    found = Resolution()
    unresolved = [seed for seed in seeds if not seed.arxiv_id]
    if not unresolved:
        return found
    ids = [pid for pid, _ in titles]
    normals = [normal_title(title) for _, title in titles]
    to_search = []
    for seed in progress.track(unresolved, "resolving seeds", len(unresolved)):
        key = seed_key(seed.title)
        index = closest(seed.title, normals, threshold)
        tried = tries.get(key)
        if index is not None:
            found.tied[key] = ids[index]
        elif search is not None and (tried is None or now - tried >= retry_after):
            to_search.append((key, seed.title))
    if not to_search or search is None:
        return found
    papers = search([title for _, title in to_search])
    found_normals = [normal_title(p.title) for p in papers]
    for key, title in to_search:
        index = closest(title, found_normals, threshold)
        if index is not None:
            found.papers.append(papers[index])
        found.tied[key] = papers[index].id if index is not None else None
    return found


def normal_title(title: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", title.casefold()).split())


def closest(title: str, normal_titles: list[str], threshold: float) -> int | None:
    """Index of the whole title closest to `title`; typos and punctuation are forgiven."""
    found = process.extractOne(normal_title(title), normal_titles, scorer=fuzz.ratio,
                               score_cutoff=threshold)
    return found[2] if found else None


def as_dict(report: CollectReport) -> dict[str, Any]:
    return {
        "window": [report.window[0].isoformat(), report.window[1].isoformat()],
        "sources": {name: vars(part) for name, part in report.sources.items()},
        "new": len(report.new), "revised": len(report.revised),
        "coverage": asdict(report.coverage) if report.coverage else None,
    }
