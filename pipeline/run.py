"""run_digest(): the stages in order, top to bottom.

Each phase reads what it needs from the store once, hands records from stage to
stage, and keeps its results at its end, so a killed run loses at most the phase it
was in and the next run completes it:

1. collect and rank: the seeds and the sources for the window -> kept; new papers scored -> kept
2. resolve: seed entries tied to papers, thin RSS records completed -> kept
3. the week: read once into a `Week`
4. enrich: grey-band judgements -> kept; summaries and translations -> cached as each arrives
5. compose the digest; publish it (files, digest and outbox rows, channels, git)

A failed source stops the run before anything is published, so the watermark stays.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from typing import Any

from pipeline import (
    calendar,
    collect,
    compose,
    coverage,
    feature,
    fulltext,
    importance,
    learn,
    rank,
    reading_list,
    sources,
    store_seeds,
    templating,
    trends,
)
from pipeline.config import Config
from pipeline.deliver import files
from pipeline.enrich import Enricher, Item, make_client
from pipeline.errors import ConfigError, DigestError
from pipeline.models import (
    Digest,
    Entry,
    Options,
    Paper,
    RunReport,
    Scored,
    SeedDocument,
    SeedEntry,
    Update,
    merge_papers,
    paper_key,
    requests_note,
    seed_key,
)
from pipeline.publish import publish
from pipeline.sources import CALENDAR, Source, SourceReport, SourceSetup, arxiv_api
from pipeline.sources.http import Fetcher
from pipeline.sources.seeds import all_read, in_reading_order, same_paper, seed_source, shown
from pipeline.stopping import Stopped, checkpoint
from pipeline.store import Store
from pipeline.store_schema import now_iso

log = logging.getLogger(__name__)

JUDGED = "LLM judge: "
MEMORY = "source:"  # state key prefix: what each source keeps from one window to the next
SCORED_WITH = "relevance_scored_with"  # state key: the model and settings the waiting papers were scored with
ARXIV_BEGAN = datetime(1991, 8, 14, tzinfo=UTC)


def parse_as_of(value: str | None, config: Config, option: str = "--as-of") -> datetime:
    """An ISO date means the end of that day in schedule.timezone; default: now there. A
    datetime with another offset is the same moment there: the digest id is its date in
    schedule.timezone, the date the window ends on.

    More than a day ahead is refused: a window reaching into the future would move the
    watermark past the present, and every later run would miss what arrives meanwhile.
    """
    zone = config.zone
    now = datetime.now(zone).replace(microsecond=0)
    if not value:
        return now
    day = iso_date(value)
    try:
        if day is not None:
            moment = datetime.combine(day, dtime(23, 59, 59), zone)
        else:
            moment = datetime.fromisoformat(value)
            moment = moment.astimezone(zone) if moment.tzinfo else moment.replace(tzinfo=zone)
    except ValueError:
        raise ConfigError(f"{option}: not an ISO date or datetime: {value!r}",
                          "write it as YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
    ahead = now + timedelta(days=1)
    if (moment.date() > ahead.date()) if day is not None else moment > ahead:  # tomorrow's date is fine
        raise ConfigError(f"{option}: {value} is more than a day ahead of now ({now:%Y-%m-%d %H:%M})",
                          "a digest can only be made for the past or the present")
    if moment < ARXIV_BEGAN:
        raise ConfigError(f"{option}: {value} is before arXiv began (1991-08-14)")
    return moment


def iso_date(value: str) -> date | None:
    """The day `value` names when it is a date alone, in any ISO form (2026-11-30, 20261130,
    2026-W49-1); None for a datetime. By its length, 20261130 was a datetime: midnight,
    the start of the day, where 2026-11-30 is its end."""
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def seed_documents(config: Config) -> list[SeedDocument]:
    """The seed documents as the seeds source reads them (for `rl-digest seeds`)."""
    return seed_source(SourceSetup("seeds", config)).documents()


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
    snapshots: dict[str, dict | None] = field(default_factory=dict)  # the Updates ledger of `listed`
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


def run_digest(config: Config, store: Store, options: Options,
               fetcher: Fetcher | None = None) -> RunReport:
    """collect -> rank -> resolve seeds -> enrich -> compose -> render -> deliver.

    Recorded as a `publish` run, an offline one as a `preview` (it publishes nothing, so it
    must not stand in for a publish the scheduler missed); a failure marks it failed and
    propagates.
    """
    kind = "preview" if options.offline else "publish"
    run_id = None if options.dry_run else store.start_run(kind, options.as_of)
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
    if config.email.enabled and not (options.offline or options.no_email):
        config.readers()  # an unreadable readers' file stops the run now, not after the LLM's work
    unwritable = None if options.dry_run else files.unwritable(config.outputs.dir, "outputs.dir")
    if unwritable:  # and so does an outputs.dir no file can be written in
        raise ConfigError(unwritable)
    report = RunReport(as_of=options.as_of.isoformat())
    fetcher = fetcher or collect.make_fetcher(config)
    used = sources.configured(config, offline=options.offline)
    collected, seeds, report.relevance_model = collect_and_rank(
        config, store, used, fetcher, options.as_of, record=not options.offline)
    report.relevance_refit = report.relevance_model not in ("rule", learn.shipped().version,
                                                            last_model(store))
    report.warnings += [str(w) for doc in collected.documents for w in doc.warnings]
    report.warnings += collected.warnings
    report.fetched, report.new, report.revised = (
        collected.fetched, len(collected.new), len(collected.revised))
    checkpoint()
    online = None if options.offline else fetcher
    if online is not None:
        seeds = resolve_seeds(config, store, online, seeds)
    read = {seed_key(e.title) for doc in collected.documents for e in doc.entries}  # not those only kept
    report.warnings += [str(w) for w in same_paper(s for s in seeds if seed_key(s.title) in read)]
    week = load_week(config, store, seeds, options.as_of)
    if online is not None:
        # RSS records lack the submission date and comment (a seed's paper, kept or not, shows
        # them too); a new version may bring a venue or code
        shown = week.waiting() + [week.papers[s.arxiv_id] for s in seeds if s.arxiv_id in week.papers]
        thin = [p.id for p in shown if p.submitted is None] + [p.id for p in collected.revised]
        week.take(complete_thin(config, store, online, list(dict.fromkeys(thin))))
    checkpoint()
    enricher = make_enricher(config, store, options, report)
    try:
        judged = judge_grey_band(config, week, enricher)
        if judged:
            store.set_scores(judged)
        # under enrich.max_tokens_per_run the budget goes to what a reader reads first: the
        # entries shown in full, the digest's own calls, then the one-line entries and the rest
        summarise(config, week, enricher, report, full=True)
        checkpoint()
        asked = ask_for_digest(config, week, collected.documents, enricher, collected.window[1],
                               read=None if online is None else lambda e: full_text(config, store, online, e))
        summarise(config, week, enricher, report, full=False)
        checkpoint()
        credits = sources.credits(config, used, options.offline)
        digest = build_digest(config, options, week, collected.documents, asked, credits, collected.window[1])
        _count_enrichment(report, enricher)
    finally:
        if enricher.client is not None:  # the scheduler's process outlives the run
            enricher.client.close()
    publish(config, store, options, digest, report)
    report.elapsed = time.monotonic() - started
    return report


# --- phase 1: collect and rank ----------------------------------------------------------------

def collect_and_rank(config: Config, store: Store, used: Sequence[Source], fetcher: Fetcher,
                     as_of: datetime, record: bool = True, since: datetime | None = None,
                     ) -> tuple[collect.CollectReport, list[SeedEntry], str]:
    """Read the sources for the window after the watermark (or from `since`), keep what
    they found, score the new papers; return the collect report, every kept seed entry
    and the relevance model's version.

    record=False (an offline run) keeps no `collect` run and no ledger, so the watermark
    and the coverage stay as they were.
    """
    mark = store.watermark()
    report = collect.CollectReport(collect.window(config, mark, as_of, since))
    if mark is not None and mark > datetime.now(UTC) and since is None:
        report.sources.setdefault(CALENDAR, SourceReport()).warnings.append(
            f"the watermark {mark.isoformat()} is ahead of this machine's clock (it went back?): "
            f"this collect reads sources.arxiv.lookback_days again, as a first one does")
    memory = {s.name: store.get_state(MEMORY + s.name) for s in used}
    ledger = coverage.Ledger.load(store)
    run_id = store.start_run("collect", as_of) if record else None
    try:
        collect.collect(config, used, report, fetcher, ledger, memory, first_run=mark is None,
                        reread=since is not None)
        entries = [e for doc in report.documents for e in doc.entries]
        store_seeds.save_seeds(store, entries)
        if all_read(report.documents):  # an entry removed from its file, or its file deleted, goes
            store_seeds.forget_seeds(store, [seed_key(e.title) for e in in_reading_order(entries)])
        known = {p.id: p for p in store.papers(u.id for u in report.updates)} if report.updates else {}
        updates = collect.with_versions(report.updates, known)
        report.fetched = len({p.id for p in report.papers} | {u.id for u in updates})
        new, revised, _ = store.upsert_papers(report.papers + updates)
        collect.count_kept(report, new, revised)
        for name, kept in report.memory.items():
            store.set_state(MEMORY + name, kept)
        if run_id is not None:
            ledger.save(store, as_of.date())
    except BaseException as exc:  # the row says how it ended (a long-lived scheduler goes on)
        if run_id is not None:
            stopped = isinstance(exc, Stopped)  # asked for: no error to show
            store.finish_run(run_id, "stopped" if stopped else "failed", collect.as_dict(report),
                             error=None if stopped else str(exc) or type(exc).__name__)
        raise
    if run_id is not None:
        store.finish_run(run_id, "ok", collect.as_dict(report), window=report.window)
    seeds = store_seeds.all_seeds(store)
    return report, seeds, rank_papers(config, store, seeds)


def rank_papers(config: Config, store: Store, seeds: Sequence[SeedEntry]) -> str:
    """Score papers not yet scored with the rule, the model and the profile; the install's
    verdict (rl-digest mark) overrides the score, readers' 👍/👎 only teach the model. When
    the model (new verdicts) or the settings under `relevance:` and `topics:` (a profile
    phrase added midweek) changed, the week's unpublished papers are scored again.
    Returns the model's version."""
    taste = [(s.title, s.title) for s in seeds]
    taste += [(p.title, f"{p.title} {p.abstract}") for p in learn.judged(store)[0]]
    model = learn.current(config.relevance, store)
    version = model.version if model else "rule"
    settings = learn.version_of({"relevance": config.relevance.model_dump(mode="json"),
                                 "topics": [t.model_dump(mode="json") for t in config.topics]})
    papers = store.papers_to_score()
    if store.get_state(SCORED_WITH) != f"{version} {settings}":
        papers = list({p.id: p for p in papers + rescore_candidates(store)}.values())
    store.set_scores(rank_papers_with(config, papers, taste, model))
    store.set_state(SCORED_WITH, f"{version} {settings}")
    return version


