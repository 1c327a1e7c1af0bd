"""The database on SQLite and PostgreSQL: made from the Table objects, an older database
brought forward, the paper ledger's version rule, the outbox's uniqueness, ids, upserts, JSON."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline import store_outbox, store_readers, store_reading_list, store_seeds
from pipeline.models import Enrichment, Paper, Scored, SeedEntry
from pipeline.store import Store
from pipeline.store_schema import LATEST, meta

V1 = Path(__file__).parent / "data" / "store_v1.sql"


def paper(pid="2401.00001", version=1, **fields) -> Paper:
    base = dict(id=pid, title="A title", abstract="An abstract.", version=version,
                submitted=datetime(2024, 1, 2, tzinfo=UTC), sources=("api",))
    return Paper(**{**base, **fields})


def test_empty_database_is_made_from_the_tables(db_url):
    store = Store.open(db_url)
    assert store.version() == LATEST
    live = sa.inspect(store.engine)
    assert set(live.get_table_names()) == set(meta.tables)
    for table in meta.tables.values():
        assert {c["name"] for c in live.get_columns(table.name)} == set(table.c.keys()), table.name
    assert Store.open(db_url).version() == LATEST  # idempotent


def load_v1(url: str) -> None:
    """A database exactly as the previous release made it (schema version 1)."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in V1.read_text(encoding="utf-8").split(";\n"):
            lines = [line for line in statement.splitlines() if not line.startswith("--")]
            if "".join(lines).strip():
                conn.exec_driver_sql("\n".join(lines))
    engine.dispose()


def test_a_database_of_the_previous_release_is_brought_forward_with_its_rows(db_url):
    load_v1(db_url)
    store = Store.open(db_url)
    assert store.version() == LATEST
    stored = {p.id: p for p in store.papers()}
    assert stored["2611.00001"].authors == ("Ada Lovelace", "李雷")
    assert stored["2611.00001"].sources == ("api", "rss") and stored["2611.00001"].version == 2
    assert [p.id for p in store.relevant_papers()] == ["2611.00001", "2611.00002"]  # the verdict counts
    scores = store.scores()
    assert scores["2611.00001"].reasons == ("title: GRPO", "abstract: RL")
    assert scores["2611.00001"].topics == ("RLHF", "reasoning")
    assert store.watermark() == datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC)
    assert store.published_keys() == {"arxiv:2611.00001", "seed:deepseekr1"}
    assert store.digest("2026-11-30")["data"]["entries"][0]["title"] == "GRPO “x”"
    assert store.get_many(["paper_summary:arxiv:2611.00001:v2"]) == {
        "paper_summary:arxiv:2611.00001:v2": {"summary_zh": "中文摘要", "summary_en": "An English summary."}}
    assert store.get_state("git:out") == {"error": None, "since": "2026-11-30T06:00:00+00:00"}
    seed = store_seeds.all_seeds(store)[0]
    assert (seed.title, seed.date, seed.parts_zh) == ("DeepSeek-R1: 强化学习", date(2025, 1, 22), (("方法", "GRPO"),))
    assert [r["status"] for r in store_outbox.rows(store, "2026-11-30")] == ["sent", "pending"]
    # new rows after the old ones: ids continue, the outbox still refuses a second copy
    run = store.start_run("publish", datetime(2026, 12, 7, tzinfo=UTC))
    assert run == 3 and [r["id"] for r in store.last_runs()] == [3, 2, 1]
    store.save_digest("2026-12-07", (datetime(2026, 12, 1, tzinfo=UTC),) * 2, {}, [], ["ada@example.org"])
    assert [r["id"] for r in store_outbox.rows(store, "2026-12-07")] == [3]
    with pytest.raises(sa.exc.IntegrityError):
        store.save_digest("2026-12-14", (datetime(2026, 12, 8, tzinfo=UTC),) * 2, {},
                          [("arxiv:2611.00001", True)], [])
    assert Store.open(db_url).version() == LATEST


def test_the_feeds_memory_moves_under_one_key_for_the_rss_source(db_url):
    Store.open(db_url).set_state("rss.seen:https://rss.arxiv.org/rss/cs.LG", {"day": "2026-11-24"})
    with sa.create_engine(db_url).begin() as conn:  # as the release before this one left it
        conn.execute(sa.text("UPDATE schema_migrations SET version = 3"))
    store = Store.open(db_url)
    assert store.version() == LATEST
    assert store.get_state("source:rss") == {"https://rss.arxiv.org/rss/cs.LG": {"day": "2026-11-24"}}
    assert store.get_state("rss.seen:https://rss.arxiv.org/rss/cs.LG") is None


