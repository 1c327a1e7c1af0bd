"""The reading list on the web edition: out/site/papers/, its search index, papers.xml, exports/.

Fed by reading_list.publish's one pass over the store, a batch of entries at a time, it
renders each paper's full entry (summaries in both languages, key points, links, topic,
the digest that listed it, its updates) once, for its topic's page of its month (its
canonical place, site.paper_href), and one line for its month's page that links there; a
topic's own page names its months. The same pass
writes the search index (one script per year, so the index page loads them with script
tags and works from file://), the Atom feed of the newest additions and the four export
files. Topic pages are spooled to temporary files, months and years are written as they
complete, so memory stays flat; every file is replaced only when its bytes changed.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import IO, Any, TextIO

import orjson

from pipeline import bilingual, escape, export, months, reading_list_markdown, render, site, templating
from pipeline.config import Config
from pipeline.config_sections import TopicDef
from pipeline.deliver import files
from pipeline.deliver.files import spool_folder, streamed_if_changed, write_if_changed
from pipeline.models import Digest, Entry, Moved
from pipeline.store import Store

FEED_SIZE = 100  # entries in papers.xml: the newest additions
MARK = "<!--rl-digest:entry-->"  # between rendered entries; escaped text can never hold it
SUMMARY_CHARS = 160  # of each summary in the search index
SEPARATOR = ",\n"  # between two records of the search index


class Papers:
    """The web edition's papers, fed entries in the reading list's order a batch at a time
    by reading_list.publish's one pass over the store. Use as a context manager (its
    spools and drafts go when the block ends); `close` writes the rest and returns the
    paths that changed. A month the last build rendered and nothing changed in is
    replayed (pipeline/months.py): its month page kept as it is, its search records from
    its pieces, its entries and export records as byte ranges of the pages and exports
    it wrote."""

    leading = FEED_SIZE  # papers.xml needs the newest as entries

    def __init__(self, config: Config, store: Store, settings: render.Settings, folder: Path,
                 digests: Mapping[str, Digest] | Sequence[Digest], updated: str,
                 feedback: Callable[[str, str], str] | None = None,
                 moved: Mapping[str, Moved] | None = None):
        self.config, self.settings, self.folder, self.updated = config, settings, folder, updated
        self.moved = moved or {}  # reading_list.tied: a seed entry's anchor, its paper found
        self.store, self.digests, self.feedback = store, digests, feedback
        self.votes = feedback("up", "arxiv:0000.00000") if feedback else None  # a sample, for `key`
        self.records: list[tuple[str, str]] = []  # (year, search record) since the last cut
        self.env = site.env(settings)
        self.context = {**site.context(settings), "root": "../../", "feedback": feedback}
        self.entries_html = self.env.get_template("site/papers_entries.html.j2")
        self.lines_html = self.env.get_template("site/papers_lines.html.j2")
        self.listed, self.news = store.listed_in(), _updates(digests)
        self.newest: list[Entry] = []
        self.stack = ExitStack()
        self.tmp = Path(self.stack.enter_context(spool_folder("rl-digest-site-")))
        self.pages = _Pages(self.env, self.context, folder, self.tmp)
        self.changed = changed = self.pages.changed  # every path that changed, once closed
        self.search = _Search(folder, changed)
        self.stack.enter_context(self.search.stack)  # a failed run publishes no half-written year
        self.writers = [export.Writer(fmt, self.stack.enter_context(streamed_if_changed(
            self._export(suffix), changed)), ranges=True)
            for fmt, suffix in export.FORMATS.items()]

    def __enter__(self) -> Papers:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stack.__exit__(*exc)

    def key(self) -> object:
        return ("papers", self.settings, self.folder, self.votes)

    def about(self, key: str) -> object:
        return self.listed.get(key), self.news.get(key)

    def elsewhere(self, out: Path, folder: Path) -> Papers:
        return Papers(self.config, self.store, self.settings, folder / self.folder.relative_to(out),
                      self.digests, self.updated, self.feedback, self.moved)

    def add(self, batch: Sequence[Entry]) -> None:
        html = self.entries_html.render(entries=batch, listed=self.listed, news=self.news,
                                        **self.context).split(MARK)[1:]
        lines = self.lines_html.render(entries=batch, **self.context).split(MARK)[1:]
        for entry, fragment, line in zip(batch, html, lines, strict=True):
            self.pages.fragment(entry.topic, site.month(entry.date), fragment.encode("utf-8"), 1)
            entry = export.in_languages(entry, self.settings.languages)
            record, year = _searchable(entry, self.settings.languages), site.year(entry.date)
            self.pages.line(entry.date, line)
            self.search.add(year, record)
            self.records.append((year, record))
            for writer in self.writers:
                writer.add(entry)
            if len(self.newest) < FEED_SIZE:
                self.newest.append(entry)

    def cut(self) -> tuple[object, dict[str, Any]]:
        """The month just added, its page written: byte ranges in the topic spools and
        exports; its entry count, its line of the index and its search records by year."""
        month = self.pages.close_month()
        records = [[year, SEPARATOR.join(record for _, record in group)]
                   for year, group in groupby(self.records, key=itemgetter(0))]
        count, self.records = len(self.records), []
        return ({"topics": self.pages.cut(), "exports": [writer.cut() for writer in self.writers]},
                {"count": count, "month": month, "search": records})

    def replay(self, ranges: Any, pieces: dict[str, Any], last: months.Ledger, note: Any) -> None:
        self.pages.keep_month(pieces["month"], pieces["count"])
        if pieces["month"] and last.place(kept := self.pages.month_page(pieces["month"]["key"])):
            self.changed.append(kept)
        for year, records in pieces["search"]:
            self.search.add(year, records)
        for key, part, start, end, count in ranges["topics"]:
            page = site.part_href(key, part)
            data = last.read(str(self.folder / page), note[page] + start, note[page] + end)
            self.pages.fragment(key, part, data, count)
        exports = [str(self._export(suffix)) for suffix in export.FORMATS.values()]
        for writer, name, found in zip(self.writers, exports, ranges["exports"], strict=True):
            if found:
                start, end, count = found
                writer.add_records(last.read(name, start, end), count)

    def sources(self) -> list[Path]:
        """The topic pages and exports the byte ranges point into, and the month pages a
        replayed month keeps as they are."""
        return [self.folder / site.part_href(*part) for part in self.pages.topics] + \
            [self._export(suffix) for suffix in export.FORMATS.values()] + \
            [self.pages.month_page(month["key"]) for month in self.pages.months]

    def note(self) -> object:
        """Where each topic's month page's entries begin (after its heading)."""
        return self.pages.heads

    def _old_names(self) -> dict[str, dict[str, str]]:
        """The name a topic the config no longer has (renamed or removed) was shown under:
        its section's in the newest digest that listed one of its papers."""
        listed: dict[str, set[str]] = {}
        for found in self.moved.values():
            if found.was and found.key in self.listed:
                listed.setdefault(found.was, set()).add(self.listed[found.key])
        digests, names = render.by_id(self.digests), {}
        for old, ids in listed.items():
            for digest_id in sorted(ids, reverse=True):
                section = next((s for s in digests[digest_id].sections if s.topic == old), None)
                if section:
                    names[old] = {"zh": section.name_zh, "en": section.name_en}
                    break
        return names

    def _export(self, suffix: str) -> Path:
        return self.folder / "exports" / f"reading-list.{suffix}"

    def close(self) -> list[Path]:
        """Write the topic pages, the index page, papers.xml, search.js and topic.js (a
        topic page's old links); the paths that changed."""
        pages, env, context, settings, folder = self.pages, self.env, self.context, self.settings, self.folder
        pages.close_month()
        topics = pages.write_topics(self.config.topics)
        pages.write_gone(self.moved.values(), self.config.topics, self._old_names())
        moved = {site.anchor(old): site.anchor(now.key) for old, now in self.moved.items() if old != now.key}
        self.search.close({t["key"]: {part["month"]: part["page"] for part in t["parts"]} for t in topics},
                          moved)
        for writer in self.writers:
            writer.close()
        self.stack.close()  # the index and exports are in place
        base = settings.site_url  # the pages it links are the site's, not out/'s (outputs.base_url)
        feed_id = f"{base}papers.xml" if base else render.feed_id(settings, "papers")
        done = {
            "papers/index.html": env.get_template("site/papers_index.html.j2").render(
                topics=topics, months=pages.months, years=[y for y in self.search.years if y != site.UNDATED],
                undated=site.UNDATED in self.search.years,
                shards=[self.search.shard(y).name for y in self.search.years],
                total=pages.count, **{**context, "root": "../"}),
            "papers.xml": env.get_template("site/papers.xml.j2").render(
                entries=self.newest, updated=render.rfc3339(self.updated, settings.timezone),
                feed_id=feed_id, base=base, **render.common(settings), topic_labels=context["topic_labels"]),
            **{f"assets/{name}": env.loader.get_source(env, f"site/assets/{name}")[0]  # type: ignore[union-attr]
               for name in ("search.js", "topic.js")},
        }
        pages.changed += [folder / name for name, text in done.items()
                          if write_if_changed(folder / name, text)]
        _remove_stale(folder / "papers", pages.written)
        return pages.changed


