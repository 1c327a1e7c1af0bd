"""Scheduling: trigger arithmetic without sleeping, the day-of-week pitfall, catch-up, stops."""

from __future__ import annotations

import json
import logging
import signal
import threading
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from apscheduler.events import EVENT_JOB_EXECUTED, EVENT_JOB_MISSED
from apscheduler.executors.base import run_job

from pipeline import heartbeat, lock, schedule, store_outbox, templating
from pipeline.config import load
from pipeline.crontab import crontab
from pipeline.errors import ConfigError, DigestError
from pipeline.stopping import STOP, Stopped
from pipeline.store import Store
from tests.helpers import ROOT, write_config


def fires(config, which, start, count):
    cron = schedule.trigger(config, which)
    out, last, moment = [], None, start
    for _ in range(count):
        last = cron.get_next_fire_time(last, moment)
        out.append(last)
        moment = last.astimezone(UTC) + timedelta(seconds=1)  # a wall-clock step falls back with the clock
    return out


def test_collect_fires_weekdays_at_14_in_shanghai():
    config = load(ROOT / "config.yaml")
    start = datetime(2026, 11, 28, tzinfo=ZoneInfo("Asia/Shanghai"))  # a Saturday
    got = fires(config, "collect", start, 6)
    assert [f.strftime("%a %H:%M") for f in got] == [
        "Mon 14:00", "Tue 14:00", "Wed 14:00", "Thu 14:00", "Fri 14:00", "Mon 14:00"]
    assert all(f.utcoffset() == timedelta(hours=8) for f in got)


def test_publish_keeps_local_time_across_dst_in_new_york(tmp_path):
    config = load(write_config(tmp_path, {"schedule": {"timezone": "America/New_York"}}, seeds=False))
    start = datetime(2026, 10, 26, tzinfo=ZoneInfo("America/New_York"))
    got = fires(config, "publish", start, 3)  # DST ends on Sunday 1 November 2026
    assert [f.strftime("%Y-%m-%d %H:%M") for f in got] == [
        "2026-10-26 08:00", "2026-11-02 08:00", "2026-11-09 08:00"]
    assert got[0].utcoffset() == timedelta(hours=-4) and got[1].utcoffset() == timedelta(hours=-5)
    assert got[1].astimezone(UTC) - got[0].astimezone(UTC) == timedelta(days=7, hours=1)


@pytest.mark.parametrize(("cron", "expected"), [
    ("0 8 * * 1-5", "0 8 * * mon-fri"), ("0 8 * * 1", "0 8 * * mon"),
    ("0 8 * * 0", "0 8 * * sun"), ("0 8 * * 7", "0 8 * * sun"), ("0 8 * * 0,6", "0 8 * * sun,sat"),
    # from Sunday: APScheduler's week starts on Monday, where sun-sat was refused as a range
    ("0 8 * * 0-6", "0 8 * * sun,mon-sat"), ("0 20 * * sun-thu", "0 20 * * sun,mon-thu"),
    ("0 8 * * MON-FRI", "0 8 * * mon-fri"),
])
def test_cron_day_numbers_mean_what_a_cron_user_means(cron, expected):
    assert crontab(cron) == expected


def test_numeric_weekday_range_fires_monday_to_friday_not_tuesday_to_saturday(tmp_path):
    config = load(write_config(tmp_path, {"schedule": {"collect_cron": "0 14 * * 1-5"}}, seeds=False))
    start = datetime(2026, 11, 28, tzinfo=ZoneInfo("Asia/Shanghai"))
    assert {f.strftime("%a") for f in fires(config, "collect", start, 10)} == {
        "Mon", "Tue", "Wed", "Thu", "Fri"}
    arxiv_days = load(write_config(tmp_path, {"schedule": {"collect_cron": "0 9 * * 0-4"}}, seeds=False))
    assert {f.strftime("%a") for f in fires(arxiv_days, "collect", start, 10)} == {
        "Sun", "Mon", "Tue", "Wed", "Thu"}


def test_unreadable_day_of_week_is_a_config_error_naming_the_key(tmp_path):
    path = write_config(tmp_path, {"schedule": {"publish_cron": "0 8 * * 1-5x"}}, seeds=False)
    with pytest.raises(ConfigError, match=r"schedule.publish_cron: .*day-of-week as names"):
        load(path)


