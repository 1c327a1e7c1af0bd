"""The web edition in out/site/: the index, every digest untrimmed, the digests' feed.

Built from the stored digest records after a run's files are written, through the
templates in templates/site/ (each page extends site/base.html.j2). Every link is
relative, so the site works from file:// and from `rl-digest serve`. A page is written
only when its text changed, so a weekly run rewrites the index and the new week's page.
Nor is an old week's page rendered again when nothing it is made of changed (its stored
digest, its neighbours, the code, templates and settings): rendering every page every
week took a run 0.1 s more per digest kept, 25 s a run after five years.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from functools import cache
from itertools import groupby
from pathlib import Path
from typing import Any, NamedTuple

import jinja2

from pipeline import bilingual, months, render, templating
from pipeline.deliver.files import write_atomic, write_if_changed
from pipeline.models import Digest, Highlight, Moved, safe_id

ASSETS = ("site.css", "site.js")  # templates/site/assets/ -> out/site/assets/
UNDATED = "undated"  # the month and year of an undated entry, in its page's and its search file's name
# Under outputs.dir's months.FOLDER: the digest pages the last build wrote (JSON). Not named
# *.json: the reading list's build removes the files named so that are not its months'.
PAGES = "site-pages"


def anchor(key: str) -> str:
    """A paper's id on every page that lists it: p- and its key, made URL- and id-safe."""
    return "p-" + safe_id(key)


def paper_href(key: str, topic: str, day: str | None) -> str:
    """A paper's canonical page from the site's root: its entry on its topic's page of its
    month (`day`: the entry's date), where it stays as the months go by."""
    return f"{part_href(topic, month(day))}#{anchor(key)}"


def topic_href(topic: str) -> str:
    """A topic's page of the reading list, from the site's root: its count and its months."""
    return f"papers/topic/{safe_id(topic)}.html"


def part_href(topic: str, part: str) -> str:
    """The page of a topic's papers of one month (`month`), from the site's root. A topic's
    papers are split by month: one page of every paper grew past 3 MB in two and a half
    years, too much for a phone, and a year of a busy topic is still a megabyte or more. A
    month, not packs of days under a size as the Markdown files are split: a paper's link
    (on a digest, a month's page, a search result) must name its page before the pages
    are laid out, and must not move when a later week fills one."""
    return f"papers/topic/{safe_id(topic)}-{part}.html"


def month(day: str | None) -> str:
    """The YYYY-MM of an entry's date, as its topic's page of its month is named."""
    return (day or "")[:7] or UNDATED


def year(day: str | None) -> str:
    """The year of an entry's date, as its search index file is named."""
    return (day or "")[:4] or UNDATED


def env(settings: render.Settings) -> jinja2.Environment:
    """The web edition's templates, with its links as globals (and as filters, for the
    templates of the reading list's entries: see templating._shared)."""
    return _env(settings.templates, settings.languages)


@cache
def _env(user_dir: Path | None, languages: tuple[str, ...]) -> jinja2.Environment:
    """Built once per template folder and languages, as templating's own; the names a page's
    context gives (`topic_labels`) are the settings'."""
    found = templating.new_env(user_dir, html=True, languages=languages)
    found.globals.update(paper_href=paper_href, anchor=anchor, digest_href=digest_href,
                         rfc3339=render.rfc3339)
    found.filters.update(anchor=anchor, paper_href=paper_href, topic_href=topic_href, topic_name=_topic_label)
    return found


def context(settings: render.Settings) -> dict[str, Any]:
    """What every page of the site knows (render.common), and each topic's name with each
    language tagged, so the zh / en switch hides the other one (`topic_labels`, which the
    `topic_name` filter shows): rendered once per topic, the month pages name one on every line."""
    return {**render.common(settings), "topic_labels": _topic_labels(settings)}


def _topic_labels(settings: render.Settings) -> dict[str, Any]:
    macros: Any = env(settings).get_template("site/macros.html.j2").module
    return {key: macros.pair(*pair) for key, pair in settings.topic_names.items()}


@jinja2.pass_context
def _topic_label(context: Any, key: str) -> Any:
    """It takes the context as templating's plain one does: compiled templates are shared
    between the two."""
    return context["topic_labels"].get(key, key)


def digest_href(digest_id: str) -> str:
    return f"digests/{digest_id}.html"


class Row(NamedTuple):
    """A digest as the index lists it: its id and its first highlight."""

    id: str
    highlights: tuple[Highlight, ...]


