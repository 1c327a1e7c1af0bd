"""The RSS source: the real 2024 feeds field by field, the local feed, and its failure modes."""

from __future__ import annotations

import runpy
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pipeline.errors import SourceError
from pipeline.models import Paper
from pipeline.sources.arxiv_rss import (
    Replacement,
    fetch_feed,
    parse_feed,
    split_authors,
)
from pipeline.sources.http import Fetcher
from tests.helpers import shared_file
from tests.servers.arxiv_server import (
    EMPTY,
    FEED_ERROR,
    HTML_PAGE,
    MALFORMED,
    RSS_TYPE,
    ArxivServer,
    Fault,
    raw,
)

RECORDED = Path(__file__).with_name("data") / "arxiv"  # real answers, see its README.md
EASTERN = timezone(timedelta(hours=-5))
MAILING = datetime(2024, 11, 28, tzinfo=EASTERN)  # pubDate of every item in the samples
URL = "https://rss.arxiv.org/rss/cs.LG"


def sample(name: str) -> bytes:
    return (RECORDED / name).read_bytes()


def capture() -> bytes:
    """The whole capture of 1,504 items the slice is cut from; skips without ../shared."""
    return shared_file("data", "formats", "arxiv_rss_2024-11-28_all_archives.xml").read_bytes()


@pytest.fixture(scope="module")
def all_archives():
    """For what needs all of the capture: its counts, every list of authors in it."""
    return parse_feed(capture(), URL)


@pytest.fixture(scope="module")
def sliced():
    """38 of its items, verbatim, kept in the repository: every cross-listing, the first and
    last replacements, TeX, escapes, DOIs and journal references (see slice_rss.py)."""
    return parse_feed(sample("arxiv_rss_2024-11-28_all_archives_slice.xml"), URL)


def fetcher() -> Fetcher:
    return Fetcher(0, 5, 1, "rl-digest-tests/0.1", backoff_seconds=0.01)


def test_real_feed_keeps_new_and_cross_and_lists_replacements(all_archives):
    kinds = [p.announce_type for p in all_archives.papers]

    assert (kinds.count("new"), kinds.count("cross"), len(kinds)) == (926, 7, 933)
    assert len(all_archives.replacements) == 571  # 569 replace, 2 cross of older papers
    assert {r.announce_type for r in all_archives.replacements} == {"replace", "cross"}
    assert all_archives.counts() == (926, 9, 569)  # as the feed lists them
    assert all_archives.items == 1504
    assert all_archives.warnings == ()
    assert all_archives.url == URL


def test_real_slice_keeps_new_and_cross_and_lists_replacements(sliced):
    kinds = [p.announce_type for p in sliced.papers]

    assert (kinds.count("new"), kinds.count("cross"), len(kinds)) == (20, 7, 27)
    assert len(sliced.replacements) == 11  # 9 replace, 2 cross of older papers
    assert sliced.counts() == (20, 9, 9) and sliced.items == 38
    assert sliced.warnings == () and sliced.error is None


def test_the_slice_is_cut_from_the_capture_by_its_script():
    """So the slice stays a real answer: its script, run on the capture, gives it byte for byte."""
    cut = runpy.run_path(str(RECORDED / "slice_rss.py"))["slice_feed"]
    assert cut(capture()) == sample("arxiv_rss_2024-11-28_all_archives_slice.xml")


def test_real_feed_first_item_every_field(sliced):
    first = sliced.papers[0]

    assert first == Paper(
        id="2411.17700",
        title="Exploring the Impact of Generative AI on Cross-Border E-Commerce Brand Building "
        "in Chinese Tianjin's Manufacturing Sector",
        abstract=first.abstract,
        version=1,
        authors=("Jun Cui",),
        categories=("cs.CY",),
        submitted=None,
        updated=MAILING,
        comment=None,
        journal_ref=None,
        sources=("rss",),
        announce_type="new",
    )
    assert first.abstract.startswith("This study investigates the influence of generative")
    assert first.abstract.endswith("regression and structural equations (PLS-SEM).")
    assert first.updated.utcoffset() == timedelta(hours=-5)


def test_real_cross_item_keeps_its_own_primary_first_and_journal_ref(sliced):
    by_id = {p.id: p for p in sliced.papers}
    learning = by_id["2411.16552"]

    assert (learning.announce_type, learning.version) == ("cross", 1)
    assert by_id["2411.17758"].journal_ref == ("Sustainable Energy, Grids and Networks, Volume 39, 2024, "
                                               "101477, ISSN 2352-4677")
    assert learning.categories == ("stat.AP", "cs.LG", "econ.EM", "stat.ME", "stat.ML")
    assert learning.authors == ("Anya Shchetkina", "Ron Berman")
    assert learning.title == "When Is Heterogeneity Actionable for Personalization?"