def test_ids_come_from_the_database_on_every_backend(db_url):
    store = Store.open(db_url)
    moment = datetime(2026, 11, 30, tzinfo=UTC)
    first, second = store.start_run("collect", moment), store.start_run("publish", moment)
    assert second > first
    store.save_digest("2026-11-30", (moment, moment), {}, [], ["a@example.org", "b@example.org"])
    ids = [r["id"] for r in store_outbox.rows(store, "2026-11-30")]
    assert len(set(ids)) == 2 and all(isinstance(i, int) for i in ids)


def test_json_values_round_trip(db_url):
    store = Store.open(db_url)
    report = {"warnings": ["“quoted” 中文 | <b>"], "nested": {"n": 1, "f": 0.5, "none": None},
              "when": datetime(2026, 11, 30, tzinfo=UTC)}
    run = store.start_run("publish", datetime(2026, 11, 30, tzinfo=UTC))
    store.finish_run(run, "ok", report)
    assert store.last_runs(1)[0]["report"] == {**report, "when": "2026-11-30 00:00:00+00:00"}
    data = {"z": 1, "a": [1, 2, {"b": "中"}], "m": "x"}
    store.save_digest("2026-11-30", (datetime(2026, 11, 30, tzinfo=UTC),) * 2, data, [], [])
    assert list(store.digest("2026-11-30")["data"]) == ["z", "a", "m"]  # key order kept too
    for value in ("text", 3, 2.5, True, [1, "二"], {"k": None}):
        store.set_state("k", value)
        assert store.get_state("k") == value
    store.set_state("k", None)
    assert store.get_state("k") is None


def test_upserts_refresh_known_rows(db_url):
    store = Store.open(db_url)
    store.put_many([Enrichment("k", "arxiv:1", "paper_summary", {"v": 1}, (1, 1))])
    store.put_many([Enrichment("k", "arxiv:1", "paper_summary", {"v": 2}, (3, 4))])
    assert store.get_many(["k"]) == {"k": {"v": 2}}
    first = SeedEntry(title="A seed", source="a.md", line=1, arxiv_id="2401.00001")
    assert store_seeds.save_seeds(store, [first, SeedEntry(title="Another", source="a.md", line=2)]) == 2
    store_seeds.set_seed_resolutions(store, {"seed:anotherseed": None}, "2026-11-30T00:00:00+00:00")
    moved = SeedEntry(title="A seed", source="b.md", line=7)
    assert store_seeds.save_seeds(store, [moved, moved, SeedEntry(title="Third", source="b.md", line=9)]) == 1
    rows = {seed.title: seed for seed in store_seeds.all_seeds(store)}
    assert (rows["A seed"].source, rows["A seed"].line) == ("b.md", 7)
    assert rows["A seed"].arxiv_id == "2401.00001"  # a resolution is never undone


def test_the_reading_lists_makings_are_the_stored_bytes_and_follow_every_change(db_url):
    """What the months' fingerprints hash: each paper's stored row as UTF-8 bytes, read
    without decoding, which changes with its summary, its score and the install's verdict."""
    from pipeline.models import Scored

    store = Store.open(db_url)
    store.upsert_papers([paper("2401.00001", title="Ω-RL: “quoted” | 中文 <b>")])
    store.set_scores([Scored("2401.00001", 0.9, True, ("rl",), "alignment", ())])

    def makings() -> tuple:
        (pid, day, row), = store_reading_list.reading_makings(store)
        assert (pid, day) == ("2401.00001", "2024-01-02")
        assert all(value is None or isinstance(value, bytes) for value in row)
        return row

    first = makings()
    assert "Ω-RL: “quoted” | 中文 <b>".encode() in first
    assert first[-1] is None  # no summary yet
    store.put_many([Enrichment("k1", "arxiv:2401.00001", "paper_summary", {"summary_zh": "摘要"}, (1, 1))])
    summarised = makings()
    assert "摘要".encode() in summarised[-1]
    store.set_scores([Scored("2401.00001", 0.8, True, ("rl",), "alignment", ())])
    rescored = makings()
    assert rescored != summarised
    store_readers.set_verdict(store, "2401.00001", True)
    assert makings() != rescored


