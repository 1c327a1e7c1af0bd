"""The store's schema: the Table objects, the same on SQLite and PostgreSQL, and the numbered
steps that bring an older database forward to them.

A new database is created from the Tables, and an older one is brought forward at start
by steps written against them, never rebuilt. Apart from store.py's queries so that a
change of schema reads in one place: a Table, its step, LATEST. The clocks rows are
stamped by and the upsert live here because the steps use them too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from pipeline.errors import ConfigError
from pipeline.models import paper_key
from pipeline.store_connect import where
from pipeline.text import OTHERS

meta = sa.MetaData()
Stamp = sa.String(32)  # ISO 8601 text, as every release has stored times
Json = sa.JSON(none_as_null=True)  # JSON on PostgreSQL, text on SQLite; Python None is SQL NULL

papers = sa.Table(
    "papers", meta,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("title", sa.Text, nullable=False), sa.Column("abstract", sa.Text, nullable=False),
    sa.Column("authors", Json, nullable=False), sa.Column("categories", Json, nullable=False),
    sa.Column("submitted", Stamp, index=True), sa.Column("updated", Stamp),
    sa.Column("comment", sa.Text), sa.Column("journal_ref", sa.Text),
    sa.Column("sources", Json, nullable=False),
    sa.Column("first_seen", Stamp, nullable=False), sa.Column("revised_at", Stamp),
    sa.Column("score", sa.Float), sa.Column("relevant", sa.Boolean), sa.Column("reasons", Json),
    sa.Column("topic", sa.String(64)), sa.Column("topics", Json),
    sa.Column("changed_at", Stamp),  # when its news (compose.snapshot) last changed: Updates
)
seeds = sa.Table(
    "seeds", meta,
    sa.Column("key", sa.String(255), primary_key=True), sa.Column("title", sa.Text, nullable=False),
    sa.Column("source", sa.String(255), nullable=False), sa.Column("line", sa.Integer, nullable=False),
    sa.Column("data", Json, nullable=False), sa.Column("arxiv_id", sa.String(64)),
    sa.Column("resolve_tried_at", Stamp), sa.Column("first_seen", Stamp, nullable=False),
)
runs = sa.Table(
    "runs", meta,
    sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False), sa.Column("as_of", Stamp, nullable=False),
    sa.Column("started", Stamp, nullable=False), sa.Column("finished", Stamp),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("window_start", Stamp), sa.Column("window_end", Stamp),
    sa.Column("report", Json), sa.Column("error", sa.Text),
)
digests = sa.Table(
    "digests", meta,
    sa.Column("id", sa.String(10), primary_key=True), sa.Column("created", Stamp, nullable=False),
    sa.Column("window_start", Stamp), sa.Column("window_end", Stamp),
    sa.Column("data", Json, nullable=False),
)
digest_items = sa.Table(
    "digest_items", meta,
    sa.Column("digest_id", sa.String(10), sa.ForeignKey("digests.id"), primary_key=True),
    sa.Column("item_key", sa.String(255), primary_key=True, unique=True),  # one digest per paper
    sa.Column("shown", sa.Boolean, nullable=False),
    sa.Column("snapshot", Json),  # what the paper looked like when listed (Updates)
)
enrichments = sa.Table(
    "enrichments", meta,
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("item_key", sa.String(255), nullable=False, index=True),
    sa.Column("kind", sa.String(32), nullable=False), sa.Column("data", Json, nullable=False),
    sa.Column("tokens_in", sa.Integer), sa.Column("tokens_out", sa.Integer),
    sa.Column("created", Stamp, nullable=False),
)
deliveries = sa.Table(
    "deliveries", meta,
    sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
    sa.Column("digest_id", sa.String(10), sa.ForeignKey("digests.id"), nullable=False),
    sa.Column("recipient", sa.String(320), nullable=False),
    sa.Column("status", sa.String(16), nullable=False), sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("last_error", sa.Text), sa.Column("message_id", sa.String(255)),
    sa.Column("sent_at", Stamp), sa.Column("next_attempt", Stamp),
    sa.Column("not_before", Stamp),  # the other side's Retry-After: no try before it, by anyone
    sa.UniqueConstraint("digest_id", "recipient"),  # a reader gets a digest once
)
state = sa.Table(
    "state", meta,
    sa.Column("key", sa.String(255), primary_key=True), sa.Column("value", Json, nullable=False),
)
readers = sa.Table(  # what a reader said through serve's links; the config says who they are
    "readers", meta,
    sa.Column("address", sa.String(320), primary_key=True),  # lower case
    sa.Column("name", sa.Text), sa.Column("status", sa.String(16), nullable=False),
    sa.Column("changed_at", Stamp),
)
verdicts = sa.Table(  # relevant or not, by whom: `mark` (reader '') or a reader's 👍/👎
    "verdicts", meta,
    sa.Column("item_key", sa.String(255), primary_key=True),
    sa.Column("reader", sa.String(320), primary_key=True),
    sa.Column("verdict", sa.Boolean, nullable=False), sa.Column("at", Stamp, nullable=False),
)
YOU = ""  # the reader of `rl-digest mark`: the install's own
schema_migrations = sa.Table(
    "schema_migrations", meta,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied", sa.String),
)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def db_now(conn: Connection) -> str:
    """now_iso by the database's clock, for a time that rows another process wrote are
    ordered by: a paper's change against the last digest (papers.changed_at, digests.created)
    and the newest summary. Machines sharing a PostgreSQL server may keep their clocks
    apart, and a change stamped by one an hour slow sorted before the digest it came after:
    never in Updates. The server is one clock; a SQLite file's is its machine's."""
    if conn.dialect.name != "postgresql":
        return now_iso()
    return conn.execute(sa.select(sa.func.now())).scalar_one().astimezone(UTC).isoformat(timespec="seconds")


def upsert(conn: Connection, table: sa.Table, rows: list[dict[str, Any]],
           refresh: Iterable[str] | None = None) -> None:
    """INSERT ... ON CONFLICT (primary key) DO UPDATE, through the dialect's own insert.
    `refresh` names the columns a known row takes (default: all but the key)."""
    if not rows:
        return
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)
    keys = [c.name for c in table.primary_key]
    names = refresh if refresh is not None else [n for n in rows[0] if n not in keys]
    conn.execute(insert.on_conflict_do_update(
        index_elements=keys, set_={name: insert.excluded[name] for name in names}), rows)


def _from_hand_written_sql(conn: Connection) -> None:
    """Version 1 was SQL text. On PostgreSQL its ids had no default (the first run failed)
    and its JSON sat in TEXT columns: give them the Table's identity and JSON type. On
    SQLite it already matches (INTEGER PRIMARY KEY is the rowid; JSON is read from text)."""
    if conn.dialect.name != "postgresql":
        return
    live = sa.inspect(conn)
    for table in meta.sorted_tables:
        if not live.has_table(table.name):
            continue
        for name in (c["name"] for c in live.get_columns(table.name)):
            column = table.c.get(name)
            if column is None:
                continue
            target = f"ALTER TABLE {table.name} ALTER COLUMN {name}"
            if column.identity is not None:
                conn.execute(sa.DDL(f"{target} ADD GENERATED BY DEFAULT AS IDENTITY"))
                restart_identity(conn, table)
            elif isinstance(column.type, sa.JSON):
                kind = column.type.compile(dialect=conn.dialect)
                conn.execute(sa.DDL(f"{target} TYPE {kind} USING {name}::{kind}"))


# Steps from an older database's version to the next, written against the Tables above:
# step N takes version N to N + 1. A new database is made whole by meta.create_all and
# starts at the latest version. A change to a Table above adds a step here (a new table:
# `table.create(conn)`; a new column: ALTER TABLE ... ADD COLUMN from
# `sa.schema.CreateColumn(column).compile(dialect=conn.dialect)`).
def _digest_item_snapshots(conn: Connection) -> None:
    """The Updates ledger: what each listed paper looked like (version, venue, code)."""
    column = sa.schema.CreateColumn(digest_items.c.snapshot).compile(dialect=conn.dialect)
    conn.execute(sa.DDL(f"ALTER TABLE digest_items ADD COLUMN {column}"))


def _source_memory(conn: Connection) -> None:
    """What a source keeps between windows lives under one key per source: the RSS feeds'
    `rss.seen:<url>` keys become the `source:rss` mapping of url to what was seen."""
    rows = conn.execute(sa.select(state.c.key, state.c.value).where(state.c.key.like("rss.seen:%"))).all()
    if rows:
        upsert(conn, state, [{"key": "source:rss",
                              "value": {key.removeprefix("rss.seen:"): value for key, value in rows}}])
        conn.execute(state.delete().where(state.c.key.like("rss.seen:%")))


def _reader_tables(conn: Connection) -> None:
    """Readers and verdicts get tables: the `readers` and `feedback` state keys and the
    papers' `verdict` column (rl-digest mark) move into them."""
    readers.create(conn, checkfirst=True)
    verdicts.create(conn, checkfirst=True)
    stamp = now_iso()
    said = conn.execute(sa.select(state.c.value).where(state.c.key == "readers")).scalar() or {}
    upsert(conn, readers, [{"address": address.lower(), "name": None, "status": row.get("status", "active"),
                            "changed_at": row.get("changed")} for address, row in said.items()])
    feedback = conn.execute(sa.select(state.c.value).where(state.c.key == "feedback")).scalar() or {}
    rows = [{"item_key": key, "reader": address.lower(), "verdict": row["verdict"] == "up",
             "at": row.get("at") or stamp}
            for key, by in feedback.items() for address, row in by.items()]
    marked = "verdict" in {c["name"] for c in sa.inspect(conn).get_columns("papers")}
    if marked:
        marks = conn.execute(sa.text("SELECT id, verdict FROM papers WHERE verdict IS NOT NULL"))
        rows += [{"item_key": paper_key(pid), "reader": YOU, "verdict": bool(verdict), "at": stamp}
                 for pid, verdict in marks]
    upsert(conn, verdicts, rows)
    conn.execute(state.delete().where(state.c.key.in_(("readers", "feedback"))))
    if marked:
        conn.execute(sa.DDL("ALTER TABLE papers DROP COLUMN verdict"))


