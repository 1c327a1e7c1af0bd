"""`rl-digest schedule` for real: a subprocess started from /, the local arXiv stand-in, SIGTERM.

No test waits for a cron fire: a fresh database has missed the last publish fire,
so the scheduler's catch-up publishes at once; the test polls (bounded) for its
result and stops the process as systemd would.
"""

from __future__ import annotations

import gc
import signal
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers import CATS, connections_to, rl_paper, write_config
from tests.processes import (
    Scheduler,
    config_with,
    kill9,
    papers_now,
    publish_runs,
    published,
    query,
    scheduler_config,
    start_cli,
    wait_for,
)
from tests.servers.arxiv_server import ArxivServer, hang
from tests.servers.openai_server import OpenAIServer, stall
from tests.servers.smtp_server import SmtpServer, refused_port

KEY = "sk-test-schedule"


@pytest.fixture
def start(tmp_path):
    """start(config, name) -> a running Scheduler; any left running is killed afterwards."""
    started: list[Scheduler] = []

    def _start(config: Path, name: str = "scheduler", args: tuple[str, ...] = ("schedule",)) -> Scheduler:
        started.append(Scheduler(config, tmp_path / f"{name}.log", args))
        return started[-1]

    yield _start
    for scheduler in started:
        scheduler.close()


def assert_consistent(tmp_path: Path) -> list[str]:
    """The database is sound and every digest row has its three files and vice versa."""
    assert query(tmp_path, "PRAGMA integrity_check") == [("ok",)]
    rows = sorted(r[0] for r in query(tmp_path, "SELECT id FROM digests"))
    folder = tmp_path / "out" / "digests"
    for fmt in ("md", "html", "txt"):
        assert sorted(p.stem for p in folder.glob(f"*.{fmt}")) == rows, fmt
    for digest_id in rows:
        assert query(tmp_path, f"SELECT count(*) FROM digest_items WHERE digest_id = '{digest_id}'")[0][0] > 0
    return rows


def test_status_before_any_publish_shows_the_next_fires(tmp_path, cli):
    config = write_config(tmp_path, seeds=False)
    shown = cli("--config", str(config), "status").stdout
    assert "next collect: " in shown and "(0 14 * * mon-fri, Asia/Shanghai)" in shown
    assert "next publish: " in shown and "(0 8 * * mon, Asia/Shanghai)" in shown
    assert "last publish" not in shown


def test_scheduler_catches_up_the_missed_publish_then_stops_on_sigterm(tmp_path, start, cli):
    with ArxivServer(papers_now()) as arxiv:
        config = scheduler_config(tmp_path, arxiv)
        scheduler = start(config)
        scheduler.ready()
        # the run's summary line: the publish is over and the scheduler waits for the next fire
        scheduler.wait_for("publish", lambda: published(tmp_path) and "sent to " in scheduler.log(), timeout=60)
        code, took = scheduler.terminate()
        api = [r for r in arxiv.requests if r.path == "/api/query"]
    log = scheduler.log()
    assert code == 0, log
    assert took < 5, log  # waiting, it stops at once (a run under way would finish its step first)
    assert "next collect: " in log and "next publish: " in log
    assert "a publish was missed while down: running it now" in log
    # SIGTERM can land between the run's summary line and the job's end (its lock released):
    # then the scheduler rightly says it finishes the publish first; either way it stops at once
    assert ("SIGTERM: stopping" in log
            or "SIGTERM: finishing the current step of publish, then stopping" in log), log
    assert log.rstrip().endswith("scheduler stopped")
    assert "Traceback" not in log
    assert api and all("rl-digest" in r.headers.get("User-Agent", "") for r in api)
    assert publish_runs(tmp_path) == [("ok", None)]
    [digest_id] = assert_consistent(tmp_path)
    text = (tmp_path / "out" / "digests" / f"{digest_id}.md").read_text(encoding="utf-8")
    assert "GRPO variant 2 for reinforcement learning" in text
    assert (tmp_path / "out" / "READING_LIST.md").exists()

    shown = cli("--config", str(config), "status").stdout
    assert "next publish: " in shown and "next collect: " in shown
    assert "last publish: ok at " in shown


