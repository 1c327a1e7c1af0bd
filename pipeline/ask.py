"""What a run asks the LLM, in the order a reader reads: the grey band's judgements, the
summaries of the entries shown in full, the digest's own calls (`Asked`), then the
summaries of the one-line entries, so enrich.max_tokens_per_run goes to what is read first.

Apart from run.py, which calls these in its phase 4 and composes the digest from `Asked`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pipeline import compose, feature, fulltext, rank, templating
from pipeline.config import Config
from pipeline.enrich import Enricher, Item, make_client
from pipeline.errors import DigestError
from pipeline.models import Entry, Options, RunReport, Scored, SeedDocument, SeedEntry, paper_key, seed_key
from pipeline.sources.http import Fetcher
from pipeline.sources.seeds import shown
from pipeline.store import Store
from pipeline.week import JUDGED, Week, grey_band, importance_of, week_entries


def make_enricher(config: Config, store: Store, options: Options, report: RunReport) -> Enricher:
    """With no LLM (provider none, --offline, no key) the enricher serves the cache only."""
    client = None
    if not options.offline:
        try:
            client = make_client(config.enrich)
        except DigestError as exc:
            report.warnings.append(f"{exc}; summaries fall back for now")
            report.llm_off = exc.message
    return Enricher(config.enrich, config.languages, store, client,
                    templating.text_env(config.templates.dir))


def judge_grey_band(config: Config, week: Week, enricher: Enricher) -> list[Scored]:
    """Ask the LLM about the grey band's papers; return their new scores (also applied to
    the week)."""
    unsure = [week.papers[pid] for pid in grey_band(config, week.scores, week.published)
              if pid in week.papers]
    judged = []
    for pid, verdict in enricher.judge(unsure).items():
        said = "relevant" if verdict.relevant else "not relevant"
        old = week.scores[pid]
        judged.append(replace(old, relevant=verdict.relevant,
                              reasons=(*old.reasons, f"{JUDGED}{said} ({verdict.reason_en})")))
    week.scores.update((s.paper_id, s) for s in judged)
    return judged


def summarise(config: Config, week: Week, enricher: Enricher, report: RunReport, full: bool) -> None:
    """Summaries for the papers waiting for a digest, in the digest's order, then for listed
    papers whose summary failed before; English for curated seeds. In two parts sharing
    enrich.max_papers: `full`, the best digest.max_papers + digest.featured (the entries
    shown in full), asked before the digest's own calls; the rest after them, so neither
    max_papers nor max_tokens_per_run goes to one-line entries first. The week takes them in."""
    waiting = week.waiting()
    order = importance_of(config, week, {p.id: week.scores[p.id].score or 0.0 for p in waiting})
    waiting.sort(key=lambda p: -order.get(p.id, 0.0))
    shown_in_full = config.digest.max_papers + config.digest.featured
    cached = enricher.report.cached
    if full:
        found = enricher.summarise(waiting[:shown_in_full])
    else:
        waiting_ids = {p.id for p in waiting}
        listed = [p for p in week.kept()
                  if paper_key(p.id) not in week.summaries and p.id not in waiting_ids]
        found = enricher.summarise(waiting[shown_in_full:] + listed)
    week.summaries.update((paper_key(pid), reply.model_dump(mode="json")) for pid, reply in found.items())
    found_seeds = {} if full else enricher.translate_seeds(seeds_to_translate(week, enricher))
    week.translations.update((key, reply.model_dump(mode="json")) for key, reply in found_seeds.items())
    report.summarised += len(found) + len(found_seeds)
    report.cached += enricher.report.cached - cached


def seeds_to_translate(week: Week, enricher: Enricher) -> list[SeedEntry]:
    """Seed entries not shown yet, and shown ones whose Chinese has no English yet (shown
    while the LLM was off, or edited)."""
    candidates = shown(week.seeds)  # not one another entry of its paper outranks: never shown
    seeds = [s for s in candidates if seed_key(s.title) not in week.published]
    return seeds + enricher.untranslated(s for s in candidates if seed_key(s.title) in week.published)


def count_enrichment(report: RunReport, enricher: Enricher) -> None:
    """The run's LLM work is done: its counts into the report, and what waits, said once."""
    enricher.say_waiting()
    done = enricher.report
    report.llm_calls, report.llm_failures, report.tokens_in, report.tokens_out = (
        done.calls, done.failures, done.tokens_in, done.tokens_out)
    report.llm_requests = enricher.client.requests if enricher.client else 0
    if done.error:
        report.warnings.append(f"enrich: {done.error}")
        report.llm_off = done.error
    elif done.failures:  # status says why, not only how many
        report.warnings.append(f"enrich: {done.failures} fell back and are tried again next run "
                               f"(the last: {done.last_failure})")
    report.glossary_flags = done.glossary_flags
    if done.glossary_flags:
        report.warnings.append(f"glossary: {done.glossary_flags} term(s) in the LLM's Chinese differ "
                               f"from templates/glossary.yaml, e.g. {'; '.join(done.glossary_examples)}")


