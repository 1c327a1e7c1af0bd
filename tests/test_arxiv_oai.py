"""The OAI-PMH source against the stand-in: Identify, arXivRaw records, paging, 503 Retry-After."""

from __future__ import annotations

import re
import time
from datetime import UTC, date, datetime, timedelta

import pytest
from oaipmh_scythe import Scythe

from pipeline.errors import SourceError
from pipeline.models import Paper
from pipeline.sources.arxiv_oai import harvest, set_spec
from pipeline.sources.http import Fetcher
from tests.servers import oai_server
from tests.servers.arxiv_server import HTML_PAGE, OK, ArxivServer, Fault, http_error, raw

CUT_MID_RECORD = raw(b"<?xml version='1.0' encoding='UTF-8'?>\n<OAI-PMH xmlns=\"http://www.openarchives.org/"
                     b"OAI/2.0/\"><responseDate>2026</responseDate><ListRecords><record><header>"
                     b"<identifier>oai:arXiv.org:2611.0", "text/xml")

DAY = datetime(2026, 11, 18, 15, tzinfo=UTC)


def paper(n: int, cats=("cs.LG", "cs.AI"), version=1) -> Paper:
    return Paper(id=f"2611.{n:05d}", title=f"GRPO & <RLVR> for $\\pi$-models, part {n}",
                 abstract="We train a large language model\nwith reinforcement learning.", version=version,
                 authors=("Ada Lovelace", "Alan Turing", "Grace Hopper"), categories=cats,
                 submitted=DAY, updated=DAY + timedelta(days=version - 1), comment="9 pages")


def fetcher() -> Fetcher:
    return Fetcher(0, 5, 2, "rl-digest-tests/0.1", backoff_seconds=0.01)


def test_the_stand_in_answers_identify_to_the_real_client():
    with ArxivServer() as server, Scythe(server.oai_url) as client:
        identify = client.identify()
    assert identify.repositoryName == "arXiv" and identify.protocolVersion == "2.0"


def test_set_specs_follow_arxiv():
    assert [set_spec(c) for c in ("cs.LG", "stat.ML", "eess.AS", "cs")] == [
        "cs:cs:LG", "stat:stat:ML", "eess:eess:AS", "cs"]


def test_harvest_reads_arxiv_raw_with_every_version_and_follows_resumption_tokens():
    with ArxivServer([paper(n) for n in range(5)] + [paper(9, cats=("math.CO",)),
                                                     paper(7, version=3)]) as server:
        server.oai_page_size = 2
        found = harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
        pages = [r for r in server.requests if r.path == "/oai"]
    assert found.records == 6 and len(pages) == 3
    assert pages[0].query == {"verb": "ListRecords", "from": "2026-11-01", "metadataPrefix": "arXivRaw",
                              "set": "cs:cs:LG"}
    assert set(pages[1].query) == {"verb", "resumptionToken"}
    first = next(p for p in found.papers if p.id == "2611.00000")
    assert first.title == "GRPO & <RLVR> for $\\pi$-models, part 0"
    assert first.abstract == "We train a large language model with reinforcement learning."
    assert first.authors == ("Ada Lovelace", "Alan Turing", "Grace Hopper")
    assert first.categories == ("cs.LG", "cs.AI") and first.comment == "9 pages"
    assert first.submitted == DAY and first.sources == ("oai",)
    revised = next(p for p in found.papers if p.id == "2611.00007")
    assert revised.version == 3 and revised.submitted == DAY and revised.updated == DAY + timedelta(days=2)
    assert found.latest == date(2026, 11, 21)


def first_page(papers: list[Paper], server: ArxivServer, size: int) -> bytes:
    """The stand-in's first ListRecords page of cs.LG since 2026-11-01, to alter."""
    return oai_server.answer(papers, {"verb": "ListRecords", "metadataPrefix": "arXivRaw", "set": "cs:cs:LG",
                                      "from": "2026-11-01"}, server.oai_url, size, oai_server.default_datestamp)