def test_sigterm_during_a_publish_stops_at_a_checkpoint_and_a_restart_publishes_once(tmp_path, start):
    released = threading.Event()
    with ArxivServer(papers_now()) as arxiv:
        arxiv.script("/api/query", hang(60, released))  # the first API page hangs: the run is busy
        config = scheduler_config(tmp_path, arxiv)
        first = start(config, "first")
        first.ready()
        first.wait_for("the API request", lambda: any(r.path == "/api/query" for r in arxiv.requests))
        # the page answers once both SIGTERMs were taken (it was a fixed 3 s)
        code, took = first.terminate(again_when="waiting for publish to reach a checkpoint",
                                     release=("SIGTERM: already stopping", released))
        log = first.log()
        assert code == 0, log
        assert took < 8, log  # the hung page, then the checkpoint after collecting
        assert "SIGTERM: finishing the current step of publish, then stopping" in log
        assert "SIGTERM: already stopping" in log  # the second SIGTERM does not cut the step short
        assert "Traceback" not in log
        assert "publish: stopped between steps" in log
        assert log.rstrip().endswith("scheduler stopped")
        assert publish_runs(tmp_path) == [("stopped", None)]
        assert assert_consistent(tmp_path) == []  # nothing half-published

        second = start(config, "second")
        second.ready()
        second.wait_for("publish", lambda: published(tmp_path))
        code, _ = second.terminate()
    assert code == 0, second.log()
    assert "a publish was missed while down: running it now" in second.log()
    assert publish_runs(tmp_path) == [("stopped", None), ("ok", None)]
    assert len(assert_consistent(tmp_path)) == 1


def test_a_publish_killed_after_saving_its_digest_is_finished_by_the_next_start(tmp_path, start, cli):
    """kill -9 between the digest's row and the reading list, site and feed (on a big list
    those take long): the restarted scheduler must not wait a week to write them."""
    with ArxivServer(papers_now()) as arxiv:
        config = scheduler_config(tmp_path, arxiv)
        first = start(config, "first")
        first.ready()
        first.wait_for("publish", lambda: published(tmp_path))
        first.terminate()
        # What the kill leaves: the digest saved, its run still `running`, the files after it unwritten.
        with sqlite3.connect(tmp_path / "state" / "digest.sqlite3") as db:
            db.execute("UPDATE runs SET status = 'running', finished = NULL WHERE kind = 'publish'")
        db.close()
        for name in ("READING_LIST.md", "feed.xml"):
            (tmp_path / "out" / name).unlink()
        [digest_id] = assert_consistent(tmp_path)
        (tmp_path / "out" / "site" / "digests" / f"{digest_id}.html").unlink()
        told = cli("--config", str(config), "status").stdout
        assert f"cut off after it saved digest {digest_id}: its reading list, site and feed may be behind" in told
        second = start(config, "second")
        second.ready()
        second.wait_for("the publish finished", lambda: publish_runs(tmp_path)[-1:] == [("ok", None)]
                        and len(publish_runs(tmp_path)) == 2)
        code, _ = second.terminate()
    log = second.log()
    assert code == 0, log
    assert "the last publish was cut off after its digest was saved: finishing it now" in log
    assert (tmp_path / "out" / "READING_LIST.md").exists() and (tmp_path / "out" / "feed.xml").exists()
    assert (tmp_path / "out" / "site" / "digests" / f"{digest_id}.html").exists()
    assert assert_consistent(tmp_path) == [digest_id]  # the same digest, not a second one