class _Pages:
    """The topic and month pages as entries arrive in the reading list's order: months are
    written as they complete, each topic's months spooled to `tmp` and written at the end."""

    def __init__(self, env: Any, context: dict[str, Any], folder: Path, tmp: Path):
        self.page, self.context = env.get_template("site/papers_page.html.j2"), context
        self.folder, self.tmp = folder, tmp
        self.changed: list[Path] = []
        self.written: set[Path] = set()
        self.topics: dict[tuple[str, str], _Spool] = {}  # (topic, month): newest month first
        self.months: list[dict[str, Any]] = []
        self.month: list[str] = []
        self.current, self.count = "", 0
        self.heads: dict[str, int] = {}  # a topic's month page -> its bytes before the entries

    def line(self, day: str | None, line: str) -> None:
        """A paper's line for its month's page."""
        if day:
            if day[:7] != self.current:
                self.close_month()
            self.current = day[:7]
            self.month.append(line)
        self.count += 1

    def fragment(self, topic: str, month: str, data: bytes, count: int) -> None:
        """`count` papers' full entries for their topic's page of `month`."""
        if (topic, month) not in self.topics:
            self.topics[topic, month] = _Spool(self.tmp / f"t{len(self.topics)}")
        self.topics[topic, month].add(data, count)

    def cut(self) -> list[list[Any]]:
        """[topic, month, start, end, count] in each spool of the entries since the last cut."""
        return [[*part, *found] for part, spool in self.topics.items() if (found := spool.cut())]

    def _frame(self, **values: Any) -> tuple[str, str]:
        head, tail = self.page.render(body=MARK, **values, **self.context).split(MARK)
        return head, tail

    def close_month(self) -> dict[str, Any] | None:
        """Write the month's page; its line of the index."""
        if not self.month:
            return None
        self.months.append({"key": self.current, "count": len(self.month),
                            "href": f"month/{self.current}.html"})
        head, tail = self._frame(heading=self.current, name=None, count=len(self.month))
        target = self.month_page(self.current)
        if write_if_changed(target, head + "".join(self.month) + tail):
            self.changed.append(target)
        self.written.add(target)
        self.month.clear()
        return self.months[-1]

    def keep_month(self, month: dict[str, Any] | None, count: int) -> None:
        """A month (of `count` entries) whose page the last build wrote as it is now."""
        self.count += count
        if month:
            self.months.append(month)
            self.written.add(self.month_page(month["key"]))

    def month_page(self, key: str) -> Path:
        return self.folder / "papers" / "month" / f"{key}.html"

    def write_topics(self, known: Sequence[TopicDef]) -> list[dict[str, Any]]:
        """Each topic's page of each month, newest first, and its own page naming them
        (taxonomy order, then topics it no longer names); the index's list."""
        names = {t.key: t.name for t in known}
        found = []
        for key in reading_list_markdown.in_order({topic for topic, _ in self.topics}, known):
            name = names.get(key)
            shown = name or {"zh": key, "en": key}
            page, beside = site.topic_href(key), "papers/topic/"  # the month pages are beside it
            spools = [(month, spool) for (topic, month), spool in self.topics.items() if topic == key]
            parts: list[dict[str, Any]] = [
                {"month": month, "count": spool.count, "page": site.part_href(key, month),
                 "href": site.part_href(key, month).removeprefix(beside)} for month, spool in spools]
            for part, (month, spool) in zip(parts, spools, strict=True):
                head, tail = self._frame(heading=None, name=shown, count=spool.count, month=month,
                                         parts=parts, topic_page=page.removeprefix(beside))
                self.heads[part["page"]] = len(head.encode("utf-8"))
                with streamed_if_changed(self.folder / part["page"], self.changed) as out:
                    out.write(head)
                    spool.copy_to(out)
                    out.write(tail)
                self.written.add(self.folder / part["page"])
            count = sum(part["count"] for part in parts)
            if write_if_changed(self.folder / page, self.page.render(
                    body="", heading=None, name=shown, count=count, month=None, parts=parts, **self.context)):
                self.changed.append(self.folder / page)
            self.written.add(self.folder / page)
            found.append({"key": key, "name": name, "count": count, "page": page,
                          "href": page.removeprefix("papers/"), "parts": parts})
        return found

    def write_gone(self, moved: Iterable[Moved], known: Sequence[TopicDef],
                   was_named: Mapping[str, dict[str, str]]) -> None:
        """The page of a topic the config no longer has (renamed or removed) and of each of
        its months, kept for a link made before (a feed reader's copy of papers.xml, a
        bookmark): headed by the name it had (`was_named`; else its key), it names the
        topics its papers have now, the most of them first, and assets/topic.js takes a
        link to one of them (#p-…) on to its page."""
        now: dict[str, Counter[str]] = {}
        months: dict[str, set[str]] = {}
        for found in moved:
            if found.was:
                now.setdefault(found.was, Counter())[found.topic] += 1
                months.setdefault(found.was, set()).add(site.month(found.date))
        names, beside = {t.key: t.name for t in known}, "papers/topic/"
        for old, topics in now.items():
            shown = sorted(topics, key=lambda key: (-topics[key], key))  # the most of its papers first
            text = self.page.render(heading=old, name=was_named.get(old), month=None, now_in=[
                {"name": names[key], "href": site.topic_href(key).removeprefix(beside)} for key in shown],
                **self.context)
            for page in [site.topic_href(old), *(site.part_href(old, month) for month in months[old])]:
                if self.folder / page not in self.written:  # not a topic's page the list has
                    if write_if_changed(self.folder / page, text):
                        self.changed.append(self.folder / page)
                    self.written.add(self.folder / page)


