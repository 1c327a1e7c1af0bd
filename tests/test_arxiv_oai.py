"""The OAI-PMH source against the stand-in: Identify, arXivRaw records, paging, 503 Retry-After."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta

import pytest
from oaipmh_scythe import Scythe

from pipeline.errors import SourceError
from pipeline.models import Paper
from pipeline.sources.arxiv_oai import harvest, set_spec
from pipeline.sources.http import Fetcher
from tests.servers.arxiv_server import HTML_PAGE, ArxivServer, http_error

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
