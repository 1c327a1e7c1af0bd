"""`rl-digest store copy` through the real CLI: a store with history (digests, a mark, an
unsubscribed reader, a digest waiting in the outbox, summaries the LLM was paid for) copied
SQLite -> PostgreSQL -> SQLite goes on on each copy as it would have on the original; a target
holding rl-digest data, a held run lock and a password in the URL are refused; a copy stopped
or cut off midway leaves the target empty."""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from tests import backends
from tests.helpers import ids_in, rl_paper, start_warm_cli
from tests.processes import config_with, lock_holder, stderr_lines, wait_for
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer
from tests.servers.smtp_server import SmtpServer

WEEK1, WEEK2, WEEK3 = (datetime(2026, 10, 29, 12, tzinfo=UTC) + timedelta(weeks=n) for n in range(3))
ADA, ALAN = "ada@example.org", "alan@example.org"
KEY = {"OPENAI_API_KEY": "sk-test-store-copy"}


def pointed_at(config: Path, name: str, url: str) -> Path:
    """The same config beside it, its storage.url `url`: the outputs and state/ are the same."""
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["storage"] = {"url": url}
    path = config.with_name(name)
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def seen(cli, config: Path) -> dict[str, str]:
    """What a user reads of a store: status (but the database line), both digests rendered,
    the reading list exported with its summaries, the readers."""
    status = cli("--config", str(config), "status").stdout
    return {"status": "".join(line for line in status.splitlines(True) if not line.startswith("database:")),
            **{day: cli("--config", str(config), "render", "--digest", day, "--format", "html").stdout
               for day in ("2026-11-02", "2026-11-09")},
            "export": cli("--config", str(config), "export", "--format", "jsonl").stdout,
            "readers": cli("--config", str(config), "readers").stdout}


