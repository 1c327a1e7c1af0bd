"""APScheduler wiring only: two cron jobs, catch-up from the database (a missed publish;
the day's missed collect), outbox retries, clean stops.

The job store is memory: what was done lives in the database (runs and
digests), so a restart asks the database whether a publish is due, and so does
every publish fire (inside the run lock), which keeps two schedulers on one
database from publishing twice. "Due" is keyed on the week: the as-of of the
digests and publishes that exist, not the clock time they ran at, so a digest
re-made by hand for last week does not hide this week's missed publish.

The outbox has its own job: it runs when the earliest waiting delivery's backoff
runs out (one of a channel the config has: a row held for a channel taken out waits for
its return, not for a look every few minutes) and at start, sends what is due, and plans
itself again; a publish plans it too. So a failed send is retried without waiting for the next publish.

Stopping: SIGTERM/SIGINT set stopping.STOP and shut the scheduler down without
waiting; the job that is running sees STOP at its next checkpoint (between
stages, after the current transaction) and stops there (stopping.Stopped);
serve() then waits for its thread and returns, and the command exits 0.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import jinja2
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED, EVENT_SCHEDULER_STARTED
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.base import STATE_STOPPED
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.cron import CronTrigger

from pipeline import heartbeat, lock, templating
from pipeline.config import Config
from pipeline.deliver.files import write_atomic
from pipeline.errors import DigestError, LockedError
from pipeline.publish import next_look
from pipeline.stopping import STOP, Stopped, from_signal
from pipeline.store import Store

log = logging.getLogger(__name__)

RETRY_SECONDS = 300  # a publish that found the lock held (or failed) looks again this much later
OWN_RETRY_SECONDS = 15  # ... held by this scheduler's own collect: soon, not at its next fire
WATCH_SECONDS = 300  # how often a running scheduler asks whether a publish fire went by unseen
FAILED_RETRY_MAX = 3600  # the longest wait between publishes that keep failing
CATCH_UP = "catch-up"
CATCH_UP_COLLECT = "catch-up-collect"
HEARTBEAT = "heartbeat"
OUTBOX = "outbox"
WATCH = "watch"
PublishJob = Callable[[datetime | None], object]  # a publish as of then (None: now)


class _Cron(CronTrigger):
    """APScheduler's cron trigger keeping a clock change as cron(8) does. A fixed time (no `*`
    in its minute or hour) that a clock falling back repeats fires at its first pass only
    (APScheduler fired it at both: a publish at 01:30 on the night New York's clock went back
    ran twice, its collect, files, feed and run record made again); a time the clock springs
    over fires an hour later, shown as the clock reads then (03:30, not a 02:30 that never was),
    also for a scheduler started between the jump and then: APScheduler matches the fields
    against the wall clock, and from 03:10 it found the day's 02:30 gone by and went on to
    the next day's (that day's collect never ran)."""

    fixed = False
    LOOK_BACK = timedelta(hours=3)  # cron(8) keeps fixed times across a clock change under three hours

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        if previous_fire_time is not None or not self.fixed:
            return self._kept(previous_fire_time, now)
        now = now.astimezone(UTC)
        fire = self._kept(None, now - self.LOOK_BACK)  # a fire the clock sprang over comes after now
        while fire is not None and fire.astimezone(UTC) < now:
            fire = self._kept(None, fire.astimezone(UTC) + timedelta(seconds=1))
        return fire

    def _kept(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        """APScheduler's next fire, the repeat of a fixed time in the hour a clock falls back
        skipped, in this zone's offset of then."""
        fire = super().get_next_fire_time(previous_fire_time, now)
        while fire is not None:
            fire = fire.astimezone(UTC).astimezone(self.timezone)
            if not (self.fixed and fire.fold and fire.replace(fold=0).utcoffset() != fire.utcoffset()):
                return fire
            fire = super().get_next_fire_time(None, fire.astimezone(UTC) + timedelta(seconds=1))
        return None


def trigger(config: Config, which: str) -> CronTrigger:
    expr = getattr(config.schedule, f"{which}_cron")
    cron = _Cron.from_crontab(expr, timezone=config.schedule.timezone)
    cron.fixed = "*" not in "".join(expr.split()[:2])
    return cron


