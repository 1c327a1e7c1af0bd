"""The API source: query building, paging, look-ups, real samples and failure semantics."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from pipeline.errors import SourceError
from pipeline.models import Paper
from pipeline.sources.arxiv_api import build_query, fetch_ids, search_titles, search_window
from pipeline.sources.http import Fetcher
from tests.servers.arxiv_server import (
    EMPTY,
    HTML_PAGE,
    MALFORMED,
    OK,
    ArxivServer,
    Fault,
    api_error,
    http_error,
    raw,
)

RECORDED = Path(__file__).with_name("data") / "arxiv"  # real answers, see its README.md
MONDAY = datetime(2024, 1, 1, tzinfo=UTC)
WEEK = (MONDAY, MONDAY + timedelta(days=7))
CATS = ["cs.LG", "cs.CL"]
TERMS = ["reinforcement learning", "RLHF"]
NO_CHARSET = Fault(content_type="text/xml")  # requests' .text would guess ISO-8859-1


def sample(name: str) -> bytes:
    return (RECORDED / name).read_bytes()


def fetcher(retries: int = 2) -> Fetcher:
    return Fetcher(0, 5, retries, "rl-digest-tests/0.1", backoff_seconds=0.01)


def paper(n: int, **fields) -> Paper:
    defaults = {
        "id": f"2401.{n:05d}",
        "title": f"Reinforcement Learning from Feedback, part {n}",
        "abstract": "We fine-tune an LLM with reinforcement learning.",
        "authors": ("Ada Lovelace", "Alan Turing"),
        "categories": ("cs.LG", "cs.AI"),
        "submitted": MONDAY + timedelta(hours=n),
        "updated": MONDAY + timedelta(hours=n),
    }
    return Paper(**(defaults | fields))


def test_one_query_for_all_categories_and_terms_with_a_spaced_utc_range():
    shanghai = timezone(timedelta(hours=8))
    start = datetime(2024, 1, 1, 8, 0, tzinfo=shanghai)

    query = build_query(CATS, TERMS, start, start + timedelta(days=7))

    assert query == (
        '(cat:cs.LG OR cat:cs.CL) AND (ti:"reinforcement learning" OR abs:"reinforcement learning"'
        ' OR ti:"RLHF" OR abs:"RLHF") AND submittedDate:[202401010000 TO 202401080000]'
    )


def test_naive_datetimes_are_refused():
    with pytest.raises(ValueError, match="no time zone"):
        build_query(CATS, TERMS, datetime(2024, 1, 1), datetime(2024, 1, 8))


def test_search_sends_that_query_once_sorted_by_submission_ascending():
    with ArxivServer([paper(1)]) as server:
        search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=50)

    (request,) = server.requests
    assert request.query["search_query"] == build_query(CATS, TERMS, *WEEK)
    assert "[202401010000 TO 202401080000]" in request.query["search_query"]  # not '+TO+'
    assert request.query["sortBy"] == "submittedDate"
    assert request.query["sortOrder"] == "ascending"
    assert request.query["max_results"] == "50"
    assert request.headers["User-Agent"] == "rl-digest-tests/0.1"  # ours, not arxiv.py's


def test_search_keeps_only_matching_papers_in_the_window_oldest_first():
    inside = paper(3, title="Scaling RLHF", abstract="Preference data.")
    by_abstract = paper(2, title="Policy gradients")
    too_late = paper(4, submitted=WEEK[1] + timedelta(minutes=1))
    other_category = paper(5, categories=("math.OC",))
    off_topic = paper(6, title="Diffusion models", abstract="Images.")
    papers = [inside, too_late, other_category, off_topic, by_abstract]

    with ArxivServer(papers) as server:
        found, stats = search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=50)

    assert [p.id for p in found] == [by_abstract.id, inside.id]
    assert (stats.requests, stats.seen) == (1, 2)


@pytest.mark.parametrize("count, page_size", [(7, 3), (6, 3), (1, 3), (0, 3), (5, 2000)])
def test_paging_makes_ceil_n_over_page_size_requests(count, page_size):
    papers = [paper(n) for n in range(count)]

    with ArxivServer(papers) as server:
        found, stats = search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size)

    assert [p.id for p in found] == [p.id for p in papers]
    assert stats.requests == len(server.requests) == max(1, math.ceil(count / page_size))
    assert [r.query["start"] for r in server.requests] == [
        str(start) for start in range(0, max(count, 1), page_size)
    ]


def test_page_size_is_capped_at_the_api_limit():
    with ArxivServer() as server:
        search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=5000)

    assert server.requests[0].query["max_results"] == "2000"


def test_a_window_with_more_results_than_the_api_serves_is_searched_in_halves(monkeypatch):
    """arXiv serves 30,000 results of a search, then answers HTTP 400: a backfill of months
    (collect --since, OAI-PMH off) stopped at that page, exit 3, every run. A window
    over the cap is searched in halves of its submission range, each under it."""
    from pipeline.sources import arxiv_api

    monkeypatch.setattr(arxiv_api, "MAX_RESULTS", 30)  # the server's cap, made small
    papers = [paper(n, submitted=MONDAY + timedelta(minutes=90 * n)) for n in range(100)]
    with ArxivServer(papers) as server:
        server.max_results = 30
        found, stats = search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=10)
        asked = [(re.search(r"submittedDate:(\[[^]]*\])", r.query["search_query"])[1], int(r.query["start"]))
                 for r in server.requests]
    assert [p.id for p in found] == [p.id for p in papers]  # each once, oldest first
    assert all(start + 10 <= 30 for _, start in asked)
    assert stats.requests == len(asked) and stats.seen == 100
    ranges = [query for query, start in asked if start == 0]
    assert ranges[0] == "[202401010000 TO 202401080000]" and len(ranges) == len(set(ranges)) > 4
    with ArxivServer([paper(n, submitted=MONDAY) for n in range(40)]) as server:  # in one minute
        server.max_results = 30
        with pytest.raises(SourceError, match=r"40 results, over the 30 the arXiv API serves; "
                                              r"backfill through OAI-PMH \(sources.oai.enabled: true\)$"):
            search_window(fetcher(), server.api_url, CATS, TERMS, MONDAY, MONDAY + timedelta(seconds=59), 10)


def test_fetch_ids_makes_one_request_per_batch():
    papers = [paper(n) for n in range(5)]
    wanted = [p.id for p in reversed(papers)] + [papers[0].id]  # a duplicate too

    with ArxivServer(papers) as server:
        found = fetch_ids(fetcher(), server.api_url, wanted, batch=2)

    assert [p.id for p in found] == [p.id for p in reversed(papers)]
    assert [r.query["id_list"] for r in server.requests] == [
        "2401.00004,2401.00003",
        "2401.00002,2401.00001",
        "2401.00000",
    ]


def test_search_title_finds_a_seed_title_in_one_request():
    wanted = paper(1, title="The Art of Scaling Reinforcement Learning Compute for LLMs")
    with ArxivServer([paper(2), wanted]) as server:
        found = search_titles(
            fetcher(), server.api_url, ['  the art of scaling\n reinforcement "learning" compute ']
        )

    assert [p.id for p in found] == [wanted.id]
    (request,) = server.requests
    assert request.query["search_query"] == 'ti:"the art of scaling reinforcement learning compute"'
    assert request.query["max_results"] == "5"


def test_non_ascii_title_and_authors_round_trip_as_utf8():
    tex = paper(1, title="Über $\\omega$-RLHF: 强化学习 für Wübben & Co", authors=("Dirk Wübben",))

    with ArxivServer([tex]) as server:
        server.script("/api/query", NO_CHARSET)
        found, _ = search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=10)

    assert found[0].title == "Über $\\omega$-RLHF: 强化学习 für Wübben & Co"
    assert found[0].authors == ("Dirk Wübben",)


def test_503_during_paging_is_retried_through_the_shared_fetcher():
    with ArxivServer([paper(n) for n in range(4)]) as server:
        server.script("/api/query", OK, http_error(503))
        found, stats = search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=2)

    assert len(found) == 4
    assert stats.requests == 3  # two pages plus one retry


def test_empty_later_page_is_retried_once_then_succeeds():
    with ArxivServer([paper(n) for n in range(4)]) as server:
        server.script("/api/query", OK, EMPTY)
        found, stats = search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=2)

    assert len(found) == 4 and stats.requests == 3


@pytest.mark.parametrize("first_ok", [True, False], ids=["later-page", "first-page"])
def test_empty_page_while_total_says_more_is_a_source_error(first_ok):
    with ArxivServer([paper(n) for n in range(5)]) as server:
        server.script("/api/query", *([OK] if first_ok else []), *[EMPTY] * 3)
        with pytest.raises(SourceError) as caught:
            search_window(fetcher(retries=2), server.api_url, CATS, TERMS, *WEEK, page_size=2)

    start = 2 if first_ok else 0
    message = str(caught.value)
    assert message.startswith(server.api_url + "?search_query=")
    assert f"&start={start}&" in message
    assert message.endswith(f"empty page at start={start} although totalResults=5 after 2 retries")


class LateIndexed(ArxivServer):
    """After the first page of each of the first `shifts` searches, arXiv indexes one more
    paper submitted before all the others: the later pages shift by one."""

    def __init__(self, papers, shifts: int):
        super().__init__(papers)
        self.shifts, self.late = shifts, 90

    def _atom(self, query, empty):
        page = super()._atom(query, empty)
        if query.get("start") == "0" and self.shifts:
            self.shifts -= 1
            self.late += 1
            self.papers.insert(0, paper(self.late, submitted=MONDAY - timedelta(minutes=self.late)))
        return page


def test_a_paper_indexed_while_paging_restarts_the_search_and_none_is_lost():
    with LateIndexed([paper(n) for n in range(6)], shifts=1) as server:
        found, stats = search_window(fetcher(), server.api_url, CATS, TERMS,
                                     MONDAY - timedelta(days=1), WEEK[1], page_size=3)

    assert sorted(p.id for p in found) == sorted(p.id for p in server.papers) and len(found) == 7
    assert [r.query["start"] for r in server.requests] == ["0", "3", "0", "3", "6"]
    assert stats.requests == 5 and stats.seen == 7


def test_a_search_that_keeps_shifting_is_a_source_error_naming_the_page():
    with LateIndexed([paper(n) for n in range(6)], shifts=3) as server:
        with pytest.raises(SourceError) as caught:
            search_window(fetcher(), server.api_url, CATS, TERMS,
                          MONDAY - timedelta(days=1), WEEK[1], page_size=3)

    message = str(caught.value)
    assert message.startswith(server.api_url + "?search_query=") and "&start=3&" in message
    assert message.endswith("totalResults changed from 8 to 9 while paging")


class SortIgnored(ArxivServer):
    """The first search's second page repeats its first (as when arXiv ignored sortBy)."""

    def _atom(self, query, empty):
        if query.get("start") == "3" and len(self.requests) == 2:
            query = {**query, "start": "0"}
        return super()._atom(query, empty)


