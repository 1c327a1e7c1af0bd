"""Scheduling: trigger arithmetic without sleeping, the day-of-week pitfall, catch-up, stops."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from pipeline import schedule
from pipeline.config import crontab, load
from pipeline.errors import ConfigError
from pipeline.store import Store
from tests.conftest import ROOT, write_config


def fires(config, which, start, count):
    cron = schedule.trigger(config, which)
    out, last, moment = [], None, start
    for _ in range(count):
        last = cron.get_next_fire_time(last, moment)
        out.append(last)
        moment = last + timedelta(seconds=1)
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
    assert got[1].astimezone(timezone.utc) - got[0].astimezone(timezone.utc) == timedelta(days=7, hours=1)


@pytest.mark.parametrize(("cron", "expected"), [
    ("0 8 * * 1-5", "0 8 * * mon-fri"), ("0 8 * * 1", "0 8 * * mon"),
    ("0 8 * * 0", "0 8 * * sun"), ("0 8 * * 7", "0 8 * * sun"), ("0 8 * * 0,6", "0 8 * * sun,sat"),
])
def test_cron_day_numbers_mean_what_a_cron_user_means(cron, expected):
    assert crontab(cron) == expected


def test_numeric_weekday_range_fires_monday_to_friday_not_tuesday_to_saturday(tmp_path):
    config = load(write_config(tmp_path, {"schedule": {"collect_cron": "0 14 * * 1-5"}}, seeds=False))
    start = datetime(2026, 11, 28, tzinfo=ZoneInfo("Asia/Shanghai"))
    assert {f.strftime("%a") for f in fires(config, "collect", start, 10)} == {
        "Mon", "Tue", "Wed", "Thu", "Fri"}


def test_unreadable_day_of_week_is_a_config_error_naming_the_key(tmp_path):
    path = write_config(tmp_path, {"schedule": {"publish_cron": "0 8 * * */2"}}, seeds=False)
    with pytest.raises(ConfigError, match=r"schedule.publish_cron: .*day-of-week as names"):
        load(path)


def test_catch_up_after_a_week_down_publishes_exactly_once(tmp_path):
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    zone = ZoneInfo("Asia/Shanghai")
    before = datetime(2026, 11, 16, 9, tzinfo=zone)  # published Monday 16th, then down a week
    run = store.start_run("publish", before)
    store.finish_run(run, "ok", {})
    with store.tx() as conn:
        conn.exec_driver_sql("UPDATE runs SET started = ?", (before.astimezone(timezone.utc).isoformat(),))
    back = datetime(2026, 11, 25, 10, tzinfo=zone)  # restarted Wednesday 25th
    assert schedule.previous_fire(config, "publish", back) == datetime(2026, 11, 23, 8, tzinfo=zone)
    assert schedule.publish_due(config, store, back)
    run = store.start_run("publish", back)  # the catch-up publish
    store.finish_run(run, "ok", {})
    assert not schedule.publish_due(config, store, back + timedelta(minutes=5))


def test_nothing_is_due_before_the_first_fire_after_a_publish(tmp_path):
    config = load(write_config(tmp_path, seeds=False))
    store = Store.open(config.storage.url)
    run = store.start_run("publish", datetime.now(timezone.utc))
    store.finish_run(run, "ok", {})
    assert not schedule.publish_due(config, store, datetime.now(config.zone))
