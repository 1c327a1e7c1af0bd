"""Build the Digest and the reading list from records. Pure: no I/O, no clock."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from pipeline.bilingual import summary_lines
from pipeline.config_sections import TopicDef
from pipeline.extract import contribution, links, readable, venue, withdrawn
from pipeline.models import (
    Digest,
    Entry,
    Highlight,
    Mover,
    Paper,
    Part,
    Row,
    Section,
    SeedDocument,
    SeedEntry,
    TopicWeeks,
    Trends,
    Update,
    paper_key,
    seed_key,
)


def paper_entry(paper: Paper, topic: str, score: float | None, summary: dict[str, Any] | None = None,
                seed: SeedEntry | None = None, translation: dict[str, Any] | None = None) -> Entry:
    """A paper as a digest line; a seed's curated Chinese beats the LLM's.

    Without a summary the English line is the abstract's contribution sentence; without a
    title (a feed's was empty, or only invisible characters) the paper is called by its id. Links
    and venue are read from the abstract, comment and journal-ref; TeX in the title, the
    authors' names (`R\\"opke`) and the abstract a featured paper shows becomes text.
    """
    summary = summary or {}
    curated_zh = seed.summary_zh if seed else None
    curated_en = (seed.summary_en if seed else None) or (translation or {}).get("summary_en")
    title = readable(paper.title) or paper.title or f"arXiv:{paper.id}"
    return Entry(
        key=paper_key(paper.id), title=title,
        topic=topic,
        url=paper.abs_url, date=entry_date(paper, seed),
        authors=tuple(readable(a) or a for a in paper.authors), categories=paper.categories,
        score=score,
        title_zh=chinese_title(summary, title),
        summary_zh=curated_zh or readable(summary.get("summary_zh")),
        summary_en=(curated_en if curated_zh else None) or readable(summary.get("summary_en"))
        or readable(contribution(paper.abstract, paper.title)) or None,
        key_points_zh=tuple(map(readable, summary.get("key_points_zh") or ())),  # type: ignore[arg-type]
        key_points_en=tuple(map(readable, summary.get("key_points_en") or ())),  # type: ignore[arg-type]
        abstract=readable(paper.abstract) or paper.abstract, curated=seed is not None, version=paper.version,
        revised=paper.version > 1, llm=bool(summary),
        headline_zh=seed.headline_zh if seed else None,
        parts=tuple(Part(label, "", text) for label, text in seed.parts_zh) if seed else (),
        why_zh=readable(summary.get("why_zh")), why_en=readable(summary.get("why_en")),
        kind=summary.get("kind"), links=links(paper.abstract, paper.comment),
        venue=venue(paper.comment, paper.journal_ref), origin=seed.source if seed else None,
    )


def chinese_title(summary: dict[str, Any] | None, title: str) -> str | None:
    """The summary's Chinese title; None when it is the title itself (a name the model left
    as it is: "AReaL", "GRPO-λ: Policy Optimisation"), which was shown twice, one line under
    the other."""
    found = readable((summary or {}).get("title_zh"))
    return None if found is None or _bare(found) == _bare(title) else found


def _bare(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.casefold())


def entry_date(paper: Paper, seed: SeedEntry | None = None) -> str | None:
    """A paper's date as its entry shows it: its first version's, else its seed entry's."""
    day = paper.submitted or paper.updated
    return day.date().isoformat() if day else (seed.date.isoformat() if seed and seed.date else None)


def seed_entry(seed: SeedEntry, topic: str, translation: dict[str, Any] | None = None) -> Entry:
    """A seed entry not (yet) tied to an arXiv paper: its curated text; offline, in
    English only the title speaks for it."""
    url = f"https://arxiv.org/abs/{seed.arxiv_id}" if seed.arxiv_id else None
    return Entry(
        key=seed_key(seed.title), title=readable(seed.title) or seed.title, topic=topic, url=url,
        date=seed.date.isoformat() if seed.date else None,
        summary_zh=seed.summary_zh,
        summary_en=seed.summary_en or (translation or {}).get("summary_en"),
        curated=True, llm=bool(translation),
        headline_zh=seed.headline_zh,
        parts=tuple(Part(label, "", text) for label, text in seed.parts_zh), origin=seed.source,
    )


