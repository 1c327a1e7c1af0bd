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

from dataclasses import dataclass
from datetime import date, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urlencode

import httpx2
from lxml import etree
from oaipmh_scythe import Scythe
from oaipmh_scythe.exceptions import NoRecordsMatch, OAIPMHException

from pipeline.errors import SourceError
from pipeline.models import Paper, collapse
from pipeline.sources.arxiv_rss import split_authors
from pipeline.sources.http import Fetched, Fetcher, looks_like_html

_RAW = "{http://arxiv.org/OAI/arXivRaw/}"
_OAI = b"http://www.openarchives.org/OAI/2.0/"


@dataclass(frozen=True)
class Harvest:
    """What one set's harvest returned: papers (first version date in `submitted`)."""

    category: str
    papers: tuple[Paper, ...]
    records: int  # every record, before any filter
    latest: date | None  # the newest datestamp: how far the harvest reaches


def set_spec(category: str) -> str:
    """cs.LG -> cs:cs:LG, stat.ML -> stat:stat:ML; a whole archive (cs) is its own set."""
    archive, _, _sub = category.partition(".")
    return f"{archive}:{category.replace('.', ':')}" if _sub else archive


def harvest(fetcher: Fetcher, url: str, category: str, since: date) -> Harvest:
    """Every record of the category's set changed since `since`, all pages."""
    papers, records, latest = [], 0, None
    client = _Scythe(url, fetcher)
    try:
        for record in client.list_records(from_=since.isoformat(), metadata_prefix="arXivRaw",
                                          set_=set_spec(category), ignore_deleted=True):
            records += 1
            stamp = date.fromisoformat(record.header.datestamp[:10])
            latest = max(latest, stamp) if latest else stamp
            paper = _to_paper(record.xml)
            if paper is not None:
                papers.append(paper)
    except NoRecordsMatch:
        pass  # an empty range is an answer, not a failure
    except OAIPMHException as exc:
        raise SourceError(f"{url}: OAI-PMH error for set {set_spec(category)}: "
                          f"{type(exc).__name__} {exc}".rstrip()) from None
    return Harvest(category, tuple(papers), records, latest)


class _Scythe(Scythe):
    """oaipmh-scythe with its HTTP done by the Fetcher (no retries of its own)."""

    def __init__(self, url: str, fetcher: Fetcher):
        super().__init__(url)
        self._fetcher = fetcher

    def _request(self, query: dict[str, str]) -> httpx2.Response:
        address = f"{self.endpoint}?{urlencode(query)}"
        page = self._fetcher.get(address, retry_when=_check_page)
        return httpx2.Response(200, content=page.body, request=httpx2.Request("GET", address))


def _check_page(page: Fetched) -> str | None:
    """Fail at once on what is not an OAI-PMH answer (an HTML or text page with 200)."""
    if looks_like_html(page.body, page.content_type) or _OAI not in page.body[:2000]:
        raise SourceError(f"{page.url}: not an OAI-PMH answer")
    return None


def _to_paper(record: etree._Element) -> Paper | None:
    raw = record.find(f".//{_RAW}arXivRaw")
    if raw is None:
        return None

    def text(tag: str) -> str:
        return collapse(raw.findtext(f"{_RAW}{tag}") or "")

    dates = [_date(v.findtext(f"{_RAW}date")) for v in raw.findall(f"{_RAW}version")]
    categories = tuple(text("categories").split())
    if not text("id") or not dates or dates[0] is None:
        return None
    return Paper(
        id=text("id"),
        title=text("title"),
        abstract=text("abstract"),
        version=len(dates),
        authors=split_authors(text("authors")),
        categories=categories,
        submitted=dates[0],
        updated=dates[-1],
        comment=text("comments") or None,
        journal_ref=text("journal-ref") or None,
        sources=("oai",),
    )


def _date(text: str | None) -> datetime | None:
    try:
        return parsedate_to_datetime(text) if text else None
    except (TypeError, ValueError):
        return None
