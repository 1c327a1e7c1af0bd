"""The daily arXiv announcement feed (rss.arxiv.org, 2024+ format) as Paper records.

The feed is the fast path: it lists a day's new papers hours before the API's
search index has them. Its records are thin (no submission date, no comment);
`arxiv_api.fetch_ids` completes them.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

import feedparser

from pipeline import text
from pipeline.errors import SourceError
from pipeline.models import Paper, split_arxiv_id
from pipeline.sources.http import Fetcher, looks_like_html

KEPT_TYPES = ("new", "cross")
REPLACED_TYPES = ("replace", "replace-cross")

# "arXiv:2411.17700v1 Announce Type: new \nAbstract: ..." (note the space before \n)
_PREFIX = re.compile(r"\s*arXiv:(?P<id>\S+)\s+Announce Type:\s*(?P<type>\S+)\s*Abstract:\s*")
_ERROR_TEXT = re.compile(r"\b(error|bad archive|invalid)\b", re.IGNORECASE)
_PARENTHESES = re.compile(r"\([^()]*\)")
_AND = re.compile(r"^and\s+|\s+and\s+")
CAP = 2000  # rss.arxiv.org lists at most this many items: a feed this long was cut
_NEW_STYLE_ID = re.compile(r"^(\d{4})\.(\d{4,5})$")


@dataclass(frozen=True)
class Replacement:
    """A new version of an older paper: it only updates a paper we already hold."""

    id: str
    version: int | None
    announced: datetime | None
    announce_type: str  # replace or replace-cross


@dataclass(frozen=True)
class FeedResult:
    """One feed read: papers to consider, replacements, and what looked wrong."""

    url: str
    papers: tuple[Paper, ...] = ()  # announce type new or cross
    replacements: tuple[Replacement, ...] = ()
    warnings: tuple[str, ...] = ()
    items: int = 0  # every <item>, whatever its type

    @property
    def truncated(self) -> bool:
        return self.items >= CAP

    def counts(self) -> tuple[int, int, int]:
        """Ids seen: (new, cross, replace or replace-cross)."""
        new = sum(1 for p in self.papers if p.announce_type != "cross")
        return new, len(self.papers) - new, len(self.replacements)


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

    An arXiv error answer is a well-formed feed with the error in its channel
    description, so it becomes a warning, not a success and not an exception.
    Sanitizing is off: feedparser would rewrite TeX like `$1/3<s<1$` as HTML.
    The bytes go in as a stream: feedparser tries bare bytes as a file path first.
    """
    if looks_like_html(data):
        raise SourceError(f"{url}: an HTML page instead of an RSS feed")
    parsed = feedparser.parse(io.BytesIO(text.xml_safe(data)), sanitize_html=False,
                              resolve_relative_uris=False)
    channel = parsed.feed
    if parsed.bozo and not parsed.entries and not channel.get("title"):
        raise SourceError(f"{url}: malformed feed XML ({parsed.get('bozo_exception')})")
    if not parsed.get("version"):
        raise SourceError(f"{url}: not an RSS feed")

    warnings = []
    title, description = channel.get("title", ""), channel.get("subtitle", "")
    if title.startswith("Feed error") or _ERROR_TEXT.search(description):
        warnings.append(f"{url}: arXiv reports a feed error: {description or title}")
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
    )


def split_authors(creator: str) -> tuple[str, ...]:
    """'A (Univ X, Dept Y), B, and C' -> ('A', 'B', 'C').

    dc:creator is one comma-separated string; affiliations in parentheses are
    dropped (their commas must not split) so names match the API's.
    """
    names = creator[:200_000]  # bounded before the regexes below
    while _PARENTHESES.search(names):
        names = _PARENTHESES.sub("", names)
    return text.names(name for part in names.split(",") for name in _AND.split(part))


def _read_item(entry) -> Paper | Replacement | str:
    """One <item> as a Paper, a Replacement, or a warning explaining the skip."""
    description = entry.get("summary", "")
    prefix = _PREFIX.match(description)
    raw_id = entry.get("id") or (prefix["id"] if prefix else "")
    if not raw_id:
        return f"skipped an item without an arXiv id ({entry.get('title', '')!r})"
    ident, version = split_arxiv_id(raw_id)
    if version is None and prefix:
        version = split_arxiv_id(prefix["id"])[1]
    kind = (entry.get("arxiv_announce_type") or (prefix["type"] if prefix else "")).strip()
    announced = _rfc822(entry.get("published"))
    if kind in REPLACED_TYPES:
        return Replacement(ident, version, announced, kind)
    if kind not in KEPT_TYPES:
        return f"skipped {ident} with unknown announce type {kind!r}"
    return Paper(
        id=ident,
        title=text.title(entry.get("title")),
        abstract=text.prose(description[prefix.end() :] if prefix else description),
        version=version or 1,
        authors=split_authors(entry.get("author", "")),
        categories=tuple(text.clean_name(tag["term"]) for tag in entry.get("tags", []) if tag.get("term")),
        updated=announced,  # when this version was announced; the API has the exact time
        journal_ref=text.prose(entry.get("arxiv_journal_reference"), 500) or None,
        sources=("rss",),
        announce_type=kind,
    )


def _rfc822(text: str | None) -> datetime | None:
    """An item's pubDate as an aware datetime, keeping arXiv's -0500 offset."""
    try:
        return parsedate_to_datetime(text) if text else None
    except (TypeError, ValueError):
        return None
