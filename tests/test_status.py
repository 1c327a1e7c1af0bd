"""`status --json` for monitoring, and the scheduler's heartbeat that `status` and the
container's healthcheck read."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers import cli_command, cli_env, config_for, rl_paper, write_config
from tests.processes import Scheduler, config_with, papers_now, published, scheduler_config
from tests.servers.arxiv_server import ArxivServer
from tests.servers.smtp_server import SmtpServer, refused_port


def test_status_json_parses_and_holds_the_last_run(tmp_path, cli):
    config = write_config(tmp_path)
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    data = json.loads(cli("--config", str(config), "status", "--json").stdout)
    last = data["last"]["preview"]  # offline is a preview, not a publish
    assert last["status"] == "ok" and last["as_of"].startswith("2026-11-02")
    assert data["last"]["publish"] is None
    # a digest of seeds alone: their featured pair and at most digest.max_curated more
    assert last["report"]["digest"] == "2026-11-02" and last["report"]["seeds"] == 7
    assert data["runs"][0]["id"] == last["id"]
    assert data["counts"]["digests"] == 0  # offline is a preview: no digest recorded
    assert data["counts"]["seeds"] == 38
    assert data["outbox"] == {"pending": 0, "failed": 0, "skipped": 0, "waiting": []}
    assert data["database"].endswith("state/digest.sqlite3")
    assert set(data["next"]) == {"collect", "publish"}
    assert data["scheduler"] is None  # no scheduler has run here


def test_status_json_with_the_database_down_still_prints_an_object(tmp_path, cli):
    """A monitor parses stdout: it gets the error and the scheduler's heartbeat, exit 1."""
    (tmp_path / "broken.sqlite3").write_bytes(b"this is not a database file\n" * 200)
    config = write_config(tmp_path, {"storage": {"url": f"sqlite:///{tmp_path}/broken.sqlite3"}}, seeds=False)
    result = cli("--config", str(config), "status", "--json", check=1)
    data = json.loads(result.stdout)
    assert "broken.sqlite3" in data["error"] and data["scheduler"] is None
    assert data["database"].endswith("broken.sqlite3")
    assert result.stderr.count("\n") == 1 and "broken.sqlite3" in result.stderr


@pytest.mark.slow
def test_the_scheduler_writes_a_heartbeat_that_status_and_the_healthcheck_read(tmp_path, cli):
    with ArxivServer(papers_now()) as arxiv:
        config = scheduler_config(tmp_path, arxiv, heartbeat_seconds=1)
        missing = cli("--config", str(config), "status", "--check-heartbeat", check=1)
        assert "scheduler: no heartbeat at " in missing.stderr
        scheduler = Scheduler(config, tmp_path / "scheduler.log")
        try:
            scheduler.ready()
            beat = tmp_path / "state" / "heartbeat.json"
            scheduler.wait_for("a publish", lambda: published(tmp_path), timeout=60)
            scheduler.wait_for("a heartbeat", lambda: beat.exists())
            first = json.loads(beat.read_text())["wake"]
            scheduler.wait_for("the next heartbeat", lambda: json.loads(beat.read_text())["wake"] != first)
            healthy = cli("--config", str(config), "status", "--check-heartbeat")
            data = json.loads(cli("--config", str(config), "status", "--json").stdout)
            code, _ = scheduler.terminate()
        finally:
            scheduler.close()
        stopped = cli("--config", str(config), "status", "--check-heartbeat", check=1)
    assert healthy.stdout.startswith("scheduler: alive, last wake ")
    assert data["scheduler"]["alive"] and data["scheduler"]["pid"] == scheduler.proc.pid
    assert set(data["scheduler"]["next"]) >= {"collect", "publish"}
    assert data["last"]["publish"]["status"] == "ok"
    assert code == 0 and "scheduler: stopped" in stopped.stderr


def test_an_old_heartbeat_fails_the_healthcheck(tmp_path, cli):
    config = write_config(tmp_path, seeds=False)
    (tmp_path / "state").mkdir()
    old = datetime.now(UTC) - timedelta(minutes=10)
    (tmp_path / "state" / "heartbeat.json").write_text(json.dumps(
        {"pid": 1, "host": "box", "wake": old.isoformat(), "interval_seconds": 60, "next": {},
         "running": [], "stopped": False}), encoding="utf-8")
    result = cli("--config", str(config), "status", "--check-heartbeat", check=1)
    assert re.search(r"scheduler: silent for more than 180 s, last wake 6\d\d s ago \(pid 1 on box\)",
                     result.stderr)
    assert "scheduler: silent for more than 180 s" in cli("--config", str(config), "status").stdout