def test_a_sqlite_store_copied_to_another_file_reads_the_same_there(tmp_path, cli):
    """The quick round: digests, a mark and an unsubscribe come across; the copy's status,
    export, readers and rendered digests read as the original's, on the storage.url the copy
    printed. It printed a file named '#1: copy' as 'week %231%3A copy', a store of its own:
    pasted, the next run started from nothing."""
    with ArxivServer([rl_paper(n, WEEK1) for n in (1, 2)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        arxiv.add(*[rl_paper(n, WEEK2) for n in (3, 4)])
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
    cli("--config", str(config), "mark", rl_paper(1, WEEK1).id, "--irrelevant")
    cli("--config", str(config), "readers", "--unsubscribe", ALAN)
    before = seen(cli, config)
    backup = tmp_path / "state" / "week #1: copy.sqlite3"
    copied = cli("--config", str(config), "store", "copy", f"sqlite:///{backup}")
    assert copied.stdout.startswith(f"{backup}: copied "), copied.stdout
    assert "readers 2" in copied.stdout and "verdicts 1" in copied.stdout and "digests 2" in copied.stdout
    printed = yaml.safe_load(copied.stdout[copied.stdout.index("  storage:"):])["storage"]["url"]
    assert printed == f"sqlite:///{backup}"
    assert seen(cli, pointed_at(config, "file.yaml", printed)) == before


@pytest.mark.slow
def test_a_store_copied_to_postgresql_and_back_to_sqlite_goes_on_there_as_it_would_have(
        tmp_path, cli, postgres):
    """The reader who unsubscribed is not mailed, the digest waiting for the other goes, the
    old digests render byte for byte, the next week reads from the watermark, and new rows
    take ids past the copied ones (PostgreSQL's identities)."""
    if isinstance(postgres, str):
        pytest.skip(f"PostgreSQL: {postgres}")
    server_db = postgres.create_database()
    first, second = [rl_paper(n, WEEK1) for n in (1, 2, 3)], [rl_paper(n, WEEK2) for n in (4, 5)]
    third = [rl_paper(n, WEEK3) for n in (6, 7)]
    try:
        with ArxivServer(first) as arxiv, OpenAIServer() as llm:
            with SmtpServer() as smtp:
                config = config_with(tmp_path, arxiv, smtp.port, enrich={
                    "provider": "openai", "base_url": llm.url, "timeout_seconds": 5})
                cli("--config", str(config), "run", "--as-of", "2026-11-02", env=KEY)
                down = smtp.port
            cli("--config", str(config), "mark", first[0].id, "--irrelevant")
            arxiv.add(*second)  # the mail server is down: both readers' rows wait
            cli("--config", str(config), "run", "--as-of", "2026-11-09", env=KEY, check=1)
            cli("--config", str(config), "readers", "--unsubscribe", ALAN)
            before = seen(cli, config)
            to_server = cli("--config", str(config), "store", "copy", server_db)
            on_server = pointed_at(config, "server.yaml", server_db)
            backup = tmp_path / "state" / "copy.sqlite3"  # its heartbeat where status looks for it
            to_file = cli("--config", str(on_server), "store", "copy", f"sqlite:///{backup}")
            on_file = pointed_at(config, "file.yaml", f"sqlite:///{backup}")
            copies = {"server": on_server, "file": on_file}
            after = {name: seen(cli, path) for name, path in copies.items()}
            arxiv.add(*third)
            went, weeks = {}, {}
            for name, path in copies.items():
                with SmtpServer(port=down) as back:
                    sent = cli("--config", str(path), "send")
                    went[name] = {who: len(back.to(who)) for who in (ADA, ALAN)}
                    week = cli("--config", str(path), "run", "--as-of", "2026-11-16", env=KEY)
                    weeks[name] = (sent.stdout, week.stdout, {who: len(back.to(who)) for who in (ADA, ALAN)})
        source = backends.rows(f"sqlite:///{tmp_path}/state/digest.sqlite3",
                               "SELECT max(id) AS id, max(window_end) AS watermark FROM runs WHERE status = 'ok'")[0]
        ran = {name: backends.rows(url, "SELECT id, window_start FROM runs ORDER BY id DESC LIMIT 1")[0]
               for name, url in (("server", server_db), ("file", f"sqlite:///{backup}"))}
        digest = (tmp_path / "out" / "digests" / "2026-11-16.md").read_text(encoding="utf-8")
    finally:
        postgres.drop_database(server_db)
    assert to_server.stdout.startswith(f"{server_db}: copied ")
    assert f"url: {server_db}" in to_server.stdout and "storage:" in to_server.stdout
    assert to_file.stdout.startswith(f"{backup}: copied ") and f"url: sqlite:///{backup}" in to_file.stdout
    rows = to_server.stdout.split(" tables (")[1].split(")")[0]
    assert "deliveries 4" in rows and "digests 2" in rows and "readers 2" in rows and "verdicts 1" in rows
    assert "enrichments 0" not in rows  # the summaries the LLM was paid for
    assert rows == to_file.stdout.split(" tables (")[1].split(")")[0]  # the same rows, back again
    for name in copies:
        assert after[name] == before, name
        sent, week, mailed = weeks[name]
        assert went[name] == {ADA: 1, ALAN: 0}, name  # the week that waited, to Ada alone
        assert sent.startswith("sent 1, pending 0, failed 0")
        assert "new 2" in week and "relevant 2" in week and "sent to 1" in week, week
        assert mailed == {ADA: 2, ALAN: 0}
        assert ran[name]["window_start"] == source["watermark"]  # read on from the watermark
        assert ran[name]["id"] > source["id"]  # a new run's row: past the copied ids
    assert sorted(ids_in(digest)) == [p.id for p in third]


def test_a_target_that_holds_rl_digest_data_is_refused_and_left_as_it_was(tmp_path, cli, db_url):
    (tmp_path / "source").mkdir()
    config = config_with(tmp_path / "source")
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    used = config_with(tmp_path, storage={"url": db_url})
    cli("--config", str(used), "run", "--offline", "--as-of", "2026-11-02")
    runs = backends.rows(db_url, "SELECT * FROM runs")
    file = Path(db_url.removeprefix("sqlite:///")) if db_url.startswith("sqlite") else None
    kept = file.read_bytes() if file else None
    refused = cli("--config", str(config), "store", "copy", db_url, check=2)
    target = str(file) if file else db_url
    assert stderr_lines(refused) == [
        f"rl-digest: {target}: holds rl-digest data already (its runs table has rows); store copy "
        "never merges or overwrites (name a new SQLite file or an empty PostgreSQL database)"]
    assert backends.rows(db_url, "SELECT * FROM runs") == runs
    assert file is None or file.read_bytes() == kept


def test_a_target_file_that_is_no_database_is_named_so_and_left_as_it_was(tmp_path, cli):
    """Not chmodded to 0600, not a word of restoring a store: the argument was wrong."""
    config = config_with(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n", encoding="utf-8")
    notes.chmod(0o644)
    refused = cli("--config", str(config), "store", "copy", f"sqlite:///{notes}", check=1)
    assert stderr_lines(refused) == [
        f"rl-digest: {notes}: not a usable database: file is not a database (TARGET_URL is not an "
        "empty database: name a new SQLite file or an empty PostgreSQL database)"]
    assert notes.read_text(encoding="utf-8") == "my notes\n" and notes.stat().st_mode & 0o777 == 0o644
    empty = tmp_path / "empty.sqlite3"  # made by hand: once the copy is in, the addresses are private
    empty.touch(mode=0o644)
    cli("--config", str(config), "store", "copy", f"sqlite:///{empty}")
    assert empty.stat().st_mode & 0o777 == 0o600


def test_a_copy_while_another_run_holds_the_lock_exits_75_and_writes_nothing(tmp_path, cli, db_url):
    config = config_with(tmp_path, storage={"url": db_url})
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    with lock_holder(config):
        result = cli("--config", str(config), "store", "copy", f"sqlite:///{tmp_path}/copy.sqlite3", check=75)
    assert len(stderr_lines(result)) == 1 and "another rl-digest run holds" in result.stderr
    assert not (tmp_path / "copy.sqlite3").exists()


def test_a_password_in_the_target_url_is_refused_and_never_shown(tmp_path, cli):
    config = config_with(tmp_path)
    refused = cli("--config", str(config), "store", "copy",
                  "postgresql+psycopg://rl:s3cret-pass@127.0.0.1:5432/rl", check=2)
    assert stderr_lines(refused) == [
        "rl-digest: TARGET_URL: holds a password; secrets are not taken on the command line (take it "
        "out of the URL, put it in an environment variable and give its name with --password-env)"]
    assert "s3cret" not in refused.stdout + refused.stderr


def test_the_target_password_comes_from_password_env_and_a_refusal_names_it(tmp_path, cli, pg_password):
    url, password = pg_password
    config = config_with(tmp_path)
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    asked = cli("--config", str(config), "store", "copy", url, check=2)
    wrong = cli("--config", str(config), "store", "copy", url, "--password-env", "DB_PW",
                env={"DB_PW": "not-it"}, check=2)
    unset = cli("--config", str(config), "store", "copy", url, "--password-env", "DB_PW", check=2)
    done = cli("--config", str(config), "store", "copy", url, "--password-env", "DB_PW", env={"DB_PW": password})
    assert stderr_lines(asked)[0].endswith(
        "(the server asks for a password: put it in an environment variable and set --password-env "
        "to its name)")
    assert stderr_lines(wrong)[0].endswith(
        "(check the password in the environment variable that --password-env names)")
    assert stderr_lines(unset) == ["rl-digest: --password-env: the environment variable DB_PW is not "
                                   "set (export DB_PW with the target database's password)"]
    assert done.stdout.startswith(f"{url}: copied ") and "password_env: DB_PW" in done.stdout
    assert password not in done.stdout + done.stderr


def test_a_postgresql_database_not_in_utf8_is_refused_as_target_and_as_storage(tmp_path, cli, postgres):
    """`createdb` on a cluster made under LANG=C gives SQL_ASCII (LATIN1 under a Latin-1
    locale): the copy of a store holding Chinese text ended in 'unexpected error: TypeError:
    cannot use a string pattern on a bytes-like object', and a run on it failed so at its
    first Chinese word."""
    if isinstance(postgres, str):
        pytest.skip(f"PostgreSQL: {postgres}")
    url = postgres.create_database()
    name = sa.engine.make_url(url).database
    try:
        with postgres.admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE "{name}"')
            conn.exec_driver_sql(f"CREATE DATABASE \"{name}\" ENCODING 'SQL_ASCII' LC_COLLATE 'C' "
                                 "LC_CTYPE 'C' TEMPLATE template0")
        config = config_with(tmp_path)
        copied = cli("--config", str(config), "store", "copy", url, check=2)
        stored = cli("--config", str(config_with(tmp_path, storage={"url": url})), "status", check=2)
        tables = backends.rows(f"{url}?client_encoding=utf8",  # SQLAlchemy's first query reads text
                               "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    finally:
        postgres.drop_database(url)
    refused = (f"rl-digest: {url}: the database's encoding is SQL_ASCII, not UTF8, and rl-digest keeps "
               "Chinese text (create it with createdb --encoding UTF8 --template template0)")
    assert stderr_lines(copied) == [refused] and stderr_lines(stored) == [refused]
    assert tables == []


def test_unknown_scheme_and_missing_driver_are_one_line_as_for_storage_url(tmp_path, cli):
    config = config_with(tmp_path)
    scheme = cli("--config", str(config), "store", "copy", "mysql://rl@db/rl", check=2)
    driver = cli("--config", str(config), "store", "copy", "postgresql+psycopg2://rl@db/rl", check=2)
    assert stderr_lines(scheme) == [
        "rl-digest: TARGET_URL: mysql: not supported (use sqlite:/// or postgresql+psycopg://)"]
    assert stderr_lines(driver) == [
        "rl-digest: TARGET_URL: postgresql+psycopg2:// needs a driver that is not installed (No module "
        "named 'psycopg2') (pip install 'rl-digest[postgres]' and use postgresql+psycopg://)"]


@pytest.mark.parametrize("how", ["SIGTERM", "the server ends the session"])
def test_a_copy_cut_off_midway_leaves_the_target_empty_and_says_so(tmp_path, cli, postgres, how):
    """Stopped while it waits on the store's `state` table (the tables before it copied), or
    its session on the target ended by the server: not even the schema stays."""
    if isinstance(postgres, str):
        pytest.skip(f"PostgreSQL: {postgres}")
    source, target = postgres.create_database(), postgres.create_database()
    config = config_with(tmp_path, storage={"url": source})
    err = tmp_path / "copy.err"
    try:
        cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
        engine = sa.create_engine(source, poolclass=sa.NullPool)
        with engine.connect() as holder:
            holder.exec_driver_sql("LOCK TABLE state IN ACCESS EXCLUSIVE MODE")
            proc = start_warm_cli("--config", str(config), "store", "copy", target, stderr=err)
            wait_for(lambda: waiting(source), timeout=30, what="the copy waiting on the state table",
                     proc=proc)
            assert backends.rows(source, "SELECT pid FROM pg_stat_activity WHERE datname = :name AND "
                                 "xact_start IS NOT NULL", name=target.rsplit("/", 1)[1])  # writing there
            if how == "SIGTERM":
                proc.send_signal(signal.SIGTERM)
                wait_for(lambda: "SIGTERM: stopping" in err.read_text(encoding="utf-8"), proc=proc,
                         what="the stop logged")
            else:
                backends.execute(source, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE datname = :name", name=target.rsplit("/", 1)[1])
            holder.rollback()  # the copy reads on
        code = proc.wait(timeout=60)
        tables = backends.rows(target, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    finally:
        engine.dispose()
        for url in (source, target):
            postgres.drop_database(url)
    lines = [line for line in err.read_text(encoding="utf-8").splitlines() if line.startswith("rl-digest:")]
    assert tables == []
    assert len(lines) == 1 and f"; the copy was rolled back: {target} holds no rl-digest data" in lines[0]
    if how == "SIGTERM":
        assert code == 143 and lines[0].startswith("rl-digest: stopped by SIGTERM mid-copy;")
    else:
        # libpq reads the server's notice, or finds the socket closed first: either is its words
        assert code == 1 and lines[0].startswith(f"rl-digest: {target}: ") and any(
            words in lines[0] for words in ("terminating connection", "server closed the connection"))


def waiting(url: str) -> bool:
    """Whether a session waits for a lock on the database at `url`."""
    return bool(backends.rows(url, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                   "AND wait_event_type = 'Lock'"))
