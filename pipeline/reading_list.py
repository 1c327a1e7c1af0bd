"""The reading list, streamed from the store and written as small Markdown files.

Its entries are the digest's Entry records, read a batch at a time in one stable order
(newest day first, ties by key), so memory stays flat at any size. The Markdown is an
index (`READING_LIST.md`: per topic its count and newest entries, or every entry while the
whole list fits in one file) beside
`reading-list/<topic>.md` and `reading-list/<YYYY-MM>.md`, one table row per paper. A
topic file that would pass LIMIT is split by year (a year that would still pass it, by
month). Rows are spooled to a temporary file per topic while the months, which the
order keeps together, are written as they complete. A file is rewritten only when its
bytes change, so a weekly run touches the files that gained or changed a paper.
"""

from __future__ import annotations

import gc
import heapq
import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import date
from functools import partial
from itertools import groupby, islice
from pathlib import Path
from typing import IO, Any, Protocol

from pipeline import compose, months, rank, render, store_reading_list, store_seeds, templating
from pipeline.config import Config
from pipeline.config_sections import TopicDef
from pipeline.deliver import files
from pipeline.deliver.files import spool_folder, write_if_changed
from pipeline.models import Entry, Moved, Paper, Scored, SeedEntry, paper_key, seed_key
from pipeline.sources.seeds import shown
from pipeline.store import Store

log = logging.getLogger(__name__)

LIMIT = 500_000  # bytes per file: GitHub stops rendering long Markdown files, diffs get unreadable
ROOM = 8_000  # of LIMIT, kept for a file's heading, table header and links
NEWEST = 20  # entries per topic in the index
SPLIT = 10_000  # entries a full build renders from which a helper process takes the older months
SHARE = 0.52  # of the entries, the helper's: a little more than half, as the build then replays them
FOLDER = "reading-list"
TOPIC_CELL = "\x1f"  # around the topic cell of a rendered row (reading_list/rows.md.j2)


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


# --- the Markdown files ----------------------------------------------------------------------

@dataclass
class _Part:
    """A stretch of a topic's spooled rows (newest first): a year, or a day."""

    start: int
    end: int = 0
    count: int = 0

    def __add__(self, other: _Part) -> _Part:  # two adjacent stretches, either order
        return _Part(min(self.start, other.start), max(self.end, other.end), self.count + other.count)


def packs(days: list[tuple[str, _Part]]) -> list[tuple[str, _Part]]:
    """Days (oldest first) packed into files that stay under LIMIT: (first…last day, rows).
    A day joins the newest pack while it fits, so older packs never change."""
    found: list[tuple[str, str, _Part]] = []
    for day, part in days:
        if found and (found[-1][2] + part).end - (found[-1][2] + part).start <= LIMIT - ROOM:
            first, _, held = found[-1]
            found[-1] = (first, day, held + part)
        else:
            found.append((day, day, part))
    return [(first if first == last else f"{first}…{last}", part) for first, last, part in found]


@dataclass
class _Topic:
    spool: IO[bytes]
    count: int = 0
    newest: list[str] = field(default_factory=list)
    years: dict[str, _Part] = field(default_factory=dict)
    days: dict[str, _Part] = field(default_factory=dict)
    since: int = 0  # where the rows since the last cut begin in the spool
    recent: list[list[Any]] = field(default_factory=list)  # [day, rows, bytes] of those rows

    def add(self, day: str | None, row: str) -> None:
        data = (row + "\n").encode("utf-8")
        self._place(self.spool.tell(), day, 1, len(data))
        self.spool.write(data)
        self.count += 1
        if len(self.newest) < NEWEST:
            self.newest.append(row)
        if not self.recent or self.recent[-1][0] != day:
            self.recent.append([day, 0, 0])
        self.recent[-1][1] += 1
        self.recent[-1][2] += len(data)

    def _place(self, at: int, day: str | None, count: int, size: int) -> None:
        for parts, key in ((self.years, (day or "undated")[:4]), (self.days, day or "undated")):
            part = parts.setdefault(key, _Part(at))
            part.end, part.count = at + size, part.count + count

    def cut(self) -> list[Any] | None:
        """[rows, [[day, rows, bytes], ...]]: the rows added since the last cut, to `replay`."""
        if not self.recent:
            return None
        self.spool.seek(self.since)
        found = [self.spool.read().decode("utf-8"), self.recent]
        self.since, self.recent = self.spool.tell(), []
        return found

    def replay(self, text: str, days: list[list[Any]]) -> None:
        """Rows a cut gave the last build, a day at a time."""
        at = self.spool.seek(0, 2)
        for day, count, size in days:
            self._place(at, day, count, size)
            at += size
        self.spool.write(text.encode("utf-8"))
        self.count += sum(count for _, count, _ in days)
        if len(self.newest) < NEWEST:
            self.newest += text.splitlines()[:NEWEST - len(self.newest)]
        self.since = self.spool.tell()

    def rows(self, part: _Part) -> list[str]:
        self.spool.flush()
        self.spool.seek(part.start)
        text = self.spool.read(part.end - part.start).decode("utf-8")
        self.spool.seek(0, 2)
        return text.splitlines()

    def size(self) -> int:
        """Bytes of its rows."""
        return self.spool.seek(0, 2)

    def files(self, slug: str) -> list[tuple[str, str, _Part]]:
        """(file name, period, rows): one file, else one per year, a year too big for one
        in packs of days (numbered from its oldest, so they stay as they are)."""
        whole = _Part(0, self.size(), self.count)
        if whole.end <= LIMIT - ROOM:
            return [(f"{slug}.md", "", whole)]
        found = []
        for year, part in self.years.items():
            if part.end - part.start <= LIMIT - ROOM:
                found.append((f"{slug}-{year}.md", year, part))
                continue
            days = sorted((d, p) for d, p in self.days.items() if d[:4] == year)
            found += reversed([(f"{slug}-{year}-{n}.md", period, sub)
                               for n, (period, sub) in enumerate(packs(days), 1)])
        return found