def test_the_healthcheck_loads_no_stage(tmp_path, cli):
    """The container runs `status --check-heartbeat` every minute for the scheduler's life: it
    imported every stage (SQLAlchemy, scikit-learn, APScheduler's scheduler, Jinja) to read a
    file, a second of CPU each time. It loads the config and reads the heartbeat."""
    config = write_config(tmp_path, seeds=False)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "heartbeat.json").write_text(json.dumps(
        {"pid": 1, "host": "box", "wake": datetime.now(UTC).isoformat(), "interval_seconds": 60,
         "next": {"publish": "2026-11-23T08:00:00+00:00"}, "running": [], "stopped": False}), encoding="utf-8")
    checked = cli("--config", str(config), "status", "--check-heartbeat",
                  env={"PYTHONPROFILEIMPORTTIME": "1"})  # a fresh process naming each import
    assert re.fullmatch(r"scheduler: alive, last wake \d+ s ago \(pid 1 on box\); "
                        r"next publish 2026-11-23T08:00:00\+00:00\n", checked.stdout), checked.stdout
    loaded = {line.rpartition("|")[2].strip() for line in checked.stderr.splitlines()}
    assert {name.partition(".")[0] for name in loaded} & {"sqlalchemy", "numpy", "sklearn", "jinja2"} == set()
    assert loaded & {"apscheduler.schedulers", "pipeline.store", "pipeline.schedule", "pipeline.status"} == set()


def test_an_unreadable_heartbeat_is_said_in_words(tmp_path):
    """A heartbeat another user's scheduler wrote 0600: the healthcheck printed Python's
    '[Errno 13] Permission denied: PATH' after the path."""
    config = write_config(tmp_path, seeds=False)
    (tmp_path / "state").mkdir()
    beat = tmp_path / "state" / "heartbeat.json"
    beat.write_text("{}", encoding="utf-8")
    beat.chmod(0)
    drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--"]
    args = (*cli_command(), "--config", str(config), "status", "--check-heartbeat")
    result = subprocess.run([*drop, *args] if os.geteuid() == 0 else args, cwd="/", env=cli_env(),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"rl-digest: scheduler: heartbeat {beat} unreadable: Permission denied"]


def test_a_heartbeat_ahead_of_the_clock_says_so(tmp_path, cli):
    """A scheduler's last wake an hour ahead (the clock went back since) read "last wake -3597 s ago"."""
    config = write_config(tmp_path, seeds=False)
    (tmp_path / "state").mkdir()
    ahead = datetime.now(UTC) + timedelta(hours=1)
    (tmp_path / "state" / "heartbeat.json").write_text(json.dumps(
        {"pid": 1, "host": "box", "wake": ahead.isoformat(), "interval_seconds": 60, "next": {},
         "running": [], "stopped": False}), encoding="utf-8")
    shown = cli("--config", str(config), "status").stdout
    assert re.search(r"scheduler: [a-z ]+, last wake 3[56]\d\d s ahead of this machine's clock "
                     r"\(it went back\?\) \(pid 1 on box\)", shown), shown


def test_status_of_one_paper_shows_its_title_as_a_reader_reads_it(tmp_path, cli):
    """The title as the digest prints it: TeX decoded (arXiv's line breaks were joined on the way in)."""
    day = datetime(2026, 11, 20, 12, tzinfo=UTC)
    paper = replace(rl_paper(1, day), title="GRPO-$\\lambda$ -- A Survey of\n  RL for LLM Reasoning")
    with ArxivServer([paper]) as arxiv:
        config = config_for(tmp_path, arxiv)
        cli("--config", str(config), "collect", "--as-of", "2026-11-21")
        shown = cli("--config", str(config), "status", "--paper", paper.id).stdout
    assert shown.splitlines()[0] == f"{paper.id}v1  GRPO-λ – A Survey of RL for LLM Reasoning", shown
    topic = next(line for line in shown.splitlines() if line.startswith("  topic: "))
    assert re.fullmatch(r"  topic: [a-z_]+( \(also [a-z_]+(, [a-z_]+)*\))?", topic), topic  # words, no Python list


