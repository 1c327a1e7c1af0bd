"""A local stand-in for the arXiv API and RSS feed, with faults on demand.

    with ArxivServer([paper, ...]) as server:
        server.script("/api/query", http_error(503), http_error(503))  # then normal
        fetch(server.api_url) ... ; len(server.requests)

It answers like the real services (formats copied from the samples in
shared/data/formats/) and records every request, so tests count requests and
measure their spacing without mocking our own code.
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape, quoteattr

from pipeline.models import Paper, collapse
from tests.servers import oai_server

ATOM_TYPE = "application/atom+xml"  # a charset-less text/xml trap: Fault(content_type=...)
RSS_TYPE = "application/rss+xml"
OAI_TYPE = "text/xml; charset=utf-8"
RSS_CAP = 2000  # rss.arxiv.org never lists more items than this in one feed
_ORDER = {"new": 0, "cross": 1, "replace": 2, "replace-cross": 3}  # arXiv's item order
EASTERN = timezone(timedelta(hours=-5))
_EPOCH = datetime(1991, 8, 14, tzinfo=UTC)


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour; each request on a scripted path consumes one."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None  # served instead of the real answer
    content_type: str | None = None  # overrides the answer's Content-Type
    hang_seconds: float = 0.0  # sleep, then answer (to a client that has likely gone)
    released: threading.Event | None = None  # set it to end the hang early
    empty: bool = False  # the real header (totalResults, channel) with no entries
    feed_error: bool = False  # RSS: arXiv's "Feed error for query" document
    stream: Callable[[], Iterator[bytes]] | None = None  # body made piece by piece, no length
    raw: bool = False  # the stream is the whole response, status line and headers included
    cut_after_records: int | None = None  # OAI-PMH: the real page ends after this many </record>


OK = Fault()
EMPTY = Fault(empty=True)
FEED_ERROR = Fault(feed_error=True)
MALFORMED = Fault(  # cut off mid-tag, as by a dropped connection behind a proxy
    body=b"<?xml version='1.0' encoding='UTF-8'?>\n<feed xmlns='http://www.w3.org/2005/Atom'>\n"
    b"  <id>https://arxiv.org/api/x</id>\n  <ti"
)
RATE_EXCEEDED = Fault(body=b"Rate exceeded.\n", content_type="text/plain")  # arXiv's 2026 throttle, as 200
THROTTLED = Fault(status=429, body=b"Rate exceeded.\n", content_type="text/plain")  # no Retry-After
NO_TOTAL = Fault(  # an Atom page with no opensearch:totalResults: not a result page
    body=b"<?xml version='1.0' encoding='UTF-8'?>\n<feed xmlns='http://www.w3.org/2005/Atom'>\n"
    b"  <id>https://arxiv.org/api/x</id>\n  <title>arXiv Query</title>\n</feed>\n"
)
HTML_PAGE = Fault(
    body=b"<!DOCTYPE html><html><head><title>arXiv is down for maintenance</title></head>"
    b"<body><h1>Back soon</h1><p>Please try again later.<br></p></body></html>",
    content_type="text/html; charset=utf-8",
)


def api_error(message: str) -> Fault:
    """The API's answer to a query it refuses: HTTP 200 and one Atom entry titled Error."""
    anchor = "http://arxiv.org/api/errors#" + message.replace(" ", "_")
    entry = (f"  <entry>\n    <id>{escape(anchor)}</id>\n    <title>Error</title>\n"
             f"    <summary>{escape(message)}</summary>\n"
             f'    <link href="{escape(anchor)}" rel="alternate" type="text/html"/>\n'
             "    <author><name>arXiv api core</name></author>\n  </entry>\n")
    return raw(atom_feed("", 0, 1, 1, entry))


def http_error(status: int, retry_after: int | None = None) -> Fault:
    headers = (("Retry-After", str(retry_after)),) if retry_after is not None else ()
    body = f"HTTP {status}\n".encode()
    return Fault(status=status, headers=headers, body=body, content_type="text/plain")


def hang(seconds: float, released: threading.Event | None = None) -> Fault:
    """Answer after `seconds`, or as soon as `released` is set."""
    return Fault(hang_seconds=seconds, released=released)


