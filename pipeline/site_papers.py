"""The reading list on the web edition: out/site/papers/, its search index, papers.xml, exports/.

One pass over the reading list's stream (reading_list.entries) renders each paper once
(summaries in both languages, key points, links, topic, the digest that listed it, its
updates) and places that HTML on its topic's page (its canonical place, site.paper_href)
and its month's page; the same pass writes the search index, the Atom feed of the newest
additions and the four export files. Topic pages are spooled to temporary files, months
are written as they complete, so memory stays flat; every file is replaced only when its
bytes changed.
"""

from __future__ import annotations

import filecmp
import json
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any, TextIO

from pipeline import export, reading_list, render, site
from pipeline.config import Config, TopicDef
from pipeline.deliver.files import atomic, write_if_changed
from pipeline.models import Digest, Entry
from pipeline.store import Store

FEED_SIZE = 100  # entries in papers.xml: the newest additions
MARK = "<!--rl-digest:entry-->"  # between rendered entries; escaped text can never hold it
SUMMARY_CHARS = 160  # of each summary in the search index


def build(config: Config, store: Store, settings: render.Settings, folder: Path,
          digests: Sequence[Digest], updated: str) -> list[Path]:
    """Write papers/, search-index.js, assets/search.js, papers.xml and exports/ into
    `folder`; return the paths that changed."""
    env = render.html_env(settings.templates)
    env.globals.update(paper_href=site.paper_href, anchor=site.anchor, digest_href=site.digest_href,
                       rfc3339=render.rfc3339)
    context = {**render.common(settings), "root": "../../"}
    entries_html = env.get_template("site/papers_entries.html.j2")
    listed, news = store.listed_in(), _updates(digests)
    newest: list[Entry] = []
    with tempfile.TemporaryDirectory(prefix="rl-digest-site-") as tmp, ExitStack() as stack:
        pages = _Pages(env, context, folder, Path(tmp))
        index = stack.enter_context(_published(folder / "search-index.js", Path(tmp), pages.changed))
        index.write('window.RL_DIGEST_INDEX = {"papers": [')
        writers = [export.Writer(fmt, stack.enter_context(
            _published(folder / "exports" / f"reading-list.{suffix}", Path(tmp), pages.changed)))
            for fmt, suffix in export.FORMATS.items()]
        for batch in reading_list.batches(reading_list.entries(config, store)):
            html = entries_html.render(entries=batch, listed=listed, news=news, **context).split(MARK)[1:]
            for entry, fragment in zip(batch, html, strict=True):
                pages.add(entry, fragment)
                entry = export.in_languages(entry, settings.languages)
                index.write(("," if pages.count > 1 else "") + "\n" + _searchable(entry))
                for writer in writers:
                    writer.add(entry)
                if len(newest) < FEED_SIZE:
                    newest.append(entry)
        pages.close_month()
        topics = pages.write_topics(config.topics)
        index.write('\n], "topics": ' + json.dumps({t["key"]: t["href"] for t in topics}) + "};\n")
        for writer in writers:
            writer.close()
    done = {
        "papers/index.html": env.get_template("site/papers_index.html.j2").render(
            topics=topics, months=pages.months, years=sorted(pages.years, reverse=True), total=pages.count,
            **{**context, "root": "../"}),
        "papers.xml": env.get_template("site/papers.xml.j2").render(
            entries=newest, updated=render.rfc3339(updated, settings.timezone),
            feed_id=_feed_id(settings), base=settings.base_url, **render.common(settings)),
        "assets/search.js": env.loader.get_source(env, "site/assets/search.js")[0],  # type: ignore[union-attr]
    }
    pages.changed += [folder / name for name, text in done.items() if write_if_changed(folder / name, text)]
    _remove_stale(folder / "papers", pages.written)
    return pages.changed


