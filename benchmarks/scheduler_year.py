"""One `rl-digest schedule` process for a year: whether memory, open files and threads stay flat.

    RL_DIGEST_SHARED=../shared .venv/bin/python benchmarks/scheduler_year.py [--weeks 52] [--readers 3]
        [--pg] [--no-trace] [--keep]

`rl-digest schedule` is one process people leave running for months. year.py starts a process
per command, so it cannot see what one process keeps from firing to firing. This runs the real
command (`rl-digest schedule` through the CLI, in this process: the jobs it hands APScheduler,
the scheduler's loop, executors and heartbeat, its catch-up and outbox retries) for --weeks
weeks up to Monday 2026-11-30 on a simulated clock: `datetime.now` of the pipeline and
APScheduler modules reads a clock this script moves to the next planned job (collect on
Wednesday and Friday at 14:00, publish on Monday at 08:00, Asia/Shanghai; an outbox retry or
a catch-up when one is planned), so the crons fire as they would, without the days between.

The stand-ins run in a child process, so what is measured is the scheduler's process alone:
year.py's arXiv with a clock (the dev corpus submitted evenly over the weeks, announced by
arXiv's calendar), the OpenAI stand-in and aiosmtpd for --readers readers; the HTTP ones keep
connections alive, as arXiv and LLM providers do. Every 6th week SMTP is down from the Monday
publish to 09:00 (the outbox job retries on its own every 15 minutes) and arXiv for that
week's Wednesday collect.

Printed per week, after its publish: resident memory (VmRSS, its anonymous and file parts),
open file descriptors (before and after a garbage collection: what a reference cycle holds
open stays open until the collector runs), threads (threading's and the kernel's count), the
publish and collect seconds, the database size. In week 1, every 13 weeks and at the end:
the object types that grew in number since the last look (gc.get_objects) and tracemalloc's
top growers (--no-trace: none; tracemalloc slows the jobs and holds memory of its own, shown
apart). At the end: each reader got each digest once, no job logged an error outside an
outage, every week was measured; exit 1 if not. --pg runs on a database made on
$RL_DIGEST_TEST_PG_URL's server (and dropped after).
"""

from __future__ import annotations

import argparse
import gc
import logging
import multiprocessing
import os
import re
import shutil
import signal
import sys
import threading
import time
import tracemalloc
from collections import Counter
from datetime import date, timedelta
from datetime import datetime as real_datetime
from datetime import time as clock
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from _common import dev_rows, machine, table, write_config
from apscheduler.events import EVENT_JOB_EXECUTED
from year import LAST_MONDAY, SHANGHAI, SimArxiv, Year, folder_mb

from pipeline.config import load
from tests.servers import arxiv_server, openai_server
from tests.servers.openai_server import OpenAIServer
from tests.servers.smtp_server import SmtpServer

OUTAGE_EVERY = 6  # weeks: SMTP down that Monday morning, arXiv for that week's Wednesday collect
SMTP_BACK = clock(9)  # the outage's Monday, local time: the outbox retries until then
LOOKS = 13  # weeks between two looks at the objects and tracemalloc


# --- the simulated clock ----------------------------------------------------------------------

class Clock:
    moment = real_datetime(2000, 1, 1)  # set before the scheduler starts; read by datetime.now


class _Meta(type):
    """A plain datetime is an instance of SimDatetime, so isinstance checks keep working."""

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, real_datetime)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, real_datetime)


class SimDatetime(real_datetime, metaclass=_Meta):
    """datetime whose now() is Clock.moment; what it makes is a plain datetime."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return real_datetime(*args, **kwargs)

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        moment = Clock.moment.astimezone(tz)
        return moment if tz is not None else moment.replace(tzinfo=None)

    @classmethod
    def fromisoformat(cls, text: str) -> Any:
        return real_datetime.fromisoformat(text)

    @classmethod
    def combine(cls, *args: Any, **kwargs: Any) -> Any:
        return real_datetime.combine(*args, **kwargs)

    @classmethod
    def fromtimestamp(cls, *args: Any, **kwargs: Any) -> Any:
        return real_datetime.fromtimestamp(*args, **kwargs)

    @classmethod
    def strptime(cls, *args: Any, **kwargs: Any) -> Any:
        return real_datetime.strptime(*args, **kwargs)


def patch_clocks() -> int:
    """Every loaded pipeline and APScheduler module's `datetime` becomes SimDatetime."""
    patched = 0
    for name, module in list(sys.modules.items()):
        ours = name.split(".")[0] in ("pipeline", "apscheduler")
        if ours and vars(module).get("datetime") is real_datetime:
            module.datetime = SimDatetime  # type: ignore[attr-defined]
            patched += 1
    return patched