def test_fewer_distinct_ids_than_total_results_restarts_the_search():
    with SortIgnored([paper(n) for n in range(6)]) as server:
        found, _ = search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=3)

    assert [p.id for p in found] == [paper(n).id for n in range(6)]
    assert [r.query["start"] for r in server.requests] == ["0", "3", "0", "3"]


class DateAltered(ArxivServer):
    """Its paper number `which`'s <published> as `published` says (None: left out)."""

    published: str | None = None
    which = 1

    def _entry(self, paper):
        entry = super()._entry(paper)
        if paper.id != self.papers[self.which].id:
            return entry
        tag = "" if self.published is None else f"<published>{self.published}</published>"
        return re.sub(r"<published>[^<]*</published>", tag, entry)


@pytest.mark.parametrize("published, why", [
    ("2024-01-01 01:00 EST", "whose <published> is not a date ('2024-01-01 01:00 EST')"),
    (None, "which has no <published>"),
], ids=["not-iso", "missing"])
@pytest.mark.parametrize("which", [1, 2], ids=["middle", "last"])
def test_an_entry_with_a_date_the_package_cannot_read_is_kept_without_it_naming_it(published, why, which, caplog):
    """Found by fuzzing: one such entry failed the whole search ('unexpected error: ValueError');
    the arxiv package, which skips one without a date, then pages one entry short (and fails
    with an empty page when it was the last). The paper is kept without dates, as a feed's
    paper is (the search found it in the window), with a line naming it and the date."""
    with DateAltered([paper(n) for n in range(3)]) as server:
        server.published, server.which = published, which
        for read in (lambda: fetch_ids(fetcher(), server.api_url, [paper(n).id for n in range(3)]),
                     lambda: search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=10)[0]):
            found = read()
            assert [p.id for p in found] == [paper(n).id for n in range(3)]
            assert [p.submitted is None and p.updated is None for p in found] == [n == which for n in range(3)]
            assert found[which].title == paper(which).title
        assert len(server.requests) == 2  # one page each: the undated entry counts for the paging
    assert caplog.text.count(f"arXiv API: kept http://arxiv.org/abs/{paper(which).id}v1 without a date, {why}") == 2


