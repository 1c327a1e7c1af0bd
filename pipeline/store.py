"""State on SQLAlchemy 2 Core: the paper ledger, seeds, runs, digests, cache, outbox.

SQLite by default (WAL, busy timeout); any SQLAlchemy URL such as PostgreSQL
works. Schema changes are numbered migrations recorded in the database, so an
older database is brought forward at start and never rebuilt.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from pipeline.config import mask_url, sqlite_file
from pipeline.errors import ConfigError, DigestError, LockedError
from pipeline.models import Paper, SeedEntry

MIGRATIONS: list[list[str]] = [
    [  # 1: the ledger, seeds, runs, digests, enrichment cache, outbox, key-value state
        """CREATE TABLE papers (
            id VARCHAR(64) PRIMARY KEY, version INTEGER NOT NULL, title TEXT NOT NULL,
            abstract TEXT NOT NULL, authors TEXT NOT NULL, categories TEXT NOT NULL,
            submitted VARCHAR(32), updated VARCHAR(32), comment TEXT, journal_ref TEXT,
            sources TEXT NOT NULL, first_seen VARCHAR(32) NOT NULL, revised_at VARCHAR(32),
            score FLOAT, relevant BOOLEAN, reasons TEXT, topic VARCHAR(64), topics TEXT,
            verdict BOOLEAN)""",
        "CREATE INDEX ix_papers_submitted ON papers (submitted)",
        """CREATE TABLE seeds (
            key VARCHAR(255) PRIMARY KEY, title TEXT NOT NULL, source VARCHAR(255) NOT NULL,
            line INTEGER NOT NULL, data TEXT NOT NULL, arxiv_id VARCHAR(64),
            resolve_tried_at VARCHAR(32), first_seen VARCHAR(32) NOT NULL)""",
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY, kind VARCHAR(16) NOT NULL, as_of VARCHAR(32) NOT NULL,
            started VARCHAR(32) NOT NULL, finished VARCHAR(32), status VARCHAR(16) NOT NULL,
            window_start VARCHAR(32), window_end VARCHAR(32), report TEXT, error TEXT)""",
        """CREATE TABLE digests (
            id VARCHAR(10) PRIMARY KEY, created VARCHAR(32) NOT NULL,
            window_start VARCHAR(32), window_end VARCHAR(32), data TEXT NOT NULL)""",
        """CREATE TABLE digest_items (
            digest_id VARCHAR(10) NOT NULL REFERENCES digests (id), item_key VARCHAR(255) NOT NULL,
            shown BOOLEAN NOT NULL, PRIMARY KEY (digest_id, item_key), UNIQUE (item_key))""",
        """CREATE TABLE enrichments (
            key VARCHAR(255) PRIMARY KEY, item_key VARCHAR(255) NOT NULL, kind VARCHAR(32) NOT NULL,
            data TEXT NOT NULL, tokens_in INTEGER, tokens_out INTEGER, created VARCHAR(32) NOT NULL)""",
        "CREATE INDEX ix_enrichments_item ON enrichments (item_key)",
        """CREATE TABLE deliveries (
            id INTEGER PRIMARY KEY, digest_id VARCHAR(10) NOT NULL REFERENCES digests (id),
            recipient VARCHAR(320) NOT NULL, status VARCHAR(16) NOT NULL,
            attempts INTEGER NOT NULL, last_error TEXT, message_id VARCHAR(255),
            sent_at VARCHAR(32), next_attempt VARCHAR(32), UNIQUE (digest_id, recipient))""",
        "CREATE TABLE state (key VARCHAR(255) PRIMARY KEY, value TEXT NOT NULL)",
    ],
]

