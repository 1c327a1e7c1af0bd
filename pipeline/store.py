"""State on SQLAlchemy 2 Core: the paper ledger, seeds, runs, digests, cache, outbox.

SQLite by default (WAL, busy timeout), or PostgreSQL: the engine is store_connect's, the
Tables and the steps that bring an older database forward are store_schema's.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from pipeline.compose import snapshot
from pipeline.errors import DigestError
from pipeline.models import Enrichment, Paper, Scored, collapse, merge_papers, paper_key
from pipeline.store_connect import connect, one_line, where
from pipeline.store_schema import (
    LATEST,
    YOU,
    db_now,
    deliveries,
    digest_items,
    digests,
    enrichments,
    make_current,
    now_iso,
    papers,
    runs,
    schema_version,
    seeds,
    state,
    upsert,
    verdicts,
)

ARXIV = paper_key("")  # the prefix of an arXiv paper's item key


def iso(value: datetime | date | None) -> str | None:
    return value.isoformat() if value is not None else None


def parse_dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


class Store:
    """The database behind one config; open() migrates it forward."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.running: set[int] = set()  # runs this process started and has not finished

    @classmethod
    def open(cls, url: str, busy_timeout: float = 30) -> Store:
        engine = connect(url, busy_timeout)
        store = cls(engine)
        try:
            store.migrate()
        except sa.exc.DatabaseError as exc:
            why = one_line(exc.orig or exc)
            raise DigestError(f"{where(engine)}: not a usable database: {why}") from None
        return store

    def close(self) -> None:
        """Close every connection: SQLite then folds its WAL into the database file, so the
        file alone is the whole state (backups and the Actions recipe copy just that file)."""
        self.engine.dispose()

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    def read_only(self) -> bool:
        """Whether a write would be refused: a PostgreSQL standby or default read-only
        transactions; for SQLite, a file or folder this user cannot write."""
        if self.engine.dialect.name == "postgresql":
            with self.engine.connect() as conn:
                return conn.exec_driver_sql("SHOW transaction_read_only").scalar() == "on"
        path = self.engine.url.database or ":memory:"
        return path != ":memory:" and not (
            os.access(path, os.W_OK) and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK))

    def damage(self) -> str | None:
        """SQLite's first complaint about its file (PRAGMA quick_check), None when sound: a
        damaged page may lie where opening the database never reads. A server checks its own."""
        if self.engine.dialect.name != "sqlite":
            return None
        with self.engine.connect() as conn:
            found = conn.exec_driver_sql("PRAGMA quick_check(1)").scalar()
        return None if found == "ok" else collapse(str(found))

    # --- migrations ---
    def version(self) -> int:
        with self.engine.connect() as conn:
            return schema_version(conn)

    def migrate(self) -> int:
        """Make a new database whole, or bring an older one forward step by step, in one
        transaction that a second process starting at the same moment waits for. A current
        database is only read: a read-only or busy one still opens. One a newer release
        wrote is refused: this one would not know its new tables (machines sharing a server)."""
        if self.version() == LATEST:
            return LATEST
        with self.engine.connect() as conn:
            make_current(conn)
            conn.commit()
        return LATEST

    # --- key-value state ---
    def get_state(self, key: str) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(state.c.value).where(state.c.key == key)).scalar()

    def set_state(self, key: str, value: Any, conn: Connection | None = None) -> None:
        """None forgets the key."""
        with _maybe_tx(self, conn) as c:
            if value is None:
                c.execute(state.delete().where(state.c.key == key))
            else:
                upsert(c, state, [{"key": key, "value": value}])

    # --- papers ---
    def upsert_papers(self, found: Iterable[Paper]) -> tuple[list[Paper], list[Paper], int]:
        """Store papers by version-less id; return (new, revised, unchanged count).

        A version only moves forward; a newer one updates the record and is
        noted as revised, never as a new paper.
        """
        found = list(found)
        new, revised, same = [], [], 0
        with self.tx() as conn:
            stamp = db_now(conn)
            known, revised_at, changed_at = _stored_papers(conn, [p.id for p in found])
            inserts, updates = [], {}
            for paper in found:
                old = known.get(paper.id)
                if old is None:
                    inserts.append({**_paper_row(paper), "first_seen": stamp, "revised_at": None,
                                    "changed_at": stamp})
                    if len(inserts) == 500:  # a slice at a time: the rows are as big as the papers
                        conn.execute(papers.insert(), inserts)
                        inserts = []
                    known[paper.id], changed_at[paper.id] = paper, stamp
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
                if snapshot(merged) != snapshot(old):  # news for Updates, not another feed's sight of it
                    changed_at[paper.id] = stamp
                updates[paper.id] = merged
            if inserts:
                conn.execute(papers.insert(), inserts)
            if updates:
                rows = [{**_paper_row(p), "pid": pid, "revised_at": revised_at.get(pid),
                         "changed_at": changed_at.get(pid)} for pid, p in updates.items()]
                for changed in rows:
                    del changed["id"]
                conn.execute(papers.update().where(papers.c.id == sa.bindparam("pid")), rows)
        return new, revised, same

    def papers(self, ids: Iterable[str] | None = None) -> list[Paper]:
        """All papers, or those with these ids (asked in slices)."""
        queries = _sliced(sa.select(papers), papers.c.id, ids)
        with self.engine.connect() as conn:
            return [row_to_paper(row) for query in queries for row in conn.execute(query).mappings()]

    def unlisted_papers(self, since: date | None = None, new: bool = False) -> list[Paper]:
        """Papers in no digest; with `since`, only those submitted that day or later (by the
        stored date's own day) or undated; `new`, only those first seen after the newest
        digest was made (both by the database's clock)."""
        query = sa.select(papers).where(~sa.exists().where(digest_items.c.item_key == paper_item_key()))
        if since is not None:
            query = query.where(sa.or_(papers.c.submitted.is_(None),
                                       sa.func.substr(papers.c.submitted, 1, 10) >= since.isoformat()))
        if new:
            query = query.where(papers.c.first_seen > _last_made())
        with self.engine.connect() as conn:
            return [row_to_paper(row) for row in conn.execute(query).mappings()]

    def paper_titles(self) -> list[tuple[str, str]]:
        with self.engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.select(papers.c.id, papers.c.title))]

    def papers_to_score(self) -> list[Paper]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(papers).where(papers.c.score.is_(None))).mappings()
            return [row_to_paper(row) for row in rows]

    def relevant_papers(self, waiting: bool = False, backlog: int | None = None) -> list[Paper]:
        """Kept by the score, unless the install's own verdict (rl-digest mark) says otherwise,
        newest first. waiting: only those a run still has work for, not in a digest yet or in
        one with no cached summary, of these the newest `backlog` (all when None): a run's
        week, however long the history and however many summaries never came."""
        mine = own_verdicts()
        query = (sa.select(papers).select_from(papers.outerjoin(mine, mine.c.item_key == paper_item_key()))
                 .where(is_kept(mine)).order_by(papers.c.submitted.desc().nulls_last(), papers.c.id))
        queries = [query]
        if waiting:
            listed = sa.exists().where(digest_items.c.item_key == paper_item_key())
            summarised = sa.exists().where(enrichments.c.item_key == paper_item_key(),
                                           enrichments.c.kind == "paper_summary")
            queries = [query.where(~listed), query.where(listed, ~summarised).limit(backlog)]
        with self.engine.connect() as conn:
            found = [row_to_paper(row) for q in queries for row in conn.execute(q).mappings()]
        if waiting:
            found.sort(key=lambda p: p.id)
            found.sort(key=lambda p: p.submitted.isoformat() if p.submitted else "", reverse=True)
        return found

    def marked(self, relevant: bool) -> list[Paper]:
        """The papers the install's own verdict (rl-digest mark) calls relevant, or not, by id:
        the refit learns from them in this order, the same on every backend."""
        mine = own_verdicts()
        query = (sa.select(papers).join(mine, mine.c.item_key == paper_item_key())
                 .where(mine.c.verdict.is_(relevant)).order_by(papers.c.id))
        with self.engine.connect() as conn:
            return [row_to_paper(row) for row in conn.execute(query).mappings()]

    def readers_verdicts(self) -> list[tuple[Paper, bool]]:
        """The readers' verdicts (not the install's own) on stored papers, one per reader."""
        query = (sa.select(papers, verdicts.c.verdict.label("said"))
                 .join(verdicts, verdicts.c.item_key == paper_item_key())
                 .where(verdicts.c.reader != YOU).order_by(papers.c.id, verdicts.c.reader))
        with self.engine.connect() as conn:
            return [(row_to_paper(row), bool(row["said"])) for row in conn.execute(query).mappings()]

    def scores(self, ids: Iterable[str] | None = None) -> dict[str, Scored]:
        """Every paper's score, reasons, topics and the install's verdict, by id, or those
        of these ids (asked in slices)."""
        query = _scores_query(own_verdicts())
        queries = _sliced(query, papers.c.id, ids)
        with self.engine.connect() as conn:
            return {row.id: row_to_scored(row._mapping) for each in queries for row in conn.execute(each)}

    def unlisted_scores(self, low: float, high: float) -> dict[str, Scored]:
        """The scores from `low` to `high` of the papers in no digest that the install's
        verdict did not decide (where the LLM judge's grey band lies)."""
        mine = own_verdicts()
        query = _scores_query(mine).where(papers.c.score.between(low, high), mine.c.verdict.is_(None),
                                          ~sa.exists().where(digest_items.c.item_key == paper_item_key()))
        with self.engine.connect() as conn:
            return {row.id: row_to_scored(row._mapping) for row in conn.execute(query)}

    def set_scores(self, scored: Iterable[Scored]) -> None:
        """Keep what rank (or the LLM judge) decided; the reader's verdict is left alone."""
        rows = [{"pid": s.paper_id, "score": s.score, "relevant": s.relevant, "reasons": list(s.reasons),
                 "topic": s.topic, "topics": list(s.topics)} for s in scored]
        if rows:
            with self.tx() as conn:
                conn.execute(papers.update().where(papers.c.id == sa.bindparam("pid")), rows)

    # --- runs ---
    def start_run(self, kind: str, as_of: datetime) -> int:
        """Callers hold the run lock, so a row still `running` is from a process that died,
        unless this process started it (a publish run's own collect)."""
        with self.tx() as conn:
            conn.execute(runs.update().where(runs.c.status == "running", runs.c.id.not_in(self.running))
                         .values(status="interrupted", finished=now_iso(), error=ENDED_MID_RUN))
            result = conn.execute(runs.insert().values(
                kind=kind, as_of=as_of.isoformat(), started=now_iso(), status="running"))
            run_id = int(result.inserted_primary_key[0])  # type: ignore[index]
        self.running.add(run_id)
        return run_id

    def finish_run(self, run_id: int, status: str, report: dict[str, Any], error: str | None = None,
                   window: tuple[datetime, datetime] | None = None) -> None:
        values: dict[str, Any] = dict(finished=now_iso(), status=status, error=error, report=report)
        if window:
            values.update(window_start=window[0].isoformat(), window_end=window[1].isoformat())
        with self.tx() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(**values))
        self.running.discard(run_id)

    def watermark(self) -> datetime | None:
        """End of the last window that was collected completely. Compared as times: a
        window ends in its as-of's zone, and ends in two offsets (schedule.timezone changed,
        summer and winter time) compare wrongly as text."""
        with self.engine.connect() as conn:
            ends = conn.execute(sa.select(runs.c.window_end).where(runs.c.status == "ok")).scalars()
            return max(filter(None, map(parse_dt, ends)), default=None)

    def last_runs(self, limit: int = 10) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(runs).order_by(runs.c.id.desc()).limit(limit)).mappings()
            return [dict(r) for r in rows]

    def last_run(self, kind: str, status: str | None = None) -> dict[str, Any] | None:
        query = sa.select(runs).where(runs.c.kind == kind)
        if status:
            query = query.where(runs.c.status == status)
        with self.engine.connect() as conn:
            row = conn.execute(query.order_by(runs.c.id.desc()).limit(1)).mappings().first()
        return dict(row) if row else None

    # --- digests ---
    def listed_changed(self) -> list[tuple[Paper, dict[str, Any]]]:
        """The Updates ledger's papers: those a digest listed whose record changed since the
        last digest was made (papers.changed_at), each with what it looked like when last listed;
        not one the install has since marked irrelevant (out of the reading list too)."""
        since = _last_made()
        mine = own_verdicts()
        query = (sa.select(papers, digest_items.c.snapshot)
                 .select_from(papers.join(digest_items, digest_items.c.item_key == paper_item_key())
                              .outerjoin(mine, mine.c.item_key == paper_item_key()))
                 .where(digest_items.c.snapshot.is_not(None),
                        sa.or_(mine.c.verdict.is_not(False), papers.c.id.in_(sa.select(seed_arxiv_id()))),
                        sa.or_(papers.c.changed_at.is_(None), since.is_(None), papers.c.changed_at >= since))
                 .order_by(papers.c.id))
        with self.engine.connect() as conn:
            return [(row_to_paper(row), row["snapshot"]) for row in conn.execute(query).mappings()
                    if row["snapshot"]]

    def listed_in(self) -> dict[str, str]:
        """Item key -> the digest that listed it."""
        with self.engine.connect() as conn:
            return dict(conn.execute(sa.select(digest_items.c.item_key, digest_items.c.digest_id)).all())

    def published_keys(self) -> set[str]:
        with self.engine.connect() as conn:
            return set(conn.execute(sa.select(digest_items.c.item_key)).scalars())

    def save_digest(self, digest_id: str, window: tuple[datetime, datetime], data: dict[str, Any],
                    items: list[tuple[str, bool]], recipients: list[str],
                    snapshots: dict[str, dict[str, Any]] | None = None) -> None:
        """Record a digest, its items and its outbox rows in one transaction; `snapshots`
        (item key -> what the paper looked like) are the Updates ledger's new baseline."""
        snapshots = snapshots or {}
        with self.tx() as conn:
            conn.execute(digests.insert().values(
                id=digest_id, created=db_now(conn), window_start=window[0].isoformat(),
                window_end=window[1].isoformat(), data=data))
            new = {key for key, _ in items}
            if items:
                conn.execute(digest_items.insert(), [
                    dict(digest_id=digest_id, item_key=key, shown=shown,
                         snapshot=snapshots.get(key))
                    for key, shown in items])
            older = [{"k": key, "snap": snap} for key, snap in snapshots.items() if key not in new]
            if older:
                conn.execute(digest_items.update().where(digest_items.c.item_key == sa.bindparam("k"))
                             .values(snapshot=sa.bindparam("snap")), older)
            for address in recipients:
                conn.execute(deliveries.insert().values(
                    digest_id=digest_id, recipient=address, status="pending", attempts=0))

    def digest(self, digest_id: str | None = None) -> dict[str, Any] | None:
        query = sa.select(digests)
        query = query.where(digests.c.id == digest_id) if digest_id else query.order_by(digests.c.id.desc())
        with self.engine.connect() as conn:
            row = conn.execute(query.limit(1)).mappings().first()
        return dict(row) if row is not None else None

    def digest_fingerprints(self) -> dict[str, str]:
        """Each stored digest's id -> a hash of its stored text, which changes when the digest
        does (`readers --forget` scrubs one): the site renders only the pages whose changed.
        Read a few at a time: PostgreSQL's driver otherwise fetches every digest's text at once."""
        query = sa.select(digests.c.id, sa.cast(digests.c.data, sa.Text))
        with self.engine.connect() as conn:
            return {did: hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
                    for did, text in conn.execution_options(yield_per=20).execute(query)}

    def digest_updates(self) -> dict[str, list[dict[str, Any]]]:
        """Each stored digest's Updates alone (as compose.digest_to_dict wrote them), by id:
        what the papers' pages show, without decoding every digest whole every week."""
        query = sa.select(digests.c.id, digests.c.data["updates"])
        with self.engine.connect() as conn:
            return {did: found or [] for did, found in conn.execute(query)}

    def listed_per_topic(self, after: str, until: str, known: Collection[str] = ()
                         ) -> list[tuple[str, str | None, int, str | None]]:
        """(digest id, topic, papers, None) for the digests with after < id <= until: the
        relevant arXiv papers each listed, by primary topic, seed-tied papers left out; a
        paper whose topic is not one of `known` (renamed or removed since) is a row of its
        own, (digest id, topic, 1, paper id), for the caller to count under its topic now.
        A digest that listed none gives one row (id, None, 0, None), so an empty week reads
        as zero, not as unknown. One grouped query over the digests' own items."""
        mine = own_verdicts()
        curated = sa.exists().where(seeds.c.arxiv_id == papers.c.id)
        gone = sa.case((papers.c.topic.in_(list(known)), None), else_=papers.c.id).label("gone")
        listed = (sa.select(digest_items.c.digest_id, papers.c.topic, gone)
                  .join(papers, papers.c.id == sa.func.substr(digest_items.c.item_key, len(ARXIV) + 1))
                  .outerjoin(mine, mine.c.item_key == digest_items.c.item_key)
                  .where(digest_items.c.digest_id > after, digest_items.c.digest_id <= until,
                         digest_items.c.item_key.like(ARXIV + "%"), is_kept(mine), ~curated)
                  .subquery())
        query = (sa.select(digests.c.id, listed.c.topic, sa.func.count(listed.c.digest_id), listed.c.gone)
                 .select_from(digests.outerjoin(listed, listed.c.digest_id == digests.c.id))
                 .where(digests.c.id > after, digests.c.id <= until)
                 .group_by(digests.c.id, listed.c.topic, listed.c.gone)
                 .order_by(digests.c.id, listed.c.topic, listed.c.gone))
        with self.engine.connect() as conn:
            return [(day, topic, count, gone) for day, topic, count, gone in conn.execute(query)]

    def last_digest_end(self, by: datetime | None = None) -> datetime | None:
        """The latest end of a digest's window (of those ending by `by`: a digest made by hand
        for an earlier week starts where the digest before it ended, not after a later one).
        Compared as times: ends in two offsets (summer and winter time) compare wrongly as text."""
        with self.engine.connect() as conn:
            ends = [parse_dt(end) for end in conn.execute(sa.select(digests.c.window_end)).scalars()]
        return max((end for end in ends if end is not None and (by is None or end <= by)), default=None)

    def digest_ids(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(digests.c.id).order_by(digests.c.id)).scalars())

    # --- enrichment cache ---
    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The enrichment cache: key -> cached data, for those of `keys` in it (asked in slices)."""
        query = sa.select(enrichments.c.key, enrichments.c.data)
        with self.engine.connect() as conn:
            return {key: data for chunk in chunks(keys)
                    for key, data in conn.execute(query.where(enrichments.c.key.in_(chunk)))}

    def put_many(self, results: Iterable[Enrichment]) -> None:
        """Keep LLM results in the enrichment cache, in one transaction."""
        rows = [dict(key=r.key, item_key=r.item_key, kind=r.kind, data=r.data, tokens_in=r.tokens[0],
                     tokens_out=r.tokens[1]) for r in results]
        if rows:
            with self.tx() as conn:
                stamp = db_now(conn)
                upsert(conn, enrichments, [{**row, "created": stamp} for row in rows])

    def latest_enrichments(self, kind: str, keys: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """item_key -> its newest enrichment of this kind (by time, then key, as the reading
        list's `store_reading_list._summary`), of every item or of those `keys` (asked in slices)."""
        query = sa.select(enrichments.c.item_key, enrichments.c.data).where(
            enrichments.c.kind == kind).order_by(enrichments.c.created, enrichments.c.key)
        queries = _sliced(query, enrichments.c.item_key, keys)
        with self.engine.connect() as conn:
            return {key: data for each in queries for key, data in conn.execute(each)}

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
                # a hand-over cut off (`sending`) waits to be resent as much as a pending one
                "pending": count(deliveries, deliveries.c.status.in_(("pending", "sending"))),
                "failed": count(deliveries, deliveries.c.status == "failed"),
                "skipped": count(deliveries, deliveries.c.status == "skipped"),
            }