@pytest.mark.parametrize("cron, days", [("*/2", "sun,tue,thu,sat"), ("1-5/2", "mon,wed,fri"),
                                        ("mon-fri/2", "mon,wed,fri"), ("5-1/2", "as mon,wed,fri")])
def test_a_step_in_day_of_week_is_refused_saying_why_and_which_days_cron_means(tmp_path, cron, days):
    """It was refused with 'write day-of-week as names', though '*/2' has no number of a day."""
    path = write_config(tmp_path, {"schedule": {"publish_cron": f"0 8 * * {cron}"}}, seeds=False)
    with pytest.raises(ConfigError, match=rf"schedule.publish_cron: .*a step in day-of-week .*counts from "
                                          rf"Sunday in cron, from Monday in APScheduler: list the days by "
                                          rf"name \({days}\)"):
        load(path)


def test_catch_up_after_a_week_down_publishes_exactly_once(tmp_path):
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    zone = ZoneInfo("Asia/Shanghai")
    before = datetime(2026, 11, 16, 9, tzinfo=zone)  # published Monday 16th, then down a week
    run = store.start_run("publish", before)
    store.finish_run(run, "ok", {})
    with store.tx() as conn:
        conn.exec_driver_sql("UPDATE runs SET started = ?", (before.astimezone(UTC).isoformat(),))
    back = datetime(2026, 11, 25, 10, tzinfo=zone)  # restarted Wednesday 25th
    assert schedule.previous_fire(config, "publish", back) == datetime(2026, 11, 23, 8, tzinfo=zone)
    assert schedule.publish_due(config, store, back)
    run = store.start_run("publish", back)  # the catch-up publish
    store.finish_run(run, "ok", {})
    assert not schedule.publish_due(config, store, back + timedelta(minutes=5))


def test_a_quarterly_publish_missed_while_down_is_caught_up(tmp_path):
    """The last fire was looked for five weeks back only: a quarterly publish (1 October)
    missed by a scheduler started in December was never due, and never published."""
    config = load(write_config(tmp_path, {"schedule": {"publish_cron": "0 8 1 1,4,7,10 *"}}, seeds=False))
    store = Store.open(config.storage.url)
    zone = ZoneInfo("Asia/Shanghai")
    back = datetime(2026, 12, 5, 12, tzinfo=zone)
    assert schedule.previous_fire(config, "publish", back) == datetime(2026, 10, 1, 8, tzinfo=zone)
    assert schedule.publish_due(config, store, back)
    every_minute = load(write_config(tmp_path, {"schedule": {"publish_cron": "* * * * *"}}, seeds=False))
    assert schedule.previous_fire(every_minute, "publish", back) == back


def test_a_fire_in_the_hour_a_clock_falls_back_is_found_and_the_search_ends(tmp_path):
    """01:30 on 2026-11-01 in New York happens twice. Stepping a second past the second one
    in wall-clock time went back an hour to the first, and the scheduler spun forever at
    start-up (and at its next publish, holding the run lock) for five weeks."""
    config = load(write_config(tmp_path, {"schedule": {"timezone": "America/New_York",
                                                       "publish_cron": "30 1 * * sun"}}, seeds=False))
    zone = ZoneInfo("America/New_York")
    found: list = []
    search = threading.Thread(target=lambda: found.append(
        schedule.previous_fire(config, "publish", datetime(2026, 11, 4, 12, tzinfo=zone))), daemon=True)
    search.start()
    search.join(timeout=10)
    assert found, "previous_fire did not return"
    assert found[0].astimezone(UTC) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # the first 01:30, EDT: the fire
    # between the two 01:30s only the first has fired (the wall clock reads 01:40 EDT)
    first_pass = datetime(2026, 11, 1, 5, 40, tzinfo=UTC).astimezone(zone)
    assert schedule.previous_fire(config, "publish", first_pass).astimezone(UTC) == \
        datetime(2026, 11, 1, 5, 30, tzinfo=UTC)


