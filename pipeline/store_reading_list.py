"""The reading list's queries: its papers (kept by the score or the install's verdict, or tied
to a seed entry) a batch at a time, the bytes that tell a changed month, and its counts.

Apart from store.py because only reading_list.py asks them, and they are built for a list
of years: streamed, grouped by month, compared without decoding.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from functools import partial
from typing import Any

import sqlalchemy as sa

from pipeline.models import Paper, Scored
from pipeline.store import (
    Store,
    is_kept,
    own_verdicts,
    paper_item_key,
    row_to_paper,
    row_to_scored,
    seed_arxiv_id,
)
from pipeline.store_schema import enrichments, papers, seeds


def reading_rows(db: Store, batch: int = 500, skip: Collection[str] = (), only: Collection[str] | None = None
                 ) -> Iterator[list[tuple[Paper, Scored, dict[str, Any] | None]]]:
    """The reading list's papers (kept, or tied to a seed entry), newest day first, ties
    by id, each with its score and newest cached summary: `batch` rows at a time, so
    memory stays flat however many there are. Papers of the months in `skip`
    (YYYY-MM) are left out; with `only`, all but those of its months."""
    mine = own_verdicts()
    query = (sa.select(papers, mine.c.verdict, _summary(enrichments.c.data).label("summary"))
             .select_from(papers.outerjoin(mine, mine.c.item_key == paper_item_key()))
             .where(_in_reading_list(mine)).order_by(_day().desc().nulls_last(), papers.c.id))
    if skip:
        query = query.where(sa.or_(sa.func.substr(_day(), 1, 7).not_in(list(skip)), _day().is_(None)))
    if only is not None:
        query = query.where(sa.func.substr(_day(), 1, 7).in_(list(only)))
    with db.engine.connect() as conn:
        result = conn.execution_options(yield_per=batch).execute(query).mappings()
        for rows in result.partitions():
            yield [(row_to_paper(row), row_to_scored(row), row["summary"]) for row in rows]


def reading_makings(db: Store, batch: int = 2000
                    ) -> Iterator[tuple[str, str | None, tuple[bytes | None, ...]]]:
    """(id, day, everything its reading_rows row holds, as the stored text's UTF-8 bytes)
    of each of the reading list's papers: what tells a month that changed from one that
    did not, read without decoding (the database hands the bytes over as they are)."""
    mine = own_verdicts()
    raw = partial(_utf8, db.engine.dialect.name)
    columns = [c for c in papers.c if c is not papers.c.changed_at]  # changes with the others
    query = (sa.select(papers.c.id, _day(), *map(raw, columns), raw(mine.c.verdict),
                       raw(_summary(enrichments.c.data)))
             .select_from(papers.outerjoin(mine, mine.c.item_key == paper_item_key()))
             .where(_in_reading_list(mine)))
    with db.engine.connect() as conn:
        for rows in conn.execution_options(yield_per=batch).execute(query).partitions():
            yield from ((row[0], row[1], tuple(row[2:])) for row in rows)


def reading_months(db: Store) -> dict[str, int]:
    """How many of the reading list's papers each month (YYYY-MM, "" undated) holds."""
    mine = own_verdicts()
    month = sa.func.coalesce(sa.func.substr(_day(), 1, 7), "")
    query = (sa.select(month, sa.func.count())
             .select_from(papers.outerjoin(mine, mine.c.item_key == paper_item_key()))
             .where(_in_reading_list(mine)).group_by(month))
    with db.engine.connect() as conn:
        return {found: count for found, count in conn.execute(query)}


def reading_count(db: Store) -> int:
    """How many entries the reading list holds: its papers and the seed entries tied to
    no stored paper (reading_list.untied)."""
    one_each = sa.distinct(sa.func.coalesce(seed_arxiv_id(), seeds.c.key))  # two naming a paper: one
    untied = (sa.select(sa.func.count(one_each))
              .where(~sa.exists().where(papers.c.id == seed_arxiv_id())))
    kept = sum(reading_months(db).values())
    with db.engine.connect() as conn:
        return kept + (conn.execute(untied).scalar() or 0)


def _in_reading_list(mine: Any) -> sa.ColumnElement[Any]:
    """Kept (`store.is_kept`), or tied to a seed entry."""
    return sa.or_(is_kept(mine), papers.c.id.in_(sa.select(seed_arxiv_id())))


def _summary(column: Any) -> Any:
    """`column` of a paper row's newest cached summary, as a scalar subquery."""
    return (sa.select(column)
            .where(enrichments.c.item_key == paper_item_key(), enrichments.c.kind == "paper_summary")
            .order_by(enrichments.c.created.desc(), enrichments.c.key.desc())
            .limit(1).correlate(papers).scalar_subquery())


def _utf8(dialect: str, column: Any) -> Any:
    """`column` as text, read as its UTF-8 bytes."""
    text = sa.cast(column, sa.Text)
    return sa.type_coerce(sa.func.convert_to(text, "UTF8") if dialect == "postgresql"
                          else sa.cast(text, sa.LargeBinary), sa.LargeBinary)


def _day() -> sa.ColumnElement[Any]:
    """The day a paper's entry shows (submitted, else this version's date): the list's order."""
    return sa.func.substr(sa.func.coalesce(papers.c.submitted, papers.c.updated), 1, 10)
