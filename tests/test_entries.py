"""The pieces behind an entry: Updates from the ledger, English for the seed page, the
glossary check, and an email that keeps both languages in a big week."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from pipeline import compose, escape, render
from pipeline.glossary import Term, glossary_misses, load_glossary
from pipeline.models import Entry, Paper, Part, Row
from pipeline.replies import PaperSummary
from pipeline.templating import text_env
from tests import fixtures_digest as fx

DAY = datetime(2026, 11, 26, tzinfo=UTC)


def paper(n: int, **changes) -> Paper:
    return replace(Paper(id=f"2611.{n:05d}", title=f"Paper {n}", version=1, submitted=DAY,
                         abstract="We propose a method for RL of LLMs."), **changes)


def test_updates_name_what_changed_and_only_that():
    a, b, c, d = paper(1), paper(2), paper(3), paper(4)
    ledger = {f"arxiv:{p.id}": compose.snapshot(p) for p in (a, b, c)}
    ledger["arxiv:2611.00004"] = None  # listed before the ledger kept snapshots
    now = [replace(a, version=3),
           replace(b, comment="Accepted at NeurIPS 2026. Code: https://github.com/lab/b"),
           c, replace(d, version=2), paper(5, version=2)]
    found = compose.updates(now, ledger, {"arxiv:2611.00001": {"title_zh": "论文一"}})
    assert [(u.key, u.changes) for u in found] == [  # a venue before a new version alone
        ("arxiv:2611.00002", (("venue", "", "NeurIPS 2026"), ("code", "", "https://github.com/lab/b"))),
        ("arxiv:2611.00001", (("version", "1", "3"),)),
    ]
    assert found[1].title_zh == "论文一" and found[1].version == 3
    # After the digest that lists them, the ledger holds the new state: no repeat.
    digest = replace(fx.digest(), sections=(), featured=(), updates=tuple(found))
    ledger.update(compose.snapshots(digest))
    assert compose.updates(now[:3], ledger, {}) == []


def test_the_seed_pages_readings_table_and_synthesis_get_english_once():
    seed = Entry(key="seed:prism", title="PRISM", topic="x", curated=True, headline_zh="标题句。",
                 parts=(Part("解决方案", "", "对齐阶段。"), Part("启示", "Implication", "可改进。", "It can improve.")))
    curated = ((Row("视角", "", (("正面", ""), ("反面", ""))), Row("对齐阶段。", "", (("正面", ""),))),
               "综合。", None)
    texts = compose.to_translate([seed], curated)
    assert texts == ["标题句。", "解决方案", "对齐阶段。", "视角", "正面", "反面", "综合。"]
    english = {zh: f"EN({zh})" for zh in texts}
    (entry,), (rows, zh, en) = compose.with_english([seed], curated, english)
    assert entry.headline_en == "EN(标题句。)"
    assert entry.parts[0] == Part("解决方案", "EN(解决方案)", "对齐阶段。", "EN(对齐阶段。)")
    assert entry.parts[1] == seed.parts[1]  # English already there stays
    assert rows[0] == Row("视角", "EN(视角)", (("正面", "EN(正面)"), ("反面", "EN(反面)")))
    assert (zh, en) == ("综合。", "EN(综合。)")
    assert compose.to_translate([entry], (rows, zh, en)) == []


def test_glossary_check_flags_a_rendering_the_glossary_avoids():
    terms = load_glossary(text_env(None), {"agent": "智能体"})
    assert len(terms) >= 40 and terms["reward model"] == Term("奖励模型", ("奖赏模型", "回报模型"))
    reply = PaperSummary(title_zh="奖赏模型的训练", summary_zh="本文提出了…", summary_en="A reward model.",
                         why_zh="值得读。", why_en="Worth it.", kind="method",
                         key_points_zh=["一", "二"], key_points_en=["reward model", "two"])
    assert glossary_misses(reply, terms) == ["reward model: 奖赏模型 (glossary: 奖励模型)"]
    fine = reply.model_copy(update={"title_zh": "奖励模型的训练"})
    assert glossary_misses(fine, terms) == []


def test_a_big_week_keeps_both_languages_in_every_email_entry():
    week = fx.many(150)
    # every paper has both lines (fx.many leaves a Chinese line out of every 7th)
    sections = tuple(replace(s, entries=tuple(replace(e, summary_zh=e.summary_zh or "中文摘要。")
                                               for e in s.entries)) for s in week.sections)
    week = replace(week, sections=sections)
    html = render.digest_html(fx.config(), week, 500)
    assert len(html.encode("utf-8")) <= render.EMAIL_LIMIT
    blocks = re.findall(r'<td class="paper".*?</td></tr>', html, re.S)
    assert 0 < len(blocks) < 150  # some are one-line entries, their text left to the web copy ...
    for block in blocks:  # ... but none lost a language
        assert re.search(r"[\u4e00-\u9fff]", block) and 'class="en"' in block, block[:300]
    assert "本邮件为节选" in html  # the header links the whole digest


def test_a_link_a_browser_reads_as_javascript_is_never_emitted():
    """A browser drops control characters from a URL before it reads the scheme: a target
    "\x01javascript:..." passed the scheme check and ran as javascript: there."""
    for hidden in ("\x01javascript:alert(1)", "java\x00script:alert(1)", "\x7fjavascript:alert(1)",
                   " \tJaVaScRiPt:alert(1)", "data:text/html,<script>alert(1)</script>"):
        assert escape.safe_url(hidden) == "#", hidden
    assert escape.safe_url(" https://arxiv.org/abs/2611.00002\n") == "https://arxiv.org/abs/2611.00002"


def test_a_javascript_link_in_an_abstract_stays_dead_text_in_every_format():
    digest = replace(fx.digest(), featured=(fx.LAMBDA, fx.HACKING))  # its abstract is shown
    cfg = fx.config()
    md = render.digest_markdown(cfg, digest, 5)
    html = render.digest_html(cfg, digest, 5)
    txt = render.digest_text(cfg, digest, 5)
    assert "javascript:alert(1)" in txt and "javascript:alert(1)" in html  # shown as text ...
    assert "javascript" not in "".join(re.findall(r'href="([^"]*)"', html))  # ... never a link
    assert "javascript" not in "".join(re.findall(r"(?<!\\)\]\(([^)]*)\)", md))
    assert "\\[this\\](javascript:alert(document.cookie))" in md
    # the abstract's real links are live, after the host check
    assert 'href="https://github.com/example-lab/grpo-lambda"' in html
    assert "[Code](https://github.com/example-lab/grpo-lambda)" in md


def test_english_only_facts_table_names_topics_in_english():
    cfg = fx.config(languages=["en"])
    digest = replace(fx.plain_digest(), featured=(fx.LAMBDA, fx.OFFLINE))  # no comparison: facts
    md = render.digest_markdown(cfg, digest, 3)
    assert "| Topic | Algorithms and objectives | Reward models and verifiers |" in md
    assert not re.search(r"[\u4e00-\u9fff]", md)


def test_a_week_holds_the_papers_it_works_on_not_the_history(db_url, tmp_path, monkeypatch):
    """Years of listed papers stay in the database: a run's week holds those waiting for a
    digest or a summary, the grey band of its own week (an older week's, passed over before
    the judge was turned on, stays out: it would be listed now, as new), and the listed ones
    that changed since the last digest, with their scores and summaries."""
    from pipeline import learn
    from pipeline import store as store_module
    from pipeline.config import load
    from pipeline.models import Enrichment, Scored, paper_key
    from pipeline.store import Store
    from pipeline.week import grey_band, load_week
    from tests.helpers import write_config

    config = load(write_config(tmp_path, {"storage": {"url": db_url}, "relevance": {"llm_judge": True}},
                               seeds=False))
    store = Store.open(db_url)
    clock = iter(f"2026-11-{day:02d}T08:00:00+00:00" for day in range(1, 30))
    monkeypatch.setattr(store_module, "db_now", lambda conn: next(clock))
    threshold, band = learn.band(config.relevance)
    listed, unsummarised, waiting, grey, far = (paper(n) for n in range(1, 6))
    old_grey = paper(6, submitted=DAY - timedelta(days=7))
    store.upsert_papers([listed, unsummarised, waiting, grey, far, old_grey])
    store.set_scores([Scored(p.id, threshold + 1, True) for p in (listed, unsummarised, waiting)]
                     + [Scored(p.id, threshold - band / 2, False) for p in (grey, old_grey)]
                     + [Scored(far.id, threshold - 1, False)])
    store.put_many([Enrichment(f"s{p.id}", paper_key(p.id), "paper_summary", {"summary_en": p.id})
                    for p in (listed, waiting)])
    store.save_digest("2026-11-02", (DAY, DAY), {}, [(paper_key(listed.id), True),
                                                      (paper_key(unsummarised.id), True)], [],
                      snapshots={paper_key(listed.id): {"version": 1, "venue": None, "code": None}})
    week = load_week(config, store, [], DAY)
    assert set(week.papers) == set(week.scores) == {unsummarised.id, waiting.id, grey.id}
    assert set(week.summaries) == {paper_key(waiting.id)} and week.listed == {}
    assert [p.id for p in week.waiting()] == [waiting.id] and grey_band(
        config, week.scores, week.published) == [grey.id]
    store.upsert_papers([replace(listed, journal_ref="ICLR 2027")])  # news of a listed paper
    week = load_week(config, store, [], DAY)
    assert list(week.listed) == [listed.id] and set(week.summaries) == {paper_key(listed.id), paper_key(waiting.id)}
    news = compose.updates(week.listed.values(), week.snapshots, week.summaries)
    assert [(u.key, u.changes) for u in news] == [(paper_key(listed.id), (("venue", "", "ICLR 2027"),))]
    store.close()


def test_with_max_curated_0_a_paper_of_the_week_a_seed_names_is_one_of_the_weeks(tmp_path):
    """digest.max_curated 0 left seed entries no section, and a relevant paper of the week that
    a seed entry named was listed nowhere in its digest. It is listed as one of the week's papers,
    with the seed's words: here one sent on Friday before the last digest's end and announced
    after it. A seed's older paper stays out, as seed entries do; with max_curated 5 both keep
    their own section."""
    from pipeline.config import load
    from pipeline.models import Scored, SeedEntry, paper_key
    from pipeline.week import Week, week_entries
    from tests.helpers import write_config

    start = datetime(2026, 11, 2, tzinfo=UTC)  # the last digest's end: Monday 08:00 in Shanghai
    end = datetime(2026, 11, 9, tzinfo=UTC)
    ours = paper(11, submitted=datetime(2026, 10, 30, 16, tzinfo=UTC))  # announced Sunday 20:00 in New York
    old = paper(12, submitted=datetime(2025, 1, 10, tzinfo=UTC))
    seeds = [SeedEntry(f"Our pick {p.id}", "010_ours.yaml", n, summary_zh="我们挑的论文。", arxiv_id=p.id)
             for n, p in enumerate((ours, old), start=1)]
    week = Week(papers={p.id: p for p in (ours, old)}, scores={p.id: Scored(p.id, 2.0, True) for p in (ours, old)},
                seeds=seeds, published=set(), summaries={}, translations={}, last_digest_end=start)
    first = replace(week, last_digest_end=None)  # the first digest: its window is lookback_days long
    config = load(write_config(tmp_path, {"digest": {"max_curated": 0}}, seeds=False))
    assert {e.key: e.curated for e in week_entries(config, first, end)[0]} == {
        paper_key(ours.id): False, paper_key(old.id): True}
    for max_curated, curated in ((0, {paper_key(ours.id): False, paper_key(old.id): True}),
                                 (5, {paper_key(ours.id): True, paper_key(old.id): True})):
        config = load(write_config(tmp_path, {"digest": {"max_curated": max_curated}}, seeds=False))
        entries, _ = week_entries(config, week, end)
        assert {e.key: e.curated for e in entries} == curated
        digest = compose.make_digest(
            digest_id="2026-11-09", window=(start, end), timezone="UTC", entries=entries, featured=[],
            topics=config.topics, max_papers=30, comparison=None, curated=((), None, None), model=None,
            sources=[], categories=[], max_curated=max_curated)
        assert paper_key(ours.id) in compose.listed_keys(digest)
        assert (paper_key(old.id) in compose.listed_keys(digest)) == bool(max_curated)
        shown = [e for s in digest.sections for e in (*s.entries, *s.brief)]
        assert [(e.key, e.summary_zh) for e in shown] == (
            [(paper_key(ours.id), "我们挑的论文。")] if not max_curated else [])


def test_a_digest_made_by_hand_for_an_earlier_week_lists_its_papers_not_one_sent_since(tmp_path):
    """`run --as-of` for last week, with a newer paper collected since and a listed one whose
    summary never came still in the week: last week's digest lists its own paper (not only up
    to the first one it skips), and the newer paper waits for the next digest, listed there once."""
    from pipeline.config import load
    from pipeline.models import Scored, paper_key
    from pipeline.week import Week, week_entries
    from tests.helpers import write_config

    end = datetime(2026, 11, 9, tzinfo=UTC)
    newer = paper(21, submitted=end + timedelta(days=2))  # collected since, sent after the window
    ours = paper(22, submitted=end - timedelta(days=3))
    listed = paper(23, submitted=end - timedelta(days=10))  # in the digest before, unsummarised
    config = load(write_config(tmp_path, seeds=False))
    week = Week(papers={p.id: p for p in (newer, ours, listed)},
                scores={p.id: Scored(p.id, 2.0, True) for p in (newer, ours, listed)},
                seeds=[], published={paper_key(listed.id)}, summaries={}, translations={})
    entries, _ = week_entries(config, week, end)
    assert [e.key for e in entries] == [paper_key(ours.id)]
    week.published.add(paper_key(ours.id))  # the next digest, a week later
    entries, _ = week_entries(config, week, end + timedelta(days=7))
    assert [e.key for e in entries] == [paper_key(newer.id)]



def test_with_max_curated_0_a_seeds_paper_announced_as_the_last_digest_was_made_is_listed(tmp_path):
    """Monday 08:00 in Shanghai is Sunday 20:00 in New York in summer: a paper a seed entry
    names, announced that very minute, reached no feed before the digest of that minute,
    and the next digest (which counts that announcement in its window) left it to the
    seed entries' section, which max_curated 0 hides: it was listed in no digest."""
    from zoneinfo import ZoneInfo

    from pipeline.config import load
    from pipeline.models import Scored, SeedEntry, paper_key
    from pipeline.week import Week, week_entries
    from tests.helpers import write_config

    shanghai = ZoneInfo("Asia/Shanghai")
    start, end = datetime(2026, 6, 8, 8, tzinfo=shanghai), datetime(2026, 6, 15, 8, tzinfo=shanghai)
    ours = paper(31, submitted=datetime(2026, 6, 4, 19, tzinfo=UTC))  # Thursday 15:00 in New York
    seed = SeedEntry("Our pick", "010_ours.yaml", 1, summary_zh="我们挑的论文。", arxiv_id=ours.id)
    config = load(write_config(tmp_path, {"digest": {"max_curated": 0}}, seeds=False))
    week = Week(papers={ours.id: ours}, scores={ours.id: Scored(ours.id, 2.0, True)}, seeds=[seed],
                published=set(), summaries={}, translations={}, last_digest_end=start)
    entries, _ = week_entries(config, week, end)
    assert [(e.key, e.curated) for e in entries] == [(paper_key(ours.id), False)]


def test_the_llm_judge_leaves_alone_a_grey_band_paper_the_readers_profile_decided(tmp_path):
    """A score near the threshold that an include or exclude phrase, a followed author or the
    reader's marks decided is the reader's word: the judge is asked about the others only."""
    from pipeline import decide, learn
    from pipeline.config import load
    from pipeline.models import Scored
    from pipeline.week import grey_band
    from tests.helpers import write_config

    config = load(write_config(tmp_path, {"relevance": {"llm_judge": True}}, seeds=False))
    threshold, _ = learn.band(config.relevance)
    reasons = [(), ("include: diffusion policy",), ("exclude: survey",), (f"{decide.FOLLOW}Ada Lovelace",),
               (f"{decide.TAUGHT}relevant",)]
    scores = {f"2611.{n:05d}": Scored(f"2611.{n:05d}", threshold, None, why) for n, why in enumerate(reasons)}
    assert grey_band(config, scores, set()) == ["2611.00000"]