class Rows:
    """Table rows rendered by the templates, a batch of entries per call."""

    def __init__(self, settings: render.Settings):
        self.settings, self.env = settings, templating.text_env(settings.templates)
        self.context = render.common(settings)
        self.template = self.env.get_template("reading_list/rows.md.j2")

    def rows(self, found: Sequence[Entry]) -> list[str]:
        """A row per entry, its topic cell between two TOPIC_CELL characters (see `split`)."""
        return self.template.render(entries=found, **self.context).splitlines()

    @staticmethod
    def split(line: str) -> tuple[str, str]:
        """(row of a topic's file, row of a month's file, which adds the topic)."""
        before, topic, after = line.split(TOPIC_CELL)
        return before + after, before + topic + after

    def page(self, template: str, **values: Any) -> str:
        return self.env.get_template(template).render(**values, **self.context)


class Markdown:
    """READING_LIST.md and the files of reading-list/, fed entries in `order` a batch at a
    time (the one pass over the store feeds the web edition the same batches), or a
    month as the last build rendered it (`replay`: its topics' rows, its month files kept
    as they are). Months are written as they complete; topics are spooled to a temporary
    folder and written by `close`. Use as a context manager: the spools go when the
    block ends."""

    leading = 0  # every row can be replayed

    def __init__(self, settings: render.Settings, topics: Sequence[TopicDef], out: Path, updated: str):
        self.rows, self.topics, self.out, self.updated = Rows(settings), topics, out, updated
        self.tmp = spool_folder("rl-digest-reading-")
        self.written: dict[str, Path] = {}
        self.state: dict[str, _Topic] = {}
        self.months: list[dict[str, Any]] = []
        self.month: list[tuple[str, str]] = []  # (day, row) of the month being read
        self.current, self.total = "", 0
        self.recent = 0  # entries since the last cut

    def __enter__(self) -> Markdown:
        return self

    def __exit__(self, *exc: object) -> None:
        for topic in self.state.values():
            topic.spool.close()
        self.tmp.cleanup()

    def key(self) -> object:
        return ("markdown", self.rows.settings, list(self.topics))

    def elsewhere(self, out: Path, folder: Path) -> Markdown:
        return Markdown(self.rows.settings, self.topics, folder, self.updated)

    def about(self, key: str) -> object:
        return None

    def add(self, batch: Sequence[Entry]) -> None:
        for entry, line in zip(batch, self.rows.rows(batch), strict=True):
            self._place(entry.date, entry.topic, line)

    def cut(self) -> tuple[object, dict[str, Any]]:
        """The month just added, its files written: no byte ranges; its entry count, its
        files as the index lists them, and each topic's rows with each day's count and size."""
        month = self._close_month()
        topics = {key: found for key, topic in self.state.items() if (found := topic.cut())}
        count, self.recent = self.recent, 0
        return None, {"count": count, "month": month, "topics": topics}

    def replay(self, ranges: object, pieces: dict[str, Any], last: months.Ledger, note: object) -> None:
        self.total += pieces["count"]
        if pieces["month"]:
            self.months.append(pieces["month"])
            for file in pieces["month"]["files"]:
                self.written[file["href"]] = self.out / file["href"]
                last.place(self.out / file["href"])
        for key, (text, days) in pieces["topics"].items():
            self._topic(key).replay(text, days)

    def _place(self, day: str | None, key: str, line: str) -> None:
        row, month_row = self.rows.split(line)
        self.total += 1
        self.recent += 1
        if day:
            if self.month and day[:7] != self.current:
                self._close_month()
            self.current = day[:7]
            self.month.append((day, month_row))
        self._topic(key).add(day, row)

    def _topic(self, key: str) -> _Topic:
        topic = self.state.get(key)
        if topic is None:
            spool = files.spool(Path(self.tmp.name, f"{len(self.state)}.rows"))  # closed on exit
            topic = self.state[key] = _Topic(spool)
        return topic

    def sources(self) -> list[Path]:
        """The month files, which a replayed month keeps as the last build wrote them."""
        return [self.out / f["href"] for month in self.months for f in month["files"]]

    def note(self) -> object:
        return None

    def _close_month(self) -> dict[str, Any] | None:
        """Write the month's files; its line of the index."""
        if not self.month:
            return None
        files = []
        for file, period, held in _month_files(self.current, self.month):
            files.append({"href": f"{FOLDER}/{file}", "period": period, "count": len(held)})
            _write(self.out, f"{FOLDER}/{file}", self.written, self.rows.page(
                "reading_list/file.md.j2", name=None, heading=period, rows=held, with_topic=True))
        self.months.append({"month": self.current, "count": len(self.month), "files": files})
        self.month.clear()
        return self.months[-1]

    def close(self) -> dict[str, Path]:
        """Write what is left; {name under out: path} of every file the reading list now has (for git)."""
        self._close_month()
        every = sum(topic.size() for topic in self.state.values()) <= LIMIT - ROOM
        sections = [_topic_files(self.rows, self.out, self.written, key, self.state[key], self.topics, every)
                    for key in in_order(self.state, self.topics)]
        _write(self.out, "READING_LIST.md", self.written, self.rows.page(
            "reading_list.md.j2", sections=sections, total=self.total, updated=str(self.updated),
            months=self.months, newest=NEWEST, limit_kb=LIMIT // 1000))
        _remove_stale(self.out / FOLDER, self.written)
        return self.written


def write_markdown(settings: render.Settings, topics: Sequence[TopicDef], found: Iterable[Entry],
                   out: Path, updated: str) -> dict[str, Path]:
    """READING_LIST.md and the files of reading-list/ from entries in `order`."""
    with Markdown(settings, topics, out, updated) as markdown:
        for batch in batches(found):
            markdown.add(batch)
        return markdown.close()


def _month_files(name: str, month: list[tuple[str, str]]) -> list[tuple[str, str, list[str]]]:
    """(file name, period, rows): the month in one file, or in packs of days if too big."""
    at, offsets = 0, []
    days: dict[str, _Part] = {}
    for day, row in month:  # newest first, as the spool of a topic
        size = len(row.encode("utf-8")) + 1
        part = days.setdefault(day, _Part(at))
        part.end, part.count = at + size, part.count + 1
        offsets.append(at)
        at += size
    if at <= LIMIT - ROOM:
        return [(f"{name}.md", name, [row for _, row in month])]
    placed = list(zip(offsets, (row for _, row in month), strict=True))
    return list(reversed([(f"{name}-{n}.md", period, [row for o, row in placed if part.start <= o < part.end])
                          for n, (period, part) in enumerate(packs(sorted(days.items())), 1)]))


def batches(found: Iterable[Entry], size: int = 500) -> Iterator[list[Entry]]:
    """The entries `size` at a time: one template call renders a batch."""
    it = iter(found)
    while batch := list(islice(it, size)):
        yield batch


def in_order(found: Iterable[str], topics: Sequence[TopicDef]) -> list[str]:
    """Topic keys in the taxonomy's order, then those it no longer names."""
    have, known = set(found), [t.key for t in topics]
    return [key for key in known if key in have] + sorted(have - set(known))


def _topic_files(rows: Rows, out: Path, written: dict[str, Path], key: str, topic: _Topic,
                 topics: Sequence[TopicDef], every: bool) -> dict[str, Any]:
    """Write a topic's file (or its files by year); return its section of the index, with
    every row of the topic when `every` (the whole list fits in one file), else the newest."""
    name = next((t.name for t in topics if t.key == key), None)
    zh, en = (name.zh, name.en) if name else (key, key)
    files = []
    for file, period, part in topic.files(templating.slug(key)):
        files.append({"href": f"{FOLDER}/{file}", "period": period, "count": part.count})
        _write(out, f"{FOLDER}/{file}", written, rows.page(
            "reading_list/file.md.j2", name={"zh": zh, "en": en}, heading=period,
            rows=topic.rows(part), with_topic=False))
    shown = topic.rows(_Part(0, topic.size(), topic.count)) if every else topic.newest
    return {"topic": key, "name_zh": zh, "name_en": en, "count": topic.count,
            "newest": shown, "every": every, "files": files, "split": len(files) > 1}


def _write(out: Path, name: str, written: dict[str, Path], text: str) -> None:
    """Write `text` unless the file already holds it (a weekly run rewrites what changed)."""
    write_if_changed(out / name, text)
    written[name] = out / name


def _remove_stale(folder: Path, written: dict[str, Path]) -> None:
    """Files of an older layout (a topic since split by year, a topic renamed) go."""
    if not folder.is_dir():
        return
    kept = {path.resolve() for path in written.values()}
    for path in folder.glob("*.md"):
        if path.resolve() not in kept:
            path.unlink(missing_ok=True)


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