def _delivery_not_before(conn: Connection) -> None:
    """A row keeps the time the other side asked us to wait until (Retry-After)."""
    if "not_before" in {c["name"] for c in sa.inspect(conn).get_columns("deliveries")}:
        return
    column = sa.schema.CreateColumn(deliveries.c.not_before).compile(dialect=conn.dialect)
    conn.execute(sa.DDL(f"ALTER TABLE deliveries ADD COLUMN {column}"))


def _paper_changed_at(conn: Connection) -> None:
    """A paper keeps when its record last changed (a version, a venue or code link can come
    without one), so a run compares only those with what their digest said. Every paper
    stored before counts as changed now: the next run compares them all, once."""
    if "changed_at" not in {c["name"] for c in sa.inspect(conn).get_columns("papers")}:
        column = sa.schema.CreateColumn(papers.c.changed_at).compile(dialect=conn.dialect)
        conn.execute(sa.DDL(f"ALTER TABLE papers ADD COLUMN {column}"))
    conn.execute(papers.update().values(changed_at=db_now(conn)))


def _authors_cut_at_100(conn: Connection) -> None:
    """Releases before this one cut an author list at 100 names and said nothing: a list of
    exactly 100 ends in OTHERS now, so the exports say the paper may name more (the paper's
    next fetch brings its whole list, up to text.AUTHORS_MAX)."""
    cut = conn.execute(sa.select(papers.c.id, papers.c.authors)
                       .where(sa.func.json_array_length(papers.c.authors) == 100)).all()
    for pid, authors in cut:
        conn.execute(papers.update().where(papers.c.id == pid).values(authors=[*authors, OTHERS]))


