"""compose.py on records alone: entries from papers and seeds, sections, the cap, round trips."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime

from pipeline import compose
from pipeline.models import Paper, SeedDocument, SeedEntry
from tests import fixtures_digest as fx

DAY = datetime(2026, 11, 26, 9, tzinfo=UTC)
PAPER = Paper(id="2611.00007", title="GRPO for maths", version=2, authors=("Ada",),
              abstract="We train an LLM with GRPO. It doubles accuracy.", categories=("cs.LG",),
              submitted=DAY, updated=DAY)
SUMMARY = {"title_zh": "数学的 GRPO", "summary_zh": "本文提出…", "summary_en": "An LLM summary.",
           "key_points_zh": ["一", "二"], "key_points_en": ["one", "two"]}
SEED = SeedEntry(title="GRPO for maths", source="s.txt", line=3, summary_zh="人工摘要。",
                 date=date(2026, 11, 1), featured=True, parts_zh=(("关键发现", "更好"),))


def test_a_paper_entry_takes_the_llm_summary_and_falls_back_to_the_first_sentence():
    with_llm = compose.paper_entry(PAPER, "algorithms", 3.5, SUMMARY)
    assert (with_llm.key, with_llm.url, with_llm.date) == (
        "arxiv:2611.00007", "https://arxiv.org/abs/2611.00007", "2026-11-26")
    assert (with_llm.summary_zh, with_llm.summary_en, with_llm.llm) == ("本文提出…", "An LLM summary.", True)
    assert with_llm.revised and with_llm.version == 2 and with_llm.score == 3.5
    bare = compose.paper_entry(PAPER, "algorithms", None)
    assert (bare.summary_zh, bare.summary_en, bare.llm) == (None, "We train an LLM with GRPO.", False)
    # a title the model left as it is was shown twice, one line under the other
    same = compose.paper_entry(PAPER, "algorithms", 3.5, {**SUMMARY, "title_zh": "GRPO for Maths："})
    assert same.title_zh is None and with_llm.title_zh == "数学的 GRPO"


def test_tex_in_a_title_and_in_authors_names_becomes_text():
    paper = replace(PAPER, title='Schr\\"odinger bridges for GRPO', authors=(
        'Willem R\\"opke', "\\'Angel Mu\\~noz", "<b>Jos\\'e</b> | *x*", "Ada"))
    entry = compose.paper_entry(paper, "algorithms", None)
    assert entry.title == "Schrödinger bridges for GRPO"
    assert entry.authors == ("Willem Röpke", "Ángel Muñoz", "<b>José</b> | *x*", "Ada")


def test_tex_in_the_abstract_a_featured_paper_shows_becomes_text():
    paper = replace(PAPER, abstract="We \\uline{M}ine \\uline{in}trinsic mast\\uline{er}y. "
                                     "It reaches \\textbf{4.58} on $\\alpha$-AIME.")
    entry = compose.paper_entry(paper, "algorithms", None)
    assert entry.abstract == "We Mine intrinsic mastery. It reaches 4.58 on α-AIME."


def test_a_seed_tied_to_a_paper_keeps_its_curated_chinese_and_reading():
    entry = compose.paper_entry(PAPER, "algorithms", 1.0, SUMMARY, SEED)
    assert entry.curated and entry.summary_zh == "人工摘要。"
    assert entry.summary_en == "An LLM summary."
    assert [(p.label_zh, p.text_zh) for p in entry.parts] == [("关键发现", "更好")]
    # the LLM's reading never replaces a curated one
    assert compose.with_reading(entry, {"headline_zh": "x", "headline_en": "y", "parts": []}) == entry


def test_a_seed_alone_is_an_entry_keyed_by_its_title_with_the_translation():
    entry = compose.seed_entry(replace(SEED, parts_zh=()), "rewards", {"summary_en": "Curated, in English."})
    assert entry.key.startswith("seed:") and entry.url is None and entry.date == "2026-11-01"
    assert (entry.summary_en, entry.llm, entry.topic) == ("Curated, in English.", True, "rewards")


def test_sections_follow_the_taxonomy_newest_first_then_title():
    a = replace(fx.SCRIPT, key="a", title="b title", topic="rewards", date="2026-11-01")
    b = replace(fx.SCRIPT, key="b", title="a title", topic="rewards", date="2026-11-01")
    c = replace(fx.SCRIPT, key="c", title="z", topic="algorithms", date="2026-11-20")
    d = replace(fx.SCRIPT, key="d", title="y", topic="rewards", date="2026-11-25")
    found = compose.sections([a, b, c, d], fx.TOPICS)
    assert [(s.topic, [e.key for e in s.entries]) for s in found] == [
        ("algorithms", ["c"]), ("rewards", ["d", "b", "a"])]


def test_make_digest_lists_every_paper_full_or_one_line_and_seeds_in_their_own_section():
    papers = [replace(fx.SCRIPT, key=f"arxiv:{n}", curated=False, revised=n == 1, score=float(n))
              for n in range(1, 6)]
    seed = replace(fx.SCRIPT, key="seed:x", curated=True, revised=False, score=None)
    digest = compose.make_digest(
        digest_id="2026-11-30", window=(DAY, DAY), timezone="UTC", entries=[*papers, seed],
        featured=[], topics=fx.TOPICS, max_papers=3, comparison=None, curated=((), None, None),
        model=None, sources=["seeds"], categories=[])
    full = {e.key for s in digest.sections for e in s.entries}
    brief = {e.key for s in digest.sections for e in s.brief}
    assert full == {"arxiv:5", "arxiv:4", "arxiv:3"} and brief == {"arxiv:1", "arxiv:2"}
    assert [e.key for e in digest.curated] == ["seed:x"] and digest.left_out == ()
    assert (digest.new, digest.revised, digest.seeds) == (4, 1, 1)
    assert set(compose.listed_keys(digest)) == {e.key for e in [*papers, seed]}


def test_a_seed_whose_note_is_in_no_shown_language_waits_for_its_translation():
    """With languages: [en] and no LLM a seed entry whose note is Chinese alone was listed as a
    bare title, counted under Curated and marked shown, so it never came back with its English."""
    chinese = compose.seed_entry(replace(SEED, title="Chinese only", parts_zh=()), "rewards")
    english = compose.seed_entry(replace(SEED, title="With English", parts_zh=()), "rewards",
                                 {"summary_en": "Curated, in English."})

    def made(languages):
        return compose.make_digest(
            digest_id="2026-11-30", window=(DAY, DAY), timezone="UTC", entries=[chinese, english],
            featured=[], topics=fx.TOPICS, max_papers=3, comparison=None, curated=((), None, None),
            model=None, sources=["seeds"], categories=[], languages=languages)

    en = made(["en"])
    assert [e.title for e in en.curated] == ["With English"] and en.seeds == 1
    assert chinese.key not in compose.listed_keys(en)
    both = made(["zh", "en"])
    assert [e.title for e in both.curated] == ["Chinese only", "With English"] and both.seeds == 2


def test_the_seed_pages_own_comparison_is_used_for_its_featured_pair():
    one, two = (SeedEntry(title=t, source="p.txt", line=n, featured=True) for n, t in ((1, "A"), (2, "B")))
    doc = SeedDocument(source="p.txt", entries=(one, two), synthesis_zh="综合。",
                       comparison=(("维度", "B", "A"), ("方法", "b 法", "a 法")))
    featured = [replace(fx.SCRIPT, title="A", curated=True), replace(fx.SCRIPT, title="B", curated=True)]
    rows, synthesis_zh, synthesis_en = compose.curated_comparison(featured, [doc])
    assert [(r.label_zh, r.cells) for r in rows] == [("方法", (("a 法", ""), ("b 法", "")))]
    assert (synthesis_zh, synthesis_en) == ("综合。", None)
    assert compose.curated_comparison(featured[:1], [doc]) == ((), None, None)


def test_english_for_the_curated_chinese_is_asked_once_and_filled_in():
    entry = replace(fx.SCRIPT, headline_zh="标题", headline_en=None, parts=())
    curated = ((compose.Row("方法", "", (("甲", ""), ("标题", ""))),), "综合。", None)
    asked = compose.to_translate([entry], curated)
    assert asked == ["标题", "方法", "甲", "综合。"]  # each text once, in reading order
    featured, (rows, _, synthesis_en) = compose.with_english(
        [entry], curated, {"标题": "Title", "方法": "Method", "甲": "A", "综合。": "Synthesis."})
    assert featured[0].headline_en == "Title" and synthesis_en == "Synthesis."
    assert (rows[0].label_en, rows[0].cells) == ("Method", (("甲", "A"), ("标题", "Title")))


def test_updates_list_a_new_version_or_venue_of_a_published_paper_once():
    old = compose.snapshot(replace(PAPER, version=1))
    news = compose.updates([PAPER], {"arxiv:2611.00007": old}, {})
    assert [u.key for u in news] == ["arxiv:2611.00007"]
    assert compose.updates([PAPER], {"arxiv:2611.00007": old},
                           {"arxiv:2611.00007": {"title_zh": "GRPO for maths"}})[0].title_zh is None
    assert compose.updates([PAPER], {"arxiv:2611.00007": compose.snapshot(PAPER)}, {}) == []


def test_a_stored_digest_comes_back_exactly():
    digest = fx.digest()
    assert compose.digest_from_dict(compose.digest_to_dict(digest)) == digest
