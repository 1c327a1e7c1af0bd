"""run_digest(): the stages in order, top to bottom.

Each phase reads what it needs from the store once, hands records from stage to
stage, and keeps its results at its end, so a killed run loses at most the phase it
was in and the next run completes it:

1. collect and rank: the seeds and the sources for the window -> kept; new papers scored -> kept
2. resolve: seed entries tied to papers, thin RSS records completed -> kept
3. the week: read once into a `Week` (week.py)
4. enrich: grey-band judgements -> kept; summaries and translations -> cached as each arrives,
   and the digest's own calls, in the order a reader reads (ask.py)
5. compose the digest; publish it (files, digest and outbox rows, channels, git)

A failed source stops the run before anything is published, so the watermark stays.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from typing import Any

from pipeline import (
    ask,
    calendar,
    collect,
    compose,
    coverage,
    decide,
    learn,
    rank,
    sources,
    store_seeds,
    trends,
)
from pipeline.config import Config
from pipeline.deliver import files
from pipeline.errors import ConfigError
from pipeline.models import (
    Digest,
    Entry,
    Options,
    Paper,
    RunReport,
    Scored,
    SeedDocument,
    SeedEntry,
    requests_note,
    seed_key,
)
from pipeline.publish import publish
from pipeline.sources import CALENDAR, Source, SourceReport, SourceSetup, arxiv_api
from pipeline.sources.http import Fetcher
from pipeline.sources.seeds import all_read, in_reading_order, same_paper, seed_source
from pipeline.stopping import Stopped, checkpoint
from pipeline.store import Store
from pipeline.store_schema import now_iso
from pipeline.week import Week, load_week, unlisted_this_week, week_entries

log = logging.getLogger(__name__)

MEMORY = "source:"  # state key prefix: what each source keeps from one window to the next
SCORED_WITH = "relevance_scored_with"  # state key: the model and settings the waiting papers were scored with
ARXIV_BEGAN = datetime(1991, 8, 14, tzinfo=UTC)


def parse_as_of(value: str | None, config: Config, option: str = "--as-of",
                why: str = "a digest can only be made for the past or the present") -> datetime:
    """An ISO date means the end of that day in schedule.timezone; default: now there. A
    datetime with another offset is the same moment there: the digest id is its date in
    schedule.timezone, the date the window ends on.

    More than a day ahead is refused: a window reaching into the future would move the
    watermark past the present, and every later run would miss what arrives meanwhile;
    `why` says so in the words of the command refused.
    """
    now = datetime.now(config.zone).replace(microsecond=0)
    if not value:
        return now
    moment = read_moment(value, config, option, dtime(23, 59, 59))
    ahead = now + timedelta(days=1)
    if (moment.date() > ahead.date()) if iso_date(value) else moment > ahead:  # tomorrow's date is fine
        raise ConfigError(f"{option}: {value} is more than a day ahead of now ({now:%Y-%m-%d %H:%M})", why)
    return moment


def read_moment(value: str, config: Config, option: str, time_of_day: dtime) -> datetime:
    """`value`, an ISO date (at `time_of_day`) or datetime, in schedule.timezone; not before arXiv."""
    zone = config.zone
    day = iso_date(value)
    try:
        if day is not None:
            moment = datetime.combine(day, time_of_day, zone)
        else:
            moment = datetime.fromisoformat(value)
            moment = moment.astimezone(zone) if moment.tzinfo else moment.replace(tzinfo=zone)
    except ValueError:
        raise ConfigError(f"{option}: not an ISO date or datetime: {value!r}",
                          "write it as YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
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
    enricher = ask.make_enricher(config, store, options, report)
    try:
        judged = ask.judge_grey_band(config, week, enricher)
        if judged:
            store.set_scores(judged)
        # under enrich.max_tokens_per_run the budget goes to what a reader reads first: the
        # entries shown in full, the digest's own calls, then the one-line entries and the rest
        ask.summarise(config, week, enricher, report, full=True)
        checkpoint()
        asked = ask.ask_for_digest(
            config, week, collected.documents, enricher, collected.window[1],
            read=None if online is None else lambda e: ask.full_text(config, store, online, e))
        ask.summarise(config, week, enricher, report, full=False)
        checkpoint()
        credits = sources.credits(config, used, options.offline)
        digest = build_digest(config, options, week, collected.documents, asked, credits, collected.window[1])
        ask.count_enrichment(report, enricher)
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
        papers = list({p.id: p for p in papers + unlisted_this_week(store)}.values())
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
    profile = decide.Profile.compile(config.relevance)
    scored = []
    results = decide.decide_all([(p.title, p.abstract, p.authors) for p in papers],
                               [rank.score(p.title, p.abstract, rules, exemplars) for p in papers],
                               model, profile)
    for paper, result in zip(papers, results, strict=True):
        primary, others = rank.assign_topics(paper.title, paper.abstract, config.topics)
        scored.append(Scored(paper.id, result.value, result.relevant, tuple(result.reasons),
                             primary, tuple(others)))
    return scored


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


# --- phase 5: compose -------------------------------------------------------------------------

def build_digest(config: Config, options: Options, week: Week, documents: list[SeedDocument],
                 asked: ask.Asked | None, credits: list[str], end: datetime) -> Digest | None:
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
        question=asked.question, languages=config.languages,
        trends=trends.record(week.history, entries, options.as_of.date(), config.topics),
        coverage=None if options.offline or week.ledger is None else coverage_of(
            config, week.ledger, (start, end), entries),
    )


def coverage_of(config: Config, ledger: coverage.Ledger, window: tuple[datetime, datetime],
                entries: list[Entry]) -> dict[str, Any]:
    """The header's coverage line: the ledger against the calendar, and what was kept."""
    cal = calendar.load_calendar(config.sources.arxiv.calendar_files)
    found = coverage.summarise(ledger, cal, collect.feed_groups(config), *window)
    relevant = {g.name: sum(1 for e in entries if not e.curated
                            and any(c.split(".")[0] == g.name for c in e.categories))
                for g in found.groups}
    return {**asdict(found), "relevant": relevant}


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