def test_a_recorded_page_keeps_every_entry_when_one_has_no_date(caplog):
    """The real answer of ten entries with one <published> taken out: ten papers, one request."""
    body = sample("arxiv_api_atom_2026_search_query_testing_max10.xml")
    with ArxivServer() as server:
        server.script("/api/query", raw(body.replace(b"<published>2024-05-22T16:11:45Z</published>", b"")))
        found = search_titles(fetcher(), server.api_url, ["testing"], per_title=10)
    undated = [p for p in found if p.submitted is None]
    assert len(found) == 10 and [p.id for p in undated] == ["2405.13786"] and len(server.requests) == 1
    assert "kept http://arxiv.org/abs/2405.13786v1 without a date, which has no <published>" in caplog.text


class IdAltered(ArxivServer):
    """Its second paper's <id> is no arXiv id."""

    def _entry(self, paper):
        entry = super()._entry(paper)
        return entry if paper.id != self.papers[1].id else re.sub(
            r"<id>[^<]*</id>", "<id>http://arxivt/0607501v2</id>", entry)


def test_an_entry_whose_id_is_not_an_arxiv_id_is_skipped_with_a_warning(caplog):
    """Found by the generated pages: 'http://arxivt/0607501v2' became the paper 'arxivt/0607501',
    a key no link or look-up matches, stored beside the others."""
    with IdAltered([paper(n) for n in range(3)]) as server:
        for read in (lambda: fetch_ids(fetcher(), server.api_url, [paper(n).id for n in range(3)]),
                     lambda: search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=10)[0]):
            assert sorted(p.id for p in read()) == [paper(0).id, paper(2).id]
    assert "skipped an entry whose id is not an arXiv id ('http://arxivt/0607501v2')" in caplog.text


