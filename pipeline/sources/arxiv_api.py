"""Backfill and look-ups through the arXiv API, via the `arxiv` package and our Fetcher.

The `arxiv` package keeps the paging, URL building and Atom parsing; our
Fetcher does every HTTP request, so pacing, timeouts, retries and the request
count are shared with the RSS source.

How the two meet: `arxiv.Client` (4.0.x) calls `self._session.get(url, headers=...)`
and reads only `.status_code` and `.content` of the answer. We put a small
adapter in `_session`. That contract has held since arxiv 2.0 and survived the
4.0 parser rewrite, whereas overriding `_parse_feed` would tie us to its return
type (changed in 4.0) and to the name-mangled `__try_parse_feed`. The client's
own delay and retries are switched off so they never stack on the Fetcher's.
"""

from __future__ import annotations

import logging
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit
from xml.parsers import expat

import arxiv

from pipeline import text
from pipeline.errors import DigestError, SourceError
from pipeline.models import ARXIV_ID, Paper, collapse, split_arxiv_id
from pipeline.sources import FEED_ERROR, Found, SourceSetup, Window
from pipeline.sources.http import Fetched, Fetcher, looks_like_html, shown
from pipeline.stopping import Stopped

MAX_PAGE_SIZE = 2000  # the API's limit per request
MAX_RESULTS = 30_000  # the API's limit per search (start + max_results); past it, HTTP 400
QUERY_CHARS = 1000  # title searches per request: well inside arXiv's URL limits
SEARCH_TRIES = 3  # a search whose results shift while it is paged is read again, this often
_TOTAL = "http://a9.com/-/spec/opensearch/1.1/ totalResults"
_ATOM = "http://www.w3.org/2005/Atom"
_ATOM_FEED = f"{_ATOM} feed"  # expat's "namespace local" names
_ATOM_ENTRY = f"{_ATOM} entry"
_ATOM_ID = f"{_ATOM} id"
_ATOM_SUMMARY = f"{_ATOM} summary"
_DATES = (f"{_ATOM} published", f"{_ATOM} updated")  # what the arxiv package needs of an entry
_KEPT = {_TOTAL, _ATOM_ID, _ATOM_SUMMARY, *_DATES}
_STAND_IN = "1970-01-01T00:00:00Z"  # the date an undated entry is given, so the package reads it
_NO_DATE = datetime.fromisoformat(_STAND_IN)  # ... and taken back from it: no arXiv paper is that old
_API_ERROR = re.compile(r"https?://arxiv\.org/api/errors")  # the id of the API's error entry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchStats:
    """What one search cost and returned, for the run report."""

    requests: int
    seen: int  # entries returned, before de-duplication


class ArxivApi:
    """The API search over the whole window: it backfills what the feeds did not show."""

    name, label, online = "api", "arXiv API", True

    def __init__(self, api_url: str, categories: list[str], terms: list[str], page_size: int):
        self.api_url, self.categories, self.terms, self.page_size = api_url, categories, terms, page_size

    def fetch(self, window: Window, fetcher: Fetcher) -> Found:
        found = Found()
        part = found.report
        assert part is not None
        began, before = time.monotonic(), fetcher.requests
        found.papers, stats = search_window(fetcher, self.api_url, self.categories, self.terms,
                                            window.start, window.end, self.page_size)
        part.seen += stats.seen
        part.requests += fetcher.requests - before
        part.seconds += time.monotonic() - began
        evenings: dict[date, list[Paper]] = {}  # the papers, under the evening each was announced
        for paper in found.papers:
            if paper.submitted is not None:
                evenings.setdefault(window.calendar.announced_on(paper.submitted), []).append(paper)
        for group, days in window.missed().items():
            members = set(group.split("+"))
            for day in days:
                reading = window.ledger.get(day, group)
                if (reading.gap or "").startswith(FEED_ERROR):  # a category arXiv does not have
                    continue
                if reading.read and not reading.gap:  # read whole by its feed (collect --since)
                    continue
                if reading.recovered == "OAI-PMH":  # counted whole by the catch-up (collect --since
                    continue  # with OAI-PMH since turned off): the search would leave no ids counted
                reading.recovered = "the API search"
                # what matched the query that evening, with what a cut feed listed (the search can lag
                # the feed by days); of other ids it sees none
                found_then = {p.id for p in evenings.get(day, ()) if members & set(p.categories)}
                reading.match(found_then.union(reading.matched))
        return found