def next_fires(config: Config, now: datetime) -> dict[str, datetime | None]:
    return {which: trigger(config, which).get_next_fire_time(None, now)
            for which in ("collect", "publish")}


def previous_fire(config: Config, which: str, now: datetime) -> datetime | None:
    """The latest fire time at or before now (within the last 512 days: a yearly cron too), looked for in
    the last day, then two, four, ...: a cron of every few minutes steps through a day's
    fires, a quarterly one is found (five weeks back it was not: its missed publish was
    never caught up).

    Stepped in UTC: a second past the second 01:30 of a night the clock falls back is,
    in wall-clock arithmetic, the first 01:30 again, and the search would never end."""
    cron = trigger(config, which)
    now = now.astimezone(UTC)  # two times of one zone compare by the wall clock, fold aside
    span = timedelta(days=1)
    while span <= timedelta(days=512):
        moment, last = now - span, None
        while True:
            fire = cron.get_next_fire_time(None, moment)
            if fire is None or fire.astimezone(UTC) > now:
                break
            last, moment = fire, fire.astimezone(UTC) + timedelta(seconds=1)
        if last is not None:
            return last
        span *= 2
    return None


def publish_due(config: Config, store: Store, now: datetime) -> bool:
    """A publish fire passed and no digest or publish covers it (by as-of): run it once now.

    A `partial` publish counts: its digest is out, and the outbox retries what failed.
    A publish with nothing new makes no digest; its run's as-of counts instead.
    """
    fire = previous_fire(config, "publish", now)
    if fire is None:
        return False
    runs = [store.last_run("publish", status) for status in ("ok", "partial")]
    covered = [datetime.fromisoformat(run["as_of"]) for run in runs if run]
    covered += [end for end in [store.last_digest_end()] if end is not None]
    covered = [c if c.tzinfo else c.replace(tzinfo=config.zone) for c in covered]
    return not covered or max(covered) < fire


def collect_due(config: Config, store: Store, now: datetime) -> bool:
    """Today's collect fire passed (the scheduler was down, or restarted just after it) and
    no collect has succeeded as of it since: run it once now. An earlier day's is not
    caught up: the next fire reads from the watermark all the same."""
    fire = previous_fire(config, "collect", now)
    if fire is None or fire.date() != now.astimezone(config.zone).date():
        return False
    run = store.last_run("collect", "ok")
    as_of = datetime.fromisoformat(run["as_of"]) if run else None
    return as_of is None or (as_of if as_of.tzinfo else as_of.replace(tzinfo=config.zone)) < fire


def unfinished(store: Store) -> datetime | None:
    """The as-of of the last publish when it was cut off (killed, stopped, failed) after
    its digest was saved: its reading list, site, feed or git may be missing, and only its
    outbox would be finished. Publishing again as of then reuses the digest and finishes it."""
    run = store.last_run("publish")
    if run is None or run["status"] in ("ok", "partial") or not run["as_of"]:
        return None
    as_of = datetime.fromisoformat(run["as_of"])
    return as_of if store.digest(as_of.date().isoformat()) is not None else None