def test_real_feed_text_is_not_rewritten_as_html(sliced):
    by_id = {p.id: p for p in sliced.papers}

    assert r"where $\frac{1}{3}<s<1$ and" in by_id["2411.17730"].abstract
    assert by_id["2411.17730"].title == (
        r"Almost sure well-posedness and orbital stability for Schr\"odinger equation with potential"
    )
    assert r"Attributes \& Preferences" in by_id["2411.18380"].title


def test_real_feed_authors_drop_affiliations_with_commas(sliced):
    by_id = {p.id: p for p in sliced.papers}

    assert by_id["2411.17817"].authors == (
        "Tianliang Yan", "Yubao Liu", "Leonid Prokhorov", "Jiri Smetana",
        "Haixing Miao", "Yiqiu Ma", "Vincent Boyer", "Denis Martynov",
    )  # fmt: skip


def test_real_cross_list_of_a_paper_announced_before_is_an_update_not_a_new_paper(sliced):
    """The feed lists a 2022 paper newly cross-listed (2202.06515v3) as `cross`: it was kept
    as a new paper, and a digest featured it as this week's, dated 2022. A cross-listed paper
    at a later version or with an id of an earlier month only updates a paper held."""
    assert {"2202.06515", "2405.12090"}.isdisjoint(p.id for p in sliced.papers)
    assert sliced.replacements[:2] == (Replacement("2202.06515", 3, MAILING, "cross"),
                                       Replacement("2405.12090", 3, MAILING, "cross"))
    assert "2411.16552" in {p.id for p in sliced.papers}  # cross-listed as it is announced


def test_real_feed_replacements_carry_id_version_and_date(sliced):
    assert sliced.replacements[2] == Replacement("1401.3665", 4, MAILING, "replace")
    assert sliced.replacements[-1] == Replacement("2411.17697", 2, MAILING, "replace")


def test_real_empty_channel_is_no_papers_and_no_warning():
    result = parse_feed(sample("arxiv_rss_2024-11-28_empty_channel_test.xml"), URL)

    assert (result.papers, result.replacements, result.warnings, result.items) == ((), (), (), 0)


def test_real_error_answer_is_a_feed_error_not_an_exception():
    result = parse_feed(sample("arxiv_rss_2024-11-28_error_bad_archive.xml"), URL)

    assert result.papers == () and result.items == 0 and result.warnings == ()
    assert result.error is not None and result.error.startswith("Bad archive 'astroph'.")


@pytest.mark.parametrize(
    "creator, names",
    [
        ("Jun Cui", ("Jun Cui",)),
        ("A. One, B. Two, and C. Three", ("A. One", "B. Two", "C. Three")),
        ("A. One and B. Two", ("A. One", "B. Two")),
        ("A. One (Univ X, Dept (Y), Z), B. Anderson", ("A. One", "B. Anderson")),
        ("", ()),
        # a list a submitter ended with "et al." names no one there: a cut list, as at the bound
        ("A. One, B. Two, et al.", ("A. One", "B. Two", "others")),
        ("A. One, B. Two et al", ("A. One", "B. Two", "others")),
        ("A. One, B. Two, and others", ("A. One", "B. Two", "others")),
        ("A. Etal, B. Two", ("A. Etal", "B. Two")),
    ],
)
def test_split_authors(creator, names):
    assert split_authors(creator) == names


@pytest.mark.parametrize("feed", ["sliced", "all_archives"])
def test_real_feed_lists_end_in_names_not_in_et_al(feed, request):
    """arXiv writes a collaboration as a name ('the MeerTRAP collaboration', 'Knut Zoch (for
    the ATLAS Collaboration)'): none of the capture's 935 lists reads as cut."""
    papers = request.getfixturevalue(feed).papers
    assert [p.id for p in papers if p.authors[-1:] == ("others",)] == []
    assert any("MeerTRAP" in p.authors[-1] for p in papers)


def local_paper(n: int, kind: str, version: int = 1, **fields) -> Paper:
    defaults = {
        "id": f"2411.{17700 + n}",
        "title": f"RLHF paper {n}",
        "abstract": "We align a model.",
        "version": version,
        "authors": ("Ada Lovelace", "Alan Turing", "Grace Hopper"),
        "categories": ("cs.LG", "cs.CL"),
        "announce_type": kind,
    }
    return Paper(**(defaults | fields))