def test_a_fixed_time_the_clock_falls_back_over_publishes_once_that_day(tmp_path):
    """'30 1 * * sun' in New York: 01:30 on 2026-11-01 comes twice. The trigger fired at both
    and the second found the week's publish older than itself: the scheduler published again
    an hour later (a collect, the files, feed and site rewritten, a second run record)."""
    config = load(write_config(tmp_path, {"schedule": {"timezone": "America/New_York",
                                                       "publish_cron": "30 1 * * sun"}}, seeds=False))
    zone = ZoneInfo("America/New_York")
    got = fires(config, "publish", datetime(2026, 10, 31, 12, tzinfo=zone), 2)
    assert [f.astimezone(UTC) for f in got] == [datetime(2026, 11, 1, 5, 30, tzinfo=UTC),  # 01:30 EDT
                                                datetime(2026, 11, 8, 6, 30, tzinfo=UTC)]  # next Sunday's
    store = Store.open(config.storage.url)
    store.finish_run(store.start_run("publish", datetime(2026, 11, 1, 5, 30, 40, tzinfo=UTC)), "ok", {})
    second_pass = datetime(2026, 11, 1, 6, 31, tzinfo=UTC).astimezone(zone)  # 01:31 EST
    assert not schedule.publish_due(config, store, second_pass)  # not for the fire, the watch or a restart
    assert schedule.publish_due(config, store, datetime(2026, 11, 8, 6, 31, tzinfo=UTC))
    # a job with * in its hour runs in both passes, as cron(8) runs it
    hourly = load(write_config(tmp_path, {"schedule": {"timezone": "America/New_York",
                                                       "publish_cron": "0 * * * *"}}, seeds=False))
    assert [f.astimezone(UTC).hour for f in fires(hourly, "publish", datetime(2026, 11, 1, tzinfo=zone), 4)] \
        == [4, 5, 6, 7]


def test_a_fixed_time_the_clock_springs_over_publishes_once_that_day(tmp_path):
    """'30 2 * * sun' on 2027-03-14, when New York's clocks go from 02:00 to 03:00: one
    publish, an hour later, and the next fire is shown as the clock will read then."""
    config = load(write_config(tmp_path, {"schedule": {"timezone": "America/New_York",
                                                       "publish_cron": "30 2 * * sun"}}, seeds=False))
    zone = ZoneInfo("America/New_York")
    got = fires(config, "publish", datetime(2027, 3, 13, 12, tzinfo=zone), 2)
    assert [f.isoformat() for f in got] == ["2027-03-14T03:30:00-04:00", "2027-03-21T02:30:00-04:00"]
    store = Store.open(config.storage.url)
    store.finish_run(store.start_run("publish", datetime(2027, 3, 7, 7, 31, tzinfo=UTC)), "ok", {})
    assert not schedule.publish_due(config, store, datetime(2027, 3, 14, 7, 15, tzinfo=UTC))  # 03:15 EDT
    assert schedule.publish_due(config, store, datetime(2027, 3, 14, 7, 31, tzinfo=UTC))
    store.finish_run(store.start_run("publish", datetime(2027, 3, 14, 7, 31, tzinfo=UTC)), "ok", {})
    assert not schedule.publish_due(config, store, datetime(2027, 3, 14, 23, tzinfo=UTC))


def test_a_collect_the_clock_springs_over_runs_after_it_and_a_restart_catches_the_days_missed_one(tmp_path):
    """'30 2 * * *' in New York on 2027-03-14 (02:00 -> 03:00): a scheduler (re)started at
    03:00 to 03:29 planned the next day's 02:30, and that day's collect never ran. It runs
    at 03:30; a scheduler started after a collect fire of the same day collects at once."""
    config = load(write_config(tmp_path, {"schedule": {"timezone": "America/New_York",
                                                       "collect_cron": "30 2 * * *"}}, seeds=False))
    zone = ZoneInfo("America/New_York")
    for hour, minute in ((1, 59), (3, 0), (3, 10), (3, 29)):
        got = fires(config, "collect", datetime(2027, 3, 14, hour, minute, tzinfo=zone), 2)
        assert [f.isoformat() for f in got] == ["2027-03-14T03:30:00-04:00", "2027-03-15T02:30:00-04:00"]
    store = Store.open(config.storage.url)
    published = store.start_run("publish", datetime(2027, 3, 8, 8, tzinfo=zone))  # Monday's: none due
    store.finish_run(published, "ok", {})
    assert not schedule.collect_due(config, store, datetime(2027, 3, 14, 3, 10, tzinfo=zone))
    restarted = datetime(2027, 3, 14, 3, 45, tzinfo=zone)  # after the fire, nothing collected since
    assert schedule.collect_due(config, store, restarted)
    calls: list[str] = []
    scheduler = schedule.build(config, lambda: calls.append("collect"), lambda as_of: None, store, restarted)
    assert {job.id for job in scheduler.get_jobs()} == {"collect", "publish", "watch", "catch-up-collect"}
    scheduler.get_job("catch-up-collect").func()
    assert calls == ["collect"]
    store.finish_run(store.start_run("collect", restarted), "ok", {})
    assert not schedule.collect_due(config, store, restarted + timedelta(minutes=5))  # collected: once
    old = load(write_config(tmp_path, {"schedule": {"timezone": "America/New_York",
                                                    "collect_cron": "30 2 * * sat"}}, seeds=False))
    assert not schedule.collect_due(old, store, restarted)  # yesterday's: the next fire reads it