def outage(mondays: list[date], moment: real_datetime) -> tuple[bool, bool]:
    """(arXiv down, SMTP down) at this moment."""
    local = moment.astimezone(SHANGHAI)
    week = (local.date() - mondays[0]).days // 7
    if week <= 0 or week % OUTAGE_EVERY:
        return False, False
    return local.weekday() == 2, local.weekday() == 0 and local.time() < SMTP_BACK


# --- the stand-ins, in a child process ----------------------------------------------------------

def stand_ins(conn: Any, items: list, cal: Any, categories: list[str], log: Path) -> None:
    """arXiv with a clock, the OpenAI stand-in and aiosmtpd, told what to do over `conn`.
    Both HTTP stand-ins keep connections open between requests, as arXiv and LLM providers
    do (the tests' HTTP/1.0 closes each): a client dropped unclosed holds its sockets."""
    for handler in (arxiv_server._Handler, openai_server._Handler):
        handler.protocol_version, handler.disable_nagle_algorithm = "HTTP/1.1", True
    sys.stderr = log.open("a", encoding="utf-8")  # a client that goes makes the servers say so
    with SimArxiv(items, cal) as arxiv, OpenAIServer() as llm, SmtpServer() as smtp:
        conn.send({"api": arxiv.api_url, "rss": arxiv.rss_url(categories), "oai": arxiv.oai_url,
                   "llm": llm.url, "smtp": smtp.port})
        smtp_up = True
        while True:
            what, arg = conn.recv()
            if what == "clock":
                arxiv.set_clock(arg)
            elif what == "arxiv_down":
                arxiv.down = arg
            elif what == "smtp_up" and arg != smtp_up:
                smtp.start() if arg else smtp.stop()
                smtp_up = arg
            elif what == "mail":
                conn.send([(list(m.rcpt_tos), str(m.message["Message-ID"])) for m in smtp.messages])
                continue
            conn.send("ok")
            if what == "end":
                return


class Remote:
    def __init__(self, conn: Any):
        self.conn = conn

    def ask(self, what: str, arg: Any = None) -> Any:
        self.conn.send((what, arg))
        return self.conn.recv()


# --- what the process holds ---------------------------------------------------------------------

def held() -> dict[str, Any]:
    status = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        status[key] = value.split()[0] if value.split() else ""
    kinds: Counter[str] = Counter()  # the descriptors by what they are: socket, pipe, a file's folder
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own, closed by now
            continue
        kinds[target.split(":")[0] if ":" in target else str(Path(target).parent.name)] += 1
    return {"rss_mb": int(status["VmRSS"]) / 1024, "anon_mb": int(status["RssAnon"]) / 1024,
            "file_mb": int(status["RssFile"]) / 1024, "fds": sum(kinds.values()), "fd_kinds": dict(kinds),
            "threads": threading.active_count(), "os_threads": int(status["Threads"])}


def short(filename: str) -> str:
    return re.sub(r".*/(site-packages|lib/python3\.\d+)/", "", filename).replace(str(Path.cwd()) + "/", "")


class Looks:
    """Object counts by type and tracemalloc snapshots, each compared with the last look."""

    def __init__(self, trace: bool):
        self.trace = trace
        self.snapshot: tracemalloc.Snapshot | None = None
        self.first: tracemalloc.Snapshot | None = None
        self.types: Counter[str] | None = None

    def look(self, label: str) -> None:
        gc.collect()
        types = Counter(type(o).__qualname__ for o in gc.get_objects())
        if self.types is not None:
            grown = sorted(((name, self.types[name], count, count - self.types[name])
                            for name, count in types.items() if count > self.types[name]),
                           key=lambda r: -r[3])
            print(f"\n{label}: object types grown in number since the last look (gc.get_objects)\n")
            print(table(["type", "before", "now", "grown"], [list(r) for r in grown[:10]] or [["-"] * 4]))
        self.types = types
        if not self.trace:
            return
        snapshot = tracemalloc.take_snapshot().filter_traces([
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "<frozen importlib.*")])
        if self.snapshot is not None:
            self.growers(f"{label}: tracemalloc's top growers since the last look", snapshot, self.snapshot)
        self.first = self.first or snapshot
        self.snapshot = snapshot

    def growers(self, title: str, now: tracemalloc.Snapshot, then: tracemalloc.Snapshot) -> None:
        rows = [[f"{short(s.traceback[0].filename)}:{s.traceback[0].lineno}", f"{s.size_diff / 1024:+,.0f}",
                 f"{s.count_diff:+,}", f"{s.size / 1024:,.0f}"]
                for s in now.compare_to(then, "lineno")[:10] if s.size_diff > 0]
        print(f"\n{title}\n")
        print(table(["line", "KiB grown", "blocks grown", "KiB now"], rows or [["-"] * 4]))


