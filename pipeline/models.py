"""The vocabulary: keys and the record types passed between stages.

Frozen: a stage returns new records, never edits the ones it was given.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, NamedTuple, Protocol

ARXIV_ID = re.compile(r"\d{4}\.\d{4,5}|[a-z-]+(?:\.[A-Z]{2})?/\d{7}")  # 2410.10110, hep-th/9901001
_VERSION = re.compile(r"v(\d+)$")
_QUERY = re.compile(r"[?#]")
_SUBJECT_CLASS = re.compile(r"^([a-z-]+)\.[A-Z]{2}/(?=\d{7})")  # math.GT/0309136: arXiv's id is math/0309136
_ID_PREFIX = re.compile(r"^(?:(?:https?://)?(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|html)/|oai:arxiv\.org:|arxiv:\s*)",
                        re.IGNORECASE)


def split_arxiv_id(raw: str) -> tuple[str, int | None]:
    """'http://arxiv.org/abs/2401.01234v3' -> ('2401.01234', 3); old ids keep their archive.
    A pasted abs, pdf or html link (with or without https://, www.) or 'arxiv:ID' reads the same,
    with the query or anchor a browser's address bar adds (?context=cs.LG, #S3) or not. An old
    id cited with its subject class (cs.AI/9605103) is the one arXiv gives it (cs/9605103)."""
    address = _QUERY.split(_ID_PREFIX.sub("", raw.strip()), maxsplit=1)[0]
    ident = _SUBJECT_CLASS.sub(r"\1/", address.removesuffix("/").removesuffix(".pdf"))
    match = _VERSION.search(ident)
    if match:
        return ident[: match.start()], int(match.group(1))
    return ident, None


class State(Protocol):
    """Small values a stage keeps between runs (the store is one): a narrow interface, so
    the stage needs no database."""

    def get_state(self, key: str) -> Any: ...

    def set_state(self, key: str, value: Any) -> None: ...


def paper_key(paper_id: str) -> str:
    """What a paper is called in digests and the cache: its version-less arXiv id."""
    return "arxiv:" + paper_id


def seed_key(title: str) -> str:
    """Seeds are identified by their title, folded: the same paper in two files is one."""
    return "seed:" + "".join(ch for ch in title.casefold() if ch.isalnum())[:200]


def safe_id(value: str) -> str:
    """`value` as an id for URLs, HTML anchors and citation keys (ASCII letters, digits,
    `._-`): arxiv:2611.00001 -> arxiv-2611.00001. Text beyond ASCII (a Chinese seed
    title) is folded and a short hash of it added, so two such keys never become one."""
    if value.isascii():
        return re.sub(r"[^A-Za-z0-9._-]", "-", value)
    folded = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
    return f"{safe_id(folded).rstrip('-')}-{hashlib.blake2b(value.encode(), digest_size=4).hexdigest()}"


def collapse(text: str | None) -> str:
    """Collapse runs of whitespace (arXiv hard-wraps titles and abstracts)."""
    return " ".join((text or "").split())


@dataclass(frozen=True)
class Paper:
    """One arXiv paper, keyed by its version-less id."""

    id: str
    title: str
    abstract: str = ""
    version: int = 1
    authors: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()  # primary first
    submitted: datetime | None = None  # v1
    updated: datetime | None = None  # this version
    comment: str | None = None
    journal_ref: str | None = None
    sources: tuple[str, ...] = ()  # "api", "rss", "seed"
    announce_type: str | None = None  # RSS: new, cross, replace, replace-cross

    @property
    def abs_url(self) -> str:
        return f"https://arxiv.org/abs/{self.id}"

    @property
    def primary_category(self) -> str | None:
        return self.categories[0] if self.categories else None


def merge_papers(old: Paper, new: Paper) -> Paper:
    """The newest version wins its fields; thin fields never erase richer ones."""
    newer = new if new.version >= old.version else old
    other = old if newer is new else new
    sources = tuple(dict.fromkeys(old.sources + new.sources))
    return Paper(
        id=old.id, version=newer.version,
        title=newer.title or other.title, abstract=newer.abstract or other.abstract,
        authors=newer.authors or other.authors, categories=newer.categories or other.categories,
        submitted=old.submitted or new.submitted,
        updated=newer.updated or other.updated,
        comment=newer.comment or other.comment, journal_ref=newer.journal_ref or other.journal_ref,
        sources=sources, announce_type=old.announce_type or new.announce_type,
    )


@dataclass(frozen=True)
class Options:
    """How a run was asked for on the command line."""

    as_of: datetime
    offline: bool = False
    dry_run: bool = False
    no_email: bool = False


@dataclass(frozen=True)
class Scored:
    """What rank decided about one paper, and the reader's verdict (rl-digest mark) if any."""

    paper_id: str
    score: float | None
    relevant: bool | None
    reasons: tuple[str, ...] = ()
    topic: str | None = None
    topics: tuple[str, ...] = ()  # secondary topics
    verdict: bool | None = None

    @property
    def kept(self) -> bool:
        """The reader's verdict beats the score."""
        return self.verdict if self.verdict is not None else bool(self.relevant)


@dataclass(frozen=True)
class Enrichment:
    """One LLM result as the cache keeps it: about which item, for which task, the reply."""

    key: str  # the cache key: changes with the item's version, the model, prompts, languages
    item_key: str  # paper_key(...), seed_key(...) or "compare:..."
    kind: str  # the task: paper_summary, seed_translation, featured_reading, ...
    data: dict[str, Any]  # the validated reply as JSON data
    tokens: tuple[int, int] = (0, 0)  # in, out


@dataclass(frozen=True)
class SeedEntry:
    """A curated entry from a seed document: the user's own picks and wording."""

    title: str
    source: str  # file name
    line: int  # 1-based line of the title
    summary_zh: str | None = None
    summary_en: str | None = None
    date: date | None = None
    arxiv_id: str | None = None
    topic: str | None = None
    featured: bool = False
    truncated: bool = False  # the curated summary was cut with "..."
    # Featured analysis, as in the seed page: headline plus labelled parts.
    headline_zh: str | None = None
    parts_zh: tuple[tuple[str, str], ...] = ()  # (label, text)

    @property
    def flags(self) -> tuple[str, ...]:
        names = []
        if self.featured:
            names.append("featured")
        if self.truncated:
            names.append("truncated")
        if not self.summary_zh:
            names.append("no-summary")
        return tuple(names)


@dataclass(frozen=True)
class SeedWarning:
    """A seed line that could not be placed; reported, then skipped."""

    source: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.message}" if self.line else f"{self.source}: {self.message}"