def with_reading(entry: Entry, reading: dict[str, Any] | None) -> Entry:
    """Attach the LLM's featured reading; a curated reading from the seed page stays."""
    if not reading or entry.parts:
        return entry
    parts = tuple(Part(p["label_zh"], p["label_en"], p["text_zh"], p["text_en"])
                  for p in reading["parts"])
    return replace(entry, headline_zh=reading["headline_zh"], headline_en=reading["headline_en"],
                   parts=parts)


def highlight_candidates(featured: Sequence[Entry], entries: Iterable[Entry],
                         limit: int = 10) -> list[Entry]:
    """The papers the highlights speak of: the featured ones, then the week's best."""
    keys = {e.key for e in featured}
    rest = sorted((e for e in entries if not e.curated and e.key not in keys),
                  key=lambda e: (-(e.score or 0.0), e.key))
    return [*featured, *rest][:limit]


def highlights(reply: dict[str, Any] | None, papers: Sequence[Entry]) -> tuple[Highlight, ...]:
    """The LLM's takeaways, each tied to the paper it names (by its number in the prompt)."""
    if not reply:
        return ()
    found = []
    for item in reply["items"]:
        paper = papers[item["paper"] - 1]
        found.append(Highlight(paper.key, paper.title, paper.url, readable(item["zh"]) or item["zh"],
                               readable(item["en"]) or item["en"]))
    return tuple(found)


def snapshot(paper: Paper) -> dict[str, Any]:
    """What a reader was told about a paper: its version, venue and code link, and whether
    it was withdrawn (only said when it was: an older ledger row has no such key)."""
    code = dict(links(paper.abstract, paper.comment)).get("code")
    found = {"version": paper.version, "venue": venue(paper.comment, paper.journal_ref), "code": code}
    return found | ({"withdrawn": True} if withdrawn(paper.comment, paper.abstract) else {})


def snapshots(digest: Digest) -> dict[str, dict[str, Any]]:
    """The Updates ledger's baseline after this digest: each listed paper as shown, one-line
    entries too (most of a busy week), and a seed's paper under 收录 · From the reading list."""
    found = {e.key: {"version": e.version, "venue": e.venue, "code": dict(e.links).get("code")}
             for e in [*(e for s in digest.sections for e in (*s.entries, *s.brief)), *digest.featured,
                       *digest.curated]
             if e.key.startswith("arxiv:")}
    found.update({u.key: {"version": u.version, "venue": u.venue, "code": u.code}
                  | ({"withdrawn": True} if u.withdrawn else {}) for u in digest.updates})
    return found


# What a reader most needs to hear first, the email giving way from the last: a paper
# withdrawn, then one published at a venue, then code released, then a new version.
UPDATE_ORDER = ("withdrawn", "venue", "code", "version")


def update_order(update: Update) -> tuple[int, str, str]:
    """An update's place among the week's: by its weightiest change, then by title."""
    weight = min((UPDATE_ORDER.index(what) for what, _, _ in update.changes if what in UPDATE_ORDER),
                 default=len(UPDATE_ORDER))
    return weight, update.title.casefold(), update.key


def updates(papers: Iterable[Paper], ledger: dict[str, dict[str, Any] | None],
            summaries: dict[str, dict[str, Any]]) -> list[Update]:
    """Published papers with news since they were last listed: a newer version, a venue,
    code, a withdrawal (in `update_order`). A paper listed before the ledger kept snapshots
    has nothing to compare with."""
    found: list[Update] = []
    for paper in papers:
        key = paper_key(paper.id)
        before, now = ledger.get(key), snapshot(paper)
        if before is None or before == now:
            continue
        changes = []
        if before.get("version") and now["version"] > before["version"]:
            changes.append(("version", str(before.get("version")), str(now["version"])))
        if now["venue"] and now["venue"] != before.get("venue"):
            changes.append(("venue", before.get("venue") or "", now["venue"]))
        if now["code"] and not before.get("code"):
            changes.append(("code", "", now["code"]))
        if now.get("withdrawn") and not before.get("withdrawn"):
            changes.append(("withdrawn", "", ""))
        if changes:  # the weightiest first on its line too: "withdrawn · v1 → v2"
            title = readable(paper.title) or paper.title
            found.append(Update(key=key, title=title, url=paper.abs_url,
                                title_zh=chinese_title(summaries.get(key), title),
                                changes=tuple(sorted(changes, key=lambda c: UPDATE_ORDER.index(c[0]))),
                                **now))
    found.sort(key=update_order)
    return found


