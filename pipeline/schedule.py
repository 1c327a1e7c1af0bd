"""APScheduler wiring only: two cron jobs, catch-up from the database, clean stops.

The job store is memory: what was done lives in the database (runs and
digests), so a restart asks the database whether a publish is due.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from datetime import datetime, timedelta

from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.cron import CronTrigger

from pipeline import lock
from pipeline.config import Config
from pipeline.errors import DigestError, LockedError
from pipeline.run import STOP, Stopped
from pipeline.store import Store

log = logging.getLogger(__name__)


def trigger(config: Config, which: str) -> CronTrigger:
    expr = getattr(config.schedule, f"{which}_cron")
    return CronTrigger.from_crontab(expr, timezone=config.schedule.timezone)


def next_fires(config: Config, now: datetime) -> dict[str, datetime | None]:
    return {which: trigger(config, which).get_next_fire_time(None, now)
            for which in ("collect", "publish")}


def previous_fire(config: Config, which: str, now: datetime) -> datetime | None:
    """The latest fire time at or before now (within the last five weeks)."""
    cron = trigger(config, which)
    moment, last = now - timedelta(days=35), None
    while True:
        fire = cron.get_next_fire_time(last, moment)
        if fire is None or fire > now:
            return last
        last, moment = fire, fire + timedelta(seconds=1)


def publish_due(config: Config, store: Store, now: datetime) -> bool:
    """A publish fire passed with no successful publish since: run it once now."""
    fire = previous_fire(config, "publish", now)
    if fire is None:
        return False
    last = store.last_run("publish", "ok")
    return last is None or datetime.fromisoformat(last["started"]) < fire


def guarded(config: Config, name: str, work: Callable[[], object]) -> Callable[[], None]:
    """A job body: takes the run lock (skips the fire if it is held) and logs failures."""

    def job() -> None:
        if STOP.is_set():
            return
        try:
            with lock.held(config):
                work()
        except LockedError as exc:
            log.warning("%s: skipped this fire: %s", name, exc)
        except Stopped:
            log.info("%s: stopped between steps; the next fire picks up from here", name)
        except DigestError as exc:
            log.error("%s failed: %s", name, exc)

    return job


def serve(config: Config, collect_job: Callable[[], object], publish_job: Callable[[], object],
          store: Store) -> None:
    """Block until SIGTERM or SIGINT; the running step finishes its transaction first."""
    zone = config.schedule.timezone
    scheduler = BlockingScheduler(timezone=zone, job_defaults={
        "coalesce": True, "max_instances": 1,
        "misfire_grace_time": config.schedule.misfire_grace_seconds,
    })
    collect_body = guarded(config, "collect", collect_job)
    publish_body = guarded(config, "publish", publish_job)
    scheduler.add_job(collect_body, trigger(config, "collect"), id="collect", name="collect")
    scheduler.add_job(publish_body, trigger(config, "publish"), id="publish", name="publish")
    now = datetime.now(config.zone)
    if publish_due(config, store, now):
        log.info("a publish was missed while down: running it now")
        scheduler.add_job(publish_body, id="catch-up", name="catch-up publish")

    def stop(signum, _frame) -> None:
        log.info("%s: finishing the current step, then stopping", signal.Signals(signum).name)
        STOP.set()
        scheduler.shutdown(wait=False)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for which, fire in next_fires(config, now).items():
        log.info("next %s: %s", which, fire.isoformat() if fire else "never")
    scheduler.start()
    log.info("scheduler stopped")
