"""run_digest(): the stages in order, top to bottom.

Phase one builds the context (seeds, collect, rank, enrich, compose); phase two
writes it (files, database, outbox, email, git). A failed source stops the run
before anything is published, so the watermark stays where it was.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime

from pipeline import calendar, collect, compose, coverage, learn, rank, render
from pipeline.config import Config, bundled
from pipeline.enrich import Enricher, Item, make_client
from pipeline.errors import ConfigError, DigestError
from pipeline.models import Digest, Entry, Paper, RunReport, SeedDocument
from pipeline.publish import publish
from pipeline.sources.http import Fetcher
from pipeline.sources.seeds import load_seeds
from pipeline.stopping import Stopped, checkpoint
from pipeline.store import Store, paper_key, row_to_seed, seed_key

log = logging.getLogger(__name__)


@dataclass
class Options:
    as_of: datetime
    offline: bool = False
    dry_run: bool = False
    no_email: bool = False


ARXIV_BEGAN = datetime(1991, 8, 14, tzinfo=UTC)


def parse_as_of(value: str | None, config: Config, option: str = "--as-of") -> datetime:
    """An ISO date means the end of that day in schedule.timezone; default: now there.

    More than a day ahead is refused: a window reaching into the future would move the
    watermark past the present, and every later run would miss what arrives meanwhile.
    """
    zone = config.zone
    now = datetime.now(zone).replace(microsecond=0)
    if not value:
        return now
    try:
        if len(value) == 10:
            moment = datetime.combine(date.fromisoformat(value), dtime(23, 59, 59), zone)
        else:
            moment = datetime.fromisoformat(value)
            moment = moment if moment.tzinfo else moment.replace(tzinfo=zone)
    except ValueError:
        raise ConfigError(f"{option}: not an ISO date or datetime: {value!r}",
                          "write it as YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
    if moment > now + timedelta(days=1):
        raise ConfigError(f"{option}: {value} is more than a day ahead of now ({now:%Y-%m-%d %H:%M})",
                          "a digest can only be made for the past or the present")
    if moment < ARXIV_BEGAN:
        raise ConfigError(f"{option}: {value} is before arXiv began (1991-08-14)")
    return moment


def seed_documents(config: Config) -> list[SeedDocument]:
    """The user's seed paths, plus the built-in pages unless a file of that name is there."""
    documents = load_seeds(list(config.seeds.paths))
    if config.seeds.builtin:
        have = {doc.source for doc in documents}
        builtin = [doc for doc in load_seeds([bundled("seeds")]) if doc.source not in have]
        documents = builtin + documents
    return documents


def run_digest(config: Config, store: Store, options: Options,
               fetcher: Fetcher | None = None) -> RunReport:
    """collect -> rank -> resolve seeds -> enrich -> compose -> render -> deliver.

    Recorded as a `publish` run; a failure marks it failed and propagates.
    """
    run_id = None if options.dry_run else store.start_run("publish", options.as_of)
    try:
        report = _run(config, store, options, fetcher)
    except Stopped:
        if run_id is not None:
            store.finish_run(run_id, "stopped", {})
        raise
    except BaseException as exc:
        if run_id is not None:
            store.finish_run(run_id, "failed", {}, error=str(exc) or type(exc).__name__)
        raise
    if run_id is not None:
        store.finish_run(run_id, "ok" if not report.delivery_errors else "partial", vars(report))
    return report


def _run(config: Config, store: Store, options: Options, fetcher: Fetcher | None) -> RunReport:
    started = time.monotonic()
    report = RunReport(as_of=options.as_of.isoformat())
    documents = seed_documents(config)
    seeds = [e for doc in documents for e in doc.entries]
    report.warnings += [str(w) for doc in documents for w in doc.warnings]
    store.save_seeds(seeds)
    if not options.offline:
        fetcher = fetcher or collect.make_fetcher(config)
        collected = collect.collect(config, store, fetcher, options.as_of)
        report.fetched, report.new, report.revised = (
            collected.fetched, len(collected.new), len(collected.revised))
        report.warnings += collected.warnings
    checkpoint()
    report.relevance_model = rank_papers(config, store)
    if not options.offline:
        collect.resolve_seeds(config, store, fetcher)
        thin = [p.id for p in unpublished_papers(store) if p.submitted is None]
        thin += [p.id for p in collected.revised]  # a new version may bring a venue or code
        collect.complete_thin(config, store, fetcher, thin)
    checkpoint()
    enricher = make_enricher(config, store, options, report)
    judge_grey_band(config, store, enricher)
    summarise(store, enricher, report)
    checkpoint()
    digest = build_digest(config, store, options, documents, enricher)
    _count_enrichment(report, enricher)
    publish(config, store, options, digest, digest_entries(config, store), report)
    report.elapsed = time.monotonic() - started
    return report


def make_enricher(config: Config, store: Store, options: Options, report: RunReport) -> Enricher:
    """With no LLM (provider none, --offline, no key) the enricher serves the cache only."""
    client = None
    if not options.offline:
        try:
            client = make_client(config.enrich)
        except DigestError as exc:
            report.warnings.append(f"enrich: {exc}; summaries fall back for now")
    return Enricher(config.enrich, config.languages, store, client,
                    render.text_env(config.templates.dir))