@dataclass(frozen=True)
class Asked:
    """The digest's own LLM replies, asked for before the one-line entries' summaries (what
    a reader reads first gets enrich.max_tokens_per_run first), composed after them."""

    featured: tuple[str, ...]  # entry keys
    question: tuple[str | None, str | None]  # (zh, en)
    english: dict[str, str]  # curated Chinese -> English
    readings: dict[str, dict[str, Any]]  # entry key -> its featured reading
    comparison: dict[str, Any] | None
    highlights: dict[str, Any] | None
    told: tuple[str, ...]  # entry keys: the papers the highlights' numbers point at


def ask_for_digest(config: Config, week: Week, documents: list[SeedDocument], enricher: Enricher,
                   end: datetime, read: Callable[[Entry], str | None] | None = None) -> Asked | None:
    """The featured pick, the English of curated texts, the featured readings, the
    comparison and the highlights; None when no digest is made. `read` gives a featured
    paper's full text (None: the abstract)."""
    if week.existing is not None:
        return None
    entries, news = week_entries(config, week, end)
    papers = [e for e in entries if not e.curated]
    if not papers and not news and not (week.first and entries):
        return None
    pick = choose_featured(config, week, enricher, papers, entries)
    featured = list(pick.entries)
    curated = compose.curated_comparison(featured, documents)
    english = enricher.translate(compose.to_translate(featured, curated))
    featured, curated = compose.with_english(featured, curated, english)
    items = [_item(e) for e in featured]
    readings = enricher.read_featured(_item(e, read(e) if read else None) for e in featured if not e.parts)
    comparison = None if curated[0] else _dump(enricher.compare(items, pick.question_en))
    told = compose.highlight_candidates(featured, entries)
    return Asked(featured=tuple(e.key for e in featured), question=(pick.question_zh, pick.question_en),
                 english=english, readings={k: r.model_dump(mode="json") for k, r in readings.items()},
                 comparison=comparison, highlights=_dump(enricher.highlights([_item(e) for e in told])),
                 told=tuple(e.key for e in told))


def choose_featured(config: Config, week: Week, enricher: Enricher, papers: list[Entry],
                    entries: list[Entry]) -> feature.Pick:
    """This week's papers that share a question; the seed page's own pair only in a
    digest of seeds alone."""
    n = config.digest.featured
    if not papers:
        wanted = {paper_key(s.arxiv_id) if s.arxiv_id in week.papers else seed_key(s.title)
                  for s in week.seeds if s.featured}
        return feature.Pick(tuple(rank.choose_featured(
            entries, n, key_topic=lambda e: e.topic, key_score=lambda e: e.score or 0.0,
            forced=[e for e in entries if e.key in wanted])))
    top = feature.candidates(papers)
    reply = enricher.pick_featured([_item(e) for e in top], n) if n > 1 and len(top) > 1 else None
    return feature.choose(papers, n, config.digest.pair_similarity, _dump(reply))


def _item(entry: Entry, text: str | None = None) -> Item:
    """A paper as the LLM reads it: `text` (its full text), else the abstract, else what
    the seed page says."""
    return Item(entry.key, entry.title, text or entry.abstract or entry.summary_zh or entry.summary_en or "",
                entry.version or 1)


def full_text(config: Config, store: Store, fetcher: Fetcher, entry: Entry) -> str | None:
    """A featured arXiv paper's main text from its HTML page; None without one."""
    reading = config.sources.fulltext.enabled and config.enrich.fulltext_tokens
    if not entry.key.startswith("arxiv:") or not reading:
        return None
    return fulltext.read(fetcher, store, config.sources.fulltext.url, entry.key.removeprefix("arxiv:"),
                         entry.version or 1, config.enrich.fulltext_tokens)


def _dump(reply: Any) -> dict[str, Any] | None:
    return reply.model_dump(mode="json") if reply is not None else None
