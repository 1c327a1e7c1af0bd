"""Catch-up after downtime through arXiv's OAI-PMH interface, via oaipmh-scythe and our Fetcher.

arXiv recommends OAI-PMH for bulk and catch-up: one set per category
(`cs:cs:LG`), `from=<date>` on the record's datestamp, resumption tokens
for paging, and `arXivRaw` records that carry every version with its date.
oaipmh-scythe keeps the protocol (paging, OAI errors); every HTTP request
goes through the shared Fetcher (`Scythe._request` is overridden), so the
3-second pace, retries, 503 with Retry-After and the request count are the
same as for the API and the feeds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from urllib.parse import urlencode

import httpx2
from lxml import etree
from oaipmh_scythe import Scythe
from oaipmh_scythe.exceptions import NoRecordsMatch, OAIPMHException

from pipeline import text
from pipeline.calendar import Calendar
from pipeline.errors import DigestError, SourceError
from pipeline.models import ARXIV_ID, Paper, collapse
from pipeline.rank import Query
from pipeline.sources import Found, SourceSetup, Window
from pipeline.sources.arxiv_rss import announced_before, rfc822, split_authors
from pipeline.sources.http import Fetched, Fetcher, looks_like_html
from pipeline.stopping import Stopped

_RAW = "{http://arxiv.org/OAI/arXivRaw/}"
_OAI = "http://www.openarchives.org/OAI/2.0/"
_STRICT = etree.XMLParser(resolve_entities=False, no_network=True)  # no recover: a cut page fails
EMPTY_PAGES = 3  # pages in a row with a resumption token and no record: a harvest going nowhere


@dataclass(frozen=True)
class Harvest:
    """What one set's harvest returned: papers (first version date in `submitted`)."""

    category: str
    papers: tuple[Paper, ...]
    records: int  # every record, before any filter
    latest: date | None  # the newest datestamp: how far the harvest reaches
    unread: tuple[str, ...] = ()  # identifiers of records with no arXiv id or no date of version 1
    stamps: dict[str, date] = field(default_factory=dict)  # each paper's datestamp, by id


class OaiCatchUp:
    """Harvest each group with a gap through OAI-PMH, from a day before the deadline of the
    announcement preceding the first missed one on (where the kept papers start: a Monday's
    batch begins at Friday's deadline, before Sunday's announcement).

    Kept: papers whose first version falls in the missed window (from a day before that
    deadline), or was sent earlier and held until a missed evening (_held), and that match
    the query, and as updates
    the older papers revised in that window (the run keeps those it holds: a new version,
    venue or code for the Updates section). A missed day counts as recovered once the
    harvest reaches it.
    """

    name, label, online = "oai", "OAI-PMH", True

    def __init__(self, url: str, query: Query):
        self.url, self.query = url, query

    def fetch(self, window: Window, fetcher: Fetcher) -> Found:
        found = Found()
        part, cal, missed = found.report, window.calendar, window.missed()
        assert part is not None
        reach = None  # the newest datestamp of any set: how far OAI-PMH is up to date
        harvests: dict[str, list[Harvest]] = {}
        for group, days in missed.items():
            began, before = time.monotonic(), fetcher.requests
            first, last = cal.at(days[0]), cal.at(days[-1])
            earlier = cal.between(first.at - timedelta(days=10), first.at - timedelta(seconds=1))
            low = cal.cutoff((earlier[-1] if earlier else first).day) - timedelta(days=1)
            for category in group.split("+"):  # from where the kept papers start: a batch arXiv
                # announced on an evening the calendar skips is stamped before the first missed one
                got = harvest(fetcher, self.url, category, low.date())
                part.seen += got.records
                if got.unread:  # an answer of another metadataPrefix, a date not RFC 822: none kept
                    part.warnings.append(
                        f"{self.url}: OAI-PMH set {set_spec(category)}: {len(got.unread)} of "
                        f"{got.records} records skipped: no arXiv id in arXivRaw <id>, or no RFC 822 date of "
                        f"version 1 ({', '.join(got.unread[:3])}{', …' if len(got.unread) > 3 else ''})")
                found.papers += [p for p in got.papers if p.submitted and (
                    low <= p.submitted <= last.at
                    or p.submitted < low and _held(p, got.stamps.get(p.id), first.day, last.day))
                    and self.query.matches(p.title, p.abstract, p.categories)]
                found.updates += [p for p in got.papers  # revised in the gap: news for a held paper
                                  if p.version > 1 and p.submitted and p.submitted < low
                                  and p.updated and low <= p.updated <= last.at]
                harvests.setdefault(group, []).append(got)
                reach = max(filter(None, (reach, got.latest)), default=None)
            part.requests += fetcher.requests - before
            part.seconds += time.monotonic() - began
        waiting: dict[str, list[str]] = {}  # days not in OAI-PMH yet -> the groups that wait for them
        for group, days in missed.items():
            for day in days:
                if reach is None or reach < day:
                    continue  # not in OAI-PMH yet: the next collect tries again
                reading = window.ledger.get(day, group)
                reading.recovered = "OAI-PMH"
                if not reading.read or reading.gap:  # unread, or a feed cut at arXiv's cap listed some
                    # a paper in two of the group's sets is one of its ids, as in its feed
                    on_day = {p.id: p for got in harvests[group] for p in got.papers
                              if _announced_day(cal, p, got.stamps.get(p.id), days) == day}.values()
                    firsts = [p for p in on_day if p.version == 1]
                    new = sum(1 for p in firsts if _primary_in(p, group))
                    # set, not added to: an evening read again (collect --since) was counted before
                    reading.new, reading.cross = new, len(firsts) - new
                    reading.replace = sum(1 for p in on_day if p.version > 1)
                    reading.match(p.id for p in on_day
                                  if self.query.matches(p.title, p.abstract, p.categories))
            unrecovered = [d for d in days if window.ledger.get(d, group).open]
            if unrecovered:
                waiting.setdefault(", ".join(f"{d:%m-%d}" for d in unrecovered), []).append(group)
        for days_text, groups in waiting.items():  # one line for the feeds that wait for the same days
            named = groups[0] if len(groups) == 1 else f"{len(groups)} feeds ({', '.join(groups)})"
            part.warnings.append(f"{named}: OAI-PMH has nothing yet for {days_text}; "
                                 "the next collect tries again")
        return found