def test_nothing_is_due_before_the_first_fire_after_a_publish(tmp_path):
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    run = store.start_run("publish", datetime.now(UTC))
    store.finish_run(run, "ok", {})
    assert not schedule.publish_due(config, store, datetime.now(config.zone))


def test_a_publish_whose_email_failed_is_not_published_again_by_a_restart(tmp_path):
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    failed = store.start_run("publish", datetime.now(UTC))
    store.finish_run(failed, "stopped", {})
    assert schedule.publish_due(config, store, datetime.now(config.zone))
    partial = store.start_run("publish", datetime.now(UTC))
    store.finish_run(partial, "partial", {})  # the digest is out; the outbox retries the email
    assert not schedule.publish_due(config, store, datetime.now(config.zone))


# --- the scheduler as built: job defaults, misfires, the lock, stops -------------------------


@pytest.fixture
def stop_flag():
    """Tests that set run.STOP leave it clear for the next test."""
    yield STOP
    STOP.clear()


def recorder(store, calls):
    """A publish job that records a successful publish run, as run_digest does."""
    def publish(as_of=None):
        calls.append("publish" if as_of is None else f"publish as of {as_of.isoformat()}")
        store.finish_run(store.start_run("publish", as_of or datetime.now(UTC)), "ok", {})
    return publish


def published_now(store):
    """A publish as run_digest records one: its collect's run, then its own."""
    store.finish_run(store.start_run("collect", datetime.now(UTC)), "ok", {})
    store.finish_run(store.start_run("publish", datetime.now(UTC)), "ok", {})


def test_jobs_coalesce_run_one_at_a_time_and_honour_the_grace(tmp_path):
    config = load(write_config(tmp_path, {"schedule": {"misfire_grace_seconds": 120}}, seeds=False))
    store = Store.open(config.storage.url)
    scheduler = schedule.build(config, lambda: None, lambda as_of: None, store)
    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == {"collect", "publish", "catch-up", "watch"}  # a fresh database missed the last fire
    for name in ("collect", "publish"):
        assert (jobs[name].coalesce, jobs[name].max_instances, jobs[name].misfire_grace_time) == (
            True, 1, 120)
    assert jobs["catch-up"].misfire_grace_time is None  # however late it starts, it runs


def test_no_catch_up_when_the_last_publish_is_newer_than_the_last_fire(tmp_path):
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    published_now(store)
    scheduler = schedule.build(config, lambda: None, lambda as_of: None, store)
    assert {job.id for job in scheduler.get_jobs()} == {"collect", "publish", "watch"}