@dataclass(frozen=True)
class SeedDocument:
    """What one seed file holds besides its entries (the 004 page's framing text)."""

    source: str
    intro_zh: str | None = None
    comparison: tuple[tuple[str, ...], ...] = ()  # rows of the comparison table, header first
    synthesis_zh: str | None = None
    entries: tuple[SeedEntry, ...] = ()
    warnings: tuple[SeedWarning, ...] = field(default=())


@dataclass(frozen=True)
class Part:
    """A labelled paragraph of a featured reading (解决方案 · Approach: …)."""

    label_zh: str
    label_en: str
    text_zh: str | None = None
    text_en: str | None = None


@dataclass(frozen=True)
class Entry:
    """One line of a digest or the reading list: a paper, a seed entry, or both.

    Plain values only (dates as ISO strings) so a stored digest re-renders as it was.
    """

    key: str
    title: str
    topic: str
    url: str | None = None
    date: str | None = None
    authors: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    score: float | None = None  # relevance; in a digest, importance (importance.py) orders by it
    title_zh: str | None = None
    summary_zh: str | None = None
    summary_en: str | None = None
    key_points_zh: tuple[str, ...] = ()
    key_points_en: tuple[str, ...] = ()
    abstract: str = ""
    curated: bool = False  # comes from a seed document
    version: int | None = None
    revised: bool = False
    llm: bool = False  # the summaries were written by the LLM
    headline_zh: str | None = None
    headline_en: str | None = None
    parts: tuple[Part, ...] = ()
    why_zh: str | None = None  # 为何值得读 · Why it matters, one sentence each
    why_en: str | None = None
    kind: str | None = None  # method, analysis, benchmark, system, survey, position
    links: tuple[tuple[str, str], ...] = ()  # (kind, url) from extract.links
    venue: str | None = None  # as stated in the comment or journal-ref
    origin: str | None = None  # the seed document a curated entry comes from


class Moved(NamedTuple):
    """Where an entry an old digest links is now (reading_list.tied): its key, topic and
    date; `was`, the topic it was listed under when the config no longer has it (renamed or
    removed), whose old page on the site then says where its papers went."""

    key: str
    topic: str
    date: str | None
    was: str | None = None


