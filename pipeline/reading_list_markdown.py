"""The reading list's Markdown files: rendered rows packed into files GitHub still shows.

Apart from reading_list.py, which picks the entries from the store and feeds them here
(and to the web edition) in one pass: this side only turns entries in that order into
files. The Markdown is an index (`READING_LIST.md`: per topic its count and newest
entries, or every entry while the whole list fits in one file) beside
`reading-list/<topic>.md` and `reading-list/<YYYY-MM>.md`, one table row per paper. A
topic file that would pass LIMIT is split by year (a year that would still pass it, by
month). Rows are spooled to a temporary file per topic while the months, which the
order keeps together, are written as they complete. A file is rewritten only when its
bytes change, so a weekly run touches the files that gained or changed a paper.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pipeline import months, render, templating
from pipeline.config_sections import TopicDef
from pipeline.deliver import files
from pipeline.deliver.files import spool_folder, write_if_changed
from pipeline.models import Entry

LIMIT = 500_000  # bytes per file: GitHub stops rendering long Markdown files, diffs get unreadable
ROOM = 8_000  # of LIMIT, kept for a file's heading, table header and links
NEWEST = 20  # entries per topic in the index
FOLDER = "reading-list"
TOPIC_CELL = "\x1f"  # around the topic cell of a rendered row (reading_list/rows.md.j2)


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
        self.settings, self.env = settings, templating.text_env(settings.templates, settings.languages)
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