def trickle(interval: float = 1.0) -> Fault:
    """A well-formed start of a feed, one byte every `interval` seconds, forever."""
    start = atom_feed("", 0, 0, 0, "")

    def pieces() -> Iterator[bytes]:
        for index in range(len(start)):
            yield start[index : index + 1]
            time.sleep(interval)
        while True:
            yield b" "
            time.sleep(interval)

    return Fault(stream=pieces)


def trickle_headers(interval: float = 1.0) -> Fault:
    """A status line, then a header one byte every `interval` seconds, forever: every read
    gets a byte in time, so only a deadline on the whole request ends it."""
    def pieces() -> Iterator[bytes]:
        yield b"HTTP/1.1 200 OK\r\nX-Slow: "
        while True:
            time.sleep(interval)
            yield b"z"

    return Fault(stream=pieces, raw=True)


def huge(megabytes: int) -> Fault:
    """A feed start followed by `megabytes` MB of whitespace, made as it is sent."""
    def pieces() -> Iterator[bytes]:
        yield atom_feed("", 0, 0, 0, "")[:200]
        blank = b" " * 2**20
        for _ in range(megabytes):
            yield blank

    return Fault(stream=pieces)


def gzip_bomb(megabytes: int) -> Fault:
    """`megabytes` MB of zeros gzipped (about 1/1000 of that on the wire), compressed as sent."""
    def pieces() -> Iterator[bytes]:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        zeros = bytes(2**20)
        for _ in range(megabytes):
            if out := packer.compress(zeros):
                yield out
        yield packer.flush()

    return Fault(stream=pieces, headers=(("Content-Encoding", "gzip"),))


def raw(body: bytes, content_type: str = ATOM_TYPE) -> Fault:
    """Serve recorded bytes verbatim (the real samples)."""
    return Fault(body=body, content_type=content_type)


@dataclass(frozen=True)
class Request:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    started: float  # time.monotonic() when the request arrived