@pytest.mark.parametrize(
    "fault, cause",
    [
        (MALFORMED, "malformed XML"),
        (HTML_PAGE, "an HTML page instead of the API's Atom feed"),
        (raw(b"<rss version='2.0'><channel/></rss>"), "not an Atom feed (root element <rss>)"),
        (raw(b"<?xml version='1.0' encoding='UTF-4'?><feed xmlns='http://www.w3.org/2005/Atom'/>"),
         "malformed XML from the arXiv API (unknown encoding: UTF-4)"),  # found by fuzzing
        (raw(b"<?xml version='1.0' encoding='UTF-7'?><feed xmlns='http://www.w3.org/2005/Atom'/>"),
         "malformed XML from the arXiv API (multi-byte encodings are not supported)"),
    ],
    ids=["malformed", "html-200", "not-atom", "unknown-encoding", "multi-byte-encoding"],
)
def test_bad_page_fails_at_once_naming_the_url(fault, cause):
    with ArxivServer([paper(1)]) as server:
        server.script("/api/query", fault)
        with pytest.raises(SourceError) as caught:
            search_window(fetcher(), server.api_url, CATS, TERMS, *WEEK, page_size=10)

    assert str(caught.value).startswith(server.api_url + "?search_query=")
    assert cause in str(caught.value)
    assert len(server.requests) == 1


def test_an_api_error_entry_is_a_source_error_quoting_it_not_an_empty_result():
    with ArxivServer([paper(1)]) as server:
        server.script("/api/query", api_error("incorrect id format for 1234.12345v"))
        with pytest.raises(SourceError) as caught:
            fetch_ids(fetcher(), server.api_url, ["1234.12345v"])

    message = str(caught.value)
    assert message.startswith(server.api_url + "?search_query=&id_list=1234.12345v")
    assert message.endswith("the arXiv API answered with an error: incorrect id format for 1234.12345v")
    assert len(server.requests) == 1  # a refused query is not retried


