"""The outbox's rows in the store: one per digest and recipient, read and changed by
deliver/outbox.py as each send is tried (store.save_digest writes a digest's first rows).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from pipeline.store import Store
from pipeline.store_schema import deliveries, digests


def rows(db: Store, digest_id: str | None = None, statuses: tuple[str, ...] = (),
         noted: str | None = None) -> list[dict[str, Any]]:
    """Outbox rows, oldest first, each with `queued`, when its digest was saved; `noted`:
    only those whose last_error begins so (a big group's sent rows number a thousand a
    week: status wants the few resent)."""
    query = (sa.select(deliveries, digests.c.created.label("queued"))
             .join(digests, digests.c.id == deliveries.c.digest_id, isouter=True)
             .order_by(deliveries.c.digest_id, deliveries.c.id))
    if digest_id:
        query = query.where(deliveries.c.digest_id == digest_id)
    if statuses:
        query = query.where(deliveries.c.status.in_(statuses))
    if noted:
        query = query.where(deliveries.c.last_error.startswith(noted, autoescape=True))
    with db.engine.connect() as conn:
        return [dict(r) for r in conn.execute(query).mappings()]


def last_sent(db: Store) -> list[tuple[str, str, str | None]]:
    """(recipient, newest digest sent, last sent_at) of each recipient an outbox row reached:
    a big group's sent rows number a thousand a week, and `readers` wants only these."""
    query = sa.select(deliveries.c.recipient, sa.func.max(deliveries.c.digest_id),
                      sa.func.max(deliveries.c.sent_at)).where(
        deliveries.c.status == "sent").group_by(deliveries.c.recipient)
    with db.engine.connect() as conn:
        return [(who, digest_id, at) for who, digest_id, at in conn.execute(query)]


def add_delivery(db: Store, digest_id: str, recipient: str) -> None:
    with db.tx() as conn:
        conn.execute(deliveries.insert().values(
            digest_id=digest_id, recipient=recipient, status="pending", attempts=0))


def update_delivery(db: Store, delivery_id: int, seen: tuple[str, str | None] | None = None,
                    **values: Any) -> bool:
    """Change a row; with `seen` (status, message_id), only if it still has them.
    Whether it changed."""
    query = deliveries.update().where(deliveries.c.id == delivery_id)
    if seen is not None:
        query = query.where(deliveries.c.status == seen[0],
                            deliveries.c.message_id.is_not_distinct_from(seen[1]))
    with db.tx() as conn:
        return conn.execute(query.values(**values)).rowcount == 1