meta = sa.MetaData()
papers = sa.Table(
    "papers", meta,
    sa.Column("id", sa.String, primary_key=True), sa.Column("version", sa.Integer),
    sa.Column("title", sa.Text), sa.Column("abstract", sa.Text), sa.Column("authors", sa.Text),
    sa.Column("categories", sa.Text), sa.Column("submitted", sa.String),
    sa.Column("updated", sa.String), sa.Column("comment", sa.Text),
    sa.Column("journal_ref", sa.Text), sa.Column("sources", sa.Text),
    sa.Column("first_seen", sa.String), sa.Column("revised_at", sa.String),
    sa.Column("score", sa.Float), sa.Column("relevant", sa.Boolean), sa.Column("reasons", sa.Text),
    sa.Column("topic", sa.String), sa.Column("topics", sa.Text), sa.Column("verdict", sa.Boolean),
)
seeds = sa.Table(
    "seeds", meta,
    sa.Column("key", sa.String, primary_key=True), sa.Column("title", sa.Text),
    sa.Column("source", sa.String), sa.Column("line", sa.Integer), sa.Column("data", sa.Text),
    sa.Column("arxiv_id", sa.String), sa.Column("resolve_tried_at", sa.String),
    sa.Column("first_seen", sa.String),
)
runs = sa.Table(
    "runs", meta,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("kind", sa.String),
    sa.Column("as_of", sa.String), sa.Column("started", sa.String), sa.Column("finished", sa.String),
    sa.Column("status", sa.String), sa.Column("window_start", sa.String),
    sa.Column("window_end", sa.String), sa.Column("report", sa.Text), sa.Column("error", sa.Text),
)
digests = sa.Table(
    "digests", meta,
    sa.Column("id", sa.String, primary_key=True), sa.Column("created", sa.String),
    sa.Column("window_start", sa.String), sa.Column("window_end", sa.String),
    sa.Column("data", sa.Text),
)
digest_items = sa.Table(
    "digest_items", meta,
    sa.Column("digest_id", sa.String, primary_key=True),
    sa.Column("item_key", sa.String, primary_key=True), sa.Column("shown", sa.Boolean),
)
enrichments = sa.Table(
    "enrichments", meta,
    sa.Column("key", sa.String, primary_key=True), sa.Column("item_key", sa.String),
    sa.Column("kind", sa.String), sa.Column("data", sa.Text), sa.Column("tokens_in", sa.Integer),
    sa.Column("tokens_out", sa.Integer), sa.Column("created", sa.String),
)
deliveries = sa.Table(
    "deliveries", meta,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("digest_id", sa.String),
    sa.Column("recipient", sa.String), sa.Column("status", sa.String),
    sa.Column("attempts", sa.Integer), sa.Column("last_error", sa.Text),
    sa.Column("message_id", sa.String), sa.Column("sent_at", sa.String),
    sa.Column("next_attempt", sa.String),
)
state = sa.Table(
    "state", meta, sa.Column("key", sa.String, primary_key=True), sa.Column("value", sa.Text)
)
schema_migrations = sa.Table(
    "schema_migrations", meta,
    sa.Column("version", sa.Integer, primary_key=True), sa.Column("applied", sa.String),
)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def iso(value: datetime | date | None) -> str | None:
    return value.isoformat() if value is not None else None


def parse_dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def seed_key(title: str) -> str:
    """Seeds are identified by their title, folded: the same paper in two files is one."""
    return "seed:" + "".join(ch for ch in title.casefold() if ch.isalnum())[:200]


def paper_key(paper_id: str) -> str:
    return "arxiv:" + paper_id


