"""The database: migrations forward, the paper ledger's version rule, the outbox's uniqueness."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from pipeline.models import Paper
from pipeline.store import MIGRATIONS, Store


def paper(pid="2401.00001", version=1, **fields) -> Paper:
    base = dict(id=pid, title="A title", abstract="An abstract.", version=version,
                submitted=datetime(2024, 1, 2, tzinfo=UTC), sources=("api",))
    return Paper(**{**base, **fields})


def test_empty_database_is_migrated_to_the_latest_version(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path}/db.sqlite3")
    assert store.version() == len(MIGRATIONS)
    tables = set(sa.inspect(store.engine).get_table_names())
    assert {"papers", "seeds", "runs", "digests", "digest_items", "enrichments", "deliveries"} <= tables


@pytest.mark.parametrize("start", range(1, len(MIGRATIONS) + 1))
def test_older_database_is_brought_forward_and_keeps_its_rows(tmp_path, start):
    url = f"sqlite:///{tmp_path}/db.sqlite3"
    old = Store(sa.create_engine(url))
    old.migrate(upto=start)
    old.upsert_papers([paper()])
    store = Store.open(url)
    assert store.version() == len(MIGRATIONS)
    assert [p.id for p in store.papers()] == ["2401.00001"]
    assert Store.open(url).version() == len(MIGRATIONS)  # idempotent


def test_sqlite_runs_in_wal_mode(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path}/db.sqlite3")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_a_newer_version_updates_the_record_and_counts_as_revised(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path}/db.sqlite3")
    new, revised, same = store.upsert_papers([paper()])
    assert (len(new), len(revised), same) == (1, 0, 0)
    new, revised, same = store.upsert_papers([paper(version=2, title="A better title", sources=("rss",))])
    assert (len(new), len(revised), same) == (0, 1, 0)
    stored = store.papers()[0]
    assert (stored.version, stored.title, stored.sources) == (2, "A better title", ("api", "rss"))


def test_versions_never_move_backwards(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path}/db.sqlite3")
    store.upsert_papers([paper(version=3, title="v3 title")])
    new, revised, same = store.upsert_papers([paper(version=1, title="v1 title")])
    assert (len(new), len(revised)) == (0, 0)
    assert store.papers()[0].version == 3
    assert store.papers()[0].title == "v3 title"


def test_thin_records_never_erase_rich_fields(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path}/db.sqlite3")
    store.upsert_papers([paper(authors=("Ada",), categories=("cs.LG",))])
    store.upsert_papers([paper(abstract="", authors=(), categories=())])
    stored = store.papers()[0]
    assert stored.authors == ("Ada",) and stored.abstract == "An abstract."


def test_a_digest_recipient_pair_exists_once(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path}/db.sqlite3")
    now = datetime.now(UTC)
    store.save_digest("2026-11-30", (now, now), {}, [("arxiv:1", True)], ["a@example.org"])
    with pytest.raises(sa.exc.IntegrityError):
        with store.tx() as conn:
            conn.exec_driver_sql(
                "INSERT INTO deliveries (digest_id, recipient, status, attempts) "
                "VALUES ('2026-11-30', 'a@example.org', 'pending', 0)")


def test_a_paper_goes_into_one_digest_only(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path}/db.sqlite3")
    now = datetime.now(UTC)
    store.save_digest("2026-11-23", (now, now), {}, [("arxiv:1", True)], [])
    with pytest.raises(sa.exc.IntegrityError):
        store.save_digest("2026-11-30", (now, now), {}, [("arxiv:1", True)], [])
    assert store.digest_ids() == ["2026-11-23"]  # the failed one left nothing behind


def test_watermark_only_moves_with_successful_runs(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path}/db.sqlite3")
    a = datetime(2026, 11, 1, tzinfo=UTC)
    b = datetime(2026, 11, 8, tzinfo=UTC)
    ok = store.start_run("collect", a)
    store.finish_run(ok, "ok", {}, window=(a, a))
    failed = store.start_run("collect", b)
    store.finish_run(failed, "failed", {}, error="boom", window=(a, b))
    assert store.watermark() == a


def test_a_corrupt_database_is_one_clear_error(tmp_path):
    path = tmp_path / "db.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    from pipeline.errors import DigestError

    with pytest.raises(DigestError, match="db.sqlite3: not a usable database"):
        Store.open(f"sqlite:///{path}")


def test_integrity_check_passes_after_use(tmp_path):
    path = tmp_path / "db.sqlite3"
    store = Store.open(f"sqlite:///{path}")
    store.upsert_papers([paper(pid=f"2401.{i:05d}") for i in range(50)])
    store.engine.dispose()
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_run_left_running_by_a_dead_process_is_marked_interrupted(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path}/db.sqlite3")
    moment = datetime(2026, 11, 30, tzinfo=UTC)
    killed = store.start_run("publish", moment)  # never finished: kill -9
    store.start_run("publish", moment)
    rows = {row["id"]: row for row in store.last_runs()}
    assert rows[killed]["status"] == "interrupted"
    assert rows[killed]["error"] == "the process ended mid-run"