def last_model(store: Store) -> str | None:
    """The relevance model's version the last digest run (ok or partial) ranked with."""
    runs = [run for status in ("ok", "partial") if (run := store.last_run("publish", status))]
    return (max(runs, key=lambda run: run["id"])["report"] or {}).get("relevance_model") if runs else None


def rank_papers_with(config: Config, papers: Sequence[Paper], taste: Sequence[tuple[str, str]],
                     model: learn.Hybrid | None) -> list[Scored]:
    """The rule, the model and the profile over records: a score, its reasons and topics each."""
    rules = rank.compile_rules(config.relevance)
    exemplars = rank.build_exemplars(taste)
    profile = learn.Profile.compile(config.relevance)
    scored = []
    results = learn.decide_all([(p.title, p.abstract, p.authors) for p in papers],
                               [rank.score(p.title, p.abstract, rules, exemplars) for p in papers],
                               model, profile)
    for paper, result in zip(papers, results, strict=True):
        primary, others = rank.assign_topics(paper.title, paper.abstract, config.topics)
        scored.append(Scored(paper.id, result.value, result.relevant, tuple(result.reasons),
                             primary, tuple(others)))
    return scored


def rescore_candidates(store: Store) -> list[Paper]:
    """Scored papers of the current week not yet in a digest: submitted since the last
    digest ended, or collected since it was made (sent before its end, announced after it:
    Sunday's and Monday's evenings for a Monday digest). Older weeks keep the scores they
    were published or passed over with."""
    since = store.last_digest_end()
    day = since.date() - timedelta(days=2) if since else None  # any two offsets' days are within two
    found = [p for p in store.unlisted_papers(day)
             if since is None or p.submitted is None or p.submitted >= since]
    return list({p.id: p for p in [*found, *store.unlisted_papers(new=True)]}.values())