class Store:
    """The database behind one config; open() migrates it forward."""

    def __init__(self, engine: Engine):
        self.engine = engine

    @classmethod
    def open(cls, url: str, busy_timeout: float = 30) -> Store:
        path = sqlite_file(url)
        if path is not None:
            _private(path)
        try:
            engine = sa.create_engine(url, connect_args={"timeout": busy_timeout} if path else {})
        except (ImportError, sa.exc.NoSuchModuleError, sa.exc.ArgumentError) as exc:
            scheme = url.split(":", 1)[0]
            raise ConfigError(f"storage.url: cannot use a {scheme} database here ({exc})",
                              "for PostgreSQL: pip install 'rl-digest[postgres]'") from None
        if path is not None:
            sa.event.listen(engine, "connect", _sqlite_pragmas(busy_timeout))
            sa.event.listen(engine, "handle_error", _one_line_errors(path, busy_timeout))
        store = cls(engine)
        try:
            store.migrate()
        except sa.exc.DatabaseError as exc:
            raise DigestError(f"{path or mask_url(url)}: not a usable database: {exc.orig}") from None
        return store

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    # --- migrations ---
    def version(self) -> int:
        with self.engine.connect() as conn:
            if not sa.inspect(conn).has_table("schema_migrations"):
                return 0
            return conn.execute(sa.select(sa.func.max(schema_migrations.c.version))).scalar() or 0

    def migrate(self, upto: int | None = None) -> int:
        """Apply the numbered migrations this database lacks, each in its own transaction."""
        target = len(MIGRATIONS) if upto is None else upto
        try:
            with self.tx() as conn:
                schema_migrations.create(conn, checkfirst=True)
        except sa.exc.OperationalError:  # another process created it a moment ago
            pass
        for number in range(self.version() + 1, target + 1):
            try:
                with self.tx() as conn:
                    for statement in MIGRATIONS[number - 1]:
                        conn.exec_driver_sql(statement)
                    conn.execute(schema_migrations.insert().values(version=number,
                                                                   applied=now_iso()))
            except sa.exc.OperationalError:
                if self.version() < number:  # not a second process racing us: a real failure
                    raise
        return target

    # --- key-value state ---
    def get_state(self, key: str) -> Any:
        with self.engine.connect() as conn:
            value = conn.execute(sa.select(state.c.value).where(state.c.key == key)).scalar()
        return json.loads(value) if value is not None else None

    def set_state(self, key: str, value: Any, conn: Connection | None = None) -> None:
        with _maybe_tx(self, conn) as c:
            c.execute(state.delete().where(state.c.key == key))
            c.execute(state.insert().values(key=key, value=json.dumps(value)))

    # --- papers ---
    def upsert_papers(self, found: Iterable[Paper]) -> tuple[list[Paper], list[Paper], int]:
        """Store papers by version-less id; return (new, revised, unchanged count).

        A version only moves forward; a newer one updates the record and is
        noted as revised, never as a new paper.
        """
        found = list(found)
        new, revised, same = [], [], 0
        stamp = now_iso()
        with self.tx() as conn:
            known, revised_at = {}, {}
            for chunk in _chunks([p.id for p in found]):
                for row in conn.execute(sa.select(papers).where(papers.c.id.in_(chunk))).mappings():
                    known[row["id"]] = row_to_paper(row)
                    revised_at[row["id"]] = row["revised_at"]
            inserts, updates = [], {}
            for paper in found:
                old = known.get(paper.id)
                if old is None:
                    inserts.append({**_paper_row(paper), "first_seen": stamp, "revised_at": None})
                    if len(inserts) == 500:  # a slice at a time: the rows are as big as the papers
                        conn.execute(papers.insert(), inserts)
                        inserts = []
                    known[paper.id] = paper
                    new.append(paper)
                    continue
                merged = merge_papers(old, paper)
                known[paper.id] = merged
                if merged == old:
                    same += 1
                    continue
                if merged.version > old.version:
                    revised_at[paper.id] = stamp
                    revised.append(merged)
                else:
                    same += 1
                updates[paper.id] = merged
            if inserts:
                conn.execute(papers.insert(), inserts)
            if updates:
                rows = [{**_paper_row(p), "pid": pid, "revised_at": revised_at.get(pid)}
                        for pid, p in updates.items()]
                for row in rows:
                    del row["id"]
                conn.execute(papers.update().where(papers.c.id == sa.bindparam("pid")), rows)
        return new, revised, same

    def papers(self, ids: Iterable[str] | None = None) -> list[Paper]:
        """All papers, or those with these ids (asked in slices)."""
        queries = ([sa.select(papers)] if ids is None else
                   [sa.select(papers).where(papers.c.id.in_(chunk)) for chunk in _chunks(list(ids))])
        with self.engine.connect() as conn:
            return [row_to_paper(row) for query in queries for row in conn.execute(query).mappings()]

    def paper_titles(self) -> list[tuple[str, str]]:
        with self.engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.select(papers.c.id, papers.c.title))]

    def papers_to_score(self) -> list[Paper]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(papers).where(papers.c.score.is_(None))).mappings()
            return [row_to_paper(row) for row in rows]

    def relevant_papers(self) -> list[Paper]:
        """Kept by the score, unless the user's verdict says otherwise."""
        keep = sa.func.coalesce(papers.c.verdict, papers.c.relevant).is_(True)
        query = sa.select(papers).where(keep).order_by(papers.c.submitted.desc(), papers.c.id)
        with self.engine.connect() as conn:
            return [row_to_paper(row) for row in conn.execute(query).mappings()]

    def marked(self, relevant: bool) -> list[Paper]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(papers).where(papers.c.verdict.is_(relevant))).mappings()
            return [row_to_paper(row) for row in rows]

    def score_rows(self) -> list[dict]:
        query = sa.select(papers.c.id, papers.c.score, papers.c.relevant, papers.c.reasons,
                          papers.c.topic, papers.c.topics, papers.c.verdict)
        with self.engine.connect() as conn:
            return [dict(row) for row in conn.execute(query).mappings()]

    def set_scores(self, scored: Iterable[tuple[str, float, bool, list[str], str, list[str]]]) -> None:
        rows = [{"pid": pid, "score": value, "relevant": relevant, "reasons": json.dumps(reasons),
                 "topic": topic, "topics": json.dumps(topics)}
                for pid, value, relevant, reasons, topic, topics in scored]
        if rows:
            with self.tx() as conn:
                conn.execute(papers.update().where(papers.c.id == sa.bindparam("pid")), rows)

    def set_judgement(self, pid: str, relevant: bool, reasons: list[str]) -> None:
        """The LLM judge's call on a grey-band paper: it replaces the rule's, not the user's."""
        with self.tx() as conn:
            conn.execute(papers.update().where(papers.c.id == pid).values(
                relevant=relevant, reasons=json.dumps(reasons)))

    def set_verdict(self, pid: str, verdict: bool | None) -> bool:
        with self.tx() as conn:
            done = conn.execute(papers.update().where(papers.c.id == pid).values(verdict=verdict))
            return done.rowcount > 0

    # --- seeds ---
    def save_seeds(self, entries: Iterable[SeedEntry]) -> int:
        """Insert new seed entries and refresh known ones; return how many are new."""
        added = 0
        stamp = now_iso()
        with self.tx() as conn:
            for entry in entries:
                key = seed_key(entry.title)
                data = json.dumps(_seed_data(entry), ensure_ascii=False)
                row = conn.execute(sa.select(seeds.c.key).where(seeds.c.key == key)).first()
                values = dict(title=entry.title, source=entry.source, line=entry.line, data=data)
                if row is None:
                    conn.execute(seeds.insert().values(key=key, first_seen=stamp, **values,
                                                       arxiv_id=entry.arxiv_id))
                    added += 1
                else:
                    conn.execute(seeds.update().where(seeds.c.key == key).values(**values))
        return added

    def seed_rows(self) -> list[dict]:
        with self.engine.connect() as conn:
            query = sa.select(seeds).order_by(seeds.c.first_seen, seeds.c.source, seeds.c.line)
            return [dict(r) for r in conn.execute(query).mappings()]

    def set_seed_resolution(self, key: str, arxiv_id: str | None, tried_at: str) -> None:
        with self.tx() as conn:
            values: dict[str, Any] = {"resolve_tried_at": tried_at}
            if arxiv_id:
                values["arxiv_id"] = arxiv_id
            conn.execute(seeds.update().where(seeds.c.key == key).values(**values))

    # --- runs ---
    def start_run(self, kind: str, as_of: datetime) -> int:
        """Callers hold the run lock, so a row still `running` is from a process that died."""
        with self.tx() as conn:
            conn.execute(runs.update().where(runs.c.status == "running").values(
                status="interrupted", finished=now_iso(), error="the process ended mid-run"))
            result = conn.execute(runs.insert().values(
                kind=kind, as_of=as_of.isoformat(), started=now_iso(), status="running"))
            return result.inserted_primary_key[0]

    def finish_run(self, run_id: int, status: str, report: dict, error: str | None = None,
                   window: tuple[datetime, datetime] | None = None) -> None:
        values: dict[str, Any] = dict(finished=now_iso(), status=status, error=error,
                                      report=json.dumps(report, ensure_ascii=False, default=str))
        if window:
            values.update(window_start=window[0].isoformat(), window_end=window[1].isoformat())
        with self.tx() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(**values))

    def watermark(self) -> datetime | None:
        """End of the last window that was collected completely."""
        with self.engine.connect() as conn:
            value = conn.execute(
                sa.select(sa.func.max(runs.c.window_end)).where(runs.c.status == "ok")
            ).scalar()
        return parse_dt(value)

    def last_runs(self, limit: int = 10) -> list[dict]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(runs).order_by(runs.c.id.desc()).limit(limit)).mappings()
            return [dict(r) for r in rows]

    def last_run(self, kind: str, status: str | None = None) -> dict | None:
        query = sa.select(runs).where(runs.c.kind == kind)
        if status:
            query = query.where(runs.c.status == status)
        with self.engine.connect() as conn:
            row = conn.execute(query.order_by(runs.c.id.desc()).limit(1)).mappings().first()
        return dict(row) if row else None

    # --- digests ---
    def published_keys(self) -> set[str]:
        with self.engine.connect() as conn:
            return set(conn.execute(sa.select(digest_items.c.item_key)).scalars())

    def save_digest(self, digest_id: str, window: tuple[datetime, datetime], data: dict,
                    items: list[tuple[str, bool]], recipients: list[str]) -> None:
        """Record a digest, its items and its outbox rows in one transaction."""
        with self.tx() as conn:
            conn.execute(digests.insert().values(
                id=digest_id, created=now_iso(), window_start=window[0].isoformat(),
                window_end=window[1].isoformat(),
                data=json.dumps(data, ensure_ascii=False, default=str)))
            if items:
                conn.execute(digest_items.insert(), [dict(digest_id=digest_id, item_key=key, shown=shown)
                                                     for key, shown in items])
            for address in recipients:
                conn.execute(deliveries.insert().values(
                    digest_id=digest_id, recipient=address, status="pending", attempts=0))

    def digest(self, digest_id: str | None = None) -> dict | None:
        query = sa.select(digests)
        query = query.where(digests.c.id == digest_id) if digest_id else query.order_by(digests.c.id.desc())
        with self.engine.connect() as conn:
            row = conn.execute(query.limit(1)).mappings().first()
        if row is None:
            return None
        return {**dict(row), "data": json.loads(row["data"])}

    def last_digest_end(self) -> datetime | None:
        with self.engine.connect() as conn:
            return parse_dt(conn.execute(sa.select(sa.func.max(digests.c.window_end))).scalar())

    def digest_ids(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(digests.c.id).order_by(digests.c.id)).scalars())

    # --- enrichment cache ---
    def cached_many(self, keys: list[str]) -> dict[str, dict]:
        """key -> cached data, for those of `keys` in the cache (asked in slices)."""
        query = sa.select(enrichments.c.key, enrichments.c.data)
        with self.engine.connect() as conn:
            return {key: json.loads(data) for chunk in _chunks(keys)
                    for key, data in conn.execute(query.where(enrichments.c.key.in_(chunk)))}

    def cache(self, key: str, item_key: str, kind: str, data: dict, tokens: tuple[int, int]) -> None:
        with self.tx() as conn:
            conn.execute(enrichments.delete().where(enrichments.c.key == key))
            conn.execute(enrichments.insert().values(
                key=key, item_key=item_key, kind=kind, data=json.dumps(data, ensure_ascii=False),
                tokens_in=tokens[0], tokens_out=tokens[1], created=now_iso()))

    def latest_enrichments(self, kind: str) -> dict[str, dict]:
        """item_key -> its newest enrichment of this kind, for the reading list."""
        query = sa.select(enrichments.c.item_key, enrichments.c.data).where(
            enrichments.c.kind == kind).order_by(enrichments.c.created)
        with self.engine.connect() as conn:
            return {key: json.loads(data) for key, data in conn.execute(query)}

    # --- outbox ---
    def deliveries(self, digest_id: str | None = None, statuses: tuple[str, ...] = ()) -> list[dict]:
        query = sa.select(deliveries).order_by(deliveries.c.digest_id, deliveries.c.id)
        if digest_id:
            query = query.where(deliveries.c.digest_id == digest_id)
        if statuses:
            query = query.where(deliveries.c.status.in_(statuses))
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def update_delivery(self, delivery_id: int, **values: Any) -> None:
        with self.tx() as conn:
            conn.execute(deliveries.update().where(deliveries.c.id == delivery_id).values(**values))

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            def count(table: sa.Table, where: Any = None) -> int:
                query = sa.select(sa.func.count()).select_from(table)
                return conn.execute(query.where(where) if where is not None else query).scalar() or 0
            return {
                "papers": count(papers),
                "relevant": count(papers, papers.c.relevant.is_(True)),
                "seeds": count(seeds),
                "digests": count(digests),
                "pending": count(deliveries, deliveries.c.status == "pending"),
                "failed": count(deliveries, deliveries.c.status == "failed"),
            }


