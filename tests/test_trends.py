"""Trends: papers per topic per week counted from a store we fill (week boundaries, a topic
missing some weeks, seeds and the reader's "not relevant" left out), the movers, and what
a first run says: nothing."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest
import yaml

from pipeline import compose, render, store_readers, store_seeds, templating, trends
from pipeline.config import load
from pipeline.config_sections import Bilingual, TopicDef
from pipeline.models import Entry, Paper, Scored, SeedEntry, TopicWeeks, Trends, paper_key
from pipeline.store import Store
from tests import fixtures_digest as fx
from tests.helpers import DAY, ROOT, full_config, rl_paper
from tests.servers.arxiv_server import ArxivServer

TOPICS = [TopicDef(key="algorithms", name=Bilingual(zh="算法", en="Algorithms"), terms=[]),
          TopicDef(key="agentic", name=Bilingual(zh="智能体", en="Agentic RL"), terms=[]),
          TopicDef(key="rewards", name=Bilingual(zh="奖励", en="Rewards"), terms=[])]
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
END = date(2026, 11, 23)  # a Monday: weeks run Tuesday to Monday


def listed(store: Store, day: str, papers: list[tuple[str, str]], relevant: bool = True) -> None:
    """A digest of `day` listing papers (id, topic)."""
    store.upsert_papers(Paper(id=pid, title=f"Paper {pid}", submitted=datetime(2026, 1, 1, tzinfo=UTC))
                        for pid, _ in papers)
    store.set_scores(Scored(pid, 2.0, relevant, (), topic) for pid, topic in papers)
    moment = datetime.fromisoformat(day + "T23:59:59+08:00")
    store.save_digest(day, (moment, moment), {}, [(paper_key(pid), True) for pid, _ in papers], [])


def history_of(store: Store) -> list[tuple]:
    """The earlier weeks' counts as week.history gives them while no topic was renamed."""
    rows = store.listed_per_topic(*trends.span(END), known=[t.key for t in TOPICS])
    assert all(gone is None for *_, gone in rows)
    return [row[:3] for row in rows]


def entry(n: int, topic: str, curated: bool = False) -> Entry:
    return Entry(key=f"arxiv:2611.9{n:04d}", title=f"This week {n}", topic=topic, curated=curated)


def test_papers_count_in_the_week_their_digest_listed_them(db_url):
    store = Store.open(db_url)
    listed(store, "2026-05-01", [("2605.00001", "algorithms")])  # older than 26 weeks: not counted
    listed(store, "2026-10-19", [("2610.00001", "algorithms"), ("2610.00002", "agentic")])
    # no digest in the week ending 10-26: unknown, not zero
    listed(store, "2026-11-02", [("2611.00001", "algorithms"), ("2611.00002", "agentic"),
                                 ("2611.00003", "agentic")])  # the last day of its week
    listed(store, "2026-11-03", [("2611.00004", "algorithms")])  # the first day of the next
    listed(store, "2026-11-09", [("2611.00005", "algorithms")])  # agentic: none this week
    listed(store, "2026-11-10", [("2611.00006", "agentic"), ("2611.00007", "algorithms")])
    listed(store, "2026-11-16", [("2611.00008", "agentic")])
    # Left out: a paper the reader marked not relevant, and a paper a seed entry is tied to.
    store_readers.set_verdict(store, "2611.00007", False)
    store_seeds.save_seeds(store, [SeedEntry(title="Paper 2611.00006", source="seeds.md", line=1, arxiv_id="2611.00006")])
    history = history_of(store)
    found = trends.record(history, [entry(1, "agentic"), entry(2, "agentic"), entry(3, "rewards"),
                                    entry(4, "algorithms", curated=True)], END, TOPICS)
    assert found is not None
    assert found.weeks == ("2026-10-19", "2026-10-26", "2026-11-02", "2026-11-09", "2026-11-16",
                           "2026-11-23")
    counts = {t.topic: t.counts for t in found.topics}
    assert counts == {"algorithms": (1, None, 1, 2, 0, 0),
                      "agentic": (1, None, 2, 0, 1, 2),
                      "rewards": (0, None, 0, 0, 0, 1)}
    assert [t.topic for t in found.topics] == ["algorithms", "agentic", "rewards"]  # the taxonomy's order
    assert (found.topics[1].name_zh, found.topics[1].name_en) == ("智能体", "Agentic RL")


def test_a_digest_that_listed_nothing_is_a_week_of_zeros(db_url):
    store = Store.open(db_url)
    listed(store, "2026-11-16", [])
    history = history_of(store)
    assert history == [("2026-11-16", None, 0)]
    found = trends.record(history, [entry(1, "agentic")], END, TOPICS)
    assert found is not None and [(t.topic, t.counts) for t in found.topics] == [("agentic", (0, 1))]


