"""The reading list, streamed from the store to the files that show it.

Its entries are the digest's Entry records, read a batch at a time in one stable order
(newest day first, ties by key), so memory stays flat at any size. One pass over them
feeds every writer (a `Sink`): the Markdown files (reading_list_markdown.py) and the web
edition's papers (site_papers.py), a month rendered again only when it changed since
the last build (months.py).
"""

from __future__ import annotations

import gc
import heapq
import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from datetime import date
from functools import partial
from itertools import groupby, islice
from pathlib import Path
from typing import Any, Protocol

from pipeline import compose, months, rank, render, store_reading_list, store_seeds
from pipeline.config import Config
from pipeline.config_sections import TopicDef
from pipeline.models import Entry, Moved, Paper, Scored, SeedEntry, paper_key, seed_key
from pipeline.reading_list_markdown import Markdown
from pipeline.sources.seeds import shown
from pipeline.store import Store

log = logging.getLogger(__name__)

SPLIT = 10_000  # entries a full build renders from which a helper process takes the older months
SHARE = 0.52  # of the entries, the helper's: a little more than half, as the build then replays them


# --- the entries -------------------------------------------------------------------------

def topic_of(topics: Sequence[TopicDef], scored: Scored | None, title: str, text: str) -> str:
    """The topic rank gave a paper while the config still has it (a topic renamed or removed
    since: the one its words point to now), else the one its words point to."""
    kept = scored.topic if scored and any(t.key == scored.topic for t in topics) else None
    return kept or rank.assign_topics(title, text, topics)[0]


def paper_entry(topics: Sequence[TopicDef], paper: Paper, scored: Scored | None,
                summary: dict[str, Any] | None, seed: SeedEntry | None,
                translations: Mapping[str, dict[str, Any]]) -> Entry:
    """A paper as an entry, with the curated words of the seed entry tied to it."""
    return compose.paper_entry(paper, topic_of(topics, scored, paper.title, paper.abstract),
                               scored.score if scored else None, summary, seed,
                               translations.get(seed_key(seed.title)) if seed else None)


def seed_entry(topics: Sequence[TopicDef], seed: SeedEntry,
               translations: Mapping[str, dict[str, Any]]) -> Entry:
    """A seed entry not tied to a paper."""
    return compose.seed_entry(seed, topic_of(topics, None, seed.title, seed.summary_zh or ""),
                              translations.get(seed_key(seed.title)))


def untied(store: Store, seeds: Sequence[SeedEntry]) -> list[SeedEntry]:
    """The seed entries shown by their own text: tied to no paper, or to one arXiv never
    returned (its arxiv_id names no stored paper), which they do not wait for; the digest
    (week.digest_entries) and store_reading_list.reading_count go by the same rule."""
    stored = {p.id for p in store.papers(s.arxiv_id for s in seeds if s.arxiv_id)}
    return [s for s in shown(seeds) if s.arxiv_id not in stored]


def order(entry: Entry) -> tuple[Any, ...]:
    """Newest day first, undated last, ties by key: the one order of every list."""
    day = date.fromisoformat(entry.date).toordinal() if entry.date else 0
    return (not entry.date, -day, entry.key)


def month_of(entry: Entry) -> str:
    """YYYY-MM, or "" for an undated entry."""
    return (entry.date or "")[:7]


def entries(config: Config, store: Store, batch: int = 500, skip: Collection[str] = (),
            only: Collection[str] | None = None) -> Iterator[Entry]:
    """Every relevant paper and seed entry so far, in `order`, read `batch` papers at a
    time; those of the months in `skip` (YYYY-MM) left out, or all but those of `only`."""
    seeds = store_seeds.all_seeds(store)
    by_paper = {s.arxiv_id: s for s in seeds if s.arxiv_id}
    translations = store.latest_enrichments("seed_translation")

    def papers() -> Iterator[Entry]:
        for rows in store_reading_list.reading_rows(store, batch, skip, only):
            for paper, scored, summary in rows:
                yield paper_entry(config.topics, paper, scored, summary, by_paper.get(paper.id),
                                  translations)

    alone = sorted((seed_entry(config.topics, s, translations) for s in untied(store, seeds)), key=order)
    return (entry for entry in heapq.merge(papers(), alone, key=order)
            if month_of(entry) not in skip and (only is None or month_of(entry) in only))