@contextmanager
def _maybe_tx(store: Store, conn: Connection | None) -> Iterator[Connection]:
    if conn is not None:
        yield conn
    else:
        with store.tx() as new:
            yield new


def _one_line_errors(path: Any, busy_timeout: float) -> Any:
    """SQLite's environmental failures (a lock held elsewhere, a damaged file, a full or
    read-only disk) as one line naming the file, not a traceback. A constraint or
    programming error is a bug and stays as it is."""
    def handle(context: Any) -> None:
        error = context.original_exception
        if not isinstance(error, (sqlite3.OperationalError, sqlite3.DatabaseError)) or isinstance(
                error, (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError)):
            return
        words = str(error)
        if "already exists" in words:
            return  # two processes migrating a new database at once: migrate() sorts it out
        if "locked" in words or "busy" in words:
            raise LockedError(f"{path}: the database is locked by another process "
                              f"(waited {busy_timeout:g} s)") from None
        if "malformed" in words or "not a database" in words:
            raise DigestError(f"{path}: not a usable database: {words}",
                              "restore it from a backup, or move it aside to start afresh") from None
        hint = ("is the disk full?" if "disk" in words
                else "can this user write the state folder?" if "readonly" in words else None)
        raise DigestError(f"{path}: {words}", hint) from None
    return handle