class ArxivServer:
    """Serves /api/query (Atom), /rss/<cats joined by +>, /oai (OAI-PMH) and
    /html/<id>v<N> (the full-text pages in `html`, else 404) on 127.0.0.1."""

    def __init__(self, papers=(), announced: datetime = datetime(2024, 11, 28, tzinfo=EASTERN)):
        self.papers: list[Paper] = list(papers)
        self.announced = announced  # the RSS mailing's date
        self.requests: list[Request] = []
        self._faults: dict[str, deque[Fault]] = {}
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.block_on_close = False  # a hung handler must not stall teardown
        self._httpd.stand_in = self
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host}:{port}"
        self.api_url = f"{self.url}/api/query"
        self.oai_url = f"{self.url}/oai"
        self.html_url = f"{self.url}/html"
        self.html: dict[str, str] = {}  # "2611.00001v1" -> an arXiv-like HTML page
        self.oai_page_size = 100
        self.max_results = 30_000  # arXiv's cap on start + max_results: past it, HTTP 400 (ARXIV.md)
        self.datestamps: dict[str, date] = {}  # OAI datestamp by id (default: oai_server's)
        self._frozen: dict[str, bytes] = {}  # feeds the CDN keeps serving unchanged
        self._thread = threading.Thread(  # a short poll keeps shutdown (teardown) quick
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def rss_url(self, categories: list[str]) -> str:
        return f"{self.url}/rss/{'+'.join(categories)}"

    def add(self, *papers: Paper) -> None:
        self.papers.extend(papers)

    def freeze(self, category: str) -> None:
        """Keep serving this category's feed as it is now (a stale CDN copy)."""
        self._frozen[category] = self._rss(category, OK)

    def thaw(self, category: str) -> None:
        self._frozen.pop(category, None)

    def script(self, path_prefix: str, *faults: Fault) -> None:
        """Queue faults for requests whose path starts with path_prefix; OK means 'answer normally'."""
        with self._lock:
            self._faults.setdefault(path_prefix, deque()).extend(faults)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _record(self, path: str, query: dict[str, str], headers: dict[str, str]) -> Fault:
        """Log the request and take the next scripted fault for its path."""
        with self._lock:
            self.requests.append(Request(path, query, headers, time.monotonic()))
            for prefix, queue in self._faults.items():
                if path.startswith(prefix) and queue:
                    return queue.popleft()
        return OK

    def answer(self, path: str, query: dict[str, str], fault: Fault) -> tuple[int, str, bytes]:
        if path == "/api/query":
            return 200, ATOM_TYPE, self._atom(query, fault.empty)
        if path.startswith("/rss/"):
            spec = path[len("/rss/") :]
            return 200, RSS_TYPE, self._frozen.get(spec) or self._rss(spec, fault)
        if path.startswith("/html/") and path[len("/html/"):] in self.html:
            return 200, "text/html; charset=utf-8", self.html[path[len("/html/"):]].encode()
        if path == "/oai":
            stamp = lambda p: self.datestamps.get(p.id) or oai_server.default_datestamp(p)  # noqa: E731
            body = oai_server.answer(self.papers, query, self.oai_url, self.oai_page_size, stamp)
            return 200, OAI_TYPE, oai_server.cut(body, fault.cut_after_records)
        return 404, "text/plain", b"not found\n"

    # --- API ---------------------------------------------------------------

    def _atom(self, query: dict[str, str], empty: bool) -> bytes:
        found = self._select(query)
        start, size = int(query.get("start", 0)), int(query.get("max_results", 10))
        if start + size > self.max_results:  # answered 400 by the handler
            raise ValueError(f"start + max_results is over {self.max_results}")
        page = [] if empty else found[start : start + size]
        entries = "".join(self._entry(p) for p in page)
        return atom_feed(query.get("search_query", ""), start, size, len(found), entries)

    def _select(self, query: dict[str, str]) -> list[Paper]:
        """The papers a query matches, in the order asked for."""
        ids = [i for i in query.get("id_list", "").split(",") if i]
        text = query.get("search_query", "")
        matches = compile_query(text) if text else (lambda paper: True)
        found = [p for p in self.papers if matches(p) and (not ids or _listed(p, ids))]
        if ids and not text:
            found.sort(key=lambda p: min(i for i, x in enumerate(ids) if _listed(p, [x])))
        return _sorted(found, query.get("sortBy", "relevance"), query.get("sortOrder", ""))

    def _entry(self, paper: Paper) -> str:
        return _atom_entry(paper)

    # --- RSS ---------------------------------------------------------------

    def _rss(self, spec: str, fault: Fault) -> bytes:
        link = f"http://rss.arxiv.org/rss/{spec}"
        if fault.feed_error:
            title = f"Feed error for query: {link}"
            description = f"Bad archive '{spec}'. Valid archive names are: cs, stat, test."
            editor, skip = "rss-help.arxiv.org", ""
        else:
            title = f"{spec.replace('+', ', ')} updates on arXiv.org"
            description = f"{spec.replace('+', ', ')} updates on the arXiv.org e-print archive."
            editor = "rss-help@arxiv.org"
            skip = "    <skipDays>\n      <day>Saturday</day>\n      <day>Sunday</day>\n    </skipDays>\n"
        wanted = spec.split("+")
        shown = (
            []
            if fault.empty or fault.feed_error
            else [_as_listed(p, wanted) for p in self.papers if _in_feed(p, wanted)]
        )
        shown = sorted(shown, key=lambda p: _ORDER.get(p.announce_type or "new", 0))[:RSS_CAP]
        items = "".join(_rss_item(p, self.announced) for p in shown)
        built = self.announced.astimezone(UTC) + timedelta(hours=19, minutes=47)
        return (
            "<?xml version='1.0' encoding='UTF-8'?>\n"
            '<rss xmlns:arxiv="http://arxiv.org/schemas/atom" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:atom="http://www.w3.org/2005/Atom" '
            'xmlns:content="http://purl.org/rss/1.0/modules/content/" version="2.0">\n'
            "  <channel>\n"
            f"    <title>{escape(title)}</title>\n"
            f"    <link>{escape(link)}</link>\n"
            f"    <description>{escape(description)}</description>\n"
            f'    <atom:link href={quoteattr(link)} rel="self" type="application/rss+xml"/>\n'
            "    <docs>http://www.rssboard.org/rss-specification</docs>\n"
            "    <language>en-us</language>\n"
            f"    <lastBuildDate>{format_datetime(built)}</lastBuildDate>\n"
            f"    <managingEditor>{editor}</managingEditor>\n"
            f"    <pubDate>{format_datetime(self.announced)}</pubDate>\n"
            f"{skip}{items}  </channel>\n</rss>\n"
        ).encode()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        stand_in: ArxivServer = self.server.stand_in
        fault = stand_in._record(parts.path, query, dict(self.headers.items()))
        if fault.hang_seconds:
            (fault.released or threading.Event()).wait(fault.hang_seconds)
        if fault.stream is not None:
            self._stream(fault)
            return
        if fault.body is not None:
            status, content_type, body = fault.status, ATOM_TYPE, fault.body
        else:
            try:
                status, content_type, body = stand_in.answer(parts.path, query, fault)
            except (KeyError, IndexError, ValueError) as exc:  # arXiv answers 400 too
                status, content_type, body = 400, "text/plain", f"bad query: {exc}\n".encode()
        try:
            self.send_response(status)
            for name, value in fault.headers:
                self.send_header(name, value)
            self.send_header("Content-Type", fault.content_type or content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left

    def _stream(self, fault: Fault) -> None:
        """Headers at once, then the body as it is made, ended by closing the connection."""
        try:
            if fault.raw:
                for piece in fault.stream():
                    self.wfile.write(piece)
                    self.wfile.flush()
                return
            self.send_response(200)
            for name, value in fault.headers:
                self.send_header(name, value)
            self.send_header("Content-Type", fault.content_type or ATOM_TYPE)
            self.end_headers()
            self.wfile.flush()
            for piece in fault.stream():
                self.wfile.write(piece)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def log_message(self, *args) -> None:
        pass  # keep test output clean; the request log is ArxivServer.requests


# --- the query subset we send ------------------------------------------------

_TOKEN = re.compile(r'\s*(?:([()])|(\w+):("[^"]*"|\[[^\]]*\]|[^\s()]+)|("[^"]*"|[^\s()]+))')
_OPERATORS = {
    "AND": lambda a, b: lambda p: a(p) and b(p),
    "OR": lambda a, b: lambda p: a(p) or b(p),
    "ANDNOT": lambda a, b: lambda p: a(p) and not b(p),
}
Matcher = Callable[[Paper], bool]


def compile_query(text: str) -> Matcher:
    """Turn an arXiv search_query into a predicate: operators left to right, () group."""
    tokens = []
    for match in _TOKEN.finditer(text.strip()):
        paren, field, value, bare = match.groups()
        tokens.append(("paren", paren) if paren else ("term", (field or "all", value or bare)))
    position = 0

    def expression() -> Matcher:
        nonlocal position
        left = term()
        while position < len(tokens) and tokens[position] != ("paren", ")"):
            operator = tokens[position][1][1]
            position += 1
            left = _OPERATORS[operator](left, term())
        return left

    def term() -> Matcher:
        nonlocal position
        kind, value = tokens[position]
        position += 1
        if kind == "paren":
            inner = expression()
            position += 1  # the closing parenthesis
            return inner
        return _field_matcher(*value)

    return expression()


def _field_matcher(field: str, value: str) -> Matcher:
    if field == "submittedDate":
        low, _, high = value.strip("[]").partition(" TO ")
        if not high:  # e.g. a literal '+TO+': arXiv matches nothing
            return lambda paper: False
        low_at, high_at = _stamp(low), _stamp(high)
        return lambda p: p.submitted is not None and low_at <= _minute(p.submitted) <= high_at
    if field == "cat":
        return lambda p: value.lower() in (c.lower() for c in p.categories)
    pattern = re.compile(r"(?<!\w)" + re.escape(collapse(value.strip('"')).lower()) + r"(?!\w)")
    return lambda p: bool(pattern.search(collapse(_field_text(p, field)).lower()))


def _field_text(paper: Paper, field: str) -> str:
    parts = {
        "ti": [paper.title],
        "abs": [paper.abstract],
        "au": list(paper.authors),
        "co": [paper.comment or ""],
    }
    if field == "all":
        return " ; ".join(text for values in parts.values() for text in values)
    return " ; ".join(parts[field])


def _stamp(text: str) -> datetime:
    digits = text.strip()
    return datetime.strptime(digits.ljust(12, "0")[:12], "%Y%m%d%H%M").replace(tzinfo=UTC)


def _minute(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def _listed(paper: Paper, ids: list[str]) -> bool:
    return paper.id in ids or f"{paper.id}v{paper.version}" in ids


def _sorted(papers: list[Paper], sort_by: str, order: str) -> list[Paper]:
    keys = {
        "submittedDate": lambda p: p.submitted or _EPOCH,
        "lastUpdatedDate": lambda p: p.updated or p.submitted or _EPOCH,
    }
    if sort_by not in keys:
        return papers  # relevance: the order papers were added
    return sorted(papers, key=keys[sort_by], reverse=order == "descending")


def _in_feed(paper: Paper, wanted: list[str]) -> bool:
    """A feed for 'cs' carries every cs.* paper; one for 'cs.LG' only cs.LG."""
    return any(cat == w or cat.startswith(w + ".") for cat in paper.categories for w in wanted)


def _as_listed(paper: Paper, wanted: list[str]) -> Paper:
    """A paper whose primary category is not asked for is a cross-list in this feed."""
    if not paper.categories or any(paper.categories[0] == w or paper.categories[0].startswith(w + ".")
                                   for w in wanted):
        return paper
    kind = {"new": "cross", "replace": "replace-cross"}.get(paper.announce_type or "new")
    return replace(paper, announce_type=kind or paper.announce_type)


def atom_feed(text: str, start: int, size: int, total: int, entries: str) -> bytes:
    """One page of the API's Atom answer."""
    return (
        "<?xml version='1.0' encoding='UTF-8'?>\n"
        '<feed xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/" '
        'xmlns:arxiv="http://arxiv.org/schemas/atom" xmlns="http://www.w3.org/2005/Atom">\n'
        f"  <id>https://arxiv.org/api/stand-in</id>\n"
        f"  <title>arXiv Query: {escape(text)}</title>\n"
        f"  <updated>{_iso(datetime.now(UTC))}</updated>\n"
        f"  <opensearch:itemsPerPage>{size}</opensearch:itemsPerPage>\n"
        f"  <opensearch:totalResults>{total}</opensearch:totalResults>\n"
        f"  <opensearch:startIndex>{start}</opensearch:startIndex>\n"
        f"{entries}</feed>\n"
    ).encode()


# --- rendering (shapes copied from the real samples) -------------------------


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _atom_entry(p: Paper) -> str:
    versioned = f"{p.id}v{p.version}"
    published = p.submitted or _EPOCH
    lines = [
        "  <entry>",
        f"    <id>http://arxiv.org/abs/{versioned}</id>",
        f"    <title>{escape(p.title)}</title>",
        f"    <updated>{_iso(p.updated or published)}</updated>",
        f'    <link href="https://arxiv.org/abs/{versioned}" rel="alternate" type="text/html"/>',
        f'    <link href="https://arxiv.org/pdf/{versioned}" rel="related" type="application/pdf"'
        + ' title="pdf"/>',
        f"    <summary>{escape(p.abstract)}</summary>",
        *(
            f'    <category term="{c}" scheme="http://arxiv.org/schemas/atom"/>'
            for c in p.categories
        ),
        f"    <published>{_iso(published)}</published>",
    ]
    if p.comment:
        lines.append(f"    <arxiv:comment>{escape(p.comment)}</arxiv:comment>")
    if p.categories:
        lines.append(f'    <arxiv:primary_category term="{p.categories[0]}"/>')
    if p.journal_ref:
        lines.append(f"    <arxiv:journal_ref>{escape(p.journal_ref)}</arxiv:journal_ref>")
    lines += [f"    <author>\n      <name>{escape(a)}</name>\n    </author>" for a in p.authors]
    return "\n".join(lines + ["  </entry>", ""])


def _rss_item(p: Paper, announced: datetime) -> str:
    kind = p.announce_type or "new"
    versioned = f"{p.id}v{p.version}"
    lines = [
        "    <item>",
        f"      <title>{escape(p.title)}</title>",
        f"      <link>https://arxiv.org/abs/{p.id}</link>",
        f"      <description>arXiv:{versioned} Announce Type: {kind} \n"
        + f"Abstract: {escape(p.abstract)}</description>",
        f'      <guid isPermaLink="false">oai:arXiv.org:{versioned}</guid>',
        *(f"      <category>{c}</category>" for c in p.categories),
        f"      <pubDate>{format_datetime(announced)}</pubDate>",
        f"      <arxiv:announce_type>{kind}</arxiv:announce_type>",
        "      <dc:rights>http://creativecommons.org/licenses/by/4.0/</dc:rights>",
    ]
    if p.journal_ref:
        lines.append(
            f"      <arxiv:journal_reference>{escape(p.journal_ref)}</arxiv:journal_reference>"
        )
    lines += [f"      <dc:creator>{escape(', '.join(p.authors))}</dc:creator>", "    </item>", ""]
    return "\n".join(lines)
