"""The real CLI on each storage backend (SQLite and PostgreSQL): two weeks and a re-run,
kill -9 mid-run then a run that completes, two runs at once (one exits 75), two
schedulers on two machines sharing one PostgreSQL database, and the one-line errors of a
missing driver or a server that is down."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline import lock
from tests import backends
from tests.helpers import CATS, cli_command, cli_env, ids_in, rl_paper, run_cli, start_warm_cli
from tests.processes import (
    DONE,
    HELD,
    READERS,
    Scheduler,
    WatchedSmtp,
    config_with,
    copies,
    kill9,
    lock_holder,
    one_publishes,
    papers_now,
    start_cli,
    stderr_lines,
    wait_for,
)
from tests.servers.arxiv_server import ArxivServer, hang
from tests.servers.openai_server import OpenAIServer, stall

WEEK1 = datetime(2026, 10, 29, 12, tzinfo=UTC)
WEEK2 = datetime(2026, 11, 5, 12, tzinfo=UTC)
KEY = "sk-test-backends"


def on(db_url: str, **extra) -> dict:
    return {"storage": {"url": db_url}, **extra}


def test_two_weeks_and_a_rerun_publish_each_paper_once_and_mail_each_reader_once(tmp_path, cli, db_url):
    first = [rl_paper(n, WEEK1) for n in (1, 2, 3)]
    second = [rl_paper(n, WEEK2) for n in (4, 5)]
    with ArxivServer(first) as arxiv, WatchedSmtp() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, **on(db_url))
        week1 = cli("--config", str(config), "run", "--as-of", "2026-11-02")
        arxiv.papers = first + second
        week2 = cli("--config", str(config), "run", "--as-of", "2026-11-09")
        again = cli("--config", str(config), "run", "--as-of", "2026-11-09")
        delivered = copies(smtp)
        subjects = sorted(str(m.message["Subject"]) for m in smtp.messages)
    assert "relevant 3" in week1.stdout and "sent to 2" in week1.stdout
    assert "relevant 2" in week2.stdout and "sent to 2" in week2.stdout
    assert "sent to 0" in again.stdout
    assert delivered == {address: 2 for address in READERS}  # two digests, once each
    assert sum("2026-11-02" in s for s in subjects) == 2 and sum("2026-11-09" in s for s in subjects) == 2
    digests = tmp_path / "out" / "digests"
    assert sorted(ids_in((digests / "2026-11-02.md").read_text(encoding="utf-8"))) == [p.id for p in first]
    assert sorted(ids_in((digests / "2026-11-09.md").read_text(encoding="utf-8"))) == [p.id for p in second]
    reading = (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")
    assert sorted(ids_in(reading)) == sorted(p.id for p in first + second)
    items = backends.rows(db_url, "SELECT digest_id, item_key FROM digest_items ORDER BY item_key")
    assert [(r["digest_id"], r["item_key"]) for r in items] == (
        [("2026-11-02", f"arxiv:{p.id}") for p in first] + [("2026-11-09", f"arxiv:{p.id}") for p in second])
    status = cli("--config", str(config), "status").stdout
    assert "last publish: ok" in status and "outbox: 0 pending, 0 failed" in status


@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
def test_kill_9_mid_run_then_the_next_run_completes(tmp_path, cli, db_url):
    papers = [rl_paper(n, WEEK1) for n in (1, 2, 3)]
    with ArxivServer(papers) as arxiv, OpenAIServer() as llm, WatchedSmtp() as smtp:
        llm.script = lambda request: stall(60) if len(llm.requests) == 2 else None
        config = config_with(tmp_path, arxiv, smtp.port, **on(db_url), enrich={
            "provider": "openai", "base_url": llm.url, "timeout_seconds": 60,
            "deadline_seconds": 120, "concurrency": 1})
        proc = start_cli("--config", str(config), "run", "--as-of", "2026-11-02",
                         env={"OPENAI_API_KEY": KEY})
        try:
            # the first summary is saved while the second call stalls; kill once it is there
            wait_for(lambda: len(llm.requests) >= 2 and summaries_saved(db_url) >= 1, timeout=60,
                     what="the second LLM call and the first summary saved", proc=proc)
            kill9(proc)  # mid-enrichment: papers stored, one summary cached, nothing published
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        llm.script = None
        assert smtp.messages == [] and not (tmp_path / "out" / "digests" / "2026-11-02.md").exists()
        shown = cli("--config", str(config), "status").stdout  # no process holds the lock now
        assert "last publish: interrupted at " in shown and "— the process ended mid-run" in shown, shown
        rerun = cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        delivered = copies(smtp)
    assert "sent to 2" in rerun.stdout and "1 cached" in rerun.stdout  # the killed run's work kept
    assert delivered == {address: 1 for address in READERS}
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert sorted(ids_in(digest)) == [p.id for p in papers]
    runs = backends.rows(db_url, "SELECT status, error FROM runs WHERE kind = 'publish' ORDER BY id")
    assert [r["status"] for r in runs] == ["interrupted", "ok"]
    assert backends.integrity(db_url) == "ok"


def summaries_saved(db_url: str) -> int:
    try:
        return backends.rows(db_url, "SELECT count(*) AS n FROM enrichments")[0]["n"]
    except Exception:  # the run may not have made its tables yet
        return 0


def test_a_second_run_while_one_is_going_exits_75(tmp_path, cli, db_url):
    released = threading.Event()
    with ArxivServer([rl_paper(1, WEEK1)]) as arxiv:
        arxiv.script("/api/query", hang(60, released))  # the first run is still fetching
        config = config_with(tmp_path, arxiv, **on(db_url), sources={"arxiv": {
            "api_url": arxiv.api_url, "categories": CATS, "retries": 0, "timeout_seconds": 60}})
        cli("--config", str(config), "status")  # the database exists before both start
        proc = start_warm_cli("--config", str(config), "run", "--as-of", "2026-11-02")
        wait_for(lambda: arxiv.requests, timeout=30, what="the first run's fetch", proc=proc)
        second = cli("--config", str(config), "run", "--as-of", "2026-11-02", check=75)
        assert proc.poll() is None  # refused at once, while the first still runs
        shown = cli("--config", str(config), "status").stdout
        assert "last publish: running at " in shown and "interrupted" not in shown, shown
        hourly = cli("--config", str(config), "-q", "send", check=75)  # the run delivers itself
        assert hourly.stdout == hourly.stderr == ""  # so cron has nothing to mail
        released.set()
        assert proc.wait(timeout=90) == 0
    lines = stderr_lines(second)
    assert len(lines) == 1 and lines[0].startswith("rl-digest: another rl-digest run holds"), lines
    assert len(backends.rows(db_url, "SELECT id FROM digests")) == 1
    assert backends.integrity(db_url) == "ok"  # and the lock went with the first run


@pytest.mark.slow  # two schedulers racing: make test-slow (in .ci/run)
def test_two_schedulers_on_two_machines_sharing_one_postgresql_publish_once(tmp_path, cli, db_url):
    """Two state folders (two machines): no file lock is shared, only the database."""
    if not db_url.startswith("postgresql"):
        pytest.skip("two machines share a database only on a server (PostgreSQL)")
    with ArxivServer(papers_now()) as arxiv:
        arxiv.script("/api/query", hang(2))  # the winner's run is still going when the other tries
        machines = [tmp_path / "a", tmp_path / "b"]
        configs = []
        for folder in machines:
            folder.mkdir()
            configs.append(config_with(folder, arxiv, **on(db_url)))
        cli("--config", str(configs[0]), "status")
        both = [Scheduler(config, folder / "schedule.log") for config, folder in zip(configs, machines, strict=True)]
        try:
            codes, logs = one_publishes(both, lambda: any(r["status"] == "ok" for r in backends.rows(
                db_url, "SELECT status FROM runs WHERE kind = 'publish'")))
        finally:
            for scheduler in both:
                scheduler.close()
    assert codes == [0, 0], logs
    assert sum("summarised" in log for log in logs) == 1, logs  # one publish between them
    loser = next(log for log in logs if "summarised" not in log)
    assert f"{HELD} the lock on postgresql" in loser or any(d in loser for d in DONE), loser
    assert "Traceback" not in "".join(logs)
    runs = backends.rows(db_url, "SELECT status FROM runs WHERE kind = 'publish'")
    assert [r["status"] for r in runs] == ["ok"]
    assert len(backends.rows(db_url, "SELECT id FROM digests")) == 1
    written = [sorted(p.name for p in (folder / "out" / "digests").glob("*.md"))
               for folder in machines if (folder / "out" / "digests").exists()]
    assert len(written) == 1  # only the machine that published wrote a digest


def test_a_missing_driver_is_one_line_naming_the_scheme_and_the_extra(tmp_path, cli):
    config = config_with(tmp_path, storage={"url": "postgresql+pg8000://rl@127.0.0.1:1/db"})
    for command in (["status"], ["run", "--offline"]):
        result = cli("--config", str(config), *command, check=2)
        lines = stderr_lines(result)
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("rl-digest: storage.url: postgresql+pg8000:// needs a driver")
        assert "pip install 'rl-digest[postgres]'" in lines[0]


def test_a_sqlite_url_with_two_slashes_is_refused_by_config_check_as_by_run(tmp_path, cli):
    """sqlite://state/x.db: config check said ok; run, send and status ended with
    'unexpected error: ArgumentError: Invalid SQLite URL', exit 1."""
    config = config_with(tmp_path, storage={"url": "sqlite://state/digest.sqlite3"})
    for command in (["config", "check"], ["status"], ["run", "--offline"], ["send"]):
        lines = stderr_lines(cli("--config", str(config), *command, check=2))
        assert len(lines) == 1 and "storage.url: 'sqlite://state/digest.sqlite3': a SQLite URL has three " \
            "slashes before a path (sqlite:///state/digest.sqlite3, beside the config)" in lines[0], lines


def test_a_server_that_is_down_is_one_line_naming_it(tmp_path, cli):
    pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    port = backends.free_port()  # nothing listens there
    config = config_with(tmp_path, storage={"url": f"postgresql+psycopg://rl@127.0.0.1:{port}/digest",
                                            "password_env": "DB_PW", "busy_timeout_seconds": 2})
    for command in (["status"], ["run", "--offline"]):
        result = cli("--config", str(config), *command, check=1, env={"DB_PW": "s3cret-pw"})
        lines = stderr_lines(result)
        assert len(lines) == 1, result.stderr
        # the URL as storage.url reads (and status, doctor, config show print it): the role, no password
        assert lines[0].startswith(f"rl-digest: postgresql+psycopg://rl@127.0.0.1:{port}/digest: ")
        assert "is the server up" in lines[0]
        assert "s3cret" not in result.stderr + result.stdout


def test_the_database_lock_is_taken_on_a_dedicated_connection(tmp_path, db_url):
    """While a run holds it, a second process is refused at once; when the holder dies
    (kill -9) the lock goes with it."""
    config = config_with(tmp_path, **on(db_url))
    with lock_holder(config) as holder:
        run_cli("--config", str(config), "run", "--offline", check=75)
        kill9(holder)
        deadline = time.monotonic() + 20
        while True:
            result = run_cli("--config", str(config), "run", "--offline", check=None).returncode
            if result == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # the server notices the dead session within moments
        assert result == 0


@pytest.mark.slow
def test_a_database_password_is_read_from_the_environment_and_a_wrong_one_is_one_line(
        tmp_path, cli, pg_password):
    """Against a server that checks passwords: the right one from storage.password_env
    works; a wrong, unset or missing one is one line saying what to change, exit 2 (so
    systemd's RestartPreventExitStatus=2 stops the loop), and the password never shows."""
    url, password = pg_password
    storage = {"url": url, "password_env": "RL_DIGEST_DB_PASSWORD", "busy_timeout_seconds": 5}
    config = str(config_with(tmp_path, storage=storage))
    right = {"RL_DIGEST_DB_PASSWORD": password}
    assert cli("--config", config, "run", "--offline", env=right).returncode == 0
    assert f"database: {url}" in cli("--config", config, "status", env=right).stdout
    doctor = cli("--config", config, "doctor", env=right, check=None).stdout
    assert re.search(r"^database\s+OK\s+.*connected", doctor, re.M), doctor

    cases = {
        "wrong": (right | {"RL_DIGEST_DB_PASSWORD": "not-the-password"}, storage,
                  "password authentication failed",
                  "check the password in the environment variable that storage.password_env names"),
        "unset": ({}, storage, "storage.password_env: the environment variable RL_DIGEST_DB_PASSWORD "
                               "is not set", "export RL_DIGEST_DB_PASSWORD"),
        "not configured": (right, {"password_env": None}, "no password supplied",
                           "set storage.password_env to its name"),
        "libpq's own, wrong": ({"PGPASSWORD": "not-the-password"}, {"password_env": None},
                               "password authentication failed",
                               "check the password libpq found (PGPASSWORD, ~/.pgpass)"),
    }
    for case, (env, changed, says, hint) in cases.items():
        config = str(config_with(tmp_path, storage={**storage, **changed}))
        for command in (["status"], ["run", "--offline"]):
            result = cli("--config", config, *command, env=env, check=2)
            lines = stderr_lines(result)
            assert len(lines) == 1 and says in lines[0] and hint in lines[0], (case, result.stderr)
            assert password not in result.stdout + result.stderr
        doctor = cli("--config", config, "doctor", env=env, check=1).stdout
        assert re.search(r"^(config|database)\s+FAIL\s+.*" + re.escape(says), doctor, re.M), (case, doctor)
        assert password not in doctor


def test_a_database_the_server_does_not_have_is_a_config_error(tmp_path, cli, db_url):
    if db_url.startswith("sqlite"):
        pytest.skip("a PostgreSQL case")
    missing = db_url.rsplit("/", 1)[0] + "/no_such_database"
    config = config_with(tmp_path, storage={"url": missing})
    result = cli("--config", str(config), "status", check=2)
    lines = stderr_lines(result)
    assert len(lines) == 1 and 'database "no_such_database" does not exist' in lines[0], result.stderr
    assert "storage.url names a role or database the server does not have" in lines[0]


def test_a_database_a_newer_release_wrote_is_refused_not_used(tmp_path, cli, db_url):
    """Machines sharing one server: the one not yet upgraded must not write a schema it
    does not know."""
    import sqlalchemy as sa

    from pipeline.store import Store
    from pipeline.store_schema import LATEST

    Store.open(db_url).close()
    with sa.create_engine(db_url).begin() as conn:
        conn.execute(sa.text("INSERT INTO schema_migrations (version, applied) VALUES (:v, '2027-01-01')"),
                     {"v": LATEST + 1})
    config = config_with(tmp_path, storage={"url": db_url})
    result = cli("--config", str(config), "run", "--offline", check=2)
    (line,) = stderr_lines(result)
    assert f"schema version {LATEST + 1} is newer than this rl-digest's ({LATEST})" in line
    assert "upgrade rl-digest here too" in line
    assert not (tmp_path / "out" / "digests").exists()  # nothing made from it
    doctor = cli("--config", str(config), "doctor", check=None).stdout
    assert re.search(rf"^database\s+FAIL\s+.*schema version {LATEST + 1} is newer", doctor, re.M), doctor


def test_a_read_only_database_fails_doctor_and_a_run_says_why(tmp_path, cli, db_url):
    if db_url.startswith("sqlite"):
        pytest.skip("a PostgreSQL case (a standby, or default_transaction_read_only)")
    import sqlalchemy as sa

    from pipeline.store import Store

    Store.open(db_url).close()
    with sa.create_engine(db_url, isolation_level="AUTOCOMMIT").connect() as conn:
        name = conn.exec_driver_sql("SELECT current_database()").scalar()
        conn.exec_driver_sql(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    config = config_with(tmp_path, storage={"url": db_url})
    doctor = cli("--config", str(config), "doctor", check=None).stdout
    assert re.search(r"^database\s+FAIL\s+.*connected, but read-only", doctor, re.M), doctor
    result = cli("--config", str(config), "run", "--offline", check=1)
    (line,) = stderr_lines(result)
    assert "read-only" in line and "point storage.url at the writable primary" in line, line


def test_a_run_whose_lock_a_restart_dropped_stops_before_publishing_when_another_took_it(
        tmp_path, cli, db_url):
    """A database restart ends the lock's session unseen (here: its backend terminated, as a
    restart does): a second machine takes the lock and publishes; the first, when it gets
    to its digest, finds the lock gone and taken, and stops (75) rather than publish too."""
    if not db_url.startswith("postgresql"):
        pytest.skip("an advisory lock is a PostgreSQL session's")
    first_go, second_go = threading.Event(), threading.Event()
    with ArxivServer([rl_paper(1, WEEK1)]) as arxiv:
        arxiv.script("/api/query", hang(60, first_go), hang(60, second_go))
        machines = [tmp_path / "a", tmp_path / "b"]
        configs = []
        for folder in machines:
            folder.mkdir()
            configs.append(config_with(folder, arxiv, **on(db_url), sources={"arxiv": {
                "api_url": arxiv.api_url, "categories": CATS, "retries": 0, "timeout_seconds": 60}}))
        cli("--config", str(configs[0]), "status")
        first = start_warm_cli("--config", str(configs[0]), "run", "--as-of", "2026-11-02",
                               stderr=tmp_path / "first.err")
        wait_for(lambda: len(arxiv.requests) >= 1, timeout=30, what="the first run's fetch", proc=first)
        backends.rows(db_url, "SELECT pg_terminate_backend(pid, 10000) AS done FROM pg_locks "  # waits for it
                              f"WHERE locktype = 'advisory' AND objid = {lock.RUN_LOCK} AND database = "
                              "(SELECT oid FROM pg_database WHERE datname = current_database())")
        second = start_warm_cli("--config", str(configs[1]), "run", "--as-of", "2026-11-02")
        wait_for(lambda: len([r for r in arxiv.requests if r.path == "/api/query"]) >= 2, timeout=30,
                 what="the second run's fetch", proc=second)
        first_go.set()  # the first goes on while the second holds the lock
        assert first.wait(timeout=90) == 75
        said = (tmp_path / "first.err").read_text()
        second_go.set()
        assert second.wait(timeout=90) == 0
    assert "was lost (the database server restarted?) and another run holds it now" in said, said
    assert len(backends.rows(db_url, "SELECT id FROM digests")) == 1
    written = [folder for folder in machines if (folder / "out" / "digests").exists()]
    assert written == [machines[1]]  # only the machine that held the lock published


def test_a_lock_a_restart_dropped_is_taken_again_when_it_is_free(tmp_path, db_url, caplog):
    if not db_url.startswith("postgresql"):
        pytest.skip("an advisory lock is a PostgreSQL session's")
    from pipeline import config as config_mod

    cfg = config_mod.load(config_with(tmp_path, **on(db_url)))
    # this test's database only: another worker's test may hold the run lock in its own
    ours = (f"locktype = 'advisory' AND objid = {lock.RUN_LOCK} AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())")
    held = f"SELECT count(*) AS n FROM pg_locks WHERE {ours}"
    with lock.held(cfg):
        lock.still_held()  # nothing lost: nothing said
        assert "was lost" not in caplog.text
        # the session ended, waited for (up to 10 s): pg_terminate_backend(pid) only asks
        backends.rows(db_url, f"SELECT pg_terminate_backend(pid, 10000) AS done FROM pg_locks WHERE {ours}")
        assert backends.rows(db_url, held)[0]["n"] == 0
        lock.still_held()
        assert backends.rows(db_url, held)[0]["n"] == 1  # this run holds it again
        assert "was lost (the database server restarted?); taking it again" in caplog.text
    assert backends.rows(db_url, held)[0]["n"] == 0  # and lets go of it at the end


@contextmanager
def machine_on_a_cable(tmp_path):
    """A second 'machine': a network namespace joined to this one by a veth pair, and a
    PostgreSQL server of our own listening on this side's end (the shared test server
    listens on 127.0.0.1 alone). Yields (netns name, host's end, the server's port,
    the database URL as the other machine and as this one reach it). Root, `ip` and
    initdb only."""
    binaries, ip = backends._binaries(), shutil.which("ip")
    if os.geteuid() != 0 or ip is None or binaries is None:
        pytest.skip("needs root, ip (network namespaces) and initdb")
    tag = uuid.uuid4().hex[:6]
    ns, host_end, ns_end = f"rl{tag}", f"rlh{tag}", f"rln{tag}"
    net = f"10.{random.randint(64, 127)}.{random.randint(0, 255)}"
    folder = Path(tempfile.mkdtemp(prefix="rl-digest-pg-"))
    shutil.chown(folder, "postgres")
    port = backends.free_port()
    steps = [[ip, "netns", "add", ns], [ip, "link", "add", host_end, "type", "veth", "peer", "name", ns_end],
             [ip, "link", "set", ns_end, "netns", ns], [ip, "addr", "add", f"{net}.1/30", "dev", host_end],
             [ip, "link", "set", host_end, "up"],
             [ip, "netns", "exec", ns, ip, "addr", "add", f"{net}.2/30", "dev", ns_end],
             [ip, "netns", "exec", ns, ip, "link", "set", ns_end, "up"],
             [ip, "netns", "exec", ns, ip, "link", "set", "lo", "up"]]
    try:
        for step in steps:
            if subprocess.run(step, capture_output=True, check=False).returncode != 0:
                pytest.skip(f"cannot make a network namespace here: {' '.join(step[1:4])}")
        data = folder / "data"
        made = backends._as("postgres", f"{binaries}/initdb", "-D", str(data), "-U", "rl", "--auth=trust",
                            "--no-sync", "--no-instructions")
        assert made.returncode == 0, made.stderr
        with (data / "pg_hba.conf").open("a") as rules:
            rules.write(f"host all all {net}.0/30 trust\n")
        started = backends._as("postgres", f"{binaries}/pg_ctl", "-D", str(data), "-l", str(folder / "log"),
                               "-w", "-o", f"-c listen_addresses=127.0.0.1,{net}.1 -p {port} -k {folder} "
                               "-c fsync=off", "start")
        assert started.returncode == 0, started.stderr
        yield ns, host_end, (f"postgresql+psycopg://rl@{net}.1:{port}/postgres",
                             f"postgresql+psycopg://rl@127.0.0.1:{port}/postgres")
    finally:
        backends._as("postgres", f"{binaries}/pg_ctl", "-D", str(folder / "data"), "-m", "immediate", "stop")
        subprocess.run([ip, "netns", "delete", ns], capture_output=True, check=False)
        subprocess.run([ip, "link", "delete", host_end], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow  # waits out the server's probes of the dead session: about 90 s
def test_the_run_lock_of_a_machine_that_died_mid_run_is_free_within_two_minutes(tmp_path, cli):
    """Two machines share PostgreSQL; one dies (power, network) mid-run, so no FIN ever
    reaches the server and its session, with the run lock, looked alive: every run on the
    other machine exited 75 for the system's TCP keepalive time, 2 h 11 min. The server now
    probes an idle session and lets the lock go within two minutes."""
    with machine_on_a_cable(tmp_path) as (ns, cable, (there, here)):
        asked = tmp_path / "asked"
        hole = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c",  # an arXiv that never answers
                                 "import socket, time\ns = socket.create_server(('127.0.0.1', 8099))\n"
                                 f"c, _ = s.accept()\nopen({str(asked)!r}, 'w').close()\ntime.sleep(120)"])
        (tmp_path / "other").mkdir()
        other = config_with(tmp_path / "other", storage={"url": there}, sources={
            "arxiv": {"api_url": "http://127.0.0.1:8099/api/query", "retries": 0, "timeout_seconds": 60},
            "rss": {"enabled": False}})
        mine = config_with(tmp_path, storage={"url": here})
        time.sleep(0.5)  # the listener is up
        proc = subprocess.Popen(["ip", "netns", "exec", ns, *cli_command(), "--config", str(other), "run"],
                                cwd="/", env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(asked.exists, timeout=60, what="the run's arXiv request", proc=proc)
            subprocess.run(["ip", "link", "set", cable, "down"], check=True)  # the machine drops off
            kill9(proc)
            held = cli("--config", str(mine), "send", check=None)
            began, result = time.monotonic(), held
            while result.returncode == 75 and time.monotonic() - began < 150:
                time.sleep(5)
                result = cli("--config", str(mine), "send", check=None)
            waited = time.monotonic() - began
        finally:
            for started in (proc, hole):
                if started.poll() is None:
                    started.kill()
                    started.wait()
    assert held.returncode == 75, held.stderr  # the dead machine's session still holds it at first
    assert result.returncode == 0, result.stderr
    assert waited < 150