def test_real_id_list_sample_every_field():
    with ArxivServer() as server:
        server.script("/api/query", raw(sample("arxiv_api_atom_2026_id_list_1707.08567.xml")))
        (found,) = fetch_ids(fetcher(), server.api_url, ["1707.08567"])

    assert found.id == "1707.08567" and found.version == 1
    assert found.title == (
        "Proceedings of Workshop AEW10: Concepts in Information Theory and Communications"
    )
    assert found.abstract.startswith('The 10th Asia-Europe workshop in "Concepts in Information')
    assert found.abstract.endswith("to pay a tribute to a well respected and special scientist.")
    assert len(found.authors) == 34
    assert found.authors[:2] == ("Kees A. Schouhamer Immink", "Stan Baggen")
    assert found.authors[-1] == "Hirosuke Yamamoto"
    # The recorded fixture itself holds mojibake; we keep what the bytes say.
    assert "Dirk WÃ¼bben" in found.authors
    assert found.categories == ("cs.IT",)
    assert found.submitted == found.updated == datetime(2017, 7, 27, 8, 18, 33, tzinfo=UTC)
    assert found.comment == (
        "44 pages, editors for the proceedings: Yanling Chen and A. J. Han Vinck"
    )
    assert found.journal_ref is None
    assert found.sources == ("api",)
    assert found.abs_url == "https://arxiv.org/abs/1707.08567"


def test_real_search_sample_every_field_of_the_first_entries():
    with ArxivServer() as server:
        body = sample("arxiv_api_atom_2026_search_query_testing_max10.xml")
        server.script("/api/query", raw(body))
        found = search_titles(fetcher(), server.api_url, ["testing"], per_title=10)

    assert len(found) == 10 and len(server.requests) == 1  # totalResults=214881 not followed
    first = found[0]
    assert (first.id, first.version) == ("2202.12139", 1)
    assert first.title == (
        "Testing Deep Learning Models: A First Comparative Study of Multiple Testing Techniques"
    )
    assert first.abstract.startswith("Deep Learning (DL) has revolutionized the capabilities")
    assert first.abstract.endswith("and discuss its results.")
    assert first.authors == ("Mohit Kumar Ahuja", "Arnaud Gotlieb", "Helge Spieker")
    assert first.categories == ("cs.SE", "cs.LG")
    assert first.submitted == first.updated == datetime(2022, 2, 24, 15, 5, 19, tzinfo=UTC)
    assert first.comment == "Artificial Intelligence in Software Testing 2022 workshop @ ICST 2022"
    assert first.journal_ref.startswith("Artificial Intelligence in Software Testing @ 2022 IEEE")
    assert found[1].authors[0] == "Aurora RamÃ­rez"  # the fixture's mojibake, kept verbatim
    by_id = {p.id: p for p in found}
    assert by_id["2005.14124"].version == 2
    assert by_id["2302.03287"].title == "ChatGPT and Software Testing Education: Promises & Perils"


def test_real_legacy_sample_wrapped_text_and_old_style_ids():
    with ArxivServer() as server:
        body = sample("arxiv_api_atom_legacy_2016_del_maestro_quantum_criticality.xml")
        server.script("/api/query", raw(body))
        modern, old = search_titles(fetcher(), server.api_url, ["quantum criticality"])

    assert (modern.id, modern.version) == ("1111.2011", 2)
    assert modern.title == (
        "Quantum Criticality for Extended Nodes on a Bethe Lattice in the Large Connectivity Limit"
    )
    assert modern.abstract.startswith("Theoretical description of anisotropic systems, such as")
    assert "\n" not in modern.abstract and modern.abstract.endswith("describing a single node.")
    assert modern.authors == ("James M. Murray", "Adrian Del Maestro", "Zlatko Tesanovic")
    assert modern.categories == ("cond-mat.str-el", "cond-mat.stat-mech")
    assert modern.submitted == datetime(2011, 11, 8, 18, 48, 36, tzinfo=UTC)
    assert modern.updated == datetime(2012, 4, 2, 12, 38, 54, tzinfo=UTC)
    assert modern.comment == "8 pages, 3 figures. Published version"
    assert modern.journal_ref == "Phys. Rev. B 85, 115117 (2012)"
    assert (old.id, old.version) == ("cond-mat/0607501", 2)
    assert old.title == (
        "A striped supersolid phase and the search for deconfined quantum criticality in "
        "hard-core bosons on the triangular lattice"
    )
    assert old.categories == ("cond-mat.str-el",)


def test_real_unknown_id_sample_gives_no_papers():
    recorded = json.loads(sample("arxivpy_fixture_id_0000.0000_s0_m100_8b51d9633a68.json"))
    assert recorded["status_code"] == 200
    with ArxivServer() as server:
        server.script("/api/query", raw(recorded["body"].encode()))
        assert fetch_ids(fetcher(), server.api_url, ["0000.0000"]) == []
    assert len(server.requests) == 1