def tied(config: Config, store: Store) -> dict[str, Moved]:
    """Entries an old digest links under a key, topic or date they no longer have: a seed entry
    shown under its title before its paper was found (the seed's key) or whose file now
    gives it another date or words (another topic), a listed paper whose
    topic the config no longer has (renamed or removed) -> the key, topic and date its entry
    has now, so an old digest's link still finds it, and that old topic (its page says
    where its papers went)."""
    scores, keys, published = store.scores(), {t.key for t in config.topics}, store.published_keys()
    gone = [pid for pid, s in scores.items() if s.topic not in keys and paper_key(pid) in published]
    seeds = store_seeds.all_seeds(store)
    old = {paper_key(pid): pid for pid in gone}
    old.update({seed_key(s.title): s.arxiv_id for s in seeds if s.arxiv_id})
    by_paper = {s.arxiv_id: s for s in seeds if s.arxiv_id}  # the seed its entry shows, as `entries` reads it
    found = {p.id: p for p in store.papers(set(old.values()))}
    moved = {key: Moved(paper_key(p.id), topic_of(config.topics, scores.get(p.id), p.title, p.abstract),
                        compose.entry_date(p, by_paper.get(p.id)),
                        scores[pid].topic if key == paper_key(pid) else None)  # a seed's key: no old topic
             for key, pid in old.items() if (p := found.get(pid))}
    # a shown seed entry by its own text, where its date and words (its topic) put it now; one
    # whose paper another entry names (arXiv never returned it), where that entry is
    alone = untied(store, seeds)
    shown = {seed_key(s.title): seed_entry(config.topics, s if s in alone else by_paper[s.arxiv_id or ""], {})
             for s in seeds if seed_key(s.title) in published and (s in alone or s.arxiv_id not in found)}
    moved.update((key, Moved(entry.key, entry.topic, entry.date, None)) for key, entry in shown.items())
    return moved


def fingerprints(config: Config, store: Store, sinks: Sequence[Sink]) -> months.Fingerprints:
    """Each month's fingerprint: its papers' stored rows, their seed entries and what else
    the sinks show of them (the digest that listed a paper), read without building entries."""
    seeds = store_seeds.all_seeds(store)
    by_paper = {s.arxiv_id: s for s in seeds if s.arxiv_id}
    translations = store.latest_enrichments("seed_translation")
    found = months.Fingerprints()
    for pid, day, row in store_reading_list.reading_makings(store):
        seed, key = by_paper.get(pid), paper_key(pid)
        month = (day or (seed.date.isoformat() if seed and seed.date else ""))[:7]
        found.add(month, b"\x00".join(b"\x01" if value is None else value for value in row),
                  seed, translations.get(seed_key(seed.title)) if seed else None,
                  [sink.about(key) for sink in sinks])
    for seed in untied(store, seeds):
        entry = seed_entry(config.topics, seed, translations)
        found.add(month_of(entry), repr(entry).encode(), [sink.about(entry.key) for sink in sinks])
    return found


def count(store: Store) -> int:
    """How many entries the reading list holds, counted by the database."""
    return store_reading_list.reading_count(store)


# --- the one pass over them ------------------------------------------------------------------

def batches(found: Iterable[Entry], size: int = 500) -> Iterator[list[Entry]]:
    """The entries `size` at a time: one template call renders a batch."""
    it = iter(found)
    while batch := list(islice(it, size)):
        yield batch


def write_markdown(settings: render.Settings, topics: Sequence[TopicDef], found: Iterable[Entry],
                   out: Path, updated: str) -> dict[str, Path]:
    """READING_LIST.md and the files of reading-list/ from entries in `order`."""
    with Markdown(settings, topics, out, updated) as markdown:
        for batch in batches(found):
            markdown.add(batch)
        return markdown.close()


class Sink(Protocol):
    """A writer the one pass over the store feeds (Markdown, site_papers.Papers): entries in
    `order`, a batch at a time, or a month as the last build rendered it, then close."""

    leading: int  # how many of the newest entries it needs as entries (never replayed)

    def key(self) -> object:
        """Its settings: a change renders every month again."""

    def about(self, key: str) -> object:
        """What else its pages show of an entry (the digest that listed it): in the fingerprint."""

    def add(self, batch: Sequence[Entry]) -> None: ...

    def cut(self) -> tuple[object, Any]:
        """(byte ranges in its files, small pieces) of the month since the last cut."""

    def replay(self, ranges: Any, pieces: Any, last: months.Ledger, note: Any) -> None:
        """A month again from what `cut` gave the last build; `last.read(name, start, end)`
        reads that build's files, `last.place(path)` keeps one as it is, `note` is what
        its `note` said."""

    def elsewhere(self, out: Path, folder: Path) -> Any:
        """The same writer, with `folder` in place of outputs.dir `out` (a helper's), to
        use as a context manager."""

    def close(self) -> object: ...

    def sources(self) -> list[Path]:
        """The files its byte ranges point into, once closed."""

    def note(self) -> object:
        """What the next build needs to read those files (where a page's entries begin)."""