# --- phase 2: resolve -------------------------------------------------------------------------

def resolve_seeds(config: Config, store: Store, fetcher: Fetcher | None,
                  seeds: list[SeedEntry]) -> list[SeedEntry]:
    """Tie seed entries to arXiv papers (stored titles first, then a title search);
    keep the ties and return the seeds with them."""
    fetch_seed_papers(config, store, fetcher, seeds)
    if all(s.arxiv_id for s in seeds):
        return seeds
    search = None
    if fetcher is not None and config.sources.arxiv.enabled:  # disabled means no call at all
        def search(titles: list[str]) -> list[Paper]:
            return arxiv_api.search_titles(fetcher, config.sources.arxiv.api_url, titles)
    found = collect.resolve_seeds(
        seeds, store.paper_titles(), store_seeds.seed_tries(store), config.seeds.match_threshold, search,
        timedelta(days=config.seeds.resolve_retry_days), datetime.now(UTC))
    if found.papers:
        store.upsert_papers(found.papers)
    if found.tied:
        store_seeds.set_seed_resolutions(store, found.tied, now_iso())
    return found.apply(seeds)


def fetch_seed_papers(config: Config, store: Store, fetcher: Fetcher | None,
                      seeds: list[SeedEntry]) -> None:
    """The papers seed entries name by arxiv_id that no collect brought (older than the
    window), so they show their authors and abstract: one id_list request per batch, one
    arXiv does not return asked again after seeds.resolve_retry_days (shown meanwhile by
    its seed's own text)."""
    if fetcher is None or not config.sources.arxiv.enabled:  # disabled means no call at all
        return
    named = {seed_key(s.title): s.arxiv_id for s in seeds if s.arxiv_id}
    stored = {p.id for p in store.papers(named.values())}
    tries, now = store_seeds.seed_tries(store), datetime.now(UTC)
    wait = timedelta(days=config.seeds.resolve_retry_days)
    wanted = {key: pid for key, pid in named.items() if pid not in stored
              and ((tried := tries.get(key)) is None or now - tried >= wait)}
    if wanted:
        store.upsert_papers(arxiv_api.fetch_ids(fetcher, config.sources.arxiv.api_url, list(wanted.values())))
        store_seeds.set_seed_resolutions(store, wanted, now_iso())  # the try, kept with the id the seed gives