def test_local_feed_sorts_items_by_announce_type():
    papers = [
        local_paper(1, "new", journal_ref="J. Test 1 (2024)"),
        local_paper(2, "cross", categories=("stat.ML", "cs.LG")),
        local_paper(3, "replace", version=3),
        local_paper(4, "replace-cross", version=2, categories=("math.OC", "cs.LG")),
        local_paper(5, "new", categories=("math.OC",)),  # not in this feed
        local_paper(6, "cross", id="2401.00006"),  # submitted in January, cross-listed in November
        local_paper(7, "cross", id="2410.17707"),  # submitted the month before its announcement
    ]
    with ArxivServer(papers) as server:
        result = fetch_feed(fetcher(), server.rss_url(["cs.LG", "cs.CL"]))

    assert [r.path for r in server.requests] == ["/rss/cs.LG+cs.CL"]
    assert [(p.id, p.announce_type) for p in result.papers] == [
        ("2411.17701", "new"), ("2411.17702", "cross"), ("2410.17707", "cross"),
    ]  # fmt: skip
    new, cross, _ = result.papers
    assert new.authors == ("Ada Lovelace", "Alan Turing", "Grace Hopper")
    assert new.journal_ref == "J. Test 1 (2024)" and new.abstract == "We align a model."
    assert cross.categories == ("stat.ML", "cs.LG")
    assert result.replacements == (
        Replacement("2401.00006", 1, MAILING, "cross"),
        Replacement("2411.17703", 3, MAILING, "replace"),
        Replacement("2411.17704", 2, MAILING, "replace-cross"),
    )
    assert result.items == 6 and result.warnings == ()


def test_local_feed_non_ascii_round_trips_as_utf8():
    paper = local_paper(1, "new", title="Über $\\omega$-RL: 强化学习 & <Wübben>")
    with ArxivServer([paper]) as server:
        server.script("/rss/", Fault(content_type="text/xml"))  # no charset to guess from
        result = fetch_feed(fetcher(), server.rss_url(["cs.LG"]))

    assert result.papers[0].title == "Über $\\omega$-RL: 强化学习 & <Wübben>"


def test_empty_weekend_feed_is_not_an_error():
    with ArxivServer([local_paper(1, "new")]) as server:
        server.script("/rss/", EMPTY)
        result = fetch_feed(fetcher(), server.rss_url(["cs.LG"]))

    assert (result.papers, result.warnings, result.items) == ((), (), 0)


def test_feed_error_answer_is_kept_as_the_feeds_error():
    with ArxivServer() as server:
        server.script("/rss/", FEED_ERROR)
        url = server.rss_url(["cs.LGG"])
        result = fetch_feed(fetcher(), url)

    assert result.papers == () and result.warnings == ()
    assert result.error == "Bad archive 'cs.LGG'. Valid archive names are: cs, stat, test."


@pytest.mark.parametrize(
    "fault, cause",
    [(MALFORMED, "malformed feed XML"), (HTML_PAGE, "an HTML page instead of an RSS feed"),
     (raw(b"<?xml version='1.0' encoding='UTF\xdd8'?><rss version='2.0'><channel/></rss>", RSS_TYPE),
      "malformed feed XML (UnicodeDecodeError: "),  # found by fuzzing: feedparser's own slip
     ],
    ids=["malformed", "html-200", "non-ascii-encoding-name"],
)
def test_bad_feed_is_a_source_error_naming_the_url(fault, cause):
    with ArxivServer() as server:
        server.script("/rss/", fault)
        url = server.rss_url(["cs.LG"])
        with pytest.raises(SourceError) as caught:
            fetch_feed(fetcher(), url)

    assert str(caught.value).startswith(f"{url}: {cause}")
    assert len(server.requests) == 1


def test_an_item_feedparser_reads_without_a_description_is_kept_not_a_crash():
    """Found by fuzzing: feedparser's loose parser gives a broken item's summary as None, and
    reading it failed the run with 'unexpected error: TypeError'."""
    result = parse_feed(b'<rss version="2.0"><channel><item<description></description<description'
                        b"</rights<item<description</description><guid>oai:arXiv.org:2411.00001v1</guid>"
                        b"<arxiv:announce_type>new</arxiv:announce_type></channel></rss>", URL)
    assert [(p.id, p.version, p.abstract) for p in result.papers] == [("2411.00001", 1, "")]
    assert result.warnings[0].startswith(f"{URL}: feed is not well-formed (")