def test_a_publish_of_a_release_that_counted_no_llm_calls_shows_none(tmp_path, cli):
    """The first releases' run reports have tokens and failures but no `llm_calls`: status
    leaves the count out after an upgrade (it read 'LLM calls 0, tokens 4700 in / 2350 out')."""
    from pipeline.store import Store

    config = write_config(tmp_path, seeds=False)
    store = Store.open(f"sqlite:///{tmp_path}/state/digest.sqlite3")
    old = store.start_run("publish", datetime(2026, 10, 5, tzinfo=UTC))
    store.finish_run(old, "ok", {"digest": "2026-10-05", "relevant": 43, "summarised": 37, "cached": 0,
                                 "llm_failures": 5, "tokens_in": 4700, "tokens_out": 2350, "sent": 2})
    new = store.start_run("publish", datetime(2026, 10, 12, tzinfo=UTC))
    store.finish_run(new, "ok", {"digest": "2026-10-12", "llm_calls": 0, "tokens_in": 0, "tokens_out": 0})
    store.close()
    lines = cli("--config", str(config), "status").stdout.splitlines()
    shown = {line.split()[0]: line for line in lines if line.startswith("  #")}
    assert "summarised 37 (0 cached), tokens 4700 in / 2350 out, 5 failed" in shown[f"#{old}"]
    assert "summarised 0 (0 cached), LLM calls 0, tokens 0 in / 0 out, 0 failed" in shown[f"#{new}"]


def test_status_shows_the_newest_failed_deliveries_not_every_one_of_years(tmp_path, cli):
    """A reader whose server refused every week until someone noticed: status listed each of
    their failed rows, a line a week for as long as the tool ran."""
    from pipeline import store_outbox
    from pipeline.config import load
    from pipeline.store import Store

    config = write_config(tmp_path, seeds=False)
    store = Store.open(load(config).storage.url)
    for week in range(8):
        end = datetime(2026, 9, 7, tzinfo=UTC) + timedelta(days=7 * week)
        store.save_digest(end.date().isoformat(), (end - timedelta(days=7), end), {}, [], ["bob@example.org"])
    for row in store_outbox.rows(store):
        store_outbox.update_delivery(store, row["id"], status="failed", attempts=1,
                                     last_error="550 5.1.1 no such user")
    shown = cli("--config", str(config), "status").stdout
    listed = json.loads(cli("--config", str(config), "status", "--json").stdout)["outbox"]
    assert "outbox: 0 pending, 8 failed\n" in shown
    assert re.findall(r"  (\S+) bob@example.org: failed after 1 try", shown) == [
        "2026-10-05", "2026-10-12", "2026-10-19", "2026-10-26"], shown
    assert "  4 earlier failed, not shown (`rl-digest status --json` lists them all)\n" in shown
    assert len(listed["waiting"]) == 8


def test_status_and_send_show_the_newest_waiting_deliveries_not_a_line_for_each_of_a_big_group(
        tmp_path, cli):
    """A mail server down, or a provider's daily quota, held back 300 readers of a big group:
    `status` and every hourly `send` printed a line for each of them (some 70 KB a time),
    while failed rows were already shown four at most."""
    readers = [f"reader{n:03d}@example.org" for n in range(300)]
    (tmp_path / "readers.txt").write_text("".join(f"{a}\n" for a in readers))
    with ArxivServer([rl_paper(1, datetime(2026, 10, 29, 12, tzinfo=UTC))]) as arxiv:
        config = config_with(tmp_path, arxiv, refused_port(), recipients=[],
                             email={"recipients_file": str(tmp_path / "readers.txt")})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", check=1)
    sent = cli("--config", str(config), "send", check=1).stdout
    shown = cli("--config", str(config), "status").stdout
    listed = json.loads(cli("--config", str(config), "status", "--json").stdout)["outbox"]
    for out in (sent, shown):
        assert re.findall(r"  2026-11-02 (\S+): pending", out) == readers[-4:], out
        assert "  296 earlier pending, not shown (`rl-digest status --json` lists them all)\n" in out
    assert sent.startswith("sent 0, pending 300, failed 0\n") and "outbox: 300 pending, 0 failed\n" in shown
    assert len(listed["waiting"]) == 300


