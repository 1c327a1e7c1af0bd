"""The seed entries in the store: saved as the seed files are read, tied to the arXiv paper a
title search found, and dropped when no file lists them and no digest showed them.

Apart from store.py's paper ledger because seeds come from the operator's files, not from
a source, and keep the order those files were read in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa

from pipeline.models import SeedEntry, seed_key
from pipeline.store import Store, chunks, iso, parse_dt
from pipeline.store_schema import digest_items, now_iso, seeds, upsert

SEEDS_READ = "seeds.read"  # the seed entries' keys in the order the files were read


def save_seeds(db: Store, entries: Iterable[SeedEntry]) -> int:
    """Insert new seed entries and refresh known ones; return how many are new."""
    stamp = now_iso()
    rows = {seed_key(e.title): dict(key=seed_key(e.title), title=e.title, source=e.source,
                                    line=e.line, data=_seed_data(e), arxiv_id=e.arxiv_id,
                                    first_seen=stamp)
            for e in entries}  # the same title twice is one seed: the last one read wins
    with db.tx() as conn:
        known = {key for chunk in chunks(list(rows))
                 for key in conn.execute(sa.select(seeds.c.key).where(seeds.c.key.in_(chunk))).scalars()}
        upsert(conn, seeds, list(rows.values()), refresh=("title", "source", "line", "data"))
    return len(rows.keys() - known)


def forget_seeds(db: Store, kept: Sequence[str]) -> None:
    """Drop the seed entries whose keys are not `kept` (no longer in any seed file) and
    that no digest showed; one a digest showed stays in the reading list it links to.
    `kept` is in the order the files were read, the order `all_seeds` gives."""
    shown = sa.select(digest_items.c.item_key)
    query = sa.select(seeds.c.key).where(seeds.c.key.not_in(shown), sa.or_(
        seeds.c.arxiv_id.is_(None), (sa.literal("arxiv:") + seeds.c.arxiv_id).not_in(shown)))
    with db.tx() as conn:
        gone = list(set(conn.execute(query).scalars()) - set(kept))
        for chunk in chunks(gone):
            conn.execute(seeds.delete().where(seeds.c.key.in_(chunk)))
        db.set_state(SEEDS_READ, list(kept), conn)


def all_seeds(db: Store) -> list[SeedEntry]:
    """Every seed entry kept, tied to the paper it was resolved to: those in no seed
    file now (a digest showed them) oldest first, then the others in the order the
    files were read (by the last collect that read them all), so the last of the
    entries naming one paper is the one read last (seeds.same_paper)."""
    with db.engine.connect() as conn:
        query = sa.select(seeds).order_by(seeds.c.first_seen, seeds.c.source, seeds.c.line)
        rows = [dict(r) for r in conn.execute(query).mappings()]
    read = {key: n for n, key in enumerate(db.get_state(SEEDS_READ) or ())}
    rows.sort(key=lambda row: read.get(row["key"], -1))
    return [row_to_seed(row) for row in rows]


def seed_tries(db: Store) -> dict[str, datetime | None]:
    """Seed key -> when a title search for it last ran (None: never)."""
    with db.engine.connect() as conn:
        return {key: parse_dt(tried) for key, tried in
                conn.execute(sa.select(seeds.c.key, seeds.c.resolve_tried_at))}


def set_seed_resolutions(db: Store, tied: Mapping[str, str | None], tried_at: str) -> None:
    """Seed key -> the arXiv id it was tied to, or None: searched for, not found."""
    with db.tx() as conn:
        for key, arxiv_id in tied.items():
            values: dict[str, Any] = {"resolve_tried_at": tried_at}
            if arxiv_id:
                values["arxiv_id"] = arxiv_id
            conn.execute(seeds.update().where(seeds.c.key == key).values(**values))


def _seed_data(entry: SeedEntry) -> dict[str, Any]:
    data = asdict(entry)
    data["date"] = iso(entry.date)
    return data


def row_to_seed(row: dict[str, Any]) -> SeedEntry:
    data = dict(row["data"])
    data["date"] = date.fromisoformat(data["date"]) if data.get("date") else None
    data["parts_zh"] = tuple(tuple(part) for part in data.get("parts_zh") or ())
    data["arxiv_id"] = row.get("arxiv_id") or data.get("arxiv_id")
    return SeedEntry(**data)
