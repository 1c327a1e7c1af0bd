"""Generated broken answers from arXiv through the three readers of its services.

Real answers (the recorded ones of tests/data/arxiv, and the stand-in's own) cut short, spliced with
entities, byte order marks, bytes that are not UTF-8, DOCTYPEs, stray tags, odd ids and
dates, entries repeated or dropped: each reader gives its records or one SourceError
naming the address, never another exception. What these properties found stays in
make test as the cases in test_arxiv_api.py, test_arxiv_rss.py and test_arxiv_oai.py.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pipeline.errors import SourceError
from pipeline.models import ARXIV_ID
from pipeline.sources.arxiv_api import fetch_ids
from pipeline.sources.arxiv_oai import harvest
from pipeline.sources.arxiv_rss import parse_feed
from pipeline.sources.http import Fetcher
from tests.servers import oai_server
from tests.servers.arxiv_server import ATOM_TYPE, OK, ArxivServer, raw
from tests.test_arxiv_oai import paper

RECORDED = Path(__file__).with_name("data") / "arxiv"
FRAGMENTS = [b"&nbsp;", b"&amp;", b"&#xD800;", b"&#0;", b"\xef\xbb\xbf", b"\xff\xfe", b"\xc3", b"\x0c",
             b"<!DOCTYPE x [<!ENTITY a 'aaaaaaaaaa'>]>", b"&a;", b"<![CDATA[", b"]]>", b"</entry>",
             b"<entry>", b"</item>", b"<item>", b"</record>", b"<record>", b"<id></id>",
             b"math/0501001v2", b"oai:arXiv.org:", b"v99999999999999999999", b"<published>",
             b"2026-11-18 12:00 EST", b"Tue, 31 Feb 2026 25:61:00 +9900", b"<resumptionToken>x</resumptionToken>",
             b"encoding='UTF-16'", b"encoding='latin-1'", b"<html><body>502</body></html>",
             b"Rate exceeded.", b"<error code='badResumptionToken'>expired</error>", b"x" * 5000]
_GENERATED = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck),
                      phases=[Phase.explicit, Phase.reuse, Phase.generate])


def _bases() -> dict[str, list[bytes]]:
    papers = [paper(n) for n in range(3)] + [paper(7, version=3)]
    with ArxivServer(papers) as server:
        atom = server.answer("/api/query", {"id_list": ",".join(p.id for p in papers)}, OK)[2]
        rss = server.answer("/rss/cs.LG", {}, OK)[2]
    oai = oai_server.answer(papers, {"verb": "ListRecords", "metadataPrefix": "arXivRaw", "set": "cs:cs:LG",
                                     "from": "2026-11-01"}, "http://oai.invalid/oai", 2,
                            oai_server.default_datestamp)
    return {"api": [atom, *[p.read_bytes() for p in sorted(RECORDED.glob("arxiv_api_atom_*.xml"))]],
            "rss": [rss, *[p.read_bytes() for p in sorted(RECORDED.glob("arxiv_rss_*.xml"))]], "oai": [oai]}


BASES = _bases()
IDS = ["2611.00000", "2611.00001", "2611.00002", "2611.00007"]


@st.composite
def broken(draw, kind: str) -> bytes:
    """A real answer with up to four edits: a cut, a fragment spliced in, a piece repeated or
    taken out."""
    body = draw(st.sampled_from(BASES[kind]))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(body)))
        edit = draw(st.integers(0, 3))
        if edit == 0:
            body = body[:at]
        elif edit == 1:
            body = body[:at] + draw(st.sampled_from(FRAGMENTS)) + body[at:]
        else:
            end = draw(st.integers(at, min(len(body), at + 2000)))
            body = body[:at] + (body[at:end] * 2 if edit == 2 else b"") + body[end:]
    return body


@pytest.fixture(scope="module")
def server():
    with ArxivServer() as running:
        yield running


def fetcher() -> Fetcher:
    return Fetcher(0, 5, 0, "rl-digest-tests/0.1")


@pytest.mark.slow
@_GENERATED
@given(body=broken("api"))
def test_a_broken_api_page_gives_papers_or_a_source_error(server, body):
    server.script("/api/query", raw(body, ATOM_TYPE))
    try:
        papers = fetch_ids(fetcher(), server.api_url, IDS)
    except SourceError as exc:
        assert str(exc).startswith(server.api_url) and "\n" not in str(exc)
        return
    assert all(ARXIV_ID.fullmatch(p.id) for p in papers)  # the ids asked for, as arXiv writes them


@pytest.mark.slow
@_GENERATED
@given(body=broken("rss"))
def test_a_broken_feed_gives_items_or_a_source_error(body):
    url = "https://rss.arxiv.org/rss/cs.LG"
    try:
        feed = parse_feed(body, url)
    except SourceError as exc:
        assert str(exc).startswith(url) and "\n" not in str(exc)
        return
    assert all(p.id.strip() for p in feed.papers) and all(r.id.strip() for r in feed.replacements)
    assert all(line.startswith(url) for line in feed.warnings)


@pytest.mark.slow
@_GENERATED
@given(body=broken("oai"))
def test_a_broken_oai_page_gives_a_harvest_or_a_source_error(server, body):
    server.script("/oai", *[raw(body, "text/xml")] * 3)  # a token in it asks again: the same page
    try:
        got = harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
    except SourceError as exc:
        assert str(exc).startswith(server.oai_url) and "\n" not in str(exc)
        return
    assert all(p.id.strip() for p in got.papers)
    assert len(got.papers) + len(got.unread) <= got.records


def test_the_bases_are_read_whole():
    """The unbroken answers read as they are: a property over them is one over real pages."""
    assert (len(BASES["api"]), len(BASES["rss"])) == (4, 4)  # the stand-in's and the recorded ones
    with ArxivServer() as running:
        running.script("/api/query", raw(BASES["api"][0], ATOM_TYPE))
        assert len(fetch_ids(fetcher(), running.api_url, IDS)) == 4
    assert len(parse_feed(BASES["rss"][0], "https://rss.arxiv.org/rss/cs.LG").papers) == 4
