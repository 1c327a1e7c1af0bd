"""The week: what the stages after collecting read from the store, once (`Week`), and the
digest's entries made of it in the digest's order.

Apart from run.py, which reads it in its phase 3 and hands it on: the LLM's work (ask.py)
and the digest (run.build_digest) read the same week, and the reading list
(reading_list.py) makes its entries by the same rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Any

from pipeline import calendar, compose, coverage, decide, importance, learn, reading_list, trends
from pipeline.config import Config
from pipeline.models import (
    Digest,
    Entry,
    Paper,
    Scored,
    SeedEntry,
    Update,
    merge_papers,
    paper_key,
    seed_key,
)
from pipeline.sources.seeds import shown
from pipeline.store import Store

JUDGED = "LLM judge: "


@dataclass
class Week:
    """What the stages after collecting need, read from the store once."""

    papers: dict[str, Paper]  # relevant ones waiting for a digest (or a summary: the newest
    #                           enrich.max_papers), grey-band, seed-tied
    scores: dict[str, Scored]  # the papers', by id
    seeds: list[SeedEntry]
    published: set[str]  # keys of entries already in a digest
    summaries: dict[str, dict[str, Any]]  # paper key -> its newest summary
    translations: dict[str, dict[str, Any]]  # seed key -> its newest translation
    last_digest_end: datetime | None = None
    existing: Digest | None = None  # the digest of this as-of, if a run already made it
    # the Updates ledger of `listed`
    snapshots: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    listed: dict[str, Paper] = field(default_factory=dict)  # listed ones changed since the last digest
    ledger: coverage.Ledger | None = None  # what collecting covered, for the digest's header
    first: bool = False  # no digest yet: a digest of seeds alone may be made
    taste: importance.Taste = field(default_factory=importance.Taste)  # what the reader likes
    history: list[tuple[str, str | None, int]] = field(default_factory=list)  # trends.Listed
    weighed: dict[str, tuple[float, float]] = field(default_factory=dict)  # id -> (relevance, importance)

    def kept(self) -> list[Paper]:
        """Relevant papers (the reader's verdict beats the score), newest first."""
        found = sorted((p for p in self.papers.values()
                        if p.id in self.scores and self.scores[p.id].kept), key=lambda p: p.id)
        found.sort(key=lambda p: p.submitted.isoformat() if p.submitted else "", reverse=True)
        return found

    def waiting(self) -> list[Paper]:
        """Relevant papers not yet in a digest."""
        return [p for p in self.kept() if paper_key(p.id) not in self.published]

    def take(self, papers: Sequence[Paper]) -> None:
        """Newer records of papers the week holds (completed or revised ones)."""
        for paper in papers:
            for held in (self.papers, self.listed):
                if paper.id in held:
                    held[paper.id] = merge_papers(held[paper.id], paper)


def load_week(config: Config, store: Store, seeds: list[SeedEntry], as_of: datetime | None) -> Week:
    """Everything the later stages read, in one pass over the store: the papers waiting for
    a digest or a summary, the grey band, the seeds' papers and the listed papers that changed
    since the last digest, with their summaries; not the whole history. as_of None: every
    relevant paper, as the reading list holds them."""
    # a summary that never came is asked for again after the week's papers, at most
    # enrich.max_papers a run: older ones than the newest that many are not read
    papers = {p.id: p for p in store.relevant_papers(waiting=as_of is not None,
                                                     backlog=config.enrich.max_papers)}
    published = store.published_keys()
    # a seed shown under its title before its paper was found: that paper is shown too
    published |= {paper_key(s.arxiv_id) for s in seeds if s.arxiv_id and seed_key(s.title) in published}
    tied = [s.arxiv_id for s in seeds if s.arxiv_id and s.arxiv_id not in papers]
    grey = [pid for pid in grey_band(config, grey_band_scores(config, store), published) if pid not in papers]
    papers.update((p.id, p) for p in store.papers(list(dict.fromkeys(tied + grey))))
    scores = store.scores(papers)
    week = Week(papers=papers, scores=scores, seeds=seeds, published=published, summaries={},
                translations=store.latest_enrichments("seed_translation"))
    if as_of is not None:
        existing = store.digest(as_of.date().isoformat())
        week.existing = compose.digest_from_dict(existing["data"]) if existing else None
        week.last_digest_end = store.last_digest_end(by=as_of)
        if week.existing is None:
            changed = store.listed_changed()
            week.snapshots = {paper_key(p.id): snap for p, snap in changed}
            week.listed = {p.id: p for p, _ in changed}
            week.ledger = coverage.Ledger.load(store)
            week.first = not store.digest_ids()
            week.history = history(config, store, week, as_of.date())
            week.taste = importance.taste(seeds, store.papers(s.arxiv_id for s in seeds if s.arxiv_id),
                                          *learn.judged(store), config.relevance.follow_authors)
    week.summaries = store.latest_enrichments("paper_summary", map(paper_key, papers.keys() | week.listed))
    return week


def history(config: Config, store: Store, week: Week, end: date) -> list[tuple[str, str | None, int]]:
    """The trends' earlier weeks (trends.Listed): a paper listed under a topic the config
    no longer has counts under the topic its entry has now (reading_list.topic_of), not
    under the old key as a topic of its own for 26 weeks."""
    rows = store.listed_per_topic(*trends.span(end), known=[t.key for t in config.topics])
    papers = dict(week.papers)
    # a stored score names the stored topic, the one no longer known: only this week's may differ
    papers.update((p.id, p) for p in store.papers([pid for *_, pid in rows if pid and pid not in papers]))
    return [(day, reading_list.topic_of(config.topics, week.scores.get(pid), p.title, p.abstract)
             if pid and (p := papers.get(pid)) else topic, n) for day, topic, n, pid in rows]


def grey_band_scores(config: Config, store: Store) -> dict[str, Scored]:
    """The scores grey_band may pick from: those near the threshold of this week's papers in
    no digest (a little wider than the band: grey_band draws the line). Older weeks' grey
    band stays as it was passed over: a judge turned on later would list it now, as new."""
    if not config.relevance.llm_judge:
        return {}
    threshold, band = learn.band(config.relevance)
    near = store.unlisted_scores(threshold - band - 1e-6, threshold + band + 1e-6)
    this_week = {p.id for p in unlisted_this_week(store)} if near else set()
    return {pid: s for pid, s in near.items() if pid in this_week}


def unlisted_this_week(store: Store) -> list[Paper]:
    """Papers of the current week not yet in a digest: submitted since the last digest
    ended, or collected since it was made (sent before its end, announced after it:
    Sunday's and Monday's evenings for a Monday digest); every one before the first digest.
    A refit scores these again and the LLM judge asks about these; older weeks keep the
    scores they were published or passed over with."""
    since = store.last_digest_end()
    day = since.date() - timedelta(days=2) if since else None  # any two offsets' days are within two
    found = [p for p in store.unlisted_papers(day)
             if since is None or p.submitted is None or p.submitted >= since]
    return list({p.id: p for p in [*found, *store.unlisted_papers(new=True)]}.values())


def grey_band(config: Config, scores: dict[str, Scored], published: set[str]) -> list[str]:
    """Waiting papers whose score is within the grey band of the threshold (the model's, with
    its band, when relevance.model is on), that neither the reader nor the judge decided."""
    rel = config.relevance
    if not rel.llm_judge:
        return []
    threshold, band = learn.band(rel)
    return [pid for pid, s in scores.items()
            if s.score is not None and s.verdict is None and abs(s.score - threshold) <= band
            and paper_key(pid) not in published and not decide.reader_decided(s.reasons)
            and not any(reason.startswith(JUDGED) for reason in s.reasons)]


# --- the week's entries, in the digest's order ---------------------------------------------

def week_entries(config: Config, week: Week, end: datetime) -> tuple[list[Entry], list[Update]]:
    """The digest's entries, by importance, and its Updates: everything relevant not yet in
    a digest; one sent after the window's `end` (collected since, for a digest made by hand
    for an earlier week) is not announced by then and waits for the next digest."""
    later = {paper_key(p.id) for p in week.waiting() if p.submitted and p.submitted > end}
    entries = digest_entries(config, week, week.published | later)
    if config.digest.max_curated == 0:  # no seed entry is shown: a paper of the week one names is the week's
        ours = seed_tied_of_the_week(config, week, end)
        entries = [replace(e, curated=False) if e.key in ours else e for e in entries]
    return by_importance(config, week, entries), compose.updates(week.listed.values(), week.snapshots,
                                                                 week.summaries)


def seed_tied_of_the_week(config: Config, week: Week, end: datetime) -> set[str]:
    """Keys of the papers seed entries name that arXiv announced in the digest's window
    (from the last digest's end, else in the lookback_days before `end`), by the evening
    their first version went out; an undated one came from this week's feed. One announced
    the minute the last digest was made reached no feed by then: it is this week's, as the
    header's coverage counts it."""
    start = week.last_digest_end or end - timedelta(days=config.sources.arxiv.lookback_days)
    cal = calendar.load_calendar(config.sources.arxiv.calendar_files)
    return {paper_key(p.id) for s in week.seeds if (p := week.papers.get(s.arxiv_id or ""))
            and (p.submitted is None or cal.at(cal.announced_on(p.submitted)).at >= start)}


def digest_entries(config: Config, week: Week, published: set[str] | None = None) -> list[Entry]:
    """Relevant papers and seed entries; those already in a digest are left out when asked."""
    by_paper = {s.arxiv_id: s for s in week.seeds if s.arxiv_id}
    tied = [week.papers[pid] for pid in sorted(by_paper) if pid in week.papers]
    entries, seen = [], set(published or ())
    for paper in week.kept() + tied:
        key, seed = paper_key(paper.id), by_paper.get(paper.id)
        if key in seen:
            continue
        seen.add(key)
        entries.append(reading_list.paper_entry(config.topics, paper, week.scores.get(paper.id),
                                                week.summaries.get(key), seed, week.translations))
    for seed in shown(week.seeds):  # the others by their own text, a paper arXiv never returned too
        if seed.arxiv_id in week.papers or published is not None and seed_key(seed.title) in published:
            continue
        entries.append(reading_list.seed_entry(config.topics, seed, week.translations))
    return entries


def by_importance(config: Config, week: Week, entries: list[Entry]) -> list[Entry]:
    """The week's papers with their importance as the score they are ordered by
    (relevance plus the parts importance.py documents); seed entries as they are."""
    found = importance_of(config, week, {e.key.removeprefix("arxiv:"): e.score or 0.0
                                         for e in entries if e.key.startswith("arxiv:")})
    return [replace(e, score=found[pid]) if (pid := e.key.removeprefix("arxiv:")) in found else e
            for e in entries]


def importance_of(config: Config, week: Week, relevance: dict[str, float]) -> dict[str, float]:
    """Paper id -> importance total, the digest's order, from each paper's relevance; weighed
    once a run (the summaries' order and the digest's ask for the same papers)."""
    todo = {pid: value for pid, value in relevance.items()
            if pid in week.papers and week.weighed.get(pid, (None,))[0] != value}
    found = importance.weigh([week.papers[pid] for pid in todo], todo, week.taste, config.digest.importance)
    week.weighed.update({pid: (todo[pid], part.total) for pid, part in found.items()})
    return {pid: week.weighed[pid][1] for pid in relevance if pid in week.weighed}