def oai_source(setup: SourceSetup) -> OaiCatchUp | None:
    """The registered factory: on when sources.oai is (then the API search is off)."""
    oai, arxiv = setup.config.sources.oai, setup.config.sources.arxiv
    return OaiCatchUp(oai.url, Query.compile(arxiv.categories, arxiv.terms)) if oai.enabled else None


def _held(paper: Paper, stamp: date | None, first: date, last: date) -> bool:
    """A first version sent before the missed window whose record was stamped in it: arXiv held
    it (moderation can take weeks) and announced it on a missed evening, stamped that day or
    the next. An older id than the month before (ids count months of submission), as the feed
    reads a cross-list, is an older paper whose record changed (a journal reference) instead."""
    return (paper.version == 1 and stamp is not None and first <= stamp <= last + timedelta(days=1)
            and not announced_before(paper.id, 1, datetime(stamp.year, stamp.month, stamp.day, tzinfo=UTC)))


def _primary_in(paper: Paper, group: str) -> bool:
    """Whether the paper's primary category (arXivRaw lists it first) is one of the group's, or
    in its archive: its feed lists it as new, one cross-listed to the group as cross."""
    primary = paper.primary_category or ""
    return any(primary == wanted or primary.startswith(wanted + ".") for wanted in group.split("+"))


def _announced_day(cal: Calendar, paper: Paper, stamp: date | None = None,
                   days: list[date] | None = None) -> date | None:
    """The evening this version was announced (Calendar.announced_on); for one held (_held)
    and announced on one of the missed `days`, the last of them by its stamp. A record is
    stamped the evening's date or the next (in UTC, past 20:00 in New York): no earlier
    evening than the one before its stamp is a hold."""
    moment = paper.updated if paper.version > 1 else paper.submitted
    if moment is None:
        return None
    day = cal.announced_on(moment)
    if days and stamp and day < stamp - timedelta(days=1) and _held(paper, stamp, days[0], days[-1]):
        return max((d for d in days if d <= stamp), default=day)
    return day


def set_spec(category: str) -> str:
    """cs.LG -> cs:cs:LG, stat.ML -> stat:stat:ML; a whole archive (cs) is its own set."""
    archive, _, _sub = category.partition(".")
    return f"{archive}:{category.replace('.', ':')}" if _sub else archive


def harvest(fetcher: Fetcher, url: str, category: str, since: date) -> Harvest:
    """Every record of the category's set changed since `since`, all pages.

    A harvest that ends with fewer records than a page's completeListSize promised lost a
    page (a proxy can pass on a cut answer as a whole one), so it fails like any other:
    anything else the harvest raises is a SourceError too, so the watermark stays.
    """
    papers, records, latest, unread, stamps = [], 0, None, [], {}
    client, spec = _Scythe(url, fetcher), set_spec(category)
    try:
        for record in client.list_records(from_=since.isoformat(), metadata_prefix="arXivRaw",
                                          set_=spec):
            records = client.read = records + 1  # deleted ones too: completeListSize counts them
            if record.deleted:  # type: ignore[union-attr]
                continue
            stamp = date.fromisoformat(record.header.datestamp[:10])  # type: ignore[union-attr,index]
            latest = max(latest, stamp) if latest else stamp
            paper = _to_paper(record.xml)
            if paper is not None:
                papers.append(paper)
                stamps[paper.id] = stamp
            else:
                unread.append(collapse(record.header.identifier or "")[:100])  # type: ignore[union-attr]
    except NoRecordsMatch:
        pass  # an empty range is an answer, not a failure
    except OAIPMHException as exc:
        raise SourceError(f"{url}: OAI-PMH error for set {spec}: "
                          f"{type(exc).__name__} {exc}".rstrip()) from None
    except (DigestError, Stopped):
        raise
    except Exception as exc:  # whatever it is, this harvest is not whole
        raise SourceError(f"{url}: could not read the OAI-PMH harvest of set {spec} "
                          f"({type(exc).__name__}: {collapse(str(exc))})") from None
    if records < client.listed:
        raise SourceError(f"{url}: the OAI-PMH harvest of set {spec} ended after {records} records "
                          f"of the {client.listed} its completeListSize promised")
    return Harvest(category, tuple(papers), records, latest, tuple(unread), stamps)