def test_a_record_without_a_dated_first_version_is_named_not_dropped_unsaid():
    """A record whose first <date> is not RFC 822, or an answer in another metadataPrefix, was
    left out with no line at all (a day's papers could vanish); an <id> with a version in it
    (2611.00002v1) became a paper key no link or look-up matches."""
    papers = [paper(n) for n in range(3)]
    with ArxivServer(papers) as server:
        page = first_page(papers, server, 10)
        start = page.index(b"<date>")
        page = (page[:start] + b"<date>2026-11-18 10:00 EST</date>"
                + page[page.index(b"</date>", start) + 7:]).replace(b"<id>2611.00002</id>", b"<id>2611.00002v1</id>")
        server.script("/oai", raw(page, "text/xml"))
        found = harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
    assert [p.id for p in found.papers] == ["2611.00001"]
    assert found.unread == ("oai:arXiv.org:2611.00000", "oai:arXiv.org:2611.00002")


def test_a_malformed_page_whose_parser_quotes_its_lines_is_named_on_one_line():
    """lxml's message on an unfinished CDATA section quotes the page's next lines: the error
    a run stops with ran over several lines of the page (found by the generated pages of
    tests/test_source_properties.py)."""
    papers = [paper(n) for n in range(3)]
    with ArxivServer(papers) as server:
        page = first_page(papers, server, 10)
        page = page.replace(b"<responseDate>", b"<responseDate><![CDATA[", 1)
        server.script("/oai", *[raw(page, "text/xml")] * 3)
        with pytest.raises(SourceError) as caught:
            harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
    message = str(caught.value)
    assert "malformed XML from OAI-PMH (CData section not finished" in message and "\n" not in message


def test_an_empty_range_is_no_papers_not_a_failure():
    with ArxivServer([paper(1)]) as server:
        found = harvest(fetcher(), server.oai_url, "cs.CL", date(2026, 11, 1))
    assert (found.papers, found.records, found.latest) == ((), 0, None)


def test_503_with_retry_after_is_waited_out():
    with ArxivServer([paper(1)]) as server:
        server.script("/oai", http_error(503, retry_after=1))
        began = time.monotonic()
        found = harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
        waited = time.monotonic() - began
    assert [p.id for p in found.papers] == ["2611.00001"] and waited >= 1.0


def test_an_html_page_is_a_source_error_naming_the_url():
    with ArxivServer([paper(1)]) as server:
        server.script("/oai", HTML_PAGE)
        with pytest.raises(SourceError) as caught:
            harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
    assert str(caught.value).startswith(server.oai_url + "?verb=ListRecords")
    assert "not an OAI-PMH answer" in str(caught.value)


def test_a_page_cut_mid_record_is_retried_then_read_whole():
    with ArxivServer([paper(n) for n in range(5)]) as server:
        server.script("/oai", CUT_MID_RECORD)
        found = harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
    assert found.records == 5 and len(server.requests) == 2


@pytest.mark.parametrize("fault", [CUT_MID_RECORD, Fault(cut_after_records=3)],
                         ids=["mid-record", "after-a-record"])
def test_a_page_cut_every_time_is_a_source_error_not_a_short_harvest(fault):
    with ArxivServer([paper(n) for n in range(5)]) as server:
        server.oai_page_size = 4
        server.script("/oai", fault, fault, fault)
        with pytest.raises(SourceError) as caught:
            harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
    message = str(caught.value)
    assert message.startswith(server.oai_url + "?verb=ListRecords&")
    assert "malformed XML from OAI-PMH" in message and message.endswith("after 2 retries")
    assert "\n" not in message


def test_fewer_records_than_complete_list_size_is_a_source_error():
    papers = [paper(n) for n in range(5)]
    with ArxivServer(papers) as server:
        server.oai_page_size = 3
        last = oai_server.answer(papers, {"verb": "ListRecords", "resumptionToken": "cs:cs:LG|2026-11-01|3"},
                                 server.oai_url, 3, oai_server.default_datestamp)
        start = last.index(b"<record>")
        short = last[:start] + last[last.index(b"</record>") + len(b"</record>"):]  # a record lost
        server.script("/oai", OK, raw(short, "text/xml"))
        with pytest.raises(SourceError) as caught:
            harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
    assert str(caught.value) == (f"{server.oai_url}: the OAI-PMH harvest of set cs:cs:LG ended after 4 "
                                 "records of the 5 its completeListSize promised")