def test_two_processes_opening_a_new_database_at_once_both_work(db_url):
    errors = []

    def open_it():
        try:
            Store.open(db_url).start_run("collect", datetime(2026, 11, 30, tzinfo=UTC))
        except Exception as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(Store.open(db_url).last_runs()) == 4


def test_a_new_sqlite_file_opens_while_another_process_is_still_creating_it(tmp_path):
    """SQLite refuses a switch to WAL at once, without waiting, while another connection
    holds a lock on a file still in rollback mode: the moment a second process opens a
    database the first is creating. Opening waits for it instead of failing."""
    path = tmp_path / "db.sqlite3"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE creating (x)")
    releasing = threading.Timer(0.5, other.execute, ["COMMIT"])
    releasing.start()
    store = Store.open(f"sqlite:///{path}")
    releasing.join()
    assert store.version() == LATEST
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_sqlite_runs_in_wal_mode(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path}/db.sqlite3")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_a_newer_version_updates_the_record_and_counts_as_revised(db_url):
    store = Store.open(db_url)
    new, revised, same = store.upsert_papers([paper()])
    assert (len(new), len(revised), same) == (1, 0, 0)
    new, revised, same = store.upsert_papers([paper(version=2, title="A better title", sources=("rss",))])
    assert (len(new), len(revised), same) == (0, 1, 0)
    stored = store.papers()[0]
    assert (stored.version, stored.title, stored.sources) == (2, "A better title", ("api", "rss"))


def test_versions_never_move_backwards(db_url):
    store = Store.open(db_url)
    store.upsert_papers([paper(version=3, title="v3 title")])
    new, revised, same = store.upsert_papers([paper(version=1, title="v1 title")])
    assert (len(new), len(revised)) == (0, 0)
    assert store.papers()[0].version == 3
    assert store.papers()[0].title == "v3 title"


def test_thin_records_never_erase_rich_fields(db_url):
    store = Store.open(db_url)
    store.upsert_papers([paper(authors=("Ada",), categories=("cs.LG",))])
    store.upsert_papers([paper(abstract="", authors=(), categories=())])
    stored = store.papers()[0]
    assert stored.authors == ("Ada",) and stored.abstract == "An abstract."


def test_a_digest_recipient_pair_exists_once(db_url):
    store = Store.open(db_url)
    now = datetime.now(UTC)
    store.save_digest("2026-11-30", (now, now), {}, [("arxiv:1", True)], ["a@example.org"])
    with pytest.raises(sa.exc.IntegrityError):
        with store.tx() as conn:
            conn.exec_driver_sql(
                "INSERT INTO deliveries (digest_id, recipient, status, attempts) "
                "VALUES ('2026-11-30', 'a@example.org', 'pending', 0)")


def test_a_paper_goes_into_one_digest_only(db_url):
    store = Store.open(db_url)
    now = datetime.now(UTC)
    store.save_digest("2026-11-23", (now, now), {}, [("arxiv:1", True)], [])
    with pytest.raises(sa.exc.IntegrityError):
        store.save_digest("2026-11-30", (now, now), {}, [("arxiv:1", True)], [])
    assert store.digest_ids() == ["2026-11-23"]  # the failed one left nothing behind


def test_a_weeks_papers_hold_the_newest_of_those_published_without_a_summary(db_url):
    """The summaries a run asks for again are the newest `backlog`: older ones, which it
    could not summarise that run, are not read (every one was, every week)."""
    store = Store.open(db_url)
    store.upsert_papers([paper(f"2401.0000{n}", submitted=datetime(2024, 1, n, tzinfo=UTC)) for n in range(1, 8)])
    store.set_scores([Scored(f"2401.0000{n}", 1.0, True) for n in range(1, 8)])
    now = datetime.now(UTC)
    store.save_digest("2024-01-08", (now, now), {}, [(f"arxiv:2401.0000{n}", True) for n in range(1, 6)], [])
    store.put_many([Enrichment("k", "arxiv:2401.00005", "paper_summary", {"summary_zh": "摘要"}, (1, 1))])
    waiting = [p.id for p in store.relevant_papers(waiting=True, backlog=2)]
    assert waiting == ["2401.00007", "2401.00006", "2401.00004", "2401.00003"]  # unlisted, then 2 of 4
    assert len(store.relevant_papers(waiting=True)) == 6 and len(store.relevant_papers()) == 7