def test_sigterm_stops_a_run_between_steps_and_the_next_run_goes_on(tmp_path, start, cli):
    """As systemd stops a timer's run, or `timeout` a cron job's: the rows say stopped, not
    running, and nothing is half-done."""
    released = threading.Event()
    with ArxivServer(papers_now()) as arxiv:
        arxiv.script("/api/query", hang(60, released))  # the first API page hangs: the command is busy
        config = scheduler_config(tmp_path, arxiv)
        busy = start(config, "run", ("run",))  # collect and send stop the same way (cli.py)
        busy.wait_for("the API request", lambda: any(r.path == "/api/query" for r in arxiv.requests))
        # the page answers once the SIGTERM was taken (it was a fixed 1.5 s)
        code, took = busy.terminate(release=("SIGTERM: stopping at the next step boundary", released))
        log = busy.log()
        assert code == 143, log  # 128 + SIGTERM, as if the signal had ended it
        assert took < 6, log  # the hung page, then the checkpoint after it
        assert "SIGTERM: stopping at the next step boundary (send it again to stop at once)" in log
        assert log.rstrip().endswith("rl-digest: stopped by SIGTERM between steps; what was done is kept "
                                     "(the next run goes on from there)"), log
        assert "Traceback" not in log
        assert query(tmp_path, "SELECT kind, status FROM runs ORDER BY id") == [
            ("publish", "stopped"), ("collect", "stopped")]
        shown = cli("--config", str(config), "status").stdout
        assert "last publish: stopped at " in shown, shown
        row = next(line for line in shown.splitlines() if " collect as of " in line)
        assert ": stopped (" in row and "— " not in row, shown  # stopped, with no error to show
        cli("--config", str(config), "run")
    assert publish_runs(tmp_path) == [("stopped", None), ("ok", None)]
    assert len(assert_consistent(tmp_path)) == 1


@pytest.mark.slow
def test_sigterm_while_mailing_stops_between_readers_and_send_mails_the_rest_once(tmp_path, start, cli):
    people = ["ada@example.org", "alan@example.org", "bob@example.org"]
    with ArxivServer(papers_now()) as arxiv, SmtpServer(stall_at="DATA", stall_seconds=0.8) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=people)
        busy = start(config, "run", ("run",))
        busy.wait_for("the first message", lambda: smtp.messages, timeout=60)  # its 250 is 0.8 s away
        code, _ = busy.terminate()
        assert code == 143, busy.log()
        assert len(smtp.messages) == 1  # the hand-over under way finished; no other began
        assert publish_runs(tmp_path) == [("stopped", None)]
        assert "2 pending" in cli("--config", str(config), "status").stdout
        sent = cli("--config", str(config), "-q", "send").stdout  # as an hourly cron line runs it
        idle = cli("--config", str(config), "-q", "send")
    assert sent.startswith("sent 2, pending 0, failed 0"), sent
    assert sorted(r for m in smtp.messages for r in m.rcpt_tos) == people  # each reader once
    assert idle.stdout == idle.stderr == ""  # nothing waited: nothing for cron to mail


@pytest.mark.slow  # make test's margin under 5 minutes: it runs in make test-slow (CI)
def test_sigterm_during_an_llm_call_sends_no_retry_and_the_next_run_summarises(tmp_path, cli):
    """A model that does not answer: a SIGTERM during its call ends the run once that call
    times out; the client retried it after the stop (two more requests, each waiting out
    timeout_seconds: 26 s here, 3 min with the defaults, past systemd's 90 s)."""
    with ArxivServer(papers_now()) as arxiv, OpenAIServer() as llm:
        llm.script = lambda request: stall(30)
        config = config_with(tmp_path, arxiv, enrich={
            "provider": "openai", "base_url": llm.url, "timeout_seconds": 3, "retries": 2,
            "deadline_seconds": 120, "concurrency": 1})
        with (tmp_path / "run.log").open("w") as log:
            proc = start_cli("--config", str(config), "run", env={"OPENAI_API_KEY": KEY}, stderr=log)
            try:
                wait_for(lambda: llm.requests, timeout=60, what="the first LLM call", proc=proc)
                began = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                code = proc.wait(timeout=30)
                took = time.monotonic() - began
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        calls = len(llm.requests)
        llm.script = None
        again = cli("--config", str(config), "run", env={"OPENAI_API_KEY": KEY})
    said = (tmp_path / "run.log").read_text()
    assert code == 143, said
    assert calls == 1, said  # no retry once the stop was asked for
    assert took < 8, said  # the call's 3 s timeout, not three of them
    assert "summarised 3 (0 cached)" in again.stdout, again.stdout