def test_an_item_the_loose_parser_reads_as_a_dict_is_read_not_a_crash():
    """Found by fuzzing (an entity bomb past expat's limit): feedparser's loose parser, which
    reads a feed its XML parser gave up on (here at an HTML entity), gave an announce type
    declaring its own namespace as a dict: 'unexpected error: AttributeError'."""
    result = parse_feed(b'<rss version="2.0"><channel><title>arXiv&nbsp;cs.LG</title><item>'
                        b"<guid>oai:arXiv.org:2411.00001v1</guid><title>GRPO</title>"
                        b'<arxiv:announce_type xmlns:arxiv="http://arxiv.org/schemas/atom">new'
                        b"</arxiv:announce_type></item></channel></rss>", URL)
    assert result.papers == ()
    assert result.warnings == (f"{URL}: feed is not well-formed (<unknown>:2:40: undefined entity); "
                               "kept the 1 items read", f"{URL}: skipped 2411.00001 with unknown announce type ''")


def test_an_item_whose_id_is_not_an_arxiv_id_is_skipped_with_a_warning():
    """Found by fuzzing: a guid 'oai:arXiv.org:2411.17705 \\nv1' gave the paper '2411.17705 \\n',
    a key no link or lookup matches, beside the real paper."""
    result = parse_feed(b'<rss version="2.0" xmlns:arxiv="http://arxiv.org/schemas/atom"><channel><title>t'
                        b"</title><item><guid>oai:arXiv.org:2411.17705 \nv1</guid><arxiv:announce_type>new"
                        b"</arxiv:announce_type></item><item><guid>oai:arXiv.org:math/0501001v2</guid>"
                        b"<arxiv:announce_type>new</arxiv:announce_type></item></channel></rss>", URL)
    assert [(p.id, p.version) for p in result.papers] == [("math/0501001", 2)]
    assert result.warnings == (f"{URL}: skipped an item whose id is not an arXiv id "
                               "('oai:arXiv.org:2411.17705 v1')",)


def test_a_pubdate_too_large_for_a_clock_is_no_date_not_a_crash():
    """Found by fuzzing: seconds of 80 digits were 'unexpected error: OverflowError'."""
    result = parse_feed(b'<rss version="2.0" xmlns:arxiv="http://arxiv.org/schemas/atom"><channel><title>t'
                        b"</title><item><guid>oai:arXiv.org:2411.00001v1</guid><pubDate>Thu, 28 Nov 2024 00:00:0"
                        + b"5" * 80 + b" -0500</pubDate><arxiv:announce_type>new</arxiv:announce_type></item>"
                        b"</channel></rss>", URL)
    assert [(p.id, p.updated) for p in result.papers] == [("2411.00001", None)]


def test_a_back_dated_read_of_a_feed_never_read_since_leaves_out_its_later_announcement():
    """Down from October to December, then Monday 11-09's digest made by hand: the feed, read
    last on 10-30, now carries the 11-30 announcement. It was taken as Sunday 11-08's, whose
    batch the catch-up then never read (the ledger had it read) and which was lost, and the
    11-30 papers were that evening's. The items' dates say the batch is a later one's."""
    from pipeline.calendar import load_calendar
    from pipeline.config import load
    from pipeline.coverage import Ledger
    from pipeline.rank import Query
    from pipeline.sources import Window
    from pipeline.sources.arxiv_rss import ArxivRss

    arxiv = load(None).sources.arxiv
    later = local_paper(1, "new", id="2611.30001", title="GRPO for reinforcement learning of large language models")
    as_of = datetime(2026, 11, 9, 23, 59, tzinfo=timezone(timedelta(hours=8)))
    with ArxivServer([later], announced=datetime(2026, 12, 1, tzinfo=EASTERN)) as server:
        url = server.rss_url(["cs.LG"])
        source = ArxivRss([url], Query.compile(["cs.LG"], arxiv.terms), 0, 1)
        ledger = Ledger()
        window = Window(as_of - timedelta(days=10), as_of, as_of, load_calendar(), ["cs.LG"], ledger,
                        memory={url: {"day": "2026-10-29", "newest": "2610.29999"}})
        found = source.fetch(window, fetcher())
    assert found.papers == [] and found.updates == []
    assert ledger.days.get("2026-11-08", {}).get("cs.LG") is None  # unread: the catch-up reads it
    assert found.memory == {url: {"day": "2026-10-29", "newest": "2610.29999"}}
    assert found.report.notes == ["RSS not read for cs.LG: the feed carries a later announcement "
                                  "(dated 12-01) than 11-08's"]