def newest_first(items: Iterable[Entry]) -> list[Entry]:
    """Newest first, then by title and key: a stable order."""
    ordered = sorted(items, key=lambda e: (e.title.casefold(), e.key))
    return sorted(ordered, key=lambda e: e.date or "", reverse=True)


def sections(entries: Iterable[Entry], topics: Sequence[TopicDef],
             brief: Iterable[Entry] = ()) -> tuple[Section, ...]:
    """Group by topic in the taxonomy's order; newest first, then title, for stable output.
    `brief` entries (one line each) go under their topic after the full ones."""
    full: dict[str, list[Entry]] = {t.key: [] for t in topics}
    short: dict[str, list[Entry]] = {t.key: [] for t in topics}
    for entry in entries:
        full.setdefault(entry.topic, []).append(entry)
        short.setdefault(entry.topic, [])
    for entry in brief:
        short.setdefault(entry.topic, []).append(entry)
        full.setdefault(entry.topic, [])
    names = {t.key: t.name for t in topics}
    result = []
    for key in full:
        if not full[key] and not short[key]:
            continue
        name = names.get(key)
        result.append(Section(key, name.zh if name else key, name.en if name else key,
                              tuple(newest_first(full[key])), tuple(newest_first(short[key]))))
    return tuple(result)


Curated = tuple[tuple[Row, ...], str | None, str | None]  # table, synthesis zh, synthesis en


def curated_comparison(featured: Sequence[Entry], documents: Sequence[SeedDocument]) -> Curated:
    """The seed page's own table and synthesis, when the featured pair is that page's."""
    titles = {e.title for e in featured if e.curated}
    for doc in documents:
        own = {e.title for e in doc.entries if e.featured}
        if featured and own and titles == own and len(doc.comparison) > 1:
            header, *rows = doc.comparison
            if any(e.title not in header for e in featured):
                continue
            order = [header.index(e.title) for e in featured]
            # a row pasted short of a cell has that cell empty (it stopped every run)
            table = tuple(Row(r[0], "", tuple((r[i] if i < len(r) else "", "") for i in order))
                          for r in rows)
            return table, doc.synthesis_zh, None
    return (), None, None


def to_translate(featured: Sequence[Entry], curated: Curated) -> list[str]:
    """The curated Chinese a reader of English would miss: the seed page's featured
    readings, its table and its synthesis; each text once, in reading order."""
    found: list[str] = []
    for e in featured:
        found += [e.headline_zh] if e.headline_zh and not e.headline_en else []
        for p in e.parts:
            found += [zh for zh, en in ((p.label_zh, p.label_en), (p.text_zh, p.text_en)) if zh and not en]
    rows, synthesis_zh, synthesis_en = curated
    for r in rows:
        found += [r.label_zh] if r.label_zh and not r.label_en else []
        found += [zh for zh, en in r.cells if zh and not en]
    found += [synthesis_zh] if synthesis_zh and not synthesis_en else []
    return list(dict.fromkeys(found))


def with_english(featured: Sequence[Entry], curated: Curated,
                 english: dict[str, str]) -> tuple[list[Entry], Curated]:
    """The same featured entries and table with the English found for their Chinese."""
    def en(zh: str | None, have: str | None) -> str | None:
        return have or (english.get(zh) if zh else None)

    entries = [replace(e, headline_en=en(e.headline_zh, e.headline_en),
                       parts=tuple(replace(p, label_en=en(p.label_zh, p.label_en) or "",
                                           text_en=en(p.text_zh, p.text_en)) for p in e.parts))
               for e in featured]
    rows, synthesis_zh, synthesis_en = curated
    rows = tuple(Row(r.label_zh, en(r.label_zh, r.label_en) or "",
                     tuple((zh, en(zh, have) or "") for zh, have in r.cells)) for r in rows)
    return entries, (rows, synthesis_zh, en(synthesis_zh, synthesis_en))