def test_watermark_only_moves_with_successful_runs(db_url):
    store = Store.open(db_url)
    a = datetime(2026, 11, 1, tzinfo=UTC)
    b = datetime(2026, 11, 8, tzinfo=UTC)
    ok = store.start_run("collect", a)
    store.finish_run(ok, "ok", {}, window=(a, a))
    failed = store.start_run("collect", b)
    store.finish_run(failed, "failed", {}, error="boom", window=(a, b))
    assert store.watermark() == a


def test_the_watermark_is_the_latest_window_end_in_time_whatever_its_offset(db_url):
    """A window ends in its as-of's zone: after schedule.timezone changed, the latest end
    may read as the smaller text (20:00-05:00 is 01:00 UTC, after 00:30+00:00)."""
    store = Store.open(db_url)
    new_york = timezone(timedelta(hours=-5))
    later = datetime(2026, 11, 30, 20, 0, tzinfo=new_york)
    for end in (later, datetime(2026, 12, 1, 0, 30, tzinfo=UTC)):
        run = store.start_run("collect", end)
        store.finish_run(run, "ok", {}, window=(end - timedelta(days=1), end))
    assert store.watermark() == later


def test_after_the_server_ended_our_connections_the_next_query_reconnects(db_url):
    """A PostgreSQL restart ends every open connection; `rl-digest schedule` lives for months
    and must open new ones, not fail its next publish."""
    if not db_url.startswith("postgresql"):
        pytest.skip("a server's connections: PostgreSQL only")
    store = Store.open(db_url)
    store.set_state("k", 1)  # a connection now waits in the pool
    admin = sa.create_engine(db_url, poolclass=sa.NullPool)
    with admin.connect() as conn:
        ended = conn.execute(sa.text(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()")).scalar()
    admin.dispose()
    assert ended >= 1
    assert store.get_state("k") == 1
    store.close()


def test_a_table_locked_elsewhere_is_waited_for_then_one_clear_error(db_url):
    """A query never hangs on another session's lock: it waits storage.busy_timeout_seconds,
    then says so (exit 75, as on SQLite)."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite's busy timeout is tested in test_reliability.py")
    from pipeline.errors import LockedError
    from pipeline.store_connect import connect
    store = Store(connect(db_url, busy_timeout=1))
    store.migrate()
    holder = sa.create_engine(db_url, poolclass=sa.NullPool)
    with holder.connect() as conn, conn.begin():
        conn.execute(sa.text("LOCK TABLE state IN ACCESS EXCLUSIVE MODE"))
        with pytest.raises(LockedError, match="locked by another"):
            store.get_state("k")
    holder.dispose()
    store.close()


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


def test_a_run_left_running_by_a_dead_process_is_marked_interrupted(db_url):
    moment = datetime(2026, 11, 30, tzinfo=UTC)
    killed = Store.open(db_url).start_run("publish", moment)  # never finished: kill -9
    store = Store.open(db_url)  # the next process
    store.start_run("publish", moment)
    rows = {row["id"]: row for row in store.last_runs()}
    assert rows[killed]["status"] == "interrupted"
    assert rows[killed]["error"] == "the process ended mid-run"


def test_readers_feedback_and_marks_move_into_their_tables(db_url):
    load_v1(db_url)  # 2611.00002 carries a mark (papers.verdict) there
    with sa.create_engine(db_url).begin() as conn:  # what serve kept in state keys before
        conn.execute(sa.text("INSERT INTO state (key, value) VALUES (:k, :v)"), [
            {"k": "readers", "v": '{"Ada@Example.org": {"status": "unsubscribed", '
                                  '"changed": "2026-11-20T10:00:00+00:00"}}'},
            {"k": "feedback", "v": '{"arxiv:2611.00001": {"alan@example.org": {"verdict": "down", '
                                   '"at": "2026-11-21T10:00:00+00:00"}}}'}])
    store = Store.open(db_url)
    assert store_readers.known(store) == {"ada@example.org": {
        "name": None, "status": "unsubscribed", "changed_at": "2026-11-20T10:00:00+00:00"}}
    said = {(v["item_key"], v["reader"]): (v["verdict"], v["at"][:10]) for v in store_readers.verdicts_given(store)}
    assert said[("arxiv:2611.00001", "alan@example.org")] == (False, "2026-11-21")
    assert said[("arxiv:2611.00002", "")][0] is True and len(said) == 2
    assert [p.id for p in store.marked(relevant=True)] == ["2611.00002"]
    assert store.scores()["2611.00002"].verdict is True and store.scores()["2611.00001"].verdict is None
    assert [(p.id, v) for p, v in store.readers_verdicts()] == [("2611.00001", False)]
    assert store.get_state("readers") is None and store.get_state("feedback") is None
    assert "verdict" not in {c["name"] for c in sa.inspect(store.engine).get_columns("papers")}


def test_a_mark_and_a_readers_verdict_live_side_by_side(db_url):
    store = Store.open(db_url)
    store.upsert_papers([paper()])
    assert store_readers.set_verdict(store, "2401.00001", False) and not store_readers.set_verdict(store, "2499.99999", True)
    store_readers.record_verdict(store, "arxiv:2401.00001", "Ada@Example.org", True)
    store_readers.record_verdict(store, "arxiv:2401.00001", "ada@example.org", False)  # a later click replaces it
    assert [(v["reader"], v["verdict"]) for v in store_readers.verdicts_given(store, "arxiv:2401.00001")] == [
        ("", False), ("ada@example.org", False)]
    assert store.relevant_papers() == [] and [p.id for p in store.marked(relevant=False)] == ["2401.00001"]
    store_readers.set_verdict(store, "2401.00001", None)
    assert [v["reader"] for v in store_readers.verdicts_given(store)] == ["ada@example.org"] and store.marked(False) == []


def test_a_run_s_own_collect_leaves_it_running_and_a_dead_process_s_runs_are_interrupted(db_url):
    as_of = datetime(2026, 11, 30, tzinfo=UTC)
    store = Store.open(db_url)
    publish = store.start_run("publish", as_of)
    collect = store.start_run("collect", as_of)  # the same process: status must show it live
    rows = {row["id"]: row["status"] for row in store.last_runs()}
    assert rows == {publish: "running", collect: "running"}
    store.finish_run(collect, "ok", {})
    store.close()
    later = Store.open(db_url)  # the next process: the publish above never finished
    later.start_run("collect", as_of)
    statuses = {row["id"]: row["status"] for row in later.last_runs()}
    assert statuses[publish] == "interrupted" and statuses[collect] == "ok"
    later.close()


def test_the_updates_ledger_reads_only_the_listed_papers_that_changed_since_the_last_digest(db_url, monkeypatch):
    """A run compares a listed paper with what its digest said only when its record changed
    since the last digest: years of listed papers are not read every week."""
    from pipeline import store as store_module

    store = Store.open(db_url)
    clock = iter(f"2026-11-{day:02d}T08:00:00+00:00" for day in range(1, 30))
    monkeypatch.setattr(store_module, "db_now", lambda conn: next(clock))
    store.upsert_papers([paper(f"2401.0000{n}") for n in range(1, 4)])
    week = (datetime(2026, 11, 2, tzinfo=UTC),) * 2
    store.save_digest("2026-11-02", week, {}, [(f"arxiv:2401.0000{n}", True) for n in range(1, 4)], [],
                      snapshots={f"arxiv:2401.0000{n}": {"version": 1, "venue": None, "code": None}
                                 for n in range(1, 4)})
    assert store.listed_changed() == []
    store.upsert_papers([paper("2401.00002", journal_ref="ICLR 2027"), paper("2401.00003"), paper("2401.00004")])
    assert [(p.id, p.journal_ref, snap["venue"]) for p, snap in store.listed_changed()] == [
        ("2401.00002", "ICLR 2027", None)]  # not the unchanged one, nor the one not listed
    store_readers.set_verdict(store, "2401.00002", False)  # `mark --irrelevant` since: its news is no one's
    assert store.listed_changed() == []
    store_readers.set_verdict(store, "2401.00002", None)
    store.save_digest("2026-11-09", week, {}, [("arxiv:2401.00004", True)], [])
    assert store.listed_changed() == []  # told in that digest's Updates, or not news


def test_a_paper_read_again_from_another_source_is_no_news_but_a_version_venue_or_code_is(db_url, monkeypatch):
    """The change time Updates reads against the last digest moves with what a reader is told
    (a new version, a venue, a code link), not with another feed's sight of the same paper:
    every RSS re-read of a listed paper (its sources, announce type and times) restamped it."""
    from pipeline import store as store_module

    store = Store.open(db_url)
    clock = iter(f"2026-11-{day:02d}T08:00:00+00:00" for day in range(1, 30))
    monkeypatch.setattr(store_module, "db_now", lambda conn: next(clock))
    listed = [paper(f"2401.0000{n}") for n in range(1, 5)]
    store.upsert_papers(listed)
    store.save_digest("2026-11-02", (datetime(2026, 11, 2, tzinfo=UTC),) * 2, {},
                      [(f"arxiv:{p.id}", True) for p in listed], [],
                      snapshots={f"arxiv:{p.id}": {"version": 1, "venue": None, "code": None} for p in listed})

    def stamps() -> dict[str, str]:
        with store.engine.connect() as conn:
            return dict(conn.execute(sa.text("SELECT id, changed_at FROM papers")).all())

    before = stamps()
    announced = datetime(2024, 1, 3, 5, tzinfo=timezone(timedelta(hours=-5)))
    assert store.upsert_papers([replace(p, sources=("rss",), announce_type="new", updated=announced)
                                for p in listed]) == ([], [], 4)
    assert stamps() == before and store.listed_changed() == []
    assert store.papers(["2401.00001"])[0].sources == ("api", "rss")  # the record still learns its sources
    store.upsert_papers([paper("2401.00002", version=2), paper("2401.00003", journal_ref="ICLR 2027"),
                         paper("2401.00004", comment="Code: https://github.com/lab/rl4")])
    assert [(p.id, p.version, p.journal_ref, p.comment) for p, _ in store.listed_changed()] == [
        ("2401.00002", 2, None, None), ("2401.00003", 1, "ICLR 2027", None),
        ("2401.00004", 1, None, "Code: https://github.com/lab/rl4")]
    assert stamps()["2401.00001"] == before["2401.00001"]


def test_a_change_stamped_by_a_slow_clock_on_a_shared_server_still_reaches_updates(db_url, monkeypatch):
    """Machines sharing a PostgreSQL server: one with its clock an hour slow collects a venue
    after another made a digest, and writes the newest summary; the server's clock orders them."""
    from pipeline import store as store_module

    if db_url.startswith("sqlite"):
        pytest.skip("a SQLite file has one machine, and one clock")
    store = Store.open(db_url)
    store.upsert_papers([paper("2401.00001")])
    store.put_many([Enrichment("s1", "arxiv:2401.00001", "paper_summary", {"summary_en": "old"})])
    store.save_digest("2026-11-02", (datetime(2026, 11, 2, tzinfo=UTC),) * 2, {},
                      [("arxiv:2401.00001", True)], [], snapshots={"arxiv:2401.00001": {"version": 1}})
    slow = datetime.now(UTC) - timedelta(hours=1)
    monkeypatch.setattr(store_module, "now_iso", lambda: slow.isoformat(timespec="seconds"))
    store.upsert_papers([paper("2401.00001", journal_ref="ICLR 2027")])
    store.put_many([Enrichment("s2", "arxiv:2401.00001", "paper_summary", {"summary_en": "new"})])
    assert [(p.id, p.journal_ref) for p, _ in store.listed_changed()] == [("2401.00001", "ICLR 2027")]
    # in the same second as the first by the server's clock: the key decides, as it is meant to
    assert store.latest_enrichments("paper_summary") == {"arxiv:2401.00001": {"summary_en": "new"}}


def test_an_older_database_counts_every_paper_as_changed_once(db_url):
    """Papers stored before the change time was kept: the first run compares them all."""
    store = Store.open(db_url)
    store.upsert_papers([paper("2401.00001"), paper("2401.00002")])
    store.save_digest("2026-11-02", (datetime(2026, 11, 2, tzinfo=UTC),) * 2, {},
                      [("arxiv:2401.00001", True)], [], snapshots={"arxiv:2401.00001": {"version": 1}})
    with sa.create_engine(db_url).begin() as conn:  # as the release before this one left it
        conn.execute(sa.text("ALTER TABLE papers DROP COLUMN changed_at"))
        conn.execute(sa.text("UPDATE schema_migrations SET version = 6"))
    store = Store.open(db_url)
    assert store.version() == LATEST
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM papers WHERE changed_at IS NULL")).scalar() == 0
    assert [p.id for p, _ in store.listed_changed()] == ["2401.00001"]


def test_the_installs_verdicts_come_in_paper_order_on_every_backend(db_url):
    """The refit learns from them in the order they come, and its model differs with it: the
    same marks made one model on SQLite and another on PostgreSQL (an upgrade's week 3)."""
    store = Store.open(db_url)
    store.upsert_papers([paper(f"2401.0000{n}") for n in range(1, 6)])
    for pid in ("2401.00004", "2401.00002", "2401.00005", "2401.00001"):
        store_readers.set_verdict(store, pid, False)
    store_readers.set_verdict(store, "2401.00003", True)
    store_readers.set_verdict(store, "2401.00002", None)
    store_readers.set_verdict(store, "2401.00002", False)
    store.upsert_papers([paper("2401.00001", version=2), paper("2401.00004", version=2)])  # rows rewritten
    assert [p.id for p in store.marked(relevant=False)] == ["2401.00001", "2401.00002", "2401.00004", "2401.00005"]


def test_an_older_databases_author_lists_cut_at_100_say_that_more_may_exist(db_url):
    """Releases before cut every list at 100 names with no sign: DeepSeek-R1's 200 authors
    were stored (and cited) as 100. Such a list ends in 'others' after the upgrade, and the
    paper's next fetch brings the whole list."""
    store = Store.open(db_url)
    hundred, few = tuple(f"Author {n}" for n in range(100)), ("Ada Lovelace", "Alan Turing")
    store.upsert_papers([paper("2501.12948", authors=hundred), paper("2401.00002", authors=few)])
    with sa.create_engine(db_url).begin() as conn:  # as the release before this one left it
        conn.execute(sa.text("UPDATE schema_migrations SET version = 7"))
    store = Store.open(db_url)
    assert store.version() == LATEST
    stored = {p.id: p.authors for p in store.papers()}
    assert stored == {"2501.12948": (*hundred, "others"), "2401.00002": few}
    store.upsert_papers([paper("2501.12948", authors=tuple(f"Author {n}" for n in range(200)))])
    assert len(store.papers(["2501.12948"])[0].authors) == 200


def test_a_postgresql_session_is_dropped_by_the_server_when_its_machine_is_gone(db_url):
    """The run lock lives in a session: the server probes it when idle, and gives up on data
    the peer never acknowledges after as long (a machine that dropped off while a reply was in
    flight held the lock for TCP's 15 minutes of retransmissions, every other run exiting 75).
    test_backends_cli's slow test pulls the cable for real; this names the server's settings."""
    if db_url.startswith("sqlite"):
        pytest.skip("a SQLite file has no session on a server")
    with Store.open(db_url).engine.connect() as conn:
        shown = {name: conn.exec_driver_sql(f"SHOW {name}").scalar() for name in
                 ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout")}
    assert shown == {"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10",  # seconds
                     "tcp_keepalives_count": "6", "tcp_user_timeout": "90000"}  # milliseconds


def test_forgetting_a_reader_leaves_an_address_that_only_contains_theirs(tmp_path):
    """bob@example.org forgotten: jimbob@example.org, a reader still, keeps their outbox row,
    their 👍 and their address in the run reports; Bob's own 'Name <address>' goes whole."""
    store = Store.open(f"sqlite:///{tmp_path}/s.sqlite3")
    store.save_digest("2026-11-30", (datetime(2026, 11, 30, tzinfo=UTC),) * 2, {}, [],
                      ["bob@example.org", "jimbob@example.org"])
    store_readers.record_verdict(store, "arxiv:1", "bob@example.org", True)
    store_readers.record_verdict(store, "arxiv:1", "jimbob@example.org", False)
    run = store.start_run("publish", datetime(2026, 11, 30, tzinfo=UTC))
    store.finish_run(run, "partial", {"delivery_errors": [
        "Bob B <BOB@example.org> (digest 2026-11-30): 451", "jimbob@example.org (digest 2026-11-30): 451"]})
    done = store_readers.forget_reader(store, "bob@example.org", "Bob B")
    assert (done["dropped"], done["verdicts"], done["runs"]) == (1, 1, 1)
    assert [r["recipient"] for r in store_outbox.rows(store)] == ["jimbob@example.org"]
    assert {v["reader"] for v in store_readers.verdicts_given(store)} == {"a reader forgotten #1", "jimbob@example.org"}
    assert store.last_runs()[0]["report"]["delivery_errors"] == [
        "a reader forgotten (digest 2026-11-30): 451", "jimbob@example.org (digest 2026-11-30): 451"]