@dataclass(frozen=True)
class Update:
    """A paper from an earlier digest with news, listed once under 更新 · Updates.

    changes: (what, before, after) with what in version, venue, code, withdrawn; the
    wording is the templates'.
    """

    key: str
    title: str
    url: str | None = None
    title_zh: str | None = None
    changes: tuple[tuple[str, str, str], ...] = ()
    version: int | None = None  # what the paper looks like now: the ledger's next baseline
    venue: str | None = None
    code: str | None = None
    withdrawn: bool = False


@dataclass(frozen=True)
class Section:
    topic: str
    name_zh: str
    name_en: str
    entries: tuple[Entry, ...]  # full entries
    brief: tuple[Entry, ...] = ()  # one line each: every other relevant paper of the week


@dataclass(frozen=True)
class Highlight:
    """本周看点 · Highlights: one takeaway of the week, naming its paper."""

    key: str
    title: str
    url: str | None
    zh: str
    en: str


@dataclass(frozen=True)
class Row:
    """A row of the comparison table: one dimension, a cell per featured paper."""

    label_zh: str
    label_en: str
    cells: tuple[tuple[str, str], ...]  # (zh, en)


@dataclass(frozen=True)
class TopicWeeks:
    """One topic's relevant papers per week, oldest first; None: no digest that week
    (nothing is known, which is not zero papers)."""

    topic: str
    name_zh: str
    name_en: str
    counts: tuple[int | None, ...]


@dataclass(frozen=True)
class Mover:
    """A topic whose count changed most against the week before (trends.movers)."""

    topic: str
    name_zh: str
    name_en: str
    now: int
    before: int


@dataclass(frozen=True)
class Trends:
    """Papers per topic per week up to a digest's week (trends.py), kept with the digest
    so a re-render shows that week's figures."""

    weeks: tuple[str, ...]  # each week's last day, YYYY-MM-DD, oldest first; the last is the digest's
    topics: tuple[TopicWeeks, ...]
    movers: tuple[Mover, ...] = ()


@dataclass(frozen=True)
class Digest:
    id: str  # the as-of date, YYYY-MM-DD
    window_start: str
    window_end: str
    timezone: str
    sections: tuple[Section, ...]
    featured: tuple[Entry, ...] = ()
    comparison: tuple[Row, ...] = ()
    synthesis_zh: str | None = None
    synthesis_en: str | None = None
    new: int = 0
    revised: int = 0
    seeds: int = 0
    left_out: tuple[str, ...] = ()  # keys of entries cut to keep the email small
    model: str | None = None  # None: written without an LLM
    sources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    updates: tuple[Update, ...] = ()
    pending_zh: int = 0  # entries whose Chinese summary is not written yet
    coverage: dict[str, Any] | None = None  # coverage.Summary as a dict, plus relevant papers per archive
    curated: tuple[Entry, ...] = ()  # 收录 · From the reading list: seed entries not shown before
    first: bool = False  # the first digest of this database: the topic intro is shown in full
    highlights: tuple[Highlight, ...] = ()
    question_zh: str | None = None  # the question the featured papers share, compared along
    question_en: str | None = None  # the LLM's takeaways; none: the templates list what is known
    trends: Trends | None = None  # None: no earlier week to compare with (or made before trends)


@dataclass
class RunReport:
    """What one run did, for the summary line and `rl-digest status`."""

    as_of: str
    fetched: int = 0
    new: int = 0
    revised: int = 0
    relevant: int = 0
    seeds: int = 0
    summarised: int = 0
    cached: int = 0
    llm_calls: int = 0  # replies asked for: an unusable reply asked again is a second call
    llm_requests: int = 0  # HTTP requests those calls sent, the client's retries of failed ones too
    llm_failures: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    glossary_flags: int = 0  # Chinese terms the LLM rendered against the glossary
    llm_off: str | None = None  # why the LLM was not asked, or stopped being asked
    unread: list[str] = field(default_factory=list)  # readers' lines skipped: those readers get no email
    shared: list[str] = field(default_factory=list)  # another config's database or outputs.dir, in use
    sent: int = 0
    pending: int = 0
    failed: int = 0
    digest: str | None = None
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    delivery_errors: list[str] = field(default_factory=list)
    relevance_model: str | None = None  # the relevance model's version ("rule" without one)
    relevance_refit: bool = False  # that model is a refit on verdicts the last digest run had not
    elapsed: float = 0.0


def requests_note(calls: int, requests: int | None) -> str:
    """What follows an LLM call count when the HTTP requests differ from it: ' (11 requests)'
    after '9 calls' (a call is a reply asked for, an unusable one asked again is a second;
    the client retried failed requests). requests None or 0: a run from before they were
    counted."""
    return f" ({requests} requests)" if requests and requests != calls else ""