JUDGED = "LLM judge: "


def judge_grey_band(config: Config, store: Store, enricher: Enricher) -> int:
    """Ask the LLM about waiting papers whose score is within the grey band of the
    threshold (the model's, with its band, when relevance.model is on)."""
    rel = config.relevance
    if not rel.llm_judge:
        return 0
    threshold, band = learn.band(rel)
    published = store.published_keys()
    rows = {r["id"]: r for r in store.score_rows()
            if r["score"] is not None and r["verdict"] is None
            and abs(r["score"] - threshold) <= band
            and paper_key(r["id"]) not in published
            and not learn.reader_decided(reasons := r["reasons"] or [])
            and not any(reason.startswith(JUDGED) for reason in reasons)}
    verdicts = enricher.judge(store.papers(rows))
    for pid, verdict in verdicts.items():
        said = "relevant" if verdict.relevant else "not relevant"
        reasons = (rows[pid]["reasons"] or []) + [f"{JUDGED}{said} ({verdict.reason_en})"]
        store.set_judgement(pid, verdict.relevant, reasons)
    return len(verdicts)


def summarise(store: Store, enricher: Enricher, report: RunReport) -> None:
    """Summaries for the papers waiting for a digest (best first), then for listed papers
    whose summary failed before; English for curated seeds."""
    scores = {row["id"]: row["score"] or 0.0 for row in store.score_rows()}
    waiting = sorted(unpublished_papers(store), key=lambda p: -scores.get(p.id, 0.0))
    have = store.latest_enrichments("paper_summary")
    waiting_ids = {p.id for p in waiting}
    listed = [p for p in store.relevant_papers()
              if paper_key(p.id) not in have and p.id not in waiting_ids]
    found = enricher.summarise(waiting + listed)
    published = store.published_keys()
    seeds = [row_to_seed(row) for row in store.seed_rows() if row["key"] not in published]
    found_seeds = enricher.translate_seeds(seeds)
    report.summarised, report.cached = len(found) + len(found_seeds), enricher.report.cached


def _count_enrichment(report: RunReport, enricher: Enricher) -> None:
    done = enricher.report
    report.llm_calls, report.llm_failures, report.tokens_in, report.tokens_out = (
        done.calls, done.failures, done.tokens_in, done.tokens_out)
    if done.error:
        report.warnings.append(f"enrich: {done.error}")
    report.glossary_flags = done.glossary_flags
    if done.glossary_flags:
        report.warnings.append(f"glossary: {done.glossary_flags} term(s) in the LLM's Chinese differ "
                               f"from templates/glossary.yaml, e.g. {'; '.join(done.glossary_examples)}")


def rank_papers(config: Config, store: Store) -> str:
    """Score papers not yet scored with the rule, the model and the profile; a user's
    verdict (rl-digest mark) overrides the score. When the model changed (new verdicts)
    the week's unpublished papers are scored again. Returns the model's version."""
    rules = rank.compile_rules(config.relevance)
    exemplars = rank.build_exemplars(exemplar_texts(store))
    model = learn.current(config.relevance, store)
    profile = learn.Profile.compile(config.relevance)
    version = model.version if model else "rule"
    papers = store.papers_to_score()
    if store.get_state("relevance_scored_with") != version:
        papers = list({p.id: p for p in papers + rescore_candidates(store)}.values())
    scored = []
    for paper in papers:
        rule = rank.score(paper.title, paper.abstract, rules, exemplars)
        result = learn.decide(paper.title, paper.abstract, paper.authors, rule, model, profile)
        primary, others = rank.assign_topics(paper.title, paper.abstract, config.topics)
        scored.append((paper.id, result.value, result.relevant, list(result.reasons),
                       primary, list(others)))
    store.set_scores(scored)
    store.set_state("relevance_scored_with", version)
    return version


def rescore_candidates(store: Store) -> list[Paper]:
    """Scored papers of the current week (since the last digest) not yet in a digest:
    older weeks keep the scores they were published or passed over with."""
    published, since = store.published_keys(), store.last_digest_end()
    return [p for p in store.papers() if paper_key(p.id) not in published
            and (since is None or p.submitted is None or p.submitted >= since)]


def exemplar_texts(store: Store) -> list[tuple[str, str]]:
    """The user's taste: seed entries, and papers they marked relevant."""
    items = [(row["title"], row["title"]) for row in store.seed_rows()]
    items += [(p.title, f"{p.title} {p.abstract}") for p in store.marked(relevant=True)]
    return items


def unpublished_papers(store: Store) -> list[Paper]:
    published = store.published_keys()
    return [p for p in store.relevant_papers() if paper_key(p.id) not in published]