def test_a_second_sigterm_ends_a_run_at_once(tmp_path, start):
    with ArxivServer(papers_now()) as arxiv:
        arxiv.script("/api/query", hang(10))
        config = scheduler_config(tmp_path, arxiv)
        busy = start(config, "run", ("run",))
        busy.wait_for("the API request", lambda: any(r.path == "/api/query" for r in arxiv.requests))
        code, took = busy.terminate(again_when="SIGTERM: stopping at the next step boundary")
    assert code == -15 and took < 5, busy.log()  # the hung page is not waited for


def test_an_offline_preview_does_not_stand_in_for_a_missed_publish(tmp_path, start, cli):
    """`run --offline` (make demo) while the scheduler was down records no digest, so the
    scheduler still catches the missed publish up when it starts."""
    with ArxivServer(papers_now()) as arxiv:
        config = scheduler_config(tmp_path, arxiv)
        cli("--config", str(config), "run", "--offline")
        assert publish_runs(tmp_path) == []  # a preview, not a publish
        scheduler = start(config)
        scheduler.ready()
        scheduler.wait_for("publish", lambda: published(tmp_path) and "sent to " in scheduler.log(), timeout=30)
        code, _ = scheduler.terminate()
    assert code == 0, scheduler.log()
    assert "a publish was missed while down: running it now" in scheduler.log()
    assert query(tmp_path, "SELECT kind, status FROM runs ORDER BY id") == [
        ("preview", "ok"), ("publish", "ok"), ("collect", "ok")]
    assert len(assert_consistent(tmp_path)) == 1
    shown = cli("--config", str(config), "status").stdout
    assert "last publish: ok at " in shown and " preview as of " in shown


def test_a_cron_run_while_the_scheduler_publishes_is_turned_away_and_the_week_is_published_once(
        tmp_path, start, cli):
    """One scheduler per state folder (a second is refused: see below); the run lock keeps a
    cron `run` started mid-publish from publishing the week again."""
    released = threading.Event()
    with ArxivServer(papers_now()) as arxiv:
        arxiv.script("/api/query", hang(60, released))  # the scheduler's publish is still going
        config = scheduler_config(tmp_path, arxiv)
        scheduler = start(config)
        scheduler.ready()
        scheduler.wait_for("the publish's fetch", lambda: any(r.path == "/api/query" for r in arxiv.requests))
        cron = cli("--config", str(config), "run", check=75)
        released.set()  # the page answers once the cron run was turned away (it took 3 s whatever it waited for)
        scheduler.wait_for("publish", lambda: published(tmp_path), timeout=60)
        code, _ = scheduler.terminate()
    assert code == 0, scheduler.log()
    assert cron.stderr.startswith("rl-digest: another rl-digest run holds state/digest.sqlite3.lock (pid "), \
        cron.stderr
    assert publish_runs(tmp_path) == [("ok", None)]
    assert len(assert_consistent(tmp_path)) == 1


def test_a_digest_made_by_hand_for_last_week_does_not_hide_this_weeks_missed_publish(
        tmp_path, start, cli):
    """`run --as-of <last week>` today is not this week's publish: the scheduler decides from
    the as-of of what exists, so it still catches this week up."""
    now = datetime.now(UTC).replace(microsecond=0)
    last_week = (now - timedelta(days=8)).date().isoformat()
    with ArxivServer([rl_paper(90, now - timedelta(days=9))]) as arxiv:
        config = scheduler_config(tmp_path, arxiv)
        by_hand = cli("--config", str(config), "run", "--as-of", last_week)
        arxiv.add(*papers_now())
        scheduler = start(config)
        scheduler.ready()
        scheduler.wait_for("the catch-up publish", lambda: len(publish_runs(tmp_path)) == 2
                           and publish_runs(tmp_path)[-1] == ("ok", None))
        code, _ = scheduler.terminate()
    log = scheduler.log()
    assert code == 0, log
    assert "relevant 1" in by_hand.stdout
    assert "a publish was missed while down: running it now" in log
    digests = assert_consistent(tmp_path)
    assert digests[0] == last_week and len(digests) == 2 and digests[1] > last_week
    text = (tmp_path / "out" / "digests" / f"{digests[1]}.md").read_text(encoding="utf-8")
    assert "GRPO variant 2 for reinforcement learning" in text


