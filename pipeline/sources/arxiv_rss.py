"""The daily arXiv announcement feed (rss.arxiv.org, 2024+ format) as Paper records.

The feed is the fast path: it lists a day's new papers hours before the API's
search index has them. Its records are thin (no submission date, no comment);
`arxiv_api.fetch_ids` completes them.
"""

from __future__ import annotations

import io
import logging
import re
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import feedparser

from pipeline import text
from pipeline.calendar import Announcement, Calendar
from pipeline.errors import SourceError
from pipeline.models import ARXIV_ID, Paper, collapse, split_arxiv_id
from pipeline.rank import Query
from pipeline.sources import FEED_ERROR, Found, SourceSetup, Window
from pipeline.sources.http import Fetcher, looks_like_html
from pipeline.stopping import pause

log = logging.getLogger(__name__)

KEPT_TYPES = ("new", "cross")
REPLACED_TYPES = ("replace", "replace-cross")

# "arXiv:2411.17700v1 Announce Type: new \nAbstract: ..." (note the space before \n)
_PREFIX = re.compile(r"\s*arXiv:(?P<id>\S+)\s+Announce Type:\s*(?P<type>\S+)\s*Abstract:\s*")
_ERROR_TEXT = re.compile(r"\b(error|bad archive|invalid)\b", re.IGNORECASE)
_PARENTHESES = re.compile(r"\([^()]*\)")
_AND = re.compile(r"^and\s+|\s+and\s+")
MAYBE_HOLIDAY = "feed stale or a holiday"  # the ledger's gap on such an evening
CAP = 2000  # rss.arxiv.org lists at most this many items: a feed this long was cut
_NEW_STYLE_ID = re.compile(r"^(\d{4})\.(\d{4,5})$")


@dataclass(frozen=True)
class Replacement:
    """A new version of an older paper, or an older paper newly cross-listed: it only
    updates a paper we already hold."""

    id: str
    version: int | None
    announced: datetime | None
    announce_type: str  # replace, replace-cross, or cross (of a paper announced before)


@dataclass(frozen=True)
class FeedResult:
    """One feed read: papers to consider, replacements, and what looked wrong."""

    url: str
    papers: tuple[Paper, ...] = ()  # announce type new, or cross of a paper announced now
    replacements: tuple[Replacement, ...] = ()
    warnings: tuple[str, ...] = ()
    items: int = 0  # every <item>, whatever its type
    error: str | None = None  # arXiv's "Feed error for query" answer (an unknown category), as it says

    @property
    def dated(self) -> datetime | None:
        """The newest date of its items (pubDate: the feed's day, the batch of the evening before)."""
        return max(filter(None, [p.updated for p in self.papers] + [r.announced for r in self.replacements]),
                   default=None)

    @property
    def truncated(self) -> bool:
        return self.items >= CAP

    def counts(self) -> tuple[int, int, int]:
        """Ids seen: (new, cross, replace or replace-cross)."""
        new = sum(1 for p in self.papers if p.announce_type != "cross")
        older = sum(1 for r in self.replacements if r.announce_type == "cross")
        return new, len(self.papers) - new + older, len(self.replacements) - older