# --- the driver ---------------------------------------------------------------------------------

class Driver:
    """Moves the clock to each planned job in turn, waits for the jobs, measures each week."""

    def __init__(self, remote: Remote, mondays: list[date], folder: Path, url: str, looks: Looks):
        self.remote, self.mondays, self.folder, self.url, self.looks = remote, mondays, folder, url, looks
        self.end = real_datetime.combine(mondays[-1], clock(12), SHANGHAI)
        self.scheduler: Any = None
        self.weeks: list[dict[str, Any]] = []
        self.seconds: dict[str, list[float]] = {"collect": [], "publish": [], "outbox": []}
        self.fired: Counter[str] = Counter()
        self.problems: list[str] = []
        self.thread = threading.Thread(target=self.drive, name="benchmark-driver", daemon=True)

    def timed(self, name: str, work: Any) -> Any:
        def job(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return work(*args)
            finally:
                self.seconds[name].append(time.perf_counter() - started)
        return job

    def build(self, original: Any) -> Any:
        """pipeline.schedule.build, wrapped: the CLI's jobs timed, the scheduler kept, the driver started."""
        def build(config: Any, collect_job: Any, publish_job: Any, store: Any, now: Any = None,
                  executor: Any = None, outbox_job: Any = None) -> Any:
            scheduler = original(config, self.timed("collect", collect_job),
                                 self.timed("publish", publish_job), store, now, executor,
                                 self.timed("outbox", outbox_job))
            scheduler.add_listener(lambda event: self.fired.update([event.job_id]), EVENT_JOB_EXECUTED)
            self.scheduler = scheduler
            self.thread.start()
            return scheduler
        return build

    def settle(self, timeout: float = 900) -> None:
        """Until no job runs and none is due at the clock's moment, three looks in a row."""
        deadline, quiet = time.monotonic() + timeout, 0
        while quiet < 3:
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs still running or due at {Clock.moment}")
            busy = any(sum(executor._instances.values()) for executor in self.scheduler._executors.values())
            due = any(job.next_run_time is not None and job.next_run_time <= Clock.moment
                      for job in self.scheduler.get_jobs())
            quiet = 0 if busy or due or not self.scheduler.running else quiet + 1
            time.sleep(0.05)

    def drive(self) -> None:
        try:
            while self.scheduler is None or not self.scheduler.running:
                time.sleep(0.05)
            self.settle()  # the first publish: a fresh database missed the last fire
            self.measure()
            while True:
                moment = min(job.next_run_time for job in self.scheduler.get_jobs()
                             if job.id not in ("heartbeat", "watch") and job.next_run_time is not None)
                if moment > self.end:
                    return
                self.step(moment)
        except BaseException as exc:  # the checks say so
            self.problems.append(f"driver: {type(exc).__name__}: {exc}")
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # the scheduler stops as systemd stops it

    def step(self, moment: real_datetime) -> None:
        arxiv_down, smtp_down = outage(self.mondays, moment)
        self.remote.ask("arxiv_down", arxiv_down)
        self.remote.ask("smtp_up", not smtp_down)
        self.remote.ask("clock", moment)
        Clock.moment = moment
        published = len(self.seconds["publish"])
        self.scheduler.wakeup()
        self.settle()
        if len(self.seconds["publish"]) > published:
            self.measure()

    def database_mb(self) -> float:
        """The SQLite file (with its WAL), or the PostgreSQL database's size."""
        if self.url.startswith("sqlite"):
            return folder_mb(self.folder / "state")
        engine = sa.create_engine(self.url, poolclass=sa.NullPool)
        try:
            with engine.connect() as conn:
                return conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() / 2**20
        finally:
            engine.dispose()

    def measure(self) -> None:
        now = held()  # before a collection
        gc.collect()
        now["fds_after_gc"] = held()["fds"]
        week = len(self.weeks) + 1
        traced, own = ((tracemalloc.get_traced_memory()[0] / 2**20,
                        tracemalloc.get_tracemalloc_memory() / 2**20) if self.looks.trace else (0.0, 0.0))
        row = {**now, "week": week, "as_of": f"{Clock.moment.astimezone(SHANGHAI):%Y-%m-%d}",
               "traced_mb": traced, "publish_s": self.seconds["publish"][-1],
               "collects_s": self.seconds["collect"][-2:] if week > 1 else [],
               "db_mb": self.database_mb()}
        self.weeks.append(row)
        print(f"week {week:>3} {row['as_of']}: RSS {now['rss_mb']:.1f} MB (anon {now['anon_mb']:.1f}, "
              f"file {now['file_mb']:.1f}), fds {now['fds']} ({now['fds_after_gc']} after gc: "
              f"{', '.join(f'{k} {v}' for k, v in sorted(now['fd_kinds'].items()))}), "
              f"threads {now['threads']} ({now['os_threads']} in the kernel), "
              f"publish {row['publish_s']:.1f} s, collects "
              f"{' + '.join(f'{c:.1f}' for c in row['collects_s']) or '-'} s, "
              + (f"traced {traced:.1f} MB (tracemalloc's own {own:.1f} MB), " if self.looks.trace else "")
              + f"database {row['db_mb']:.1f} MB", flush=True)
        if week == 1 or week % LOOKS == 0 or week == len(self.mondays):
            self.looks.look(f"week {week}")
            sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=52)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--pg", action="store_true",
                        help="PostgreSQL: a database made on $RL_DIGEST_TEST_PG_URL's server, dropped after")
    parser.add_argument("--no-trace", action="store_true", help="no tracemalloc (object counts only)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print its path")
    args = parser.parse_args()
    if args.weeks < 1:
        parser.error("--weeks: at least 1")
    rows = dev_rows()
    year = Year.of(rows, args.weeks, args.readers, "rl-digest-scheduler-year-")
    mondays, first_run, folder, files, cal, items, readers = (
        year.mondays, year.first_run, year.folder, year.files, year.cal, year.items, year.readers)
    defaults = load(None).sources.arxiv

    from pipeline import cli
    from pipeline import schedule as schedule_mod

    ours, theirs = multiprocessing.Pipe()  # the stand-ins fork off before this process has a thread
    child = multiprocessing.get_context("fork").Process(
        target=stand_ins, args=(theirs, items, cal, defaults.categories, folder / "stand-ins.log"),
        daemon=True)
    child.start()
    remote = Remote(ours)
    urls = ours.recv()
    postgres, url = None, "sqlite:///state/digest.sqlite3"
    if args.pg:
        from tests.backends import URL_ENV, Postgres
        if not os.environ.get(URL_ENV):
            sys.exit(f"--pg: set {URL_ENV} to a PostgreSQL server's URL (a role that may create databases)")
        postgres = Postgres(os.environ[URL_ENV])
        url = postgres.create_database()
    config = write_config(folder, {
        "sources": {"arxiv": {"api_url": urls["api"], "calendar_files": [str(f) for f in files]},
                    "rss": {"enabled": True, "urls": [urls["rss"]], "poll_minutes": 0},
                    "oai": {"enabled": True, "url": urls["oai"]}},
        "enrich": {"provider": "openai", "base_url": urls["llm"], "timeout_seconds": 10,
                   "deadline_seconds": 30},
        "email": {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": urls["smtp"], "security": "none",
                  "timeout_seconds": 10, "recipients_file": "readers.txt"},
        "schedule": {"collect_cron": "0 14 * * wed,fri", "publish_cron": "0 8 * * mon"},
        "storage": {"url": url},
    })
    os.environ["OPENAI_API_KEY"] = "benchmark"
    os.chdir(folder)
    print(machine())
    print(f"one `rl-digest schedule` process, {args.weeks} weeks to {LAST_MONDAY}, {len(rows)} dev rows, "
          f"{args.readers} readers, {'PostgreSQL' if args.pg else 'SQLite'}; SMTP down every "
          f"{OUTAGE_EVERY}th Monday until {SMTP_BACK:%H:%M}, arXiv for that week's Wednesday collect; "
          f"tracemalloc {'off' if args.no_trace else 'on'}", flush=True)

    looks = Looks(trace=not args.no_trace)
    driver = Driver(remote, mondays, folder, url, looks)
    schedule_mod.build = driver.build(schedule_mod.build)  # type: ignore[method-assign]
    errors: list[tuple[real_datetime, str]] = []

    class Errors(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.ERROR:
                errors.append((Clock.moment, record.getMessage()[:200]))

    logging.getLogger("pipeline").addHandler(Errors())
    patched = patch_clocks()
    if looks.trace:
        tracemalloc.start()
    Clock.moment = first_run + timedelta(minutes=1)  # started after a publish fire: it is caught up
    remote.ask("clock", Clock.moment)
    began = time.perf_counter()
    real_stderr, sys.stderr = sys.stderr, (folder / "scheduler.log").open("w", encoding="utf-8")  # its log
    try:
        cli.main.main(["--config", str(config), "schedule"], standalone_mode=False)
    finally:
        sys.stderr.close()
        sys.stderr = real_stderr
    driver.thread.join(timeout=60)
    total = time.perf_counter() - began
    after = held()
    weeks = driver.weeks
    if looks.trace and looks.first is not None and looks.snapshot is not None:
        looks.growers(f"week {len(weeks)}: tracemalloc's top growers since week 1",
                      looks.snapshot, looks.first)

    shown = [[w["week"], w["as_of"], f"{w['rss_mb']:.1f}", f"{w['anon_mb']:.1f}",
              *([f"{w['traced_mb']:.1f}"] if looks.trace else []), f"{w['fds']} / {w['fds_after_gc']}",
              f"{w['threads']} / {w['os_threads']}", f"{w['publish_s']:.1f}",
              " + ".join(f"{c:.1f}" for c in w["collects_s"]) or "-", f"{w['db_mb']:.1f}"]
             for w in weeks if w["week"] in (1, 2) or w["week"] % LOOKS == 0 or w is weeks[-1]]
    print(f"\n## One scheduler process, {len(weeks)} weeks, {'PostgreSQL' if args.pg else 'SQLite'}\n")
    print(table(["week", "Monday", "RSS MB", "anon MB", *(["traced MB"] if looks.trace else []),
                 "fds (before / after gc)", "threads (Python / kernel)", "publish s", "collects s",
                 "database MB"], shown))
    fired = ", ".join(f"{k} {v}" for k, v in sorted(driver.fired.items()))
    print(f"\n{total:.0f} s in all; jobs run: {fired}; {patched} modules on the simulated clock; "
          f"after the scheduler stopped: RSS {after['rss_mb']:.1f} MB, fds {after['fds']}, "
          f"threads {after['threads']}")

    mail = remote.ask("mail")
    remote.ask("end")
    child.join(timeout=30)
    digests = sorted(p.stem for p in (folder / "out" / "digests").glob("*.md"))
    got: Counter[tuple[str, str]] = Counter()
    for rcpts, message_id in mail:  # the Message-ID ends with the digest id
        found = re.search(r"\.(\d{4}-\d{2}-\d{2})@", message_id)
        got.update((r, found[1] if found else "?") for r in rcpts)
    wrong = [f"{r} {d} x{got[(r, d)]}" for d in digests for r in readers if got[(r, d)] != 1]
    outside = [f"{moment.astimezone(SHANGHAI):%Y-%m-%d %H:%M} {text}" for moment, text in errors
               if not any(outage(mondays, moment))]
    checks = [
        ["every week measured", "FAIL" if driver.problems or len(weeks) != args.weeks else "ok",
         "; ".join(driver.problems) or f"{len(weeks)} weeks"],
        ["each reader got each digest once", "FAIL" if wrong else "ok",
         f"{len(mail)} messages, {len(digests)} digests x {len(readers)} readers"
         + (f"; {wrong[:5]}" if wrong else "")],
        ["no error logged outside an outage", "FAIL" if outside else "ok",
         f"{len(errors)} logged, {len(outside)} outside" + (f"; {outside[:3]}" if outside else "")],
    ]
    print()
    print(table(["check", "result", "detail"], checks))
    if postgres is not None:
        postgres.drop_database(url)
        postgres.stop()
    if args.keep:
        print(f"\nkept: {folder} (scheduler.log: the scheduler's log)")
    else:
        shutil.rmtree(folder)
    if any(result != "ok" for _, result, _ in checks):
        sys.exit(1)


if __name__ == "__main__":
    main()
