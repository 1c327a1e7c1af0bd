"""Readers and their verdicts in the store: who is kept and in what status, the 👍/👎 each
gave and the install's own (`rl-digest mark`), and erasing a reader (`readers --forget`).

Apart from store.py, which keeps the papers, seeds, runs and digests: these rows are about
people, and forgetting one reaches into the outbox and the run reports as well.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from email.utils import parseaddr
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pipeline.models import paper_key
from pipeline.store import Store
from pipeline.store_schema import YOU, deliveries, now_iso, papers, readers, runs, upsert, verdicts

FORGOTTEN = "a reader forgotten"  # stands for a reader erased by `readers --forget`, with " #N"


def set_verdict(db: Store, pid: str, verdict: bool | None) -> bool:
    """The install's own verdict on a stored paper; None takes it back, whatever the
    store holds (a verdict kept for a paper gone would come back with it). False: no
    such paper to judge."""
    with db.tx() as conn:
        if verdict is not None and conn.execute(
                sa.select(papers.c.id).where(papers.c.id == pid)).first() is None:
            return False
        _set_verdicts(conn, [(paper_key(pid), YOU, verdict)], now_iso())
        return True


def record_verdict(db: Store, item_key: str, reader: str, verdict: bool | None,
                   at: str | None = None) -> None:
    """A reader's verdict on an item (a later one replaces it; None takes it back)."""
    with db.tx() as conn:
        _set_verdicts(conn, [(item_key, reader.lower(), verdict)], at or now_iso())


def verdicts_given(db: Store, item_key: str | None = None) -> list[dict[str, Any]]:
    """Every verdict (item_key, reader, verdict, at), or those on one item."""
    query = sa.select(verdicts).order_by(verdicts.c.item_key, verdicts.c.reader)
    if item_key is not None:
        query = query.where(verdicts.c.item_key == item_key)
    with db.engine.connect() as conn:
        return [dict(row) for row in conn.execute(query).mappings()]


def known(db: Store) -> dict[str, dict[str, Any]]:
    """Address (lower case) -> {name, status, changed_at}, for every reader kept."""
    with db.engine.connect() as conn:
        return {row["address"]: {k: row[k] for k in ("name", "status", "changed_at")}
                for row in conn.execute(sa.select(readers)).mappings()}


def keep_readers(db: Store, found: Iterable[tuple[str, str | None]], status: str = "active") -> None:
    """Note readers (address, name) not kept yet, with `status`; known ones keep theirs
    and take the name given."""
    rows = {address.lower(): {"address": address.lower(), "name": name, "status": status,
                              "changed_at": None} for address, name in found}
    with db.tx() as conn:
        upsert(conn, readers, list(rows.values()), refresh=("name",))


def set_reader_status(db: Store, address: str, status: str, at: str | None = None) -> None:
    with db.tx() as conn:
        upsert(conn, readers, [{"address": address.lower(), "name": None, "status": status,
                                "changed_at": at or now_iso()}], refresh=("status", "changed_at"))


def forget_reader(db: Store, address: str, name: str | None = None) -> dict[str, int]:
    """Erase what is kept about a reader (`readers --forget`), in one transaction: their
    `readers` row goes, and so do their outbox rows still waiting; the rows of what was
    sent, skipped or refused stay for the digests' history as FORGOTTEN #row id; their
    👍/👎 stay, each as FORGOTTEN #N of that paper (one voice, as before, tied to no one
    and to none of their others); the run reports' words name FORGOTTEN instead of them.
    How many of each, by kind."""
    address = address.lower()
    with db.tx() as conn:
        kept = readers.c.address == address
        name = name or conn.execute(sa.select(readers.c.name).where(kept)).scalar()
        scrub = partial(_scrub, address, name)
        done = {"status": conn.execute(readers.delete().where(kept)).rowcount,
                "deliveries": 0, "dropped": 0, "verdicts": 0, "runs": 0}
        named = sa.func.lower(deliveries.c.recipient).contains(address, autoescape=True)
        for row in conn.execute(sa.select(deliveries).where(named)).all():
            if parseaddr(row.recipient)[1].lower() != address:
                continue
            this = deliveries.c.id == row.id
            if row.status in ("pending", "sending"):
                conn.execute(deliveries.delete().where(this))
                done["dropped"] += 1
            else:
                conn.execute(deliveries.update().where(this).values(
                    recipient=f"{FORGOTTEN} #{row.id}", last_error=scrub(row.last_error)))
                done["deliveries"] += 1
        said = sa.select(verdicts.c.item_key).where(verdicts.c.reader == address)
        for key in conn.execute(said).scalars().all():
            labels = set(conn.execute(sa.select(verdicts.c.reader).where(
                verdicts.c.item_key == key, verdicts.c.reader.startswith(FORGOTTEN))).scalars())
            label = next(f"{FORGOTTEN} #{n}" for n in range(1, len(labels) + 2)
                         if f"{FORGOTTEN} #{n}" not in labels)
            conn.execute(verdicts.update().where(verdicts.c.item_key == key, verdicts.c.reader == address)
                         .values(reader=label))
            done["verdicts"] += 1
        for run in conn.execute(sa.select(runs.c.id, runs.c.report, runs.c.error)).all():
            report, error = _scrubbed(run.report, scrub), scrub(run.error)
            if (report, error) != (run.report, run.error):
                conn.execute(runs.update().where(runs.c.id == run.id).values(report=report, error=error))
                done["runs"] += 1
        return done


def _set_verdicts(conn: Connection, said: Iterable[tuple[str, str, bool | None]], at: str) -> None:
    """(item key, reader, verdict) rows kept, or taken back where the verdict is None."""
    said = list(said)
    for key, reader, _ in (row for row in said if row[2] is None):
        conn.execute(verdicts.delete().where(verdicts.c.item_key == key, verdicts.c.reader == reader))
    upsert(conn, verdicts, [{"item_key": key, "reader": reader, "verdict": verdict, "at": at}
                            for key, reader, verdict in said if verdict is not None])


def _scrub(address: str, name: str | None, text: str | None) -> str | None:
    """`text` with a reader's address, and `Name <address>`, as FORGOTTEN."""
    if not text:
        return text
    # the address alone: forgetting bob@example.org leaves jimbob@example.org and bob@example.org.uk
    text = re.sub(rf"(?<![\w.!#$%&'*+/=?^`{{|}}~-]){re.escape(address)}(?![\w-]|\.\w)", FORGOTTEN, text,
                  flags=re.IGNORECASE)
    if name:
        text = re.sub(rf'"?{re.escape(name)}"?\s*<{FORGOTTEN}>', FORGOTTEN, text)
    return text


def _scrubbed(value: Any, scrub: Callable[[str], str | None]) -> Any:
    """A JSON value with `scrub` applied to every string in it, keys too."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_scrubbed(v, scrub) for v in value]
    if isinstance(value, dict):
        return {scrub(k): _scrubbed(v, scrub) for k, v in value.items()}
    return value