class ArxivRss:
    """Each feed once; the stale ones again every poll interval until the batch is out (not
    when every feed is stale on an evening of a year the calendar lacks: maybe a holiday).

    Kept: the papers that match the query, and the replacements (a new version of a paper
    perhaps held). Remembers, per feed, the last announcement read and its newest id, to
    tell a feed that was not rebuilt from one with nothing new.
    """

    name, label, online = "rss", "RSS", True

    def __init__(self, urls: list[str], query: Query, poll_minutes: float, poll_interval_minutes: float):
        self.urls, self.query = urls, query
        self.poll_minutes, self.poll_interval_minutes = poll_minutes, poll_interval_minutes

    def fetch(self, window: Window, fetcher: Fetcher) -> Found:
        seen: dict[str, dict[str, Any]] = dict(window.memory or {})  # feed URL -> {"day", "newest"}
        found = Found(memory=seen)
        part = found.report
        assert part is not None
        due, evening = window.calendar.in_feed(window.as_of)
        if due is None:
            part.notes.append(f"no announcement expected: {window.calendar.why_not(evening)}")
        # a feed holds only its latest announcement: one read for a later one than the as-of's
        # (a back-dated run) has moved past it, and the API or the catch-up reads the window
        past = [url for url in self.urls if _moved_past(seen.get(url) or {}, evening)]
        if past:
            part.notes.append(f"RSS not read for {', '.join(feed_spec(url) for url in past)}: "
                              f"the feed was read for a later announcement than {evening:%m-%d}'s")
        deadline = time.monotonic() + self.poll_minutes * 60
        pending, feeds = [url for url in self.urls if url not in past], {}
        ahead: dict[str, str] = {}  # feeds dated after the as-of's announcement -> their date
        while True:
            began, before = time.monotonic(), fetcher.requests
            for url in pending:
                feeds[url] = fetch_feed(fetcher, url)
            part.requests += fetcher.requests - before
            part.seconds += time.monotonic() - began
            ahead.update(_set_aside(feeds, pending, evening, window.calendar))
            pending = [url for url in pending if url in feeds and due
                       and _stale(seen.get(url) or {}, feeds[url], due.day)]
            wait = self.poll_interval_minutes * 60
            holiday = maybe_holiday(window, due, feeds, pending)
            if not pending or holiday or time.monotonic() + wait > deadline:
                break
            log.info("RSS: %s not yet rebuilt for the %s announcement; looking again in %g min, "
                     "for up to %.0f min more (sources.rss.poll_minutes)",
                     ", ".join(feed_spec(url) for url in pending), due.day if due else "next",
                     self.poll_interval_minutes, (deadline - time.monotonic()) / 60)
            pause(wait)
        if ahead:  # as `past`, for a feed not read since it moved past
            part.notes.append(f"RSS not read for {', '.join(map(feed_spec, ahead))}: the feed carries "
                              f"a later announcement (dated {', '.join(sorted(set(ahead.values())))}) "
                              f"than {evening:%m-%d}'s")
        for url, feed in feeds.items():
            self._take(url, feed, found, due, window, stale=url in pending, holiday=holiday)
        if holiday and due is not None:  # one line, not one a feed: nothing says a feed is late
            named = f"{feed_spec(pending[0])} shows" if len(pending) == 1 else f"{len(pending)} feeds show"
            part.warnings.append(
                f"RSS: {named} nothing new for the {due.day} announcement; arXiv's "
                f"holidays for {due.day.year} are not known, so it may be one: read once, not polled "
                "(sources.rss.poll_minutes); a later collect's catch-up reads the day if arXiv announced")
        return found

    def _take(self, url: str, feed: FeedResult, found: Found, due: Announcement | None,
              window: Window, stale: bool, holiday: bool = False) -> None:
        group, part, seen = feed_spec(url), found.report, found.memory
        assert part is not None
        part.seen += feed.items
        part.warnings += feed.warnings
        kept = [p for p in feed.papers if self.query.matches(p.title, p.abstract, p.categories)]
        if feed.error is not None:  # a wrong category: the same answer however often it is asked
            part.warnings.append(f"{url}: arXiv reports a feed error for {group} "
                                 f"(check sources.rss.urls): {feed.error}")
            if due is not None:
                window.ledger.get(due.day, group).gap = f"{FEED_ERROR}: {feed.error}"
        elif due is not None:
            reading = window.ledger.get(due.day, group)
            last = seen.get(url) or {}
            if stale and holiday:
                reading.gap = reading.gap or MAYBE_HOLIDAY
            elif stale:
                was = f"the {last['day'][5:]} announcement's" if last.get("day") else "before"
                part.warnings.append(
                    f"stale feed: {group} is empty although arXiv announced on {due.day}" if not feed.items
                    else f"stale feed: {group} shows no id newer than {was} ({url})")
                reading.gap = reading.gap or "feed stale"
            else:
                counts = feed.counts()
                reading.read = "RSS"
                reading.match(p.id for p in kept)
                reading.new, reading.cross, reading.replace = counts
                seen[url] = {"day": due.day.isoformat(), "newest": newest_id(feed)}
                if feed.truncated:
                    part.warnings.append(f"{url}: {feed.items} items, arXiv's cap: the feed was cut; "
                                         "the rest is read through the catch-up")
                    reading.gap = f"feed cut at {feed.items} items"
        found.papers += kept  # a stale feed's papers were likely read before: dedupe sorts it
        found.updates += [Paper(id=r.id, title="", version=r.version or 0, updated=r.announced,
                                sources=("rss",)) for r in feed.replacements]


def rss_source(setup: SourceSetup) -> ArxivRss | None:
    """The registered factory: the configured feeds, split to categories_per_feed."""
    arxiv, rss = setup.config.sources.arxiv, setup.config.sources.rss
    if not rss.enabled:
        return None
    query = Query.compile(arxiv.categories, arxiv.terms)
    return ArxivRss(split_feeds(rss.urls, rss.categories_per_feed), query, rss.poll_minutes,
                    rss.poll_interval_minutes)