def test_status_shows_a_runs_newest_delivery_errors_not_one_for_each_reader_of_a_big_group(tmp_path, cli):
    """A provider's "452 4.5.3 Too many recipients" to each reader after the first two: `status`
    listed each of a run's deferrals under it, a line a reader, for each of its last runs."""
    readers = [f"reader{n}@example.org" for n in range(8)]
    with ArxivServer([rl_paper(1, datetime(2026, 10, 29, 12, tzinfo=UTC))]) as arxiv, \
            SmtpServer(budget=2, over_budget="452 4.5.3 Too many recipients", over_budget_at="RCPT") as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=readers)
        cli("--config", str(config), "run", "--as-of", "2026-11-02", check=1)
    shown = cli("--config", str(config), "status").stdout
    run = json.loads(cli("--config", str(config), "status", "--json").stdout)["last"]["publish"]
    errors = re.findall(r"    delivery error: (reader\d)@example.org .*452 4.5.3", shown)
    assert errors == ["reader4", "reader5", "reader6", "reader7"], shown
    assert "    2 earlier delivery errors, not shown (`rl-digest status --json` lists them all)\n" in shown
    assert len(run["report"]["delivery_errors"]) == 6


@pytest.mark.slow  # 156,000 outbox rows
def test_status_and_readers_of_a_big_group_after_years_do_not_read_every_digest_ever_sent(tmp_path, cli):
    """Three years of a weekly digest to 1,000 readers: `status` read all 156,000 sent rows to
    find the few resent after an interrupted hand-over, and `readers` to find each reader's
    newest, seconds more each year the tool ran."""
    import sqlite3
    import time

    from pipeline.config import load
    from pipeline.deliver.outbox import RESENT
    from pipeline.store import Store

    config = write_config(tmp_path, seeds=False)
    path = load(config).storage.url.removeprefix("sqlite:///")
    Store.open(load(config).storage.url).close()

    def timed(command: str) -> tuple[float, str]:
        began = time.perf_counter()
        shown = cli("--config", str(config), command).stdout
        return time.perf_counter() - began, shown

    timed("status")  # the warm CLI's first start
    empty = {command: timed(command)[0] for command in ("status", "readers")}
    weeks = [(datetime(2023, 12, 4, tzinfo=UTC) + timedelta(days=7 * n)).date().isoformat() for n in range(156)]
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO digests (id, window_start, window_end, data, created) VALUES (?, ?, ?, '{}', ?)",
                       [(day, day, day, day) for day in weeks])
        db.executemany("INSERT INTO deliveries (digest_id, recipient, status, attempts, sent_at, message_id, "
                       "last_error) VALUES (?, ?, 'sent', 1, ?, ?, ?)",
                       [(day, f"reader{n:04d}@example.org", day, f"<{day}.{n}@example.org>",
                         f"{RESENT} (<{day}.{n}@example.org>)" if (day, n) == (weeks[-1], 7) else None)
                        for day in weeks for n in range(1000)])
    took, shown = timed("status")
    assert f"  {weeks[-1]} reader0007@example.org: sent at {weeks[-1]}, {RESENT}" in shown
    assert took - empty["status"] < 1.5, (took, empty)  # it was 4 to 5 s more on 2 busy cores
    took, listed = timed("readers")
    assert f"reader0007@example.org  lang=-  removed  last delivery: {weeks[-1]}\n" in listed
    assert took - empty["readers"] < 1.5, (took, empty)  # it was 4 s more


@pytest.mark.slow
def test_a_retry_set_while_the_clock_ran_a_day_fast_is_not_shown_a_day_ahead(tmp_path, cli):
    """A mail server's 451 while the clock ran fast (then NTP set it right): status said the
    scheduler tries at a time a day ahead, and the scheduler waited for it."""
    if shutil.which("faketime") is None:
        pytest.skip("needs faketime")
    with ArxivServer(papers_now()) as arxiv, SmtpServer(data_replies=["451 4.3.0 Try again later"] * 2) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        fast = subprocess.run(["faketime", "-f", "+1d", *cli_command(), "--config", str(config), "run"],
                              cwd="/", env=cli_env(), capture_output=True, text=True, timeout=120, check=False)
        shown = cli("--config", str(config), "status").stdout
    assert fast.returncode == 1 and "451" in fast.stderr, fast.stderr
    waiting = [line for line in shown.splitlines() if "pending after 1 of" in line]
    assert len(waiting) == 2 and all("next try due now (no scheduler runs here)" in line for line in waiting), shown