def test_a_late_fire_within_the_grace_runs_once_and_one_beyond_it_is_caught_up(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pipeline")
    config = load(write_config(tmp_path, {"schedule": {"misfire_grace_seconds": 120}}, seeds=False))
    store = Store.open(config.storage.url)
    calls: list[str] = []
    scheduler = schedule.build(config, lambda: None, recorder(store, calls), store)
    job = scheduler.get_job("publish")
    now = datetime.now(UTC)
    events = run_job(job, "default", [now - timedelta(seconds=60)], "apscheduler.executors.default")
    assert [e.code for e in events] == [EVENT_JOB_EXECUTED] and calls == ["publish"]
    events = run_job(job, "default", [now - timedelta(seconds=60)], "apscheduler.executors.default")
    assert calls == ["publish"]  # the same fire again (a second scheduler): already done
    assert "a publish already succeeded since the last fire" in caplog.text

    late = run_job(job, "default", [now - timedelta(hours=2)], "apscheduler.executors.default")
    assert [e.code for e in late] == [EVENT_JOB_MISSED] and calls == ["publish"]
    scheduler._dispatch_event(late[0])  # as the executor does after run_job
    assert "was missed by more than schedule.misfire_grace_seconds" in caplog.text
    assert [j.id for j in scheduler.get_jobs()].count("catch-up") == 2  # start-up's and this one


def test_a_collect_that_fires_while_the_schedulers_own_publish_runs_says_so_calmly(tmp_path, caplog):
    """Not 'another rl-digest run holds the lock': it is this scheduler's publish, which
    collects too; so no warning."""
    caplog.set_level(logging.INFO, logger="pipeline")
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    scheduler = schedule.build(config, lambda: None, recorder(store, []), store)
    schedule.RUNNING.add("publish")
    try:
        with lock.held(config):  # the publish holds the run lock
            scheduler.get_job("collect").func()
    finally:
        schedule.RUNNING.remove("publish")
    said = [r for r in caplog.records if "collect: skipped this fire" in r.getMessage()]
    assert [(r.levelname, r.getMessage()) for r in said] == [
        ("INFO", "collect: skipped this fire: this scheduler's publish holds the run lock")]


def test_a_publish_that_finds_the_lock_held_skips_and_tries_again_later(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pipeline")
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    calls: list[str] = []
    scheduler = schedule.build(config, lambda: None, recorder(store, calls), store)
    before = datetime.now(config.zone)
    with lock.held(config):  # e.g. `rl-digest collect` from cron, or a second scheduler
        scheduler.get_job("publish").func()
    assert calls == []
    assert "publish: skipped this fire: another rl-digest run holds" in caplog.text
    retry = [j for j in scheduler.get_jobs() if j.id == "catch-up"][-1]
    assert retry.trigger.run_date - before >= timedelta(seconds=schedule.RETRY_SECONDS - 1)
    retry.func()  # five minutes later, the lock is free and the publish still due
    assert calls == ["publish"]


def cut_off_after_saving(store, as_of):
    """A publish killed after it saved its digest (its reading list, site, feed not yet written)."""
    store.save_digest(as_of.date().isoformat(), (as_of - timedelta(days=7), as_of), {}, [], [])
    store.start_run("publish", as_of)  # left `running`: the process is gone


def test_a_publish_cut_off_after_saving_its_digest_is_finished_as_of_then(tmp_path):
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    as_of = datetime.now(config.zone).replace(microsecond=0)
    cut_off_after_saving(store, as_of)
    assert not schedule.publish_due(config, store, datetime.now(config.zone))  # its digest covers the fire
    calls: list[str] = []
    scheduler = schedule.build(config, lambda: None, recorder(store, calls), store)
    scheduler.get_job("catch-up").func()
    assert calls == [f"publish as of {as_of.isoformat()}"]  # the same digest, its files finished
    assert [j.id for j in scheduler.get_jobs()].count("catch-up") == 1  # start-up's: nothing more to do
    assert schedule.unfinished(store) is None


def test_finishing_an_old_cut_off_publish_then_runs_this_weeks(tmp_path):
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    fire = schedule.previous_fire(config, "publish", datetime.now(config.zone))
    cut_off_after_saving(store, fire - timedelta(days=1))  # last week's, before this week's fire
    calls: list[str] = []
    scheduler = schedule.build(config, lambda: None, recorder(store, calls), store)
    scheduler.get_job("catch-up").func()
    [j for j in scheduler.get_jobs() if j.id == "catch-up"][-1].func()
    assert calls == [f"publish as of {(fire - timedelta(days=1)).isoformat()}", "publish"]


def test_a_publish_waiting_for_its_own_collect_looks_again_in_seconds(tmp_path, caplog):
    """A collect every few minutes holds the lock at each of the publish's retries if those
    wait RETRY_SECONDS: the week's digest would never go out."""
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    scheduler = schedule.build(config, lambda: None, recorder(store, []), store)
    before = datetime.now(config.zone)
    schedule.RUNNING.add("collect")
    try:
        with lock.held(config):
            scheduler.get_job("publish").func()
    finally:
        schedule.RUNNING.remove("collect")
    wait = [j for j in scheduler.get_jobs() if j.id == "catch-up"][-1].trigger.run_date - before
    assert timedelta(0) < wait <= timedelta(seconds=schedule.OWN_RETRY_SECONDS + 1)


def test_a_publish_fire_while_the_schedulers_own_catch_up_runs_says_so_calmly(tmp_path, caplog):
    """A catch-up is a publish job too. One still running at the weekly fire (a scheduler
    started just before it, a failed publish's retry) made that fire warn 'another rl-digest
    run holds state/digest.sqlite3.lock (pid N)', N this scheduler's own pid, and wait five
    minutes, as for another process."""
    caplog.set_level(logging.INFO, logger="pipeline")
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    scheduler = schedule.build(config, lambda: None, recorder(store, []), store)
    before = datetime.now(config.zone)
    schedule.RUNNING.add("publish")  # the catch-up
    try:
        with lock.held(config):
            scheduler.get_job("publish").func()
    finally:
        schedule.RUNNING.remove("publish")
    said = [r for r in caplog.records if "publish: skipped this fire" in r.getMessage()]
    assert [(r.levelname, r.getMessage()) for r in said] == [
        ("INFO", "publish: skipped this fire: this scheduler's publish holds the run lock")]
    wait = [j for j in scheduler.get_jobs() if j.id == "catch-up"][-1].trigger.run_date - before
    assert timedelta(0) < wait <= timedelta(seconds=schedule.OWN_RETRY_SECONDS + 1)


def test_the_watch_catches_up_a_fire_the_trigger_stepped_over(tmp_path, monkeypatch):
    """A scheduler started inside a spring-forward hour: APScheduler's trigger goes on to
    next week, the database says this week's fire has passed."""
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    published_now(store)
    scheduler = schedule.build(config, lambda: None, recorder(store, []), store)
    watch = scheduler.get_job("watch").func
    watch()
    assert "catch-up" not in {j.id for j in scheduler.get_jobs()}  # nothing due: nothing planned
    monkeypatch.setattr(schedule, "publish_due", lambda *args: True)
    schedule.RUNNING.add("collect")
    try:
        watch()
    finally:
        schedule.RUNNING.remove("collect")
    assert "catch-up" not in {j.id for j in scheduler.get_jobs()}  # a job runs: the watch waits
    watch()
    assert "catch-up" in {j.id for j in scheduler.get_jobs()}


def test_a_failed_publish_tries_again_soon_and_backs_off_until_it_succeeds(tmp_path, caplog):
    """arXiv down at Monday 08:00 must not cost the readers their week's digest."""
    caplog.set_level(logging.INFO, logger="pipeline")
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    calls: list[str] = []
    outage = [2]

    def publish(as_of):
        if outage[0]:
            outage[0] -= 1
            raise DigestError("https://export.arxiv.org/api/query: HTTP 503")
        recorder(store, calls)(as_of)

    scheduler = schedule.build(config, lambda: None, publish, store)

    def retry():  # not started, the scheduler keeps each planned job: the newest is the plan
        return [j for j in scheduler.get_jobs() if j.id == "catch-up"][-1]

    waits = []
    for fire in (scheduler.get_job("publish"), None):
        before = datetime.now(config.zone)
        (fire or retry()).func()
        waits.append(retry().trigger.run_date - before)
    assert "publish failed: https://export.arxiv.org/api/query: HTTP 503" in caplog.text
    assert timedelta(seconds=schedule.RETRY_SECONDS - 1) <= waits[0] < waits[1]  # backing off
    retry().func()  # arXiv is back
    assert calls == ["publish"]
    assert not schedule.publish_due(config, store, datetime.now(config.zone))


def test_a_heartbeat_after_the_scheduler_stopped_writes_without_a_traceback(tmp_path):
    """A job that ends after SIGTERM shut the scheduler down still beats: its jobs then have
    no next fire (APScheduler's pending jobs have no next_run_time at all)."""
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    scheduler = schedule.build(config, lambda: None, lambda as_of: None, store)  # not running
    schedule.beat(config, scheduler)
    assert json.loads(heartbeat.path(config).read_text(encoding="utf-8"))["next"] == {}


def test_a_heartbeat_that_cannot_be_written_is_a_warning_not_a_traceback(tmp_path, caplog):
    """A full or read-only state folder: write_atomic's DigestError went past the `except
    OSError` meant for it, so APScheduler logged a traceback at each heartbeat, and SIGTERM
    ended the scheduler with exit 1 naming the heartbeat, not its clean stop. A folder in the
    heartbeat's place fails so anywhere."""
    config = load(write_config(tmp_path, seeds=False))
    heartbeat.path(config).mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        schedule.beat(config, None, stopped=True)
    assert f"heartbeat: {heartbeat.path(config)}: cannot write: Is a directory" in caplog.text


def test_a_job_does_not_start_once_stop_was_asked(tmp_path, stop_flag):
    config = load(write_config(tmp_path, seeds=False))
    calls: list[str] = []
    stop_flag.set()
    schedule.guarded(config, "collect", lambda: calls.append("collect"))()
    assert calls == []


def test_stopped_between_steps_is_logged_not_raised_and_frees_the_lock(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pipeline")
    config = load(write_config(tmp_path, seeds=False))

    def work():
        raise Stopped()

    schedule.guarded(config, "publish", work)()
    assert "publish: stopped between steps" in caplog.text
    with lock.held(config):
        pass


def test_an_unexpected_error_is_one_line_and_the_scheduler_lives_on(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pipeline")
    config = load(write_config(tmp_path, seeds=False))

    def work():
        raise OSError(28, "No space left on device")

    schedule.guarded(config, "collect", work)()
    assert "collect failed: OSError: [Errno 28] No space left on device" in caplog.text
    assert "Traceback" not in caplog.text


def test_a_template_copied_from_an_older_release_is_named_in_the_schedulers_log(tmp_path, caplog):
    """A scheduled publish that a templates.dir file from an older release breaks logs the
    line `run` prints (it logged 'publish failed: UndefinedError: ...' with no word of the file)."""
    caplog.set_level(logging.INFO, logger="pipeline")
    (tmp_path / "mine" / "partials").mkdir(parents=True)
    (tmp_path / "mine" / "partials" / "labels.j2").write_text("{%- macro both(key) -%}{{ key }}{%- endmacro -%}\n",
                                                                encoding="utf-8")
    config = load(write_config(tmp_path, {"templates": {"dir": "mine"}}, seeds=False))

    def work():
        templating.text_env(config.templates.dir).from_string(
            '{% import "partials/labels.j2" as lab %}{{ lab.tag("zh") }}').render()

    schedule.guarded(config, "publish", work)()
    assert f"publish failed: templates.dir {tmp_path / 'mine'}: " in caplog.text
    assert "(your partials/labels.j2 replaces the built-in file of that name" in caplog.text


def test_serve_returns_at_once_when_stop_came_before_the_scheduler_started(tmp_path, stop_flag):
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    published_now(store)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)}

    def blocked(*_):
        raise AssertionError("serve() started the scheduler after a stop")

    signal.signal(signal.SIGALRM, blocked)
    signal.alarm(10)
    stop_flag.set()  # a SIGTERM during start-up
    try:
        schedule.serve(config, lambda: None, lambda as_of: None, store)  # would block if it started
    finally:
        signal.alarm(0)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def test_a_digest_remade_by_hand_for_last_week_does_not_hide_this_weeks_missed_publish(tmp_path):
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    zone = ZoneInfo("Asia/Shanghai")
    monday = datetime(2026, 11, 16, 8, tzinfo=zone)
    store.finish_run(store.start_run("publish", monday), "ok", {})
    back = datetime(2026, 11, 25, 10, tzinfo=zone)  # this Monday's (23rd) fire was missed
    # Today, by hand: `run --as-of 2026-11-16` re-makes last week's digest.
    by_hand = datetime(2026, 11, 16, 23, 59, 59, tzinfo=zone)
    store.finish_run(store.start_run("publish", by_hand), "ok", {})
    store.save_digest("2026-11-16", (by_hand - timedelta(days=7), by_hand), {}, [], [])
    assert schedule.publish_due(config, store, back)
    store.finish_run(store.start_run("publish", back), "ok", {})  # the catch-up
    assert not schedule.publish_due(config, store, back + timedelta(minutes=5))


def waiting_row(store, next_attempt):
    store.save_digest("2026-11-30", (datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC)),
                      {}, [], ["ada@example.org"])
    row = store_outbox.rows(store)[0]
    store_outbox.update_delivery(store, row["id"], next_attempt=next_attempt and next_attempt.isoformat())


MAILING = {"email": {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": 2525, "security": "none",
                     "to": ["ada@example.org"]}}


def test_the_outbox_job_runs_when_the_earliest_backoff_runs_out_and_plans_itself_again(tmp_path):
    config = load(write_config(tmp_path, MAILING, seeds=False))
    store = Store.open(config.storage.url)
    published_now(store)
    assert "outbox" not in {j.id for j in schedule.build(config, lambda: None, lambda as_of: None, store,
                                                         outbox_job=lambda: None).get_jobs()}
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=1)
    waiting_row(store, due)
    calls: list[str] = []
    scheduler = schedule.build(config, lambda: None, lambda as_of: None, store,
                               outbox_job=lambda: calls.append("outbox"))
    job = scheduler.get_job("outbox")
    assert job.trigger.run_date == due and job.misfire_grace_time is None
    before = datetime.now(config.zone)
    job.func()  # the row is still waiting afterwards (the server is still down, say)
    assert calls == ["outbox"]
    again = [j for j in scheduler.get_jobs() if j.id == "outbox"][-1].trigger.run_date
    assert again - before >= timedelta(seconds=schedule.RETRY_SECONDS - 1)