def maybe_holiday(window: Window, due: Announcement | None, feeds: dict[str, FeedResult],
                  pending: list[str]) -> bool:
    """Every feed that answered shows nothing new on an evening of a year whose holidays no
    calendar file lists: arXiv may not have announced, and polling cannot tell. A feed that
    did show the batch says it was announced: then the others are late, and polled."""
    return (due is not None and due.day.year not in window.calendar.years and bool(pending)
            and all(url in pending for url, feed in feeds.items() if feed.error is None))


def _moved_past(last: dict[str, Any], evening: date) -> bool:
    """This feed was last read for an announcement after `evening`'s."""
    return bool(last.get("day")) and last["day"] > evening.isoformat()


def _set_aside(feeds: dict[str, FeedResult], urls: list[str], evening: date,
               calendar: Calendar) -> dict[str, str]:
    """Of `urls`, the feeds whose items are dated (in New York) after the feed that carries
    `evening`'s batch, dated the day after it: they hold a later announcement's, read or not
    (a back-dated run after downtime). Taken out of `feeds`, each with its date (MM-DD).
    Dates only ever lag the content, so they never tell a fresh feed; a later one tells this."""
    later = {}
    for url in urls:
        dated = feeds[url].dated
        if dated is not None and dated.astimezone(calendar.zone).date() > evening + timedelta(days=1):
            later[url] = f"{dated.astimezone(calendar.zone):%m-%d}"
            del feeds[url]
    return later


def _stale(last: dict[str, Any], feed: FeedResult, day: date) -> bool:
    """No id newer than the newest of the last announcement read from this feed.

    A feed error is not stale: it is a configuration error that polling cannot mend."""
    if last.get("day") == day.isoformat() or feed.error is not None:
        return False  # this announcement was read before: nothing newer is due
    newest = newest_id(feed)
    return newest is None or (last.get("newest") is not None
                              and id_order(newest) <= id_order(last["newest"]))


def split_feeds(urls: list[str], per_feed: int) -> list[str]:
    """Each feed URL (…/rss/a+b+c) as feeds of at most per_feed categories, in order, once each.

    One feed of many categories can reach the 2000-item cap on a busy day and
    silently lose its replacements and cross-lists; several small feeds cannot.
    """
    out: list[str] = []
    for url in urls:
        base, _, spec = url.rstrip("/").rpartition("/")
        categories = [c for c in spec.split("+") if c]
        for i in range(0, len(categories), per_feed):
            out.append(f"{base}/{'+'.join(categories[i : i + per_feed])}")
    return list(dict.fromkeys(out))


def feed_spec(url: str) -> str:
    """The categories a feed URL asks for, as written in it (cs.LG, or cs.LG+cs.CL)."""
    return url.rstrip("/").rpartition("/")[2]


def newest_id(feed: FeedResult) -> str | None:
    """The newest arXiv id a feed lists: freshness is judged by ids, never by dates."""
    ids = [p.id for p in feed.papers] + [r.id for r in feed.replacements]
    return max(ids, key=id_order) if ids else None


def id_order(ident: str) -> tuple[int, int]:
    """2611.01234 -> (2611, 1234); old-style ids (cs/0601001) sort first."""
    match = _NEW_STYLE_ID.match(ident)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def fetch_feed(fetcher: Fetcher, url: str) -> FeedResult:
    """Fetch one feed through the shared Fetcher and parse it."""
    return parse_feed(fetcher.get(url).body, url)


def parse_feed(data: bytes, url: str) -> FeedResult:
    """Parse feed bytes; SourceError if they are not a feed at all.

    An arXiv error answer ("Feed error for query", for an unknown category) is a
    well-formed feed with the error in its channel description: it is kept in `error`
    for the caller to report, neither a success nor an exception.
    Sanitizing is off: feedparser would rewrite TeX like `$1/3<s<1$` as HTML.
    The bytes go in as a stream: feedparser tries bare bytes as a file path first.
    """
    if looks_like_html(data):
        raise SourceError(f"{url}: an HTML page instead of an RSS feed")
    try:
        parsed = feedparser.parse(io.BytesIO(text.xml_safe(data)), sanitize_html=False,
                                  resolve_relative_uris=False)
    except Exception as exc:  # feedparser's own slips on broken bytes (a non-ASCII encoding name)
        raise SourceError(f"{url}: malformed feed XML ({type(exc).__name__}: {collapse(str(exc))})") from None
    channel = parsed.feed
    if parsed.bozo and not parsed.entries and not channel.get("title"):
        raise SourceError(f"{url}: malformed feed XML ({parsed.get('bozo_exception')})")
    if not parsed.get("version"):
        raise SourceError(f"{url}: not an RSS feed")

    warnings, error = [], None
    title, description = channel.get("title", ""), channel.get("subtitle", "")
    if title.startswith("Feed error") or _ERROR_TEXT.search(description):
        error = text.prose(description or title, 500)
    if parsed.bozo:
        warnings.append(
            f"{url}: feed is not well-formed ({parsed.get('bozo_exception')}); "
            f"kept the {len(parsed.entries)} items read"
        )

    papers, replacements = [], []
    for entry in parsed.entries:
        record = _read_item(entry)
        if isinstance(record, str):
            warnings.append(f"{url}: {record}")
        elif isinstance(record, Replacement):
            replacements.append(record)
        else:
            papers.append(record)
    return FeedResult(
        url=url,
        papers=tuple(papers),
        replacements=tuple(replacements),
        warnings=tuple(warnings),
        items=len(parsed.entries),
        error=error,
    )