def build(settings: render.Settings, folder: Path, digests: Mapping[str, Digest] | Iterable[Digest],
          updated: str, feedback: Callable[[str, str], str] | None = None,
          moved: Mapping[str, Moved] | None = None, stored: Mapping[str, str] | None = None,
          published: Mapping[str, Digest] | None = None) -> list[Path]:
    """Write the site's pages for `digests` (any order; by id, publish.StoredDigests reads
    each as asked) into `folder`; the paths that changed.

    `updated` is the feed's date (publish.last_change), never the clock; `feedback` makes
    a paper's 👍/👎 link (Links.on_the_web) when `serve.base_url` is set; `moved`
    (reading_list.tied) is where a seed entry's paper page is now that its paper was found,
    or a listed paper's whose topic was renamed. `stored` (Store.digest_fingerprints) says
    which digests are as they were: a page the last build wrote from the same makings is
    neither read nor rendered again (its index line comes from the ledger). `published` are
    the digests the feed lists (None: `digests`): a preview's page is written, never announced,
    and it and the index say it is one.
    """
    jinja = env(settings)
    digests = render.by_id(digests)
    newest = sorted(digests, reverse=True)
    moved = moved or {}
    common = {**context(settings), "feedback": feedback,
              "paper_href": lambda key, topic, day: paper_href(*moved.get(key, (key, topic, day))[:3])}
    ledger = Pages(folder, settings, feedback, moved, stored is not None)
    changed, rows, counts = [], [], {}
    previews = set() if published is None else {did for did in newest if did not in published}
    for n, digest_id in enumerate(newest):  # each page links the weeks before and after it
        newer, older = newest[n - 1] if n else None, newest[n + 1] if n + 1 < len(newest) else None
        fingerprint = ledger.fingerprint((stored or {}).get(digest_id), newer, older)
        if (kept := ledger.kept(digest_id, fingerprint)) is not None:
            rows.append(Row(digest_id, kept[1]))
            counts[digest_id] = kept[0]
            continue
        digest = digests[digest_id]
        sections, featured = render.listed(settings, digest)
        page = jinja.get_template("site/digest.html.j2").render(
            d=bilingual.shown(digest, settings.languages), root="../", paper_count=render.paper_count(digest),
            featured_in=featured, sections=sections, newer=newer, older=older, preview=digest.id in previews,
            **common)
        if write_if_changed(folder / digest_href(digest.id), page):  # one page at a time in memory
            changed.append(folder / digest_href(digest.id))
        rows.append(Row(digest.id, digest.highlights[:1]))  # what the index says of it
        counts[digest.id] = render.paper_count(digest)
        ledger.add(digest.id, fingerprint, counts[digest.id], rows[-1].highlights)
    pages: dict[str, str] = {}
    by_month = [(month, list(group)) for month, group in groupby(rows, key=lambda d: d.id[:7])]
    pages["index.html"] = jinja.get_template("site/index.html.j2").render(
        root="", counts=counts, latest=digests[newest[0]] if newest else None, months=by_month,
        previews=previews, **common)
    pages["feed.xml"] = render.feed_xml(settings, digests if published is None else published, updated,
                                        site=True)
    for name in ASSETS:
        source, _, _ = jinja.loader.get_source(jinja, f"site/assets/{name}")  # type: ignore[union-attr]
        pages[f"assets/{name}"] = source
    ledger.save()
    return changed + [folder / name for name, text in pages.items() if write_if_changed(folder / name, text)]


class Pages:
    """The digest pages the last build wrote: each one's fingerprint, size, paper count and
    first highlight, in outputs.dir's cache folder beside months.LEDGER. Removed when a build
    starts and written when it ends, as that ledger is; a page whose size is not the one
    written is rendered again."""

    def __init__(self, folder: Path, settings: render.Settings, feedback: Callable[[str, str], str] | None,
                 moved: Mapping[str, Moved], used: bool):
        """`used`: False (no stored fingerprints: a test's digests) renders every page and
        leaves the ledger alone."""
        self.folder, self.path, self.used = folder, folder.parent / months.FOLDER / PAGES, used
        self.key = months.inputs(["site", settings, feedback("up", "") if feedback else None,
                                  sorted(moved.items())], settings.templates) if used else ""
        self.pages: dict[str, list[Any]] = {}
        last = {}
        try:
            if used:
                last = json.loads(self.path.read_text(encoding="utf-8"))
                self.path.unlink()
        except (OSError, ValueError):
            pass
        self.last = last.get("pages", {}) if isinstance(last, dict) and last.get("key") == self.key else {}

    def fingerprint(self, stored: str | None, newer: str | None, older: str | None) -> str | None:
        """What a digest's page is made of besides the key: None (render it) when unknown."""
        return None if stored is None else hashlib.blake2b(
            repr((stored, newer, older)).encode(), digest_size=16).hexdigest()

    def kept(self, digest_id: str, fingerprint: str | None) -> tuple[int, tuple[Highlight, ...]] | None:
        """(paper count, first highlight) of a page the last build wrote from these makings."""
        last = self.last.get(digest_id)
        if fingerprint is None or not last or last[0] != fingerprint:
            return None
        try:
            if (self.folder / digest_href(digest_id)).stat().st_size != last[1]:
                return None
        except OSError:
            return None
        self.pages[digest_id] = last
        return last[2], tuple(Highlight(**h) for h in last[3])

    def add(self, digest_id: str, fingerprint: str | None, count: int,
            highlights: tuple[Highlight, ...]) -> None:
        if fingerprint is not None:
            size = (self.folder / digest_href(digest_id)).stat().st_size
            self.pages[digest_id] = [fingerprint, size, count, [asdict(h) for h in highlights]]

    def save(self) -> None:
        if self.used:
            write_atomic(self.path, json.dumps({"key": self.key, "pages": self.pages}))