class _Spool:
    """A topic's rendered entries (UTF-8), kept on disk until its page is written."""

    def __init__(self, path: Path):
        self.handle: IO[bytes] = files.spool(path)  # closed by copy_to
        self.count = self.since = self.recent = 0

    def add(self, data: bytes, count: int) -> None:
        self.handle.write(data)
        self.count += count
        self.recent += count

    def cut(self) -> list[int] | None:
        """[start, end, count] of the entries since the last cut, if any."""
        end, recent = self.handle.tell(), self.recent
        found = [self.since, end, recent] if recent else None
        self.since, self.recent = end, 0
        return found

    def copy_to(self, out: TextIO) -> None:
        self.handle.seek(0)
        out.flush()
        shutil.copyfileobj(self.handle, out.buffer)
        self.handle.close()


class _Search:
    """The search index: search-index.js names each topic's page of each month and the years,
    and each year's papers are in search-index-<year>.js (undated ones in
    search-index-undated.js), which adds them to window.RL_DIGEST_INDEX: a year's file
    changes only when its papers do. Entries arrive newest year first, so one year's file
    is open at a time."""

    def __init__(self, folder: Path, changed: list[Path]):
        self.folder, self.changed = folder, changed
        self.years: list[str] = []
        self.stack = ExitStack()
        self.out: TextIO | None = None

    def add(self, year: str, record: str) -> None:
        """A paper's record (`_searchable`), or records joined by SEPARATOR, in its year's file."""
        if not self.years or self.years[-1] != year:
            self._close_year()
            self.years.append(year)
            self.out = self.stack.enter_context(streamed_if_changed(self.shard(year), self.changed))
            self.out.write("window.RL_DIGEST_INDEX.papers = window.RL_DIGEST_INDEX.papers.concat([")
            self.first = True
        assert self.out is not None
        self.out.write(("\n" if self.first else SEPARATOR) + record)
        self.first = False

    def shard(self, year: str) -> Path:
        return self.folder / f"search-index-{year}.js"

    def _close_year(self) -> None:
        if self.out is not None:
            self.out.write("\n]);\n")
            self.stack.close()
            self.out = None

    def close(self, topics: dict[str, dict[str, str]], moved: dict[str, str]) -> None:
        """Finish the last year; write search-index.js (`moved`: a seed entry's old anchor ->
        its paper's, for an old link on a topic's page); remove the files of years gone."""
        self._close_year()
        head = {"topics": topics, "years": self.years, "moved": moved, "papers": []}
        if write_if_changed(self.folder / "search-index.js",
                            "window.RL_DIGEST_INDEX = " + json.dumps(head, ensure_ascii=False) + ";\n"):
            self.changed.append(self.folder / "search-index.js")
        kept = {self.shard(year) for year in self.years}
        for path in self.folder.glob("search-index-*.js"):
            if path not in kept:
                path.unlink(missing_ok=True)


