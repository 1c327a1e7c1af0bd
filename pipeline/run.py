"""run_digest(): the stages in order, top to bottom.

Phase one builds the context (seeds, collect, rank, enrich, compose); phase two
writes it (files, database, outbox, email, git). A failed source stops the run
before anything is published, so the watermark stays where it was.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import date, datetime, time as dtime, timedelta
from pathlib import Path

from pipeline import compose, rank, render
from pipeline.config import Config, bundled
from pipeline.deliver.files import write_atomic
from pipeline.models import Digest, Entry, RunReport, SeedDocument, SeedEntry
from pipeline.sources.seeds import load_seeds
from pipeline.store import Store, paper_key, row_to_seed, seed_key

log = logging.getLogger(__name__)


@dataclass
class Options:
    as_of: datetime
    offline: bool = False
    dry_run: bool = False
    no_email: bool = False


def parse_as_of(value: str | None, config: Config) -> datetime:
    """An ISO date means the end of that day in schedule.timezone; default: now there."""
    zone = config.zone
    if not value:
        return datetime.now(zone).replace(microsecond=0)
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), dtime(23, 59, 59), zone)
        moment = datetime.fromisoformat(value)
    except ValueError:
        from pipeline.errors import ConfigError

        raise ConfigError(f"--as-of: not an ISO date or datetime: {value!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=zone)


def seed_documents(config: Config) -> list[SeedDocument]:
    """The user's seed paths, plus the built-in pages unless a file of that name is there."""
    documents = load_seeds(list(config.seeds.paths))
    if config.seeds.builtin:
        have = {doc.source for doc in documents}
        builtin = [doc for doc in load_seeds([bundled("seeds")]) if doc.source not in have]
        documents = builtin + documents
    return documents


def run_digest(config: Config, store: Store, options: Options) -> RunReport:
    started = time.monotonic()
    report = RunReport(as_of=options.as_of.isoformat())
    documents = seed_documents(config)
    entries = [e for doc in documents for e in doc.entries]
    report.warnings += [str(w) for doc in documents for w in doc.warnings]
    if not options.dry_run:
        store.save_seeds(entries)
    # Collecting and enrichment arrive with their issues; the offline cycle uses seeds only.
    digest = build_digest(config, store, options, entries, documents)
    write_outputs(config, store, options, digest, report)
    report.seeds = digest.seeds if digest else 0
    report.relevant = sum(len(s.entries) for s in digest.sections) + len(digest.featured) if digest else 0
    report.elapsed = time.monotonic() - started
    return report


def build_digest(config: Config, store: Store, options: Options, seeds: list[SeedEntry],
                 documents: list[SeedDocument]) -> Digest | None:
    """Everything relevant not yet in a digest; None when there is nothing new."""
    digest_id = options.as_of.date().isoformat()
    existing = store.digest(digest_id)
    if existing is not None:
        return compose.digest_from_dict(existing["data"])
    published = store.published_keys()
    fresh = [s for s in seeds if seed_key(s.title) not in published]
    entries = [compose.seed_entry(s, _topic(config, s.title, s.summary_zh or "")) for s in fresh]
    if not entries:
        return None
    featured = rank.choose_featured(
        entries, config.digest.featured,
        topic=lambda e: e.topic, score=lambda e: e.score or 0.0,
        forced=[e for e, s in zip(entries, fresh) if s.featured],
    )
    last = store.last_run("publish", "ok")
    start = datetime.fromisoformat(last["as_of"]) if last else options.as_of - timedelta(
        days=config.sources.arxiv.lookback_days)
    return compose.make_digest(
        digest_id=digest_id, window=(start, options.as_of), timezone=config.schedule.timezone,
        entries=entries, featured=featured, topics=config.topics,
        max_papers=config.digest.max_papers, comparison=None,
        curated=compose.curated_comparison(featured, documents), model=None,
        sources=["seeds"], categories=[],
    )


def _topic(config: Config, title: str, text: str) -> str:
    primary, _ = rank.assign_topics(title, text, config.topics)
    return primary


def write_outputs(config: Config, store: Store, options: Options, digest: Digest | None,
                  report: RunReport) -> None:
    out = config.outputs.dir
    env = render.text_env(config.templates.dir)
    reading = reading_list_entries(config, store)
    common = dict(topic=config.topic, languages=config.languages,
                  topic_names={t.key: f"{t.name.zh} · {t.name.en}" for t in config.topics})
    if digest is not None:
        text = env.get_template("digest.md.j2").render(
            d=digest, reading_list_count=len(reading),
            reading_list_url="../READING_LIST.md",
            unsubscribe_url=config.email.unsubscribe_url, **common)
        path = out / "digests" / f"{digest.id}.md"
        if options.dry_run:
            print(text)
        else:
            write_atomic(path, text)
            report.files.append(str(path))
            if store.digest(digest.id) is None:
                store.save_digest(digest.id, (datetime.fromisoformat(digest.window_start),
                                              datetime.fromisoformat(digest.window_end)),
                                  compose.digest_to_dict(digest), _items(digest), [])
        report.digest = digest.id
    sections = compose.sections(reading, config.topics)
    text = env.get_template("reading_list.md.j2").render(
        sections=[{"topic": s.topic, "name_zh": s.name_zh, "name_en": s.name_en,
                   "count": len(s.entries), "entries": s.entries} for s in sections],
        total=len(reading), updated=options.as_of.date().isoformat(), **common)
    if not options.dry_run:
        path = write_atomic(out / "READING_LIST.md", text)
        report.files.append(str(path))


def _items(digest: Digest) -> list[tuple[str, bool]]:
    shown = [(e.key, True) for s in digest.sections for e in s.entries]
    return shown + [(e.key, True) for e in digest.featured]


def reading_list_entries(config: Config, store: Store) -> list[Entry]:
    """Every relevant paper and seed entry so far."""
    entries = []
    for row in store.seed_rows():
        seed = row_to_seed(row)
        entries.append(compose.seed_entry(seed, _topic(config, seed.title, seed.summary_zh or "")))
    return entries


def summary_line(report: RunReport) -> str:
    day = report.as_of[:10]
    return (f"{day}: fetched {report.fetched}, relevant {report.relevant} ({report.seeds} seeds), "
            f"summarised {report.summarised} ({report.cached} cached), sent to {report.sent}, "
            f"{report.elapsed:.1f} s")