@contextmanager
def _maybe_tx(store: Store, conn: Connection | None) -> Iterator[Connection]:
    if conn is not None:
        yield conn
    else:
        with store.tx() as new:
            yield new


def paper_item_key() -> Any:
    """A paper row's item key (models.paper_key) in SQL."""
    return sa.literal(paper_key("")) + papers.c.id


def _last_made() -> Any:
    """When the newest digest was made (NULL before the first), in SQL."""
    return sa.select(sa.func.max(digests.c.created)).scalar_subquery()


def own_verdicts() -> Any:
    """The install's own verdicts (rl-digest mark), to join on the item key."""
    return sa.select(verdicts.c.item_key, verdicts.c.verdict).where(verdicts.c.reader == YOU).subquery()


ENDED_MID_RUN = "the process ended mid-run"  # the error of a run whose process died


def chunks(items: list[Any], size: int = 500) -> Iterator[list[Any]]:
    """SQLite limits the variables in one statement; ask in slices."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _sliced(query: sa.Select[Any], column: Any, values: Iterable[str] | None) -> list[sa.Select[Any]]:
    """`query` for every row (values None), or for the rows whose `column` is one of
    `values`, a slice at a time (chunks)."""
    return [query] if values is None else [query.where(column.in_(chunk)) for chunk in chunks(list(values))]


def _stored_papers(conn: Connection, ids: list[str]
                   ) -> tuple[dict[str, Paper], dict[str, str | None], dict[str, str | None]]:
    """The stored papers of these ids, with when each was last revised and last changed."""
    known, revised_at, changed_at = {}, {}, {}
    for chunk in chunks(ids):
        for row in conn.execute(sa.select(papers).where(papers.c.id.in_(chunk))).mappings():
            known[row["id"]] = row_to_paper(row)
            revised_at[row["id"]], changed_at[row["id"]] = row["revised_at"], row["changed_at"]
    return known, revised_at, changed_at


def _paper_row(p: Paper) -> dict[str, Any]:
    return dict(
        id=p.id, version=p.version, title=p.title, abstract=p.abstract,
        authors=list(p.authors), categories=list(p.categories), submitted=iso(p.submitted),
        updated=iso(p.updated), comment=p.comment, journal_ref=p.journal_ref,
        sources=list(p.sources),
    )


def row_to_paper(row: Any) -> Paper:
    return Paper(
        id=row["id"], version=row["version"], title=row["title"], abstract=row["abstract"],
        authors=tuple(row["authors"]), categories=tuple(row["categories"]),
        submitted=parse_dt(row["submitted"]), updated=parse_dt(row["updated"]),
        comment=row["comment"], journal_ref=row["journal_ref"],
        sources=tuple(row["sources"]),
    )


def _scores_query(mine: Any) -> sa.Select[Any]:
    """Each paper's score, reasons and topics, with the install's verdict (`mine`, joined)."""
    return (sa.select(papers.c.id, papers.c.score, papers.c.relevant, papers.c.reasons,
                      papers.c.topic, papers.c.topics, mine.c.verdict)
            .select_from(papers.outerjoin(mine, mine.c.item_key == paper_item_key())))


def row_to_scored(row: Any) -> Scored:
    return Scored(row["id"], row["score"], row["relevant"], tuple(row["reasons"] or ()),
                  row["topic"], tuple(row["topics"] or ()), row["verdict"])


def seed_arxiv_id() -> sa.ColumnElement[Any]:
    """The paper a seed entry is tied to: its resolution, else what its document names
    (store_seeds.row_to_seed's rule)."""
    return sa.func.coalesce(seeds.c.arxiv_id, seeds.c.data["arxiv_id"].as_string())


def is_kept(mine: Any) -> sa.ColumnElement[Any]:
    """Kept by the score, unless the install's own verdict (`mine`, joined) says otherwise."""
    return sa.func.coalesce(mine.c.verdict, papers.c.relevant).is_(True)