def test_a_first_run_says_nothing(db_url):
    store = Store.open(db_url)
    assert trends.record(history_of(store), [entry(1, "agentic")], END, TOPICS) is None
    listed(store, "2026-05-01", [("2605.00001", "agentic")])  # only a digest too old to show
    assert trends.record(history_of(store), [entry(1, "agentic")], END, TOPICS) is None


def weeks(topic: str, *counts: int | None) -> TopicWeeks:
    return TopicWeeks(topic, topic, topic.title(), counts)


def test_movers_are_the_largest_changes_against_last_week_without_the_noise():
    found = trends.movers([
        weeks("algorithms", 40, 100, 103),  # +3 of 103: noise
        weeks("agentic", 10, 19, 31),  # +12
        weeks("rewards", 5, 12, 4),  # -8
        weeks("multimodal", 0, 0, 2),  # +2: noise
        weeks("analysis", 3, None, 9),  # no digest last week: nothing to compare with
        weeks("systems", 0, 0, 3),  # +3 from nothing
        weeks("safety", 1, 1, 5),  # +4, but a fourth mover
    ])
    assert [(m.topic, m.now, m.before) for m in found] == [("agentic", 31, 19), ("rewards", 4, 12),
                                                           ("safety", 5, 1)]


# --- rendered ------------------------------------------------------------------------------

def trend_block(html: str, heading: str = '主题趋势 · <span lang="en">Trends</span>') -> str:
    start = html.index(heading + "</h2>")
    return html[start:html.index("\n</td></tr>", start)]


def test_the_email_chart_is_a_table_of_bars_with_topic_names_escaped():
    html = render.digest_html(fx.config(), fx.digest(), 10)
    assert "<img" not in html and "<svg" not in html
    block = trend_block(html)
    assert '<table class="trend" role="presentation"' in block
    bars = re.findall(r'<table role="presentation" width="(\d+)%"[^>]*><tbody><tr><td class="trend-bar"', block)
    assert bars == ["100", "13", "6", "23"]  # 31, 4, 2, 7 of the largest, 31
    assert "background: #6366f1" in block  # a colour, inlined; dark mode turns it in the <style>
    assert ".trend .trend-bar { background: #a5b4fc !important; }" in html
    assert "Tools &lt;script&gt; &amp; 'agents' | *x*" in block and "<script>" not in block
    assert "&lt;b&gt;工具&lt;/b&gt; &amp; 智能体" in block and "<b>" not in block
    assert '算法与目标 · <span lang="en">Algorithms and objectives</span> · <strong>31</strong>' in block and "(19)</span>" in block
    assert "Movers: Algorithms and objectives 31 papers, up from 19" in block
    # A week without a digest shows as unknown, not as zero.
    gap = replace(fx.TRENDS, topics=(replace(fx.WEEKS[0], counts=(4, 19, None, 31)),), movers=())
    block = trend_block(render.digest_html(fx.config(), replace(fx.digest(), trends=gap), 10))
    assert "<strong>31</strong>" in block and "(–)</span>" in block and "Movers" not in block


def test_the_chart_stays_when_the_email_must_shrink():
    big = replace(fx.many(40, scale=12), trends=fx.TRENDS)
    html = render.digest_html(fx.config(), big, 500)
    assert len(html.encode("utf-8")) <= render.EMAIL_LIMIT
    assert html.count('class="trend-bar"') == 4 and html.count('class="paper"') < 40  # papers gave way


def test_only_the_configured_languages_speak():
    en = fx.config(languages=["en"])
    for text in (render.digest_markdown(en, fx.digest(), 10), render.digest_text(en, fx.digest(), 10),
                 trend_block(render.digest_html(en, fx.digest(), 10), ">Trends")):
        assert "Movers: Algorithms and objectives 31 papers" in " ".join(text.split())
        assert not CJK.search(text.replace("$\\alpha_t$", "")), CJK.search(text)
    zh = fx.config(languages=["zh"])
    md = render.digest_markdown(zh, fx.digest(), 10)
    assert "> 本周变化：算法与目标 31 篇，上周 19 篇；" in md and "Movers" not in md


def test_a_digest_without_trends_renders_as_before():
    """Digests stored before trends (no key) and first runs (None) show no chart, no line."""
    stored = compose.digest_to_dict(fx.digest())
    assert compose.digest_from_dict(stored) == fx.digest()  # the record comes back as it was
    del stored["trends"]
    old = compose.digest_from_dict(stored)
    assert old.trends is None
    for text in (render.digest_markdown(fx.config(), old, 10), render.digest_text(fx.config(), old, 10),
                 render.digest_html(fx.config(), old, 10)):
        assert "本周变化" not in text and "Movers" not in text and "主题趋势" not in text


def svg(trends, languages=("zh", "en")) -> str:
    settings = fx.config(languages=languages)
    return templating.html_env(None, settings.languages).get_template("site/trends.svg.j2").render(trends=trends, **render.common(settings))