def api_source(setup: SourceSetup) -> ArxivApi | None:
    """The registered factory: the window search, unless OAI-PMH does the catch-up (the API
    still completes feed records and ties seeds whenever it is enabled)."""
    arxiv = setup.config.sources.arxiv
    if not arxiv.enabled or setup.config.sources.oai.enabled:
        return None
    return ArxivApi(arxiv.api_url, arxiv.categories, arxiv.terms, arxiv.page_size)


def build_query(categories: list[str], terms: list[str], start: datetime, end: datetime) -> str:
    """One query for all categories and terms in a submission window (UTC, minutes).

    The range is written with spaces; urlencode turns them into '+'. A literal
    '+TO+' here would be sent as %2B and arXiv silently matches nothing.
    """
    if not categories or not terms:
        raise ValueError("a search needs at least one category and one term")
    cats = " OR ".join(f"cat:{cat}" for cat in categories)
    phrases = " OR ".join(f'{field}:"{_phrase(term)}"' for term in terms for field in ("ti", "abs"))
    return f"({cats}) AND ({phrases}) AND submittedDate:[{_stamp(start)} TO {_stamp(end)}]"


def search_window(
    fetcher: Fetcher,
    api_url: str,
    categories: list[str],
    terms: list[str],
    start: datetime,
    end: datetime,
    page_size: int,
) -> tuple[list[Paper], SearchStats]:
    """Every paper matching the terms submitted in [start, end], oldest first. A window
    with more results than the API serves (a backfill of months) is searched in halves of
    its submission range (whole minutes, as the query has them), each read whole."""
    before = fetcher.requests
    try:
        papers, seen = _search(fetcher, api_url, build_query(categories, terms, start, end), page_size)
    except _TooMany as many:
        mid = (start + (end - start) / 2).replace(second=0, microsecond=0)
        if mid <= start.replace(second=0, microsecond=0):  # one minute: no half to search
            raise SourceError(f"{many}; backfill through OAI-PMH (sources.oai.enabled: true)") from None
        log.info("%s; searching %s to %s and the rest apart", many, start.isoformat(), mid.isoformat())
        halves = [search_window(fetcher, api_url, categories, terms, *span, page_size)
                  for span in ((start, mid), (mid + timedelta(minutes=1), end))]
        papers, seen = _dedupe(p for found, _ in halves for p in found), sum(s.seen for _, s in halves)
    return papers, SearchStats(requests=fetcher.requests - before, seen=seen)


def _search(fetcher: Fetcher, api_url: str, query: str, page_size: int) -> tuple[list[Paper], int]:
    """A search read whole, again from its first page when its results shift while paged."""
    search = arxiv.Search(query=query, max_results=None, sort_by=arxiv.SortCriterion.SubmittedDate,
                          sort_order=arxiv.SortOrder.Ascending)
    size = max(1, min(page_size, MAX_PAGE_SIZE))
    for _ in range(SEARCH_TRIES - 1):
        try:
            return _read_whole(fetcher, api_url, search, size)
        except _Shifted as shifted:
            log.info("%s; reading the search again from its first page", shifted)
    return _read_whole(fetcher, api_url, search, size)  # shifting again: a SourceError


def _read_whole(fetcher: Fetcher, api_url: str, search: arxiv.Search, page_size: int
                ) -> tuple[list[Paper], int]:
    """Every result of a search as Papers, deduplicated, and how many entries were returned."""
    seen = 0

    def converted() -> Iterator[Paper]:  # page by page: a page's arxiv.Results go once they are Papers
        nonlocal seen
        for result in _results(fetcher, api_url, search, page_size):
            seen += 1
            yield from _papers([result])

    papers = _dedupe(converted())
    return papers, seen


def fetch_ids(fetcher: Fetcher, api_url: str, ids: list[str], batch: int = 100) -> list[Paper]:
    """Full records for known ids: one id_list request per batch, never one per paper."""
    unique = list(dict.fromkeys(ids))
    papers: list[Paper] = []
    for i in range(0, len(unique), batch):
        chunk = unique[i : i + batch]
        search = arxiv.Search(id_list=chunk, max_results=len(chunk))
        papers.extend(_papers(_run(fetcher, api_url, search, len(chunk))))
    return papers