def identify(fetcher: Fetcher, url: str) -> str:
    """The repository's name from one Identify request: the URL answers OAI-PMH."""
    try:
        return _Scythe(url, fetcher).identify().repositoryName or "a repository with no name"
    except (OAIPMHException, ValueError) as exc:
        raise SourceError(f"{url}: not an OAI-PMH Identify answer ({exc})") from None


class _Scythe(Scythe):
    """oaipmh-scythe with its HTTP done by the Fetcher (no retries of its own)."""

    def __init__(self, url: str, fetcher: Fetcher):
        super().__init__(url)
        self._fetcher = fetcher
        self.listed = 0  # the largest completeListSize a page gave: what the harvest must reach
        self.tokens: set[str] = set()  # the resumption tokens asked with
        self.read = 0  # the records the harvest has read (it counts them)
        self.empty = (0, 0)  # the pages in a row that brought no record, and `read` at the last page

    def _request(self, query: dict[str, str]) -> httpx2.Response:
        address = f"{self.endpoint}?{urlencode(query)}"
        token = query.get("resumptionToken")
        if token is not None:  # a token handed out again would page in a circle, for ever
            if token in self.tokens:
                raise SourceError(f"{address}: OAI-PMH gave this resumption token a second time")
            self.tokens.add(token)
            # a new token on each page but no records would page for ever, one request each 3 s
            empty = self.empty[0] + 1 if self.read == self.empty[1] else 0
            if empty >= EMPTY_PAGES:
                raise SourceError(f"{address}: OAI-PMH gave {empty} pages in a row with a resumption "
                                  "token and no record")
            self.empty = (empty, self.read)
        page = self._fetcher.get(address, retry_when=self._check_page)
        return httpx2.Response(200, content=text.xml_safe(page.body), request=httpx2.Request("GET", address))

    def _check_page(self, page: Fetched) -> str | None:
        """Fail at once on what is not an OAI-PMH answer (an HTML or text page with 200); retry
        a page that is not well-formed XML (cut off by a dropped connection): oaipmh-scythe
        parses with recover=True and would take the records before the cut for the whole page.
        What XML forbids inside a record (a raw form feed pasted from a PDF) goes first, as
        from the API and the feed: one such record failed every harvest of its window."""
        if looks_like_html(page.body, page.content_type) or _OAI.encode() not in page.body[:2000]:
            raise SourceError(f"{page.url}: not an OAI-PMH answer")
        try:
            root = etree.fromstring(text.xml_safe(page.body), _STRICT)
        except etree.XMLSyntaxError as exc:
            return f"malformed XML from OAI-PMH ({collapse(str(exc))})"  # lxml may quote lines of it
        size = root.find(f".//{{{_OAI}}}resumptionToken")
        if size is not None and size.get("completeListSize", "").isdigit():
            self.listed = max(self.listed, int(size.get("completeListSize", "")))
        return None


def _to_paper(record: etree._Element) -> Paper | None:
    raw = record.find(f".//{_RAW}arXivRaw")
    if raw is None:
        return None

    def field(tag: str) -> str:
        return collapse(raw.findtext(f"{_RAW}{tag}") or "")

    dates = [rfc822(v.findtext(f"{_RAW}date")) for v in raw.findall(f"{_RAW}version")]
    categories = tuple(field("categories").split())
    if not ARXIV_ID.fullmatch(field("id")) or not dates or dates[0] is None:  # 2611.00001v2: not a key
        return None
    return Paper(
        id=field("id"),
        title=text.title(field("title")),
        abstract=text.prose(field("abstract")),
        version=len(dates),
        authors=split_authors(field("authors")),
        categories=tuple(text.clean_name(cat) for cat in categories),
        submitted=dates[0],
        updated=dates[-1],
        comment=text.comment(field("comments")),
        journal_ref=text.journal_ref(field("journal-ref")),
        sources=("oai",),
    )