def test_a_resumption_token_handed_out_again_is_a_source_error_not_an_endless_harvest():
    """Found by fuzzing: a repository answering each page with the same token was paged for ever."""
    papers = [paper(n) for n in range(5)]
    with ArxivServer(papers) as server:
        server.oai_page_size = 2
        first = first_page(papers, server, 2)
        server.script("/oai", *[raw(first, "text/xml")] * 5)  # the first page, every time
        with pytest.raises(SourceError) as caught:
            harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
    assert str(caught.value) == (f"{server.oai_url}?verb=ListRecords&resumptionToken=cs%3Acs%3ALG"
                                 "%7C2026-11-01%7C2: OAI-PMH gave this resumption token a second time")
    assert len(server.requests) == 2


def test_pages_that_bring_no_record_but_a_new_token_end_the_harvest_as_a_source_error():
    """A repository answering each page with a new token and no record was paged for ever,
    one request each 3 s (the fuzzing's repeated token, told apart)."""
    papers = [paper(n) for n in range(5)]
    with ArxivServer(papers) as server:
        server.oai_page_size = 2
        first = first_page(papers, server, 2)
        empty = re.sub(rb"<record>.*</record>", b"", first, flags=re.S)
        pages = [re.sub(rb"(<resumptionToken[^>]*>)[^<]*", rb"\g<1>next-%d" % n, empty) for n in range(9)]
        server.script("/oai", raw(first, "text/xml"), *[raw(page, "text/xml") for page in pages])
        with pytest.raises(SourceError) as caught:
            harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
    assert str(caught.value) == (f"{server.oai_url}?verb=ListRecords&resumptionToken=next-2: OAI-PMH "
                                 "gave 3 pages in a row with a resumption token and no record")
    assert len(server.requests) == 4  # the page with records, then three with none


def test_any_other_failure_while_harvesting_is_a_source_error_naming_the_url():
    with ArxivServer([paper(1)]) as server:
        server.script("/oai", raw(b"<?xml version='1.0'?><OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">"
                                  b"<ListRecords><record><header><identifier>x</identifier></header></record>"
                                  b"</ListRecords></OAI-PMH>", "text/xml"))  # a record without a datestamp
        with pytest.raises(SourceError) as caught:
            harvest(fetcher(), server.oai_url, "cs.LG", date(2026, 11, 1))
    assert str(caught.value).startswith(f"{server.oai_url}: could not read the OAI-PMH harvest of set cs:cs:LG (")


def test_a_paper_held_for_moderation_and_announced_in_the_gap_is_caught_up():
    """arXiv holds some submissions for moderation for days or weeks; its record is stamped when
    it is at last announced. Sent on 11-10, announced Monday 11-23, an evening no feed read: the
    catch-up kept only papers sent from Thursday's deadline on, and it was lost. An older paper
    stamped in the gap by a metadata change (a journal reference) is not this week's."""
    from pipeline.calendar import load_calendar
    from pipeline.config import load
    from pipeline.coverage import Ledger
    from pipeline.rank import Query
    from pipeline.sources import Window
    from pipeline.sources.arxiv_oai import OaiCatchUp

    sent = datetime(2026, 11, 10, 15, tzinfo=UTC)
    held = Paper(**{**vars(paper(1, ("cs.LG",))), "submitted": sent, "updated": sent})
    old = Paper(**{**vars(paper(2, ("cs.LG",))), "id": "2609.00002", "submitted": sent - timedelta(days=60),
                   "updated": sent - timedelta(days=60), "journal_ref": "ICLR 2027"})
    monday = paper(3, ("cs.LG",))
    monday = Paper(**{**vars(monday), "submitted": datetime(2026, 11, 23, 15, tzinfo=UTC),
                      "updated": datetime(2026, 11, 23, 15, tzinfo=UTC)})
    as_of = datetime(2026, 11, 24, 14, tzinfo=UTC)
    with ArxivServer([held, old, monday]) as server:
        server.datestamps.update({held.id: date(2026, 11, 24), old.id: date(2026, 11, 24)})
        source = OaiCatchUp(server.oai_url, Query.compile(["cs.LG"], load(None).sources.arxiv.terms))
        ledger = Ledger()
        ledger.get(date(2026, 11, 22), "cs.LG").read = "RSS"
        found = source.fetch(Window(as_of - timedelta(days=2), as_of, as_of, load_calendar(), ["cs.LG"],
                                    ledger), fetcher())
    assert sorted(p.id for p in found.papers) == ["2611.00001", "2611.00003"]
    monday_read = ledger.get(date(2026, 11, 23), "cs.LG")
    assert (monday_read.recovered, monday_read.new, monday_read.kept) == ("OAI-PMH", 2, 2)