class _Pages:
    """The topic and month pages as entries arrive in the reading list's order: months are
    written as they complete, topics spooled to `tmp` and written at the end."""

    def __init__(self, env: Any, context: dict, folder: Path, tmp: Path):
        self.page, self.context = env.get_template("site/papers_page.html.j2"), context
        self.folder, self.tmp = folder, tmp
        self.changed: list[Path] = []
        self.written: set[Path] = set()
        self.topics: dict[str, _Spool] = {}
        self.months: list[dict] = []
        self.years: set[str] = set()
        self.month: list[str] = []
        self.current, self.count = "", 0

    def add(self, entry: Entry, fragment: str) -> None:
        if entry.date:
            if entry.date[:7] != self.current:
                self.close_month()
            self.current = entry.date[:7]
            self.month.append(fragment)
            self.years.add(entry.date[:4])
        if entry.topic not in self.topics:
            self.topics[entry.topic] = _Spool(self.tmp / f"t{len(self.topics)}")
        self.topics[entry.topic].add(fragment)
        self.count += 1

    def _frame(self, **values: Any) -> tuple[str, str]:
        head, tail = self.page.render(body=MARK, **values, **self.context).split(MARK)
        return head, tail

    def close_month(self) -> None:
        if not self.month:
            return
        self.months.append({"key": self.current, "count": len(self.month),
                            "href": f"month/{self.current}.html"})
        head, tail = self._frame(heading=self.current, name=None, count=len(self.month))
        target = self.folder / "papers" / "month" / f"{self.current}.html"
        if write_if_changed(target, head + "".join(self.month) + tail):
            self.changed.append(target)
        self.written.add(target)
        self.month.clear()

    def write_topics(self, known: Sequence[TopicDef]) -> list[dict]:
        """Each topic's page (taxonomy order, then topics it no longer names); the index's list."""
        names = {t.key: t.name for t in known}
        found = []
        for key in reading_list.in_order(self.topics, known):
            spool, name = self.topics[key], names.get(key)
            page = site.paper_href("", key).split("#")[0]  # papers/topic/<key>.html
            head, tail = self._frame(heading=None, name=name or {"zh": key, "en": key}, count=spool.count)
            with _published(self.folder / page, self.tmp, self.changed) as out:
                out.write(head)
                spool.copy_to(out)
                out.write(tail)
            self.written.add(self.folder / page)
            found.append({"key": key, "name": name, "count": spool.count,
                          "href": page.removeprefix("papers/")})
        return found


class _Spool:
    """A topic's rendered entries, kept on disk until its page is written."""

    def __init__(self, path: Path):
        self.handle: IO[str] = path.open("w+", encoding="utf-8")  # closed by copy_to
        self.count = 0

    def add(self, fragment: str) -> None:
        self.handle.write(fragment)
        self.count += 1

    def copy_to(self, out: TextIO) -> None:
        self.handle.seek(0)
        shutil.copyfileobj(self.handle, out)
        self.handle.close()


@contextmanager
def _published(target: Path, tmp: Path, changed: list[Path]) -> Iterator[TextIO]:
    """A file written piece by piece into `tmp`, then put at `target` only when it differs."""
    draft = tmp / f"draft-{len(list(tmp.iterdir()))}"
    with draft.open("w", encoding="utf-8", newline="\n") as handle:
        yield handle
    if target.is_file() and filecmp.cmp(draft, target, shallow=False):
        return
    with atomic(target) as out, draft.open(encoding="utf-8", newline="") as source:
        shutil.copyfileobj(source, out)
    changed.append(target)


def _searchable(entry: Entry) -> str:
    """One paper in the search index: [href, title, Chinese title, summaries, authors, topic, year]."""
    texts = (entry.summary_zh, entry.summary_en)
    summary = " ".join(render.clip(text, SUMMARY_CHARS) for text in texts if text)
    return json.dumps([site.paper_href(entry.key, entry.topic), render.one_line(entry.title),
                       render.one_line(entry.title_zh or ""), summary, ", ".join(entry.authors[:8]),
                       entry.topic, (entry.date or "")[:4]], ensure_ascii=False)


def _updates(digests: Sequence[Digest]) -> dict[str, list[dict]]:
    """Paper key -> the Updates that later digests listed for it, oldest first."""
    found: dict[str, list[dict]] = {}
    for digest in sorted(digests, key=lambda d: d.id):
        for update in digest.updates:
            found.setdefault(update.key, []).append({"digest": digest.id, "changes": update.changes})
    return found


def _feed_id(settings: render.Settings) -> str:
    return f"{settings.base_url}papers.xml" if settings.base_url else render._feed_id(settings, "papers")


def _remove_stale(folder: Path, kept: set[Path]) -> None:
    """Pages of a topic or month the list no longer has go."""
    for path in [*folder.glob("topic/*.html"), *folder.glob("month/*.html")]:
        if path not in kept:
            path.unlink(missing_ok=True)