def _chunks(items: list, size: int = 500) -> Iterator[list]:
    """SQLite limits the variables in one statement; ask in slices."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _sqlite_pragmas(busy_timeout: float) -> Any:
    def connect(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()
    return connect


def merge_papers(old: Paper, new: Paper) -> Paper:
    """The newest version wins its fields; thin fields never erase richer ones."""
    newer = new if new.version >= old.version else old
    other = old if newer is new else new
    sources = tuple(dict.fromkeys(old.sources + new.sources))
    return Paper(
        id=old.id, version=newer.version,
        title=newer.title or other.title, abstract=newer.abstract or other.abstract,
        authors=newer.authors or other.authors, categories=newer.categories or other.categories,
        submitted=old.submitted or new.submitted,
        updated=newer.updated or other.updated,
        comment=newer.comment or other.comment, journal_ref=newer.journal_ref or other.journal_ref,
        sources=sources, announce_type=old.announce_type or new.announce_type,
    )


def _paper_row(p: Paper) -> dict[str, Any]:
    return dict(
        id=p.id, version=p.version, title=p.title, abstract=p.abstract,
        authors=json.dumps(list(p.authors), ensure_ascii=False),
        categories=json.dumps(list(p.categories)), submitted=iso(p.submitted),
        updated=iso(p.updated), comment=p.comment, journal_ref=p.journal_ref,
        sources=json.dumps(list(p.sources)),
    )


def row_to_paper(row: Any) -> Paper:
    return Paper(
        id=row["id"], version=row["version"], title=row["title"], abstract=row["abstract"],
        authors=tuple(json.loads(row["authors"])), categories=tuple(json.loads(row["categories"])),
        submitted=parse_dt(row["submitted"]), updated=parse_dt(row["updated"]),
        comment=row["comment"], journal_ref=row["journal_ref"],
        sources=tuple(json.loads(row["sources"])),
    )


def _seed_data(entry: SeedEntry) -> dict[str, Any]:
    data = asdict(entry)
    data["date"] = iso(entry.date)
    return data


def row_to_seed(row: dict) -> SeedEntry:
    data = json.loads(row["data"])
    data["date"] = date.fromisoformat(data["date"]) if data.get("date") else None
    data["parts_zh"] = tuple(tuple(part) for part in data.get("parts_zh") or ())
    data["arxiv_id"] = row.get("arxiv_id") or data.get("arxiv_id")
    return SeedEntry(**data)


def _private(path: Path) -> None:
    """The database holds reader addresses: its folder 0700 when we make it, the file 0600."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise DigestError(f"{path.parent}: cannot create state folder: {exc.strerror}") from None
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return
    except FileExistsError:
        pass
    except OSError as exc:
        raise DigestError(f"{path}: cannot create the database: {exc.strerror}") from None
    try:
        if path.stat().st_mode & 0o077:  # made by an older version, or by hand
            path.chmod(0o600)
    except OSError:
        pass  # not ours to change; SQLite says what it cannot do