def later(config: Config, seconds: float) -> datetime:
    """So many seconds from now, in schedule.timezone. Added in UTC: on the wall clock, 5
    minutes after the second 01:35 of a night the clock falls back is the first 01:40, an
    hour ago, and a retry planned then ran at once, again and again for up to an hour."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).astimezone(config.zone)


def beat(config: Config, scheduler: BlockingScheduler | None, stopped: bool = False) -> None:
    """Write when the scheduler last woke and its next fires; `status` and healthchecks read it."""
    jobs = scheduler.get_jobs() if scheduler is not None else []
    data = {
        "pid": os.getpid(), "host": socket.gethostname(),
        "wake": datetime.now(UTC).isoformat(timespec="seconds"),
        "interval_seconds": config.schedule.heartbeat_seconds,
        "next": {job.id: job.next_run_time.isoformat(timespec="seconds")  # a stopped scheduler's have none
                 for job in jobs
                 if job.id not in (HEARTBEAT, WATCH) and getattr(job, "next_run_time", None) is not None},
        "running": RUNNING.names(), "stopped": stopped,
    }
    try:
        write_atomic(heartbeat.path(config), json.dumps(data, indent=1) + "\n")
    except DigestError as exc:  # a full or read-only state folder: the scheduler goes on
        log.warning("heartbeat: %s", exc)


class _Running:
    """Names of the jobs running now, for the stop message."""

    def __init__(self) -> None:
        self._names: list[str] = []
        self._lock = threading.Lock()

    def add(self, name: str) -> None:
        with self._lock:
            self._names.append(name)

    def remove(self, name: str) -> None:
        with self._lock:
            self._names.remove(name)

    def names(self) -> list[str]:
        with self._lock:
            return list(self._names)


RUNNING = _Running()


def guarded(config: Config, name: str, work: Callable[[], object],
            due: Callable[[], bool] | None = None,
            on_locked: Callable[[bool], None] | None = None,
            on_failed: Callable[[], None] | None = None) -> Callable[[], None]:
    """A job body: takes the run lock (skips the fire if it is held), asks `due` inside the
    lock whether there is still work (another process may have done it), logs failures
    (then `on_failed`: a publish tries again soon rather than at next week's fire)."""

    def job() -> None:
        if STOP.is_set():
            return
        RUNNING.add(name)
        try:
            with lock.held(config):
                if due is not None and not due():
                    log.info("%s: nothing to do: a publish already succeeded since the last fire", name)
                    return
                work()
        except LockedError as exc:
            ours = _skipped(name, exc)
            if on_locked is not None and not STOP.is_set():
                on_locked(ours)
        except Stopped:
            log.info("%s: stopped between steps; the next fire picks up from here", name)
        except Exception as exc:  # keep the scheduler alive; the traceback with -v
            _failed(config, name, exc)
            if on_failed is not None and not STOP.is_set():
                on_failed()
        finally:
            RUNNING.remove(name)

    return job


def _skipped(name: str, exc: LockedError) -> bool:
    """Say why a fire found the run lock held; True when this scheduler's own job holds it."""
    ours = RUNNING.names()
    ours.remove(name)  # this fire's own; another of its name is a catch-up publish of ours
    if ours:  # not another process: this scheduler's own job (a publish collects too)
        log.info("%s: skipped this fire: this scheduler's %s holds the run lock", name, ours[0])
    else:
        log.warning("%s: skipped this fire: %s", name, exc)
    return bool(ours)


def _failed(config: Config, name: str, exc: Exception) -> None:
    """Say on one line why a job failed: the error's words, a user's template's fault, or a
    bug's type and words."""
    if isinstance(exc, DigestError):
        log.error("%s failed: %s", name, exc)
        return
    own = (templating.template_failure(exc, config.templates.dir)
           if isinstance(exc, jinja2.TemplateError) else None)
    if own is not None:  # a user's template, maybe copied from an older release
        log.error("%s failed: %s", name, own)
    else:
        log.error("%s failed: %s: %s", name, type(exc).__name__, exc,
                  exc_info=log.isEnabledFor(logging.DEBUG))


def build(config: Config, collect_job: Callable[[], object], publish_job: PublishJob,
          store: Store, now: datetime | None = None,
          executor: ThreadPoolExecutor | None = None,
          outbox_job: Callable[[], object] | None = None) -> BlockingScheduler:
    """The scheduler with its jobs, not started: collect, publish, a catch-up if due (else the
    day's missed collect), the
    outbox retry when something waits in the outbox, and a watch for a publish fire that
    went by unseen (a clock change). `publish_job(as_of)`: None is now.

    coalesce: fires missed while the process was suspended run once, not once each;
    misfire_grace_time: a fire late by at most schedule.misfire_grace_seconds still runs;
    a publish fire missed by more is caught up as after a restart (it asks the database).
    """
    defaults = {"coalesce": True, "max_instances": 1,
                "misfire_grace_time": config.schedule.misfire_grace_seconds}
    scheduler = BlockingScheduler(
        timezone=config.schedule.timezone, job_defaults=defaults,
        executors={"default": executor or ThreadPoolExecutor(max_workers=2)},
    )
    jobs = _Jobs(config, store, scheduler, defaults, publish_job, outbox_job)
    collect_body = guarded(config, "collect", collect_job)
    scheduler.add_job(collect_body, trigger(config, "collect"), id="collect", name="collect", **defaults)
    scheduler.add_job(jobs.publish_body, trigger(config, "publish"), id="publish", name="publish",
                      **defaults)
    scheduler.add_listener(jobs.missed, EVENT_JOB_MISSED)
    scheduler.add_job(jobs.watch, "interval", seconds=WATCH_SECONDS, id=WATCH, name=WATCH, **defaults)
    if unfinished(store) is not None:
        log.info("the last publish was cut off after its digest was saved: finishing it now")
        jobs.catch_up()
    elif publish_due(config, store, now or datetime.now(config.zone)):
        log.info("a publish was missed while down: running it now")
        jobs.catch_up()
    else:
        log.info("no publish is due: none was missed since the last successful one")
        if collect_due(config, store, now or datetime.now(config.zone)):  # a publish collects too
            log.info("today's collect was missed while down: running it now")
            scheduler.add_job(collect_body, "date", run_date=later(config, 0), id=CATCH_UP_COLLECT,
                              name="catch-up collect", **{**defaults, "misfire_grace_time": None})
    jobs.plan_outbox()
    return scheduler


class _Jobs:
    """The publish and outbox jobs' bodies, and how each plans what comes after it: a
    catch-up publish (a fire missed or stepped over, a publish cut off, held back by the lock
    or failed) and the outbox's next look."""

    def __init__(self, config: Config, store: Store, scheduler: BlockingScheduler,
                 defaults: dict[str, Any], publish_job: PublishJob,
                 outbox_job: Callable[[], object] | None):
        self.config, self.store, self.scheduler, self.defaults = config, store, scheduler, defaults
        self.publish_job, self.outbox_job = publish_job, outbox_job
        self.failures = 0  # publishes failed in a row: each waits twice as long, up to an hour
        self.outbox_body = guarded(config, "outbox",
                                   self.then_plan(outbox_job or (lambda: None), RETRY_SECONDS),
                                   on_locked=lambda ours: self.plan_outbox(RETRY_SECONDS))
        self.publish_body = guarded(
            config, "publish", self.then_plan(self.publish_work, 0), due=self.is_due,
            on_locked=lambda ours: self.catch_up(OWN_RETRY_SECONDS if ours else RETRY_SECONDS),
            on_failed=self.retry_after_failure)

    def is_due(self) -> bool:
        return (publish_due(self.config, self.store, datetime.now(self.config.zone))
                or unfinished(self.store) is not None)

    def catch_up(self, delay: float = 0) -> None:
        """One publish soon, if still due then; replaces a catch-up already waiting."""
        when = later(self.config, delay)
        self.scheduler.add_job(self.publish_body, "date", run_date=when, id=CATCH_UP, name="catch-up publish",
                               replace_existing=True, **{**self.defaults, "misfire_grace_time": None})
        if delay:
            log.info("publish: trying again at %s", when.isoformat(timespec="seconds"))

    def plan_outbox(self, floor: float = 0) -> None:
        """The outbox job at the earliest waiting row's next attempt (not before `floor` s)."""
        if self.outbox_job is None:
            return
        when = next_look(self.config, self.store)
        if when is None:
            return
        soonest = later(self.config, floor)
        self.scheduler.add_job(self.outbox_body, "date", run_date=max(when, soonest), id=OUTBOX,
                               name="outbox retry", replace_existing=True,
                               **{**self.defaults, "misfire_grace_time": None})

    def then_plan(self, work: Callable[[], object], floor: float) -> Callable[[], None]:
        def body() -> None:
            try:
                work()
            finally:
                self.plan_outbox(floor)
        return body

    def publish_work(self) -> None:
        left = unfinished(self.store)
        if left is not None:
            log.info("publish: the one as of %s was cut off after its digest was saved; finishing it",
                     left.isoformat())
        self.publish_job(left)
        self.failures = 0
        if left is not None and publish_due(self.config, self.store, datetime.now(self.config.zone)):
            self.catch_up()  # then this week's

    def retry_after_failure(self) -> None:
        self.failures += 1
        self.catch_up(min(RETRY_SECONDS * 2 ** (self.failures - 1), FAILED_RETRY_MAX))

    def missed(self, event: Any) -> None:
        if event.job_id == "publish" and not STOP.is_set():
            log.warning("publish: the fire at %s was missed by more than "
                        "schedule.misfire_grace_seconds; catching it up now",
                        event.scheduled_run_time.isoformat())
            self.catch_up()

    def watch(self) -> None:
        """A fire the trigger stepped over (the system clock stepped past it: an NTP
        correction, a machine resumed from sleep) is caught up here, unless a publish runs or
        is planned already. A fire the wall clock springs over the trigger keeps (_Cron)."""
        if self.scheduler.get_job(CATCH_UP) is None and not RUNNING.names() and self.is_due():
            log.warning("publish: a fire went by without a publish (a clock change?); catching it up now")
            self.catch_up()


def _keep_heartbeat(config: Config, scheduler: BlockingScheduler) -> None:
    """A heartbeat now, every schedule.heartbeat_seconds (on its own thread, so it never waits
    behind a run) and after each job (the next fires moved)."""
    scheduler.add_executor(ThreadPoolExecutor(max_workers=1), HEARTBEAT)
    scheduler.add_job(beat, "interval", args=(config, scheduler), id=HEARTBEAT, name=HEARTBEAT,
                      executor=HEARTBEAT, seconds=config.schedule.heartbeat_seconds,
                      next_run_time=datetime.now(config.zone), coalesce=True, max_instances=1)

    def job_done(event: Any) -> None:
        if event.job_id != HEARTBEAT:
            beat(config, scheduler)

    scheduler.add_listener(job_done, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)


def serve(config: Config, collect_job: Callable[[], object], publish_job: PublishJob,
          store: Store, outbox_job: Callable[[], object] | None = None) -> None:
    """Block until SIGTERM or SIGINT; the running step finishes its transaction first."""
    with lock.one_scheduler(config):
        _serve(config, collect_job, publish_job, store, outbox_job)


def _serve(config: Config, collect_job: Callable[[], object], publish_job: PublishJob,
           store: Store, outbox_job: Callable[[], object] | None) -> None:
    now = datetime.now(config.zone)
    executor = ThreadPoolExecutor(max_workers=2)
    scheduler = build(config, collect_job, publish_job, store, now, executor, outbox_job)

    asked: list[str] = []
    asking = threading.Lock()  # two signals' threads: one of them stops the scheduler
    shutting = threading.Lock()  # the signal's thread and the start-up listener: one shutdown

    def stop(signum: int, _frame: Any) -> None:
        """The handler hands all to a thread (from_signal): it interrupts the main thread
        anywhere, even inside the write of a log line, where a log line of its own raised
        "reentrant call" and the scheduler never stopped."""
        name = signal.Signals(signum).name
        from_signal(lambda: asked_to_stop(name))

    def asked_to_stop(name: str) -> None:
        with asking:
            again = bool(asked)
            asked.append(name)
        if again:
            log.info("%s: already stopping; waiting for the current step", name)
            return
        STOP.set()
        busy = RUNNING.names()
        log.info("%s: %s", name, f"finishing the current step of {', '.join(busy)}, then stopping"
                 if busy else "stopping")
        shut_down()

    def shut_down(_event: Any = None) -> None:
        """Once STOP is set: at once, or when the scheduler has started (the listener)."""
        with shutting:
            if STOP.is_set() and scheduler.state != STATE_STOPPED:
                scheduler.shutdown(wait=False)  # returns at once; the job thread is joined below

    scheduler.add_listener(shut_down, EVENT_SCHEDULER_STARTED)
    _keep_heartbeat(config, scheduler)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for which, fire in next_fires(config, now).items():
        log.info("next %s: %s", which, fire.isoformat() if fire else "never")
    if not STOP.is_set():
        scheduler.start()  # blocks until stop() shuts it down
    busy = RUNNING.names()
    if busy:
        log.info("waiting for %s to reach a checkpoint", ", ".join(busy))
    executor.shutdown(wait=True)  # joins the job threads (queued jobs see STOP and return)
    beat(config, None, stopped=True)
    log.info("scheduler stopped")