@pytest.mark.slow  # waits for the backoff to run out
def test_the_scheduler_retries_the_outbox_by_itself_when_the_backoff_runs_out(
        tmp_path, start, cli):
    """SMTP down at the publish: the rows wait. The scheduler (no publish due) sends them
    when their backoff runs out, with no run or send from anyone."""
    port = refused_port()
    with ArxivServer(papers_now()) as arxiv:
        config = write_config(tmp_path, {
            "sources": {"arxiv": {"api_url": arxiv.api_url, "categories": CATS, "page_size": 50,
                                  "overlap_hours": 0, "retries": 1},
                        "rss": {"urls": [arxiv.rss_url(CATS)]}},
            "seeds": {"paths": []},
            "email": {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": port,
                      "security": "none", "to": ["ada@example.org", "alan@example.org"]},
        }, seeds=False)
        cli("--config", str(config), "run", check=1)
        soon = (datetime.now(UTC) + timedelta(seconds=3)).isoformat(timespec="seconds")
        conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
        conn.execute("UPDATE deliveries SET next_attempt = ?", (soon,))  # the backoff runs out
        conn.commit()
        conn.close()
        assert query(tmp_path, "SELECT DISTINCT status FROM deliveries") == [("pending",)]
        with SmtpServer(port=port) as smtp:
            scheduler = start(config)
            scheduler.ready()
            scheduler.wait_for("the outbox retry", lambda: query(
                tmp_path, "SELECT DISTINCT status FROM deliveries") == [("sent",)])
            code, _ = scheduler.terminate()
            received = sorted(r for m in smtp.messages for r in m.rcpt_tos)
    log = scheduler.log()
    assert code == 0, log
    assert "no publish is due" in log
    assert "outbox: sent 2, pending 0, failed 0" in log
    assert received == ["ada@example.org", "alan@example.org"]


def test_one_scheduler_per_state_folder_and_a_killed_one_is_not_called_alive(tmp_path, start, cli):
    """A second `schedule` on the same config is turned away (exit 75, one line) while the
    first runs on; after a kill -9 of the first, status says it is gone, not alive, and a
    new scheduler starts."""
    with ArxivServer(papers_now()) as arxiv:
        config = scheduler_config(tmp_path, arxiv)
        first = start(config, "first")
        first.ready()
        first.wait_for("a publish", lambda: published(tmp_path), timeout=60)
        second = cli("--config", str(config), "schedule", timeout=60, check=75)  # not a signal test: warm
        assert second.stdout == "" and second.stderr.strip().splitlines() == [
            "rl-digest: another scheduler runs on this state folder: it holds "
            "state/scheduler.lock (`rl-digest status` names its pid; stop it before "
            "starting this one)"], second.stderr
        alive = cli("--config", str(config), "status", "--check-heartbeat")
        assert alive.stdout.startswith("scheduler: alive") and f"pid {first.proc.pid} " in alive.stdout

        kill9(first.proc)
        gone = cli("--config", str(config), "status", "--check-heartbeat", check=1)
        assert gone.stderr.startswith("rl-digest: scheduler: gone without stopping (killed?), last wake "), \
            gone.stderr
        assert f"pid {first.proc.pid} " in gone.stderr and "; next" not in gone.stderr
        assert "gone without stopping" in cli("--config", str(config), "status").stdout

        third = start(config, "third")
        third.ready()
        code, _ = third.terminate()
    assert code == 0, third.log()


def test_the_schedulers_collect_logs_its_warnings_as_collect_does(tmp_path, monkeypatch, capsys):
    """The scheduler's collect job (its own fire, not the publish's) logged only its counts:
    a warning the collect made (here a watermark ahead of the clock; also an unknown year's
    calendar, a cut feed) reached `status` but never the scheduler's log or journal. The
    job is the one `rl-digest schedule` hands its scheduler, run here without waiting for
    its cron fire."""
    from pipeline import cli as cli_mod
    from pipeline import schedule as schedule_mod

    jobs = {}
    monkeypatch.setattr(schedule_mod, "serve", lambda config, collect, *rest: jobs.update(collect=collect))
    with ArxivServer(papers_now()) as arxiv:
        config = scheduler_config(tmp_path, arxiv)
        cli_mod.main.main(["--config", str(config), "collect"], standalone_mode=False)
        ahead = (datetime.now(UTC) + timedelta(days=1)).isoformat(timespec="seconds")
        conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
        with conn:  # as a clock a day fast wrote it
            conn.execute("UPDATE runs SET window_end = ?", (ahead,))
        conn.close()
        cli_mod.main.main(["--config", str(config), "schedule"], standalone_mode=False)
        capsys.readouterr()
        jobs["collect"]()
    said = capsys.readouterr().err  # the scheduler's log: stderr, as systemd's journal takes it
    assert (f"WARNING pipeline: the watermark {ahead} is ahead of this machine's clock (it went back?): "
            "this collect reads sources.arxiv.lookback_days again, as a first one does") in said, said
    assert said.rstrip().endswith("INFO pipeline: collect: fetched 3, new 0, revised 0"), said