def complete_thin(config: Config, store: Store, fetcher: Fetcher, ids: list[str]) -> list[Paper]:
    """RSS records lack the submission date and comment: one id_list request per batch."""
    if not ids or not config.sources.arxiv.enabled:  # disabled means no call at all
        return []
    papers = arxiv_api.fetch_ids(fetcher, config.sources.arxiv.api_url, ids)
    store.upsert_papers(papers)
    return papers


# --- phase 3: the week ------------------------------------------------------------------------

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
    papers, scores = dict(week.papers), dict(week.scores)
    papers.update((p.id, p) for p in store.papers([pid for *_, pid in rows if pid and pid not in papers]))
    scores.update(store.scores([pid for *_, pid in rows if pid and pid not in scores]))
    return [(day, reading_list.topic_of(config.topics, scores.get(pid), p.title, p.abstract)
             if pid and (p := papers.get(pid)) else topic, n) for day, topic, n, pid in rows]


def grey_band_scores(config: Config, store: Store) -> dict[str, Scored]:
    """The scores grey_band may pick from: those near the threshold of papers in no digest
    (a little wider than the band: grey_band draws the line)."""
    if not config.relevance.llm_judge:
        return {}
    threshold, band = learn.band(config.relevance)
    return store.unlisted_scores(threshold - band - 1e-6, threshold + band + 1e-6)


def grey_band(config: Config, scores: dict[str, Scored], published: set[str]) -> list[str]:
    """Waiting papers whose score is within the grey band of the threshold (the model's, with
    its band, when relevance.model is on), that neither the reader nor the judge decided."""
    rel = config.relevance
    if not rel.llm_judge:
        return []
    threshold, band = learn.band(rel)
    return [pid for pid, s in scores.items()
            if s.score is not None and s.verdict is None and abs(s.score - threshold) <= band
            and paper_key(pid) not in published and not learn.reader_decided(s.reasons)
            and not any(reason.startswith(JUDGED) for reason in s.reasons)]


# --- phase 4: enrich --------------------------------------------------------------------------

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


def _count_enrichment(report: RunReport, enricher: Enricher) -> None:
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


# --- phase 5: compose -------------------------------------------------------------------------

@dataclass(frozen=True)
class Asked:
    """The digest's own LLM replies, asked for before the one-line entries' summaries (what
    a reader reads first gets enrich.max_tokens_per_run first), composed after them."""

    featured: tuple[str, ...]  # entry keys
    question: tuple[str | None, str | None]  # (zh, en)
    english: dict[str, str]  # curated Chinese -> English
    readings: dict[str, dict]  # entry key -> its featured reading
    comparison: dict | None
    highlights: dict | None
    told: tuple[str, ...]  # entry keys: the papers the highlights' numbers point at