def search_titles(fetcher: Fetcher, api_url: str, titles: list[str], per_title: int = 5) -> list[Paper]:
    """Candidates for seed entries known only by title, in few requests.

    Titles are OR-ed into queries of at most QUERY_CHARS characters (arXiv refuses
    very long queries); the caller matches each title to its candidate locally.
    """
    papers: list[Paper] = []
    for group in _title_groups([_phrase(title) for title in titles if _phrase(title)]):
        query = " OR ".join(f'ti:"{title}"' for title in group)
        search = arxiv.Search(query=query, max_results=per_title * len(group))
        papers += _papers(_run(fetcher, api_url, search, search.max_results))
    return _dedupe(papers)


def _title_groups(titles: list[str]) -> Iterator[list[str]]:
    group: list[str] = []
    for title in titles:
        if group and len(" OR ".join(f'ti:"{t}"' for t in [*group, title])) > QUERY_CHARS:
            yield group
            group = []
        group.append(title)
    if group:
        yield group


class _Shifted(SourceError):
    """The result set of a search changed while it was paged (a paper indexed late): the
    pages read no longer fit together, so the search is read again from the start."""


class _TooMany(SourceError):
    """A search read whole would page past MAX_RESULTS, which the API answers with HTTP 400."""


class _FetcherSession:
    """Stands in for `arxiv.Client._session`: answers `get` through the Fetcher, and checks
    that the pages of one search belong together. `whole`: the search is read to its end."""

    def __init__(self, fetcher: Fetcher, whole: bool = False):
        self._fetcher, self.whole = fetcher, whole
        self.total: int | None = None  # the first page's totalResults
        self.ids: set[str] = set()  # the distinct entry ids of every page read
        self.url = ""  # the last page asked for
        self._page = _Scan()  # the last page checked

    def get(self, url: str, **_ignored: Any) -> _Answer:
        self.url = url
        body = text.xml_safe(self._fetcher.get(url, retry_when=self._check_page).body)
        for ident, why in self._page.undated.items():
            log.warning("arXiv API: kept %s without a date, %s", text.clip(text.clean_name(ident), 80), why)
        return _Answer(content=_dated(body, self._page.undated) if self._page.undated else body)

    def _check_page(self, page: Fetched) -> str | None:
        """Refuse what arxiv's forgiving parser would read as 'no results' or as the whole search.

        Malformed XML, non-Atom pages (an HTML error page served with 200) and the API's
        own error entry (a bad query, answered with 200) fail at once. A page without
        totalResults, or an empty page while totalResults says there is more, is a known
        transient API fault: a reason to retry, and a SourceError (so the watermark stays)
        when retries run out. A totalResults unlike the first page's is a _Shifted search.
        """
        scan = self._page = _read_page(page)
        if not scan.total.isdigit():  # a throttled or broken answer, not an empty window
            return "an Atom page without opensearch:totalResults"
        total = int(scan.total)
        asked = parse_qs(urlsplit(page.url).query)
        start = int(asked.get("start", ["0"])[0])
        size = int(asked.get("max_results", ["1"])[0]) or 1
        if self.whole and self.total is None and -(-total // size) * size > MAX_RESULTS:
            raise _TooMany(f"{shown(page.url)}: {total} results, over the {MAX_RESULTS} the arXiv API serves")
        if not scan.ids and start < total:
            return f"empty page at start={start} although totalResults={total}"
        if self.total is not None and total != self.total:
            raise _Shifted(f"{shown(page.url)}: totalResults changed from {self.total} to {total} "
                           "while paging")
        self.total = total
        self.ids.update(scan.ids)
        return None


@dataclass(frozen=True)
class _Answer:
    """The two attributes of a response that arxiv.Client reads."""

    content: bytes
    status_code: int = 200  # the Fetcher has already raised for anything else


class _Client(arxiv.Client):
    """arxiv.Client pointed at api_url, with its HTTP done by the Fetcher."""

    def __init__(self, session: _FetcherSession, api_url: str, page_size: int):
        super().__init__(page_size=page_size, delay_seconds=0, num_retries=0)
        self.query_url_format = api_url + "?{}"
        self._session = session


def _run(
    fetcher: Fetcher, api_url: str, search: arxiv.Search, page_size: int
) -> list[arxiv.Result]:
    """All results of a search; anything the arxiv package raises becomes a SourceError."""
    return list(_results(fetcher, api_url, search, page_size))


def _results(
    fetcher: Fetcher, api_url: str, search: arxiv.Search, page_size: int
) -> Iterator[arxiv.Result]:
    """The results one page at a time, as the arxiv package yields them.

    A search read to its end (no max_results) must have shown as many distinct ids as
    totalResults: fewer means the pages shifted under it (a re-served paper, another lost).
    An entry whose date the package cannot read was given a stand-in date (_dated), which
    _to_paper takes back; an id read but never given is a SourceError.
    """
    session, given = _FetcherSession(fetcher, whole=search.max_results is None), set[str]()
    try:
        for result in _Client(session, api_url, page_size).results(search):
            given.add(result.entry_id.strip())
            yield result
    except arxiv.ArxivError as err:
        raise SourceError(f"{shown(err.url)}: {err.message}") from None
    except (DigestError, Stopped):
        raise
    except Exception as exc:  # the package's parser on what it cannot read
        raise SourceError(f"{shown(session.url)}: could not read the arXiv API's answer "
                          f"({type(exc).__name__}: {collapse(str(exc))})") from None
    skipped = session.ids - given  # unless max_results ended the search first (a page over it)
    if skipped and len(given) < (search.max_results or len(session.ids)):
        named = ", ".join(sorted(skipped)[:3]) + (f" and {len(skipped) - 3} more" if len(skipped) > 3 else "")
        raise SourceError(f"{shown(session.url)}: {named} read but not given by the arxiv package")
    if search.max_results is None and len(session.ids) < (session.total or 0):
        raise _Shifted(f"{shown(session.url)}: {len(session.ids)} distinct ids read although "
                       f"totalResults={session.total}")


def _read_page(page: Fetched) -> _Scan:
    """The page scanned; a SourceError at once for malformed XML, an HTML or non-Atom page,
    or the API's own error entry (a refused query, answered with 200)."""
    if looks_like_html(page.body, page.content_type):
        raise SourceError(f"{shown(page.url)}: an HTML page instead of the API's Atom feed")
    try:
        scan = _scan(text.xml_safe(page.body))
    except (expat.ExpatError, LookupError, ValueError) as exc:  # an encoding expat cannot read
        raise SourceError(f"{shown(page.url)}: malformed XML from the arXiv API ({exc})") from None
    if scan.root != _ATOM_FEED:
        raise SourceError(f"{shown(page.url)}: not an Atom feed (root element <{_local(scan.root)}>)")
    if scan.error is not None:
        raise SourceError(f"{shown(page.url)}: the arXiv API answered with an error: {scan.error}")
    return scan


@dataclass
class _Scan:
    """What _check_page reads of a page."""

    root: str = ""
    total: str = ""  # opensearch:totalResults as written
    ids: list[str] = field(default_factory=list)  # each entry's <id>
    error: str | None = None  # the summary of an API error entry (id under /api/errors)
    undated: dict[str, str] = field(default_factory=dict)  # an entry's id: why its date fails
    entry: dict[str, str] = field(default_factory=dict)  # the entry being read: its id and _DATES


def _scan(body: bytes) -> _Scan:
    """The root, totalResults, entry ids, any error entry and the entries whose dates the
    arxiv package cannot read; raises ExpatError if malformed.

    expat reads the whole page (so a cut-off page still fails) without building a tree,
    keeping the text of the few elements wanted only: a 2,000-entry page in ~35 ms.
    """
    scan, path, chars = _Scan(), list[str](), list[str]()
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.buffer_text = True

    def start(name: str, _attrs: dict[str, Any]) -> None:
        scan.root = scan.root or name
        path.append(name)
        chars.clear()

    def data(piece: str) -> None:
        if path[-1] in _KEPT:
            chars.append(piece)

    def end(name: str) -> None:
        value = "".join(chars).strip()
        in_entry = len(path) > 1 and path[-2] == _ATOM_ENTRY
        if name == _TOTAL:
            scan.total = value
        elif in_entry and name == _ATOM_ID:
            scan.ids.append(value)
            scan.entry.setdefault(name, value)
        elif in_entry and name == _ATOM_SUMMARY and scan.ids and _API_ERROR.match(scan.ids[-1]):
            scan.error = collapse(value)
        elif in_entry and name in _DATES:
            scan.entry.setdefault(name, value)  # the first, as the package reads it
        elif name == _ATOM_ENTRY:
            _check_dates(scan)
        path.pop()
        chars.clear()

    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.CharacterDataHandler = data
    parser.Parse(body, True)
    return scan


def _check_dates(scan: _Scan) -> None:
    """At the end of an entry: note it in `undated` when the package could not read a date
    of it (its own parse, which fails the whole page on a date that is not ISO 8601)."""
    entry, scan.entry = scan.entry, {}
    ident = entry.get(_ATOM_ID)
    if not ident:  # the package skips an entry without an id itself
        return
    for name in _DATES:
        value = entry.get(name, "").strip()
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
        except (ValueError, OverflowError):
            tag = f"<{_local(name)}>"
            why = f"whose {tag} is not a date ({text.clip(value, 40)!r})" if value else f"which has no {tag}"
            scan.undated.setdefault(ident, why)


def _dated(body: bytes, undated: dict[str, str]) -> bytes:
    """The page with the `undated` entries' dates replaced by a stand-in: the package then
    gives them (it skips an entry without a date) and pages on by the entries there are, not
    one short, which re-read an entry and failed on a last page of only skipped ones."""
    root = ET.fromstring(body)
    for entry in root.iter(_clark(_ATOM_ENTRY)):
        if (entry.findtext(_clark(_ATOM_ID)) or "").strip() in undated:
            for tag in map(_clark, _DATES):
                found = entry.find(tag)
                (found if found is not None else ET.SubElement(entry, tag)).text = _STAND_IN
    return ET.tostring(root, encoding="utf-8")


def _clark(name: str) -> str:
    """An expat name ("namespace local") as ElementTree writes it ("{namespace}local")."""
    return "{" + name.replace(" ", "}")


def _papers(results: Iterable[arxiv.Result]) -> Iterator[Paper]:
    """Each result as a Paper; one whose id is not an arXiv id is skipped with a warning (it
    would be a key no link or look-up matches, stored beside the real paper)."""
    for result in results:
        ident, version = split_arxiv_id(result.entry_id)
        if ARXIV_ID.fullmatch(ident):
            yield _to_paper(result, ident, version)
        else:
            log.warning("arXiv API: skipped an entry whose id is not an arXiv id (%r)",
                        text.clip(text.clean_name(result.entry_id), 80))


def _to_paper(result: arxiv.Result, ident: str, version: int | None) -> Paper:
    primary = result.primary_category
    others = [cat for cat in result.categories if cat != primary]
    return Paper(
        id=ident,
        title=text.title(result.title),
        abstract=text.prose(result.summary),
        version=version or 1,
        authors=text.names(author.name for author in result.authors),
        categories=tuple(text.clean_name(cat) for cat in ([primary] if primary else []) + others),
        submitted=_dated_as(result.published),
        updated=_dated_as(result.updated),
        comment=text.comment(result.comment),
        journal_ref=text.journal_ref(result.journal_ref),
        sources=("api",),
    )


def _dated_as(moment: datetime) -> datetime | None:
    """None for _dated's stand-in: the paper is kept without the date arXiv did not give, as
    a feed's paper is (the window's search found it, so it is the window's)."""
    return None if moment == _NO_DATE else moment


def _dedupe(papers: Iterable[Paper]) -> list[Paper]:
    """Keep the first record per id (a page boundary can shift while paging)."""
    seen: dict[str, Paper] = {}
    for paper in papers:
        seen.setdefault(paper.id, paper)
    return list(seen.values())


def _stamp(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError(f"{moment} has no time zone; arXiv dates are UTC")
    return moment.astimezone(UTC).strftime("%Y%m%d%H%M")


def _phrase(text: str) -> str:
    """A title or term made safe to quote: no inner quotes, one space between words."""
    return collapse(text.replace('"', " "))


def _local(name: str) -> str:
    return name.rsplit(" ", 1)[-1]