UPGRADES: list[Callable[[Connection], None]] = [
    _from_hand_written_sql,  # 1 -> 2
    _digest_item_snapshots,  # 2 -> 3
    _source_memory,  # 3 -> 4
    _reader_tables,  # 4 -> 5
    _delivery_not_before,  # 5 -> 6
    _paper_changed_at,  # 6 -> 7
    _authors_cut_at_100,  # 7 -> 8
]
LATEST = len(UPGRADES) + 1


def make_current(conn: Connection) -> None:
    """In `conn`'s transaction, under the migration lock (SQLite's write lock, or an advisory
    lock that a second process starting at the same moment waits for): make a new database
    whole, or bring an older one forward step by step; the caller commits. One a newer
    release wrote is refused: this one would not know its new tables (machines sharing a server)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, before reading the version
    else:
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(MIGRATION_LOCK)))
    found = schema_version(conn)
    if found > LATEST:
        raise ConfigError(f"{where(conn.engine)}: schema version {found} is newer than this "
                          f"rl-digest's ({LATEST}): a newer release has used this database",
                          "upgrade rl-digest here too")
    if found == 0:
        meta.create_all(conn)
        conn.execute(schema_migrations.insert().values(version=LATEST, applied=now_iso()))
        found = LATEST
    for number in range(found, LATEST):
        UPGRADES[number - 1](conn)
        conn.execute(schema_migrations.insert().values(version=number + 1, applied=now_iso()))


def restart_identity(conn: Connection, table: sa.Table) -> None:
    """On PostgreSQL, the next id of `table`'s identity column past the largest it holds:
    rows were written with their ids, and a later insert must not collide with one."""
    for column in (c for c in table.c if c.identity is not None):
        conn.execute(sa.text(
            f"SELECT setval(pg_get_serial_sequence('{table.name}', '{column.name}'), "
            f"coalesce(max({column.name}), 0) + 1, false) FROM {table.name}"))


def schema_version(conn: Connection) -> int:
    if not sa.inspect(conn).has_table("schema_migrations"):
        return 0
    return conn.execute(sa.select(sa.func.max(schema_migrations.c.version))).scalar() or 0


MIGRATION_LOCK = 0x726C6D69  # "rlmi": PostgreSQL advisory lock key while migrating