def _searchable(entry: Entry, languages: Sequence[str]) -> str:
    """One paper in the search index: [anchor, title, Chinese title, Chinese summary, English
    summary (clipped; "" for a language not shown), authors (all of them: a big team's
    senior author is named last; "et al." after a list cut short), topic, month (YYYY-MM)];
    its page is the index's topics[topic][month] (an undated paper's: [..."undated"]). Both
    summaries, so a query in either language finds the paper."""
    shown = dict(bilingual.texts(languages, entry.summary_zh, entry.summary_en))
    names, more = export.named(entry)
    title_zh = escape.one_line(entry.title_zh or "") if "zh" in languages else ""
    return orjson.dumps([site.anchor(entry.key), escape.one_line(entry.title), title_zh,
                         templating.clip(shown.get("zh", ""), SUMMARY_CHARS),
                         templating.clip(shown.get("en", ""), SUMMARY_CHARS),
                         ", ".join(names) + (" et al." if more else ""), entry.topic,
                         (entry.date or "")[:7]]).decode()


def _updates(digests: Mapping[str, Digest] | Sequence[Digest]) -> dict[str, list[dict[str, Any]]]:
    """Paper key -> the Updates that later digests listed for it, oldest first: from the
    stored digests' Updates alone (publish.StoredDigests.updates), or each digest read."""
    digests = render.by_id(digests)
    stored = getattr(digests, "updates", None)  # the database's digests: their Updates only
    listed = stored() if stored else {did: [(u.key, u.changes) for u in digests[did].updates]
                                      for did in digests}
    found: dict[str, list[dict[str, Any]]] = {}
    for digest_id in sorted(listed):
        for key, changes in listed[digest_id]:
            found.setdefault(key, []).append({"digest": digest_id, "changes": changes})
    return found


def _remove_stale(folder: Path, kept: set[Path]) -> None:
    """Pages of a topic or month the list no longer has go."""
    for path in [*folder.glob("topic/*.html"), *folder.glob("month/*.html")]:
        if path not in kept:
            path.unlink(missing_ok=True)