def make_digest(*, digest_id: str, window: tuple[datetime, datetime], timezone: str,
                entries: Sequence[Entry], featured: Sequence[Entry], topics: Sequence[TopicDef],
                max_papers: int, comparison: dict[str, Any] | None, curated: Curated,
                model: str | None, sources: Sequence[str], categories: Sequence[str],
                updates: Sequence[Update] = (), coverage: dict[str, Any] | None = None,
                max_curated: int = 5, first: bool = False,
                highlights: Sequence[Highlight] = (),
                question: tuple[str | None, str | None] = (None, None),
                trends: Trends | None = None, languages: Sequence[str] = ("zh", "en")) -> Digest:
    """Every relevant paper of the week: the best max_papers as full entries, the rest as
    one-line entries under their topic. Seed entries are never this week's papers: at
    most max_curated of them, newest first, go to their own section; one whose note is in
    none of `languages` waits, unlisted, for a run that translates it (it was a bare title,
    marked shown for good)."""
    featured_keys = {e.key for e in featured}
    papers = sorted((e for e in entries if not e.curated and e.key not in featured_keys),
                    key=lambda e: (-(e.score or 0.0), e.key))
    seeds = newest_first(e for e in entries if e.curated and e.key not in featured_keys
                         and (summary_lines(e, languages) or not (e.summary_zh or e.summary_en)))
    full, brief = papers[:max_papers], papers[max_papers:]
    listed = [*featured, *full]
    rows, synthesis_zh, synthesis_en = curated
    if comparison:
        rows = tuple(Row(r["label_zh"], r["label_en"], tuple((c["zh"], c["en"]) for c in r["cells"]))
                     for r in comparison["rows"])
        synthesis_zh, synthesis_en = comparison["synthesis_zh"], comparison["synthesis_en"]
    week = [e for e in entries if not e.curated]
    return Digest(
        id=digest_id, window_start=window[0].isoformat(timespec="minutes"),
        window_end=window[1].isoformat(timespec="minutes"), timezone=timezone,
        sections=sections(full, topics, brief),
        featured=tuple(featured), comparison=rows,
        synthesis_zh=synthesis_zh, synthesis_en=synthesis_en,
        new=sum(1 for e in week if not e.revised), revised=sum(1 for e in week if e.revised),
        seeds=min(len(seeds), max_curated) + sum(1 for e in featured if e.curated),
        model=model, sources=tuple(sources), categories=tuple(categories), updates=tuple(updates),
        coverage=coverage, pending_zh=sum(1 for e in listed if not e.summary_zh and not e.curated),
        curated=tuple(seeds[:max_curated]), first=first, highlights=tuple(highlights),
        question_zh=question[0], question_en=question[1], trends=trends,
    )


def listed_keys(digest: Digest) -> list[str]:
    """Every item the digest lists, which is what publishing marks as published."""
    return [e.key for e in (*digest.featured, *digest.curated,
                            *(e for s in digest.sections for e in (*s.entries, *s.brief)))]


def digest_to_dict(digest: Digest) -> dict[str, Any]:
    return asdict(digest)


def digest_from_dict(data: dict[str, Any]) -> Digest:
    """Rebuild a stored digest exactly, for `rl-digest render`."""

    def entry(d: dict[str, Any]) -> Entry:
        return Entry(**{**d, "authors": tuple(d["authors"]), "categories": tuple(d["categories"]),
                        "key_points_zh": tuple(d["key_points_zh"]),
                        "key_points_en": tuple(d["key_points_en"]),
                        "parts": tuple(Part(**p) for p in d["parts"]),
                        "links": tuple(tuple(link) for link in d.get("links") or ())})

    def trends(t: dict[str, Any] | None) -> Trends | None:  # None in digests made before trends
        if not t:
            return None
        return Trends(tuple(t["weeks"]), tuple(TopicWeeks(w["topic"], w["name_zh"], w["name_en"],
                                                          tuple(w["counts"])) for w in t["topics"]),
                      tuple(Mover(**m) for m in t["movers"]))

    return Digest(**{
        **data,
        "trends": trends(data.get("trends")),
        "sections": tuple(Section(s["topic"], s["name_zh"], s["name_en"],
                                  tuple(entry(e) for e in s["entries"]),
                                  tuple(entry(e) for e in s.get("brief") or ()))
                          for s in data["sections"]),
        "featured": tuple(entry(e) for e in data["featured"]),
        "curated": tuple(entry(e) for e in data.get("curated") or ()),
        "highlights": tuple(Highlight(**h) for h in data.get("highlights") or ()),
        "comparison": tuple(Row(r["label_zh"], r["label_en"], tuple(tuple(c) for c in r["cells"]))
                            for r in data["comparison"]),
        "sources": tuple(data["sources"]), "categories": tuple(data["categories"]),
        "left_out": tuple(data.get("left_out") or ()),
        # in update_order, a digest stored in title order (before it) too
        "updates": tuple(sorted((Update(**{**u, "changes": tuple(tuple(c) for c in u["changes"])})
                                 for u in data.get("updates") or ()), key=update_order)),
    })