def test_the_outbox_job_does_not_look_every_few_minutes_for_a_channel_taken_out(tmp_path):
    """Email turned off (or a chat entry taken out) with a digest still queued for it: the
    row waits for the channel's return, which no look can bring, yet the scheduler ran its
    outbox job every five minutes for as long as it ran, each logging 'outbox: sent 0,
    pending 1'. A row of a channel the config has is still looked at."""
    store = Store.open(load(write_config(tmp_path, seeds=False)).storage.url)
    published_now(store)
    waiting_row(store, datetime.now(UTC) - timedelta(days=3))
    off = load(write_config(tmp_path, seeds=False))
    assert "outbox" not in {j.id for j in schedule.build(off, lambda: None, lambda as_of: None, store,
                                                         outbox_job=lambda: None).get_jobs()}
    on = load(write_config(tmp_path, MAILING, seeds=False))
    assert "outbox" in {j.id for j in schedule.build(on, lambda: None, lambda as_of: None, store,
                                                     outbox_job=lambda: None).get_jobs()}


class _SecondPass(datetime):
    """schedule's clock at 01:35 EST on 2026-11-01, the second pass of New York's 01:00-02:00."""

    at = datetime(2026, 11, 1, 6, 35, tzinfo=UTC)

    @classmethod
    def now(cls, tz=None):
        return cls.at.astimezone(tz)


def test_a_retry_planned_in_the_hour_a_clock_repeats_waits_its_minutes(tmp_path, monkeypatch):
    """'Now + 5 minutes' on the wall clock of the second 01:35 is 01:40 EDT, an hour ago: a
    publish that found the lock held (or failed) and the outbox job tried again at once, over
    and over, for up to an hour."""
    config = load(write_config(tmp_path, {**MAILING, "schedule": {"timezone": "America/New_York"}},
                               seeds=False))
    store = Store.open(config.storage.url)
    waiting_row(store, _SecondPass.at + timedelta(minutes=1))
    monkeypatch.setattr(schedule, "datetime", _SecondPass)
    scheduler = schedule.build(config, lambda: None, recorder(store, []), store, outbox_job=lambda: None)
    with lock.held(config):  # another process's run
        scheduler.get_job("publish").func()
        scheduler.get_job("outbox").func()
    for name in ("catch-up", "outbox"):
        planned = [j for j in scheduler.get_jobs() if j.id == name][-1].trigger.run_date
        assert planned.astimezone(UTC) - _SecondPass.at == timedelta(seconds=schedule.RETRY_SECONDS), name