def build_digest(config: Config, store: Store, options: Options,
                 documents: list[SeedDocument], enricher: Enricher) -> Digest | None:
    """Everything relevant not yet in a digest; None when there is nothing new."""
    digest_id = options.as_of.date().isoformat()
    existing = store.digest(digest_id)
    if existing is not None:
        return compose.digest_from_dict(existing["data"])
    entries = digest_entries(config, store, store.published_keys())
    ledger = store.snapshots()
    news = compose.updates(store.papers(k.removeprefix("arxiv:") for k, v in ledger.items() if v),
                           ledger, store.latest_enrichments("paper_summary"))
    if not entries and not news:
        return None
    wanted = featured_seed_keys(store)
    forced = [e for e in entries if e.key in wanted]
    featured = rank.choose_featured(entries, config.digest.featured, key_topic=lambda e: e.topic,
                                    key_score=lambda e: e.score or 0.0, forced=forced)
    curated = compose.curated_comparison(featured, documents)
    english = enricher.translate(compose.to_translate(featured, curated))
    featured, curated = compose.with_english(featured, curated, english)
    items = [Item(e.key, e.title, e.abstract or e.summary_zh or "", e.version or 1) for e in featured]
    readings = enricher.read_featured(item for item, e in zip(items, featured, strict=True) if not e.parts)
    featured = [compose.with_reading(e, _dump(readings.get(e.key))) for e in featured]
    comparison = None if curated[0] else _dump(enricher.compare(items))
    llm = any(e.llm for e in entries) or bool(readings) or comparison is not None
    last = store.last_digest_end()
    start = last or options.as_of - timedelta(days=config.sources.arxiv.lookback_days)
    sources = [name for name, on in (("arXiv API", config.sources.arxiv.enabled and not options.offline),
                                     ("RSS", config.sources.rss.enabled and not options.offline),
                                     ("OAI-PMH", config.sources.oai.enabled and not options.offline),
                                     ("seeds", True)) if on]
    return compose.make_digest(
        digest_id=digest_id, window=(start, options.as_of), timezone=config.schedule.timezone,
        entries=entries, featured=featured, topics=config.topics,
        max_papers=config.digest.max_papers, comparison=comparison, curated=curated,
        model=config.enrich.model if llm else None,
        sources=sources, categories=[] if options.offline else config.sources.arxiv.categories,
        updates=news,
        coverage=None if options.offline else coverage_of(config, store, (start, options.as_of), entries),
    )


def coverage_of(config: Config, store: Store, window: tuple[datetime, datetime],
                entries: list[Entry]) -> dict:
    """The header's coverage line: the ledger against the calendar, and what was kept."""
    cal = calendar.load_calendar(config.sources.arxiv.calendar_files)
    found = coverage.summarise(coverage.Ledger.load(store), cal, collect.feed_groups(config), *window)
    relevant = {g.name: sum(1 for e in entries if not e.curated
                            and any(c.split(".")[0] == g.name for c in e.categories))
                for g in found.groups}
    return {**asdict(found), "relevant": relevant}


def _dump(reply) -> dict | None:
    return reply.model_dump(mode="json") if reply is not None else None


def featured_seed_keys(store: Store) -> set[str]:
    keys = set()
    for row in store.seed_rows():
        seed = row_to_seed(row)
        if seed.featured:
            keys.add(paper_key(seed.arxiv_id) if seed.arxiv_id else seed_key(seed.title))
    return keys


def digest_entries(config: Config, store: Store, published: set[str] | None = None) -> list[Entry]:
    """Relevant papers and seed entries; those already in a digest are left out when asked."""
    summaries = store.latest_enrichments("paper_summary")
    translations = store.latest_enrichments("seed_translation")
    seeds = [row_to_seed(row) for row in store.seed_rows()]
    by_paper = {s.arxiv_id: s for s in seeds if s.arxiv_id}
    topics = {p["id"]: p for p in store.score_rows()}
    entries, seen = [], set(published or ())
    for paper in store.relevant_papers() + store.papers(by_paper):
        key = paper_key(paper.id)
        if key in seen:
            continue
        seen.add(key)
        row = topics.get(paper.id, {})
        topic = row.get("topic") or _topic(config, paper.title, paper.abstract)
        scored = compose.Scored(row.get("score"), topic)
        seed = by_paper.get(paper.id)
        entries.append(compose.paper_entry(paper, scored, summaries.get(key), seed,
                                           translations.get(seed_key(seed.title)) if seed else None))
    for seed in seeds:
        key = seed_key(seed.title)
        if seed.arxiv_id or published is not None and key in published:
            continue
        entries.append(compose.seed_entry(seed, _topic(config, seed.title, seed.summary_zh or ""),
                                          translations.get(key)))
    return entries


def _topic(config: Config, title: str, text: str) -> str:
    return rank.assign_topics(title, text, config.topics)[0]


def summary_line(report: RunReport) -> str:
    day = report.as_of[:10]
    line = (f"{day}: fetched {report.fetched}, relevant {report.relevant} ({report.seeds} seeds), "
            f"summarised {report.summarised} ({report.cached} cached), sent to {report.sent}, "
            f"{report.elapsed:.1f} s")
    if report.llm_calls or report.llm_failures:
        line += (f"; LLM: {report.llm_calls} calls, {report.tokens_in} tokens in, "
                 f"{report.tokens_out} out, {report.llm_failures} failed")
    return line