def ours() -> int:
    """This process's threads but the stand-ins' request handlers, which come and go with
    their clients' connections (a kept-alive one holds its handler until it closes)."""
    return sum("process_request_thread" not in thread.name for thread in threading.enumerate())


def test_the_schedulers_publishes_leave_no_connection_open_and_no_thread_behind(tmp_path, monkeypatch):
    """`rl-digest schedule` runs every publish for months in one process. Each publish's LLM
    client was dropped with its connections open (a provider keeps them alive, and so does
    the stand-in here): enrich.concurrency sockets a week stayed open, past the provider's
    idle timeout too, until Python's cycle collector happened to run, which an idle
    scheduler may not do for days. Three weekly publishes, as the scheduler's publish job
    runs them, with the collector off: no connection to the LLM is left, no thread more."""
    from pipeline import cli as cli_mod
    from pipeline import schedule as schedule_mod
    from tests.servers import openai_server

    monkeypatch.setattr(openai_server._Handler, "protocol_version", "HTTP/1.1")  # keep-alive
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    jobs = {}
    monkeypatch.setattr(schedule_mod, "serve", lambda config, collect, publish, *rest: jobs.update(publish=publish))
    first = datetime.now(UTC).replace(microsecond=0) - timedelta(weeks=3)
    with ArxivServer() as arxiv, OpenAIServer() as llm:
        config = config_with(tmp_path, arxiv, enrich={"provider": "openai", "base_url": llm.url,
                                                      "timeout_seconds": 5, "concurrency": 2})
        cli_mod.main.main(["--config", str(config), "schedule"], standalone_mode=False)
        port, threads = int(llm.url.split(":")[-1].split("/")[0]), None
        gc.disable()
        try:
            for week in range(3):
                as_of = first + timedelta(weeks=week)
                arxiv.add(*(rl_paper(10 * week + n, as_of - timedelta(days=1)) for n in range(3)))
                calls = len(llm.requests)
                jobs["publish"](as_of)
                assert len(llm.requests) > calls, "this week's papers were summarised"
                assert connections_to(port) == 0, f"week {week + 1}"
                threads = threads or ours()
                assert ours() == threads, f"week {week + 1}"
        finally:
            gc.enable()


def test_a_cron_naming_a_day_of_month_and_of_week_is_warned_of_by_every_command(tmp_path, cli):
    """'0 8 1 * mon' fires in cron on the 1st and on Mondays, in APScheduler on a 1st that is a
    Monday; config check said ok. Warned, not refused: '0 8 1-7 * mon' is the first Monday."""
    path = tmp_path / "config.yaml"
    path.write_text("enrich: {provider: none}\nsources: {arxiv: {contact: ops@lab.test}}\n"
                    "schedule: {publish_cron: '0 8 1-7 * mon', collect_cron: '0 14 */2 * mon'}\n", encoding="utf-8")
    warning = ("schedule.publish_cron: '0 8 1-7 * mon' names a day of the month and a day of the week: "
               "APScheduler fires it only when both match (cron fires when either does)")
    checked = cli("-q", "--config", str(path), "config", "check")  # with -q too, as its other warnings
    assert (checked.stdout.strip(), checked.stderr.strip()) == (f"{path}: ok (1 warning above)",
                                                                f"warning: {path}: {warning}")
    assert warning in cli("--config", str(path), "config", "show").stderr