def split_authors(creator: str) -> tuple[str, ...]:
    """'A (Univ X, Dept Y), B, and C' -> ('A', 'B', 'C').

    dc:creator is one comma-separated string; affiliations in parentheses are
    dropped (their commas must not split) so names match the API's.
    """
    cut = len(creator) > 200_000
    names = creator[:200_000].rsplit(",", 1)[0] if cut else creator  # bounded before the regexes below
    while _PARENTHESES.search(names):
        names = _PARENTHESES.sub("", names)
    return text.names((name for part in names.split(",") for name in _AND.split(part)), more=cut)


def _read_item(entry: Any) -> Paper | Replacement | str:
    """One <item> as a Paper, a Replacement, or a warning explaining the skip."""
    description = _field(entry, "summary")
    prefix = _PREFIX.match(description)
    raw_id = _field(entry, "id") or (prefix["id"] if prefix else "")
    if not raw_id:
        return f"skipped an item without an arXiv id ({text.title(_field(entry, 'title'))!r})"
    ident, version = split_arxiv_id(raw_id)
    if not ARXIV_ID.fullmatch(ident):  # 'oai:arXiv.org:2411.17705 \nv1' made '2411.17705 \n' a key
        return f"skipped an item whose id is not an arXiv id ({text.clip(text.clean_name(raw_id), 80)!r})"
    if version is None and prefix:
        version = split_arxiv_id(prefix["id"])[1]
    kind = (_field(entry, "arxiv_announce_type") or (prefix["type"] if prefix else "")).strip()
    announced = rfc822(_field(entry, "published"))
    if kind in REPLACED_TYPES or kind == "cross" and announced_before(ident, version, announced):
        return Replacement(ident, version, announced, kind)
    if kind not in KEPT_TYPES:
        return f"skipped {ident} with unknown announce type {kind!r}"
    return Paper(
        id=ident,
        title=text.title(_field(entry, "title")),
        abstract=text.prose(description[prefix.end() :] if prefix else description),
        version=version or 1,
        authors=split_authors(_field(entry, "author")),
        categories=tuple(text.clean_name(tag["term"]) for tag in entry.get("tags", [])
                         if isinstance(tag.get("term"), str) and tag["term"]),
        updated=announced,  # when this version was announced; the API has the exact time
        journal_ref=text.journal_ref(_field(entry, "arxiv_journal_reference")),
        sources=("rss",),
        announce_type=kind,
    )


def _field(entry: Any, key: str) -> str:
    """An item's text, "" when absent or not text: feedparser's loose parser, which reads a
    feed its XML parser gave up on (an entity bomb past expat's limit, a broken item), can
    give None or a dict."""
    value = entry.get(key)
    return value if isinstance(value, str) else ""


def announced_before(ident: str, version: int | None, announced: datetime | None) -> bool:
    """A cross-listed paper arXiv announced in an earlier month: at a later version (a first
    announcement is always v1), or with an id older than the month before this announcement
    (ids are numbered by the month of submission). The feed lists a 2022 paper newly
    cross-listed as `cross` (2202.06515v3 in the 2024-11-28 sample): it is not this week's."""
    if (version or 1) > 1:
        return True
    month = id_order(ident)[0]
    if not month:  # an old-style id: before April 2007
        return True
    if announced is None:
        return False
    year, number = divmod(month, 100)
    return (year * 12 + number) < (announced.year % 100 * 12 + announced.month) - 1


def rfc822(text: str | None) -> datetime | None:
    """An RFC 822 date (an item's pubDate, an OAI version's date) as an aware datetime,
    keeping arXiv's -0500 offset; None when absent or unreadable."""
    try:
        return parsedate_to_datetime(text) if text else None
    except (TypeError, ValueError, OverflowError):  # seconds of 80 digits: too large for C
        return None