def week_entries(config: Config, week: Week, end: datetime) -> tuple[list[Entry], list[Update]]:
    """The digest's entries, by importance, and its Updates: everything relevant not yet in
    a digest; one sent after the window's `end` (collected since, for a digest made by hand
    for an earlier week) is not announced by then and waits for the next digest."""
    later = {paper_key(p.id) for p in week.waiting() if p.submitted and p.submitted > end}
    entries = by_importance(config, week, digest_entries(config, week, week.published | later))
    return entries, compose.updates(week.listed.values(), week.snapshots, week.summaries)


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


def build_digest(config: Config, options: Options, week: Week, documents: list[SeedDocument],
                 asked: Asked | None, credits: list[str], end: datetime) -> Digest | None:
    """The digest of the week's entries, with every summary the run got, and the replies
    `asked` for it; None when there is nothing new. Its window ends where the collect's
    did (`end`: as_of, or the present when as_of is later), so its coverage expects no
    announcement not made yet and the next digest starts there."""
    if week.existing is not None:
        return week.existing
    if asked is None:
        return None
    entries, news = week_entries(config, week, end)
    by_key = {e.key: e for e in entries}
    featured = [by_key[key] for key in asked.featured]
    curated = compose.curated_comparison(featured, documents)
    featured, curated = compose.with_english(featured, curated, asked.english)
    featured = [compose.with_reading(e, asked.readings.get(e.key)) for e in featured]
    takeaways = compose.highlights(asked.highlights, [by_key[key] for key in asked.told])
    llm = any(e.llm for e in entries) or bool(asked.readings) or asked.comparison is not None
    start = week.last_digest_end or options.as_of - timedelta(days=config.sources.arxiv.lookback_days)
    return compose.make_digest(
        digest_id=options.as_of.date().isoformat(), window=(start, end),
        timezone=config.schedule.timezone, entries=entries, featured=featured, topics=config.topics,
        max_papers=config.digest.max_papers, comparison=asked.comparison, curated=curated,
        model=config.enrich.model if llm else None,
        sources=credits, categories=[] if options.offline else config.sources.arxiv.categories,
        updates=news, max_curated=config.digest.max_curated, first=week.first, highlights=takeaways,
        question=asked.question,
        trends=trends.record(week.history, entries, options.as_of.date(), config.topics),
        coverage=None if options.offline or week.ledger is None else coverage_of(
            config, week.ledger, (start, end), entries),
    )


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


def coverage_of(config: Config, ledger: coverage.Ledger, window: tuple[datetime, datetime],
                entries: list[Entry]) -> dict:
    """The header's coverage line: the ledger against the calendar, and what was kept."""
    cal = calendar.load_calendar(config.sources.arxiv.calendar_files)
    found = coverage.summarise(ledger, cal, collect.feed_groups(config), *window)
    relevant = {g.name: sum(1 for e in entries if not e.curated
                            and any(c.split(".")[0] == g.name for c in e.categories))
                for g in found.groups}
    return {**asdict(found), "relevant": relevant}


def _dump(reply: Any) -> dict | None:
    return reply.model_dump(mode="json") if reply is not None else None


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


def summary_line(report: RunReport) -> str:
    day = report.as_of[:10]
    # what did not go is said beside what went: a provider's quota can hold back most of a group
    unsent = ", ".join(f"{count} {what}" for count, what in ((report.pending, "waiting"),
                                                              (report.failed, "failed")) if count)
    line = (f"{day}: fetched {report.fetched}, new {report.new}, relevant {report.relevant} "
            f"({report.seeds} seeds), "
            f"summarised {report.summarised} ({report.cached} cached), sent to {report.sent}"
            f"{f' ({unsent})' if unsent else ''}, {report.elapsed:.1f} s")
    if report.digest is None:  # nothing written: say why rather than leave the reader to look
        line += "; no digest: nothing relevant is waiting for one"
    if report.relevance_refit:  # new verdicts taught the model: say which one ranked this week
        line += f"; relevance model refit: {report.relevance_model}"
    if report.llm_calls or report.llm_failures:
        line += (f"; LLM: {report.llm_calls} calls{requests_note(report.llm_calls, report.llm_requests)}, "
                 f"{report.tokens_in} tokens in, {report.tokens_out} out, {report.llm_failures} failed")
    if report.llm_off:  # said here too: `-q` (cron) prints this line and no warning
        line += f"; LLM off: {report.llm_off}"
    for shared in report.shared:  # another config's database or outputs.dir: said here for `-q` too
        line += f"; {shared}"
    if report.unread:  # so is a reader left out of this digest, which a fixed line does not send
        more = len(report.unread) - 1
        line += f"; not mailed: {report.unread[0]}" + (f" (and {more} more)" if more else "")
    return line