def test_the_svg_chart_parses_as_xml_and_keeps_hostile_names_as_text():
    root = ET.fromstring(svg(fx.TRENDS))
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg" and root.get("role") == "img"
    assert root.find(f"{ns}title").text == "各主题每周论文数 · Papers per topic per week"
    desc = root.find(f"{ns}desc").text
    assert "2026-11-09 → 2026-11-30" in desc and "Algorithms and objectives: 4, –, 19, 31" in desc
    # One bar per topic and week with papers; the week without a digest draws none.
    bars = [r for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
    assert "2026-11-30 · <b>工具</b> & 智能体 · Tools <script> & 'agents' | *x*: 7" in [
        r.find(f"{ns}title").text for r in bars]  # text, not markup
    assert not list(root.iter(f"{ns}script")) and not list(root.iter(f"{ns}b"))
    assert len(bars) == sum(1 for t in fx.WEEKS for n in t.counts if n)
    assert not any(r.find(f"{ns}title").text.startswith("2026-11-16") for r in bars)
    heights = {r.find(f"{ns}title").text: float(r.get("height")) for r in bars}
    assert heights["2026-11-30 · 算法与目标 · Algorithms and objectives: 31"] == pytest.approx(
        31 / 4 * heights["2026-11-09 · 算法与目标 · Algorithms and objectives: 4"], rel=0.02)
    english = svg(fx.TRENDS, ("en",))
    assert not CJK.search(english)


def test_the_svg_chart_axis_names_the_year_where_it_crosses_one():
    """The weekly digests from 12-07 to 01-25: the axis read '12-07 … 01-25', no year on
    either side of New Year. A label shows its year where the axis reaches a new one, and
    the first does too when it is not the digest's year."""
    def labels(weeks: list[date]) -> list[str]:
        counts = TopicWeeks("algorithms", "算法", "Algorithms", tuple(range(1, len(weeks) + 1)))
        chart = Trends(tuple(map(date.isoformat, weeks)), (counts,))
        root = ET.fromstring(svg(chart))
        return [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if "-" in (t.text or "")]

    assert labels([date(2026, 12, 7) + timedelta(weeks=k) for k in range(8)]) == ["2026-12-07", "2027-01-25"]
    half_year = [date(2027, 1, 18) - timedelta(weeks=k) for k in range(25, -1, -1)]
    assert labels(half_year) == ["2026-07-27", "10-26", "2027-01-18"]
    assert labels([date(2026, 2, 2) + timedelta(weeks=k) for k in range(26)]) == ["02-02", "05-04", "07-27"]
    assert labels([date(2026, 12, 28), date(2027, 1, 4)]) == ["2026-12-28", "2027-01-04"]


def test_a_renamed_topic_counts_its_older_weeks_under_its_new_key(tmp_path, cli):
    """A user renames a topic's key (algorithms -> policy-opt) after a week: the papers
    listed before are counted under the new key, where the reading list shows them now,
    not under the old key as a topic of their own for 26 weeks."""
    first = [rl_paper(n, DAY) for n in (1, 2, 3)]
    with ArxivServer(first) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        topics = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))["topics"]
        data["topics"] = [{**t, "key": "policy-opt"} if t["key"] == "algorithms" else t for t in topics]
        config.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        arxiv.papers = [*first, *(rl_paper(n, DAY + timedelta(days=7)) for n in (4, 5))]
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
    store = Store.open(load(config).storage.url)
    first_week = store.digest("2026-11-02")["data"]["trends"]
    assert first_week is None  # a first run says nothing
    found = compose.digest_from_dict(store.digest("2026-11-09")["data"]).trends
    assert found is not None and found.weeks == ("2026-11-02", "2026-11-09")
    assert [(t.topic, t.name_en, t.counts) for t in found.topics] == [
        ("policy-opt", "Algorithms and objectives", (3, 2))]


def test_a_paper_listed_under_a_topic_since_removed_counts_under_its_topic_now(tmp_path, db_url):
    """A paper a digest listed under a key the config no longer has is counted under the
    topic its words point to now, also when the week does not hold it (its summary came,
    so no run has work for it): the store gives its title and abstract."""
    from pipeline.week import Week, history
    from tests.helpers import write_config

    store = Store.open(db_url)
    papers = [rl_paper(1, DAY), replace(rl_paper(2, DAY), title="Multi-turn agents trained with RL")]
    store.upsert_papers(papers)
    store.set_scores([Scored(papers[0].id, 2.0, True, (), "policy-opt"),  # a key renamed since
                      Scored(papers[1].id, 2.0, True, (), "agentic")])
    moment = datetime(2026, 11, 16, 8, tzinfo=UTC)
    store.save_digest("2026-11-16", (moment, moment), {}, [(paper_key(p.id), True) for p in papers], [])
    config = load(write_config(tmp_path, seeds=False))  # the shipped topics: algorithms, ..., agentic
    week = Week(papers={}, scores={}, seeds=[], published=set(), summaries={}, translations={})
    assert history(config, store, week, END) == [("2026-11-16", "agentic", 1), ("2026-11-16", "algorithms", 1)]