def publish(config: Config, store: Store, updated: str, also: Sequence[Sink] = (),
            split: int = SPLIT) -> dict[str, Path]:
    """The reading list from the store into outputs.dir, in one streamed pass that also
    feeds `also` (the web edition's papers) the same entries: each is built once, and
    only in the months that changed since the last build (pipeline/months.py); the
    others are replayed from what that build wrote. A build that renders every month, of
    `split` entries or more, leaves the older months to a helper process."""
    with Markdown(render.Settings.of(config), config.topics, config.outputs.dir, updated) as markdown:
        with _frozen():
            _build(config, store, config.outputs.dir, [markdown, *also], split=split)
        return markdown.written


@contextmanager
def _frozen() -> Iterator[None]:
    """Leave what is alive when the build starts (the modules, the sinks) out of garbage
    collection while it runs: collecting them again and again took a tenth of a
    100,000-paper build, and would copy every page a helper process shares with this one."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _build(config: Config, store: Store, out: Path, sinks: Sequence[Sink], split: int = 0,
           only: Collection[str] | None = None) -> None:
    """Feed the sinks every month (or `only` those, for a helper) and close them; save the
    ledger. Without a last build to replay from, and with `split` entries or more, a
    helper process renders the older months meanwhile (started before the fingerprints
    are read: it needs none, the ledger that adopts its months keeps this build's)."""
    ledger = months.Ledger(out, months.inputs([sink.key() for sink in sinks], config.templates.dir))
    leading = max(s.leading for s in sinks)
    with ExitStack() as stack:
        helped = set() if only is not None else _helped(store, ledger, leading, split)
        if helped:
            log.info("a second process renders %s to %s", min(helped), max(helped))
            helper = stack.enter_context(months.Helper(out, partial(_help, config, store, sinks, helped)))
        if only is None:
            found = fingerprints(config, store, sinks)
            prints = found.of()
            replayed = (ledger.reusable(prints) - _leading(found.counts, leading)) | helped
        else:
            prints, replayed = {}, set()
        fresh = groupby(entries(config, store, skip=replayed, only=only), key=month_of)
        for month, group in months.merged(fresh, replayed):
            if group is None:
                if month in helped and ledger.source is None:
                    ledger.adopt(helper.join())
                for sink, ranges, pieces, note in zip(sinks, ledger.ranges(month), ledger.pieces(month),
                                                      ledger.notes(), strict=True):
                    sink.replay(ranges, pieces, ledger, note)
            else:
                for batch in batches(group):
                    for sink in sinks:
                        sink.add(batch)
            cuts = [sink.cut() for sink in sinks]
            ledger.keep(month, prints.get(month, ""), [ranges for ranges, _ in cuts],
                        None if group is None else [pieces for _, pieces in cuts])
        for sink in sinks:
            sink.close()
        ledger.save(sinks)


def _help(config: Config, store: Store, sinks: Sequence[Sink], helped: set[str], folder: Path) -> None:
    """The helper process's build: the months `helped`, into `folder` as its outputs.dir."""
    store.engine.dispose(close=False)  # the parent's connections stay the parent's
    with ExitStack() as stack:
        moved = [stack.enter_context(sink.elsewhere(config.outputs.dir, folder)) for sink in sinks]
        _build(config, store, folder, moved, only=helped)


def _helped(store: Store, ledger: months.Ledger, leading: int, split: int) -> set[str]:
    """A helper's months: on a first build of `split` or more entries, the oldest dated, not the newest."""
    if ledger.last or split <= 0 or not months.Helper.usable():
        return set()
    counts = store_reading_list.reading_months(store)
    if sum(counts.values()) < split:
        return set()
    found, seen, total, newest = set(), 0, sum(counts.values()), _leading(counts, leading)
    for month in reversed(months.order(counts)):
        if not month:
            continue
        if month in newest or seen + counts[month] > total * SHARE:
            break
        found.add(month)
        seen += counts[month]
    return found


def _leading(counts: Mapping[str, int], leading: int) -> set[str]:
    """The newest months that hold the first `leading` entries."""
    found, seen = set(), 0
    for month in months.order(counts):
        if seen >= leading:
            break
        found.add(month)
        seen += counts[month]
    return found
