"""Reliability: the real CLI under crashes (kill -9), a full or read-only disk, a locked or
damaged database, a week of daily operation with outages; and property tests for title
matching and for the escaping of outside text.

Each failure must give one clear line on stderr (no traceback) and a non-zero exit, and
leave nothing half-written: the previous files intact, no temporary files, a database
that passes PRAGMA integrity_check, and no paper lost once the cause is gone.

The week of operation and the crash matrix run on SQLite and on PostgreSQL (`db_url`);
the disk, locked-file and damaged-file cases are about the SQLite file.

The crash matrix, the locked database (it waits out SQLite's 30 s busy timeout) and the
full disk under RLIMIT_FSIZE are `@pytest.mark.slow` (`make test-slow`); the rest runs in
`make test`.
"""

from __future__ import annotations

import html
import os
import pwd
import random
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline import escape, months, reading_list, render, templating
from pipeline.collect import closest, normal_title
from pipeline.config import load
from pipeline.escape import md_escape, one_line
from pipeline.models import Paper, Scored
from pipeline.sources.seeds import load_seeds
from pipeline.store import Store
from tests import backends, helpers
from tests import fixtures_digest as fx
from tests.helpers import ROOT, cli_command, cli_env, ids_in, rl_paper
from tests.processes import (
    READERS,
    WatchedSmtp,
    config_with,
    copies,
    db_rows,
    kill9,
    start_cli,
    stderr_lines,
    try_kill9,
    wait_for,
)
from tests.servers.arxiv_server import ArxivServer, hang, http_error
from tests.servers.openai_server import OpenAIServer, stall
from tests.servers.smtp_server import SmtpServer, refused_port

DAY = datetime(2026, 10, 29, 12, tzinfo=UTC)
AS_OF = "2026-11-02"
NEXT = "2026-11-09"
KEY = "sk-test-reliability"
SEED = 20261130  # the crash points below are drawn from this seed, so a failure reproduces


# --- helpers --------------------------------------------------------------------------------

def integrity(tmp_path: Path) -> str:
    conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def leftovers(folder: Path) -> list[str]:
    """Temporary files of write_atomic (".NAME.XXXX.tmp") left behind."""
    return [str(p) for p in folder.rglob("*.tmp")]


def one_clear_line(result: subprocess.CompletedProcess, *words: str) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = stderr_lines(result)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rl-digest: "), lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def off_topic(n: int, day: datetime) -> Paper:
    """A paper the arXiv query finds (it says reinforcement learning) that is not relevant."""
    return Paper(id=f"2611.{9000 + n:05d}", version=1,
                 title=f"Reinforcement learning for quadruped robot locomotion on terrain {n}",
                 abstract="We train a quadruped robot controller with reinforcement learning in "
                          "simulation and transfer it to hardware.",
                 authors=("Rob Otter",), categories=("cs.LG",), submitted=day, updated=day)


def run_limited(args: list[str], max_file_bytes: int) -> subprocess.CompletedProcess:
    """The CLI with RLIMIT_FSIZE: every write past max_file_bytes fails (EFBIG), as on a full disk."""
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an error, not a killing signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
    return subprocess.run([*cli_command(), *args], cwd="/", env=cli_env(), capture_output=True,
                          text=True, timeout=120, preexec_fn=limit, check=False)


def _run_root(*command: str) -> bool:
    if os.geteuid() != 0 or shutil.which(command[0]) is None:
        return False
    return subprocess.run(command, capture_output=True, check=False).returncode == 0


@contextmanager
def tiny_disk(folder: Path, kilobytes: int):
    """A small tmpfs mounted on `folder` (root only; skipped where mount is not allowed)."""
    folder.mkdir(parents=True, exist_ok=True)
    if not _run_root("mount", "-t", "tmpfs", "-o", f"size={kilobytes}k", "tmpfs", str(folder)):
        pytest.skip("cannot mount a tmpfs here (needs root and mount)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


@contextmanager
def read_only(folder: Path):
    """Make `folder` read-only even for root: a read-only bind mount, else chattr +i."""
    if _run_root("mount", "--bind", str(folder), str(folder)):
        if _run_root("mount", "-o", "remount,bind,ro", str(folder)):
            try:
                yield "mount"
            finally:
                subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)
            return
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)
    folders = [folder, *[p for p in folder.rglob("*") if p.is_dir()]]
    if os.geteuid() == 0 and all(_run_root("chattr", "+i", str(f)) for f in folders):
        try:
            yield "chattr"
        finally:
            for f in folders:
                subprocess.run(["chattr", "-i", str(f)], capture_output=True, check=False)
        return
    if os.geteuid() != 0:
        os.chmod(folder, 0o555)
        try:
            yield "chmod"
        finally:
            os.chmod(folder, 0o755)
        return
    pytest.skip("root ignores chmod, and neither a read-only mount nor chattr +i works here")


# --- a full or read-only disk, a damaged database --------------------------------------------

def test_a_full_output_disk_is_one_line_and_keeps_the_previous_files(tmp_path, cli):
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv)
        with tiny_disk(tmp_path / "out", 256):
            cli("--config", str(config), "run", "--as-of", AS_OF)
            before = snapshot(tmp_path / "out")
            filler = tmp_path / "out" / "filler"
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
            try:  # fill the disk to the last byte
                while os.write(fd, b"\0" * 512):
                    pass
            except OSError:
                pass
            finally:
                os.close(fd)
            arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
            full = cli("--config", str(config), "run", "--as-of", NEXT, check=None)
            after = snapshot(tmp_path / "out")
            after.pop("filler")
            tmp_files = leftovers(tmp_path / "out")
            filler.unlink()
            again = cli("--config", str(config), "run", "--as-of", NEXT)
            reading = (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")
    one_clear_line(full, "No space left on device", str(tmp_path / "out"))
    assert {k: v for k, v in after.items() if k in before} == before
    assert tmp_files == []
    assert [r["id"] for r in db_rows(tmp_path, "SELECT id FROM digests")] == [AS_OF, NEXT]
    assert "relevant 1" in again.stdout and sorted(ids_in(reading)) == ["2611.00001", "2611.00002"]
    assert integrity(tmp_path) == "ok"


@pytest.mark.slow
def test_a_full_disk_for_the_database_too_is_one_line_and_loses_nothing(tmp_path, cli):
    """RLIMIT_FSIZE in the child: any write past 16 KB fails, the database's first."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", AS_OF)
        before = snapshot(tmp_path / "out")
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        full = run_limited(["--config", str(config), "run", "--as-of", NEXT], 16 * 1024)
        after = snapshot(tmp_path / "out")
        again = cli("--config", str(config), "run", "--as-of", NEXT)
    one_clear_line(full)
    assert after == before and leftovers(tmp_path / "out") == []
    assert integrity(tmp_path) == "ok"
    digest = (tmp_path / "out" / "digests" / f"{NEXT}.md").read_text(encoding="utf-8")
    assert "relevant 1" in again.stdout and ids_in(digest) == ["2611.00002"]


def test_a_read_only_output_folder_is_one_line_and_keeps_the_previous_files(tmp_path, cli):
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", AS_OF)
        before = snapshot(tmp_path / "out")
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        asked = len(arxiv.requests)
        with read_only(tmp_path / "out") as how:
            refused = cli("--config", str(config), "run", "--as-of", NEXT, check=None)
        read = len(arxiv.requests) - asked
        after = snapshot(tmp_path / "out")
        again = cli("--config", str(config), "run", "--as-of", NEXT)
    words = {"mount": "Read-only file system", "chattr": "Operation not permitted",
             "chmod": "Permission denied"}[how]
    # found at start, exit 2 naming the key (it was exit 1, the code of a digest made and a
    # delivery failed, after the whole week's work, naming only a file in it)
    one_clear_line(refused, f"outputs.dir: {tmp_path / 'out'}: cannot write: {words}")
    assert refused.returncode == 2 and read == 0
    assert after == before and leftovers(tmp_path / "out") == []
    assert integrity(tmp_path) == "ok"
    assert "relevant 1" in again.stdout
    assert (tmp_path / "out" / "digests" / f"{NEXT}.md").exists()


def test_a_file_where_the_output_folder_should_be_is_exit_2_at_start(tmp_path, cli):
    """`out` a file (a copy gone wrong, a mount not there): every run read arXiv, ranked and
    summarised, then ended with exit 1 and 'out/digests/2026-11-02.md: cannot write: Not a
    directory'; doctor said all was well."""
    (tmp_path / "out").write_text("", encoding="utf-8")
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv)
        refused = cli("--config", str(config), "run", "--as-of", AS_OF, check=2)
        read = len(arxiv.requests)
        checked = cli("--config", str(config), "config", "check", check=2)
        doctor = cli("--config", str(config), "doctor", check=1).stdout
    says = f"outputs.dir: {tmp_path / 'out'}: is a file, not a folder; set outputs.dir to a folder this user can write"
    assert one_clear_line(refused) == f"rl-digest: {says}" and read == 0
    assert db_rows(tmp_path, "SELECT id FROM digests") == []
    assert one_clear_line(checked) == f"rl-digest: {config}: {says}"
    line = next(line for line in doctor.splitlines() if line.startswith("config"))
    assert line.split()[1] == "FAIL" and says in line, line


def test_a_file_in_the_output_folder_that_cannot_be_replaced_is_one_line(tmp_path, cli):
    """out/ is writable, its site/ folder is not (found only when a run writes there): one
    line naming the file, no traceback."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", AS_OF)
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        with read_only(tmp_path / "out" / "site") as how:
            refused = cli("--config", str(config), "run", "--as-of", NEXT, check=None)
    words = {"mount": "Read-only file system", "chattr": "Operation not permitted",
             "chmod": "Permission denied"}[how]
    line = one_clear_line(refused, words)
    assert re.fullmatch(rf"rl-digest: {re.escape(str(tmp_path / 'out' / 'site'))}/\S+: cannot write: {words}", line)


def test_a_read_only_state_folder_is_one_line(tmp_path, cli):
    """The commands that hold no lock (status, mark, export, readers) said only 'unable to
    open database file' of a database that was there: SQLite could not make its WAL files
    beside it. The line now says what stops it, in the system's words."""
    config = config_with(tmp_path)
    (tmp_path / "state").mkdir()
    with read_only(tmp_path / "state"):
        result = cli("--config", str(config), "run", "--offline", "--as-of", AS_OF, check=None)
    one_clear_line(result, str(tmp_path / "state"))
    cli("--config", str(config), "status")  # makes the database
    db = tmp_path / "state" / "digest.sqlite3"
    with read_only(tmp_path / "state") as how:
        status = cli("--config", str(config), "status", check=None)
    words = {"mount": "(it is on a read-only file system)",
             "chattr": f"(no file can be made in {db.parent}: Operation not permitted)",
             "chmod": f"(no file can be made in {db.parent}: Permission denied)"}[how]
    assert one_clear_line(status, str(db)).endswith(words)


def run_without_root_powers(args: list[str]) -> subprocess.CompletedProcess:
    """The CLI as root without the capabilities that pass over file permissions: files that
    belong to another user are refused to it as to any user (root only; skipped elsewhere)."""
    command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    if not _run_root(*command, "true"):
        pytest.skip("needs root and setpriv")
    return subprocess.run([*command, *cli_command(), *args], cwd="/", env=cli_env(),
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
def test_state_and_out_that_belong_to_another_user_are_one_line_naming_the_owner(tmp_path, cli):
    """A first run under sudo made state/ and out/, then cron ran as the user: the lock's
    line said 'set lock.dir to a folder this user can write' (moving the lock frees nothing),
    status said 'cannot create the database' of one that was there, and a database file of
    another user's was 'unable to open database file', exit 1."""
    config = config_with(tmp_path, sources={"arxiv": {"enabled": False}, "rss": {"enabled": False}})
    state, other = tmp_path / "state", pwd.getpwuid(65534).pw_name  # doctor below reaches nothing outside
    cli("--config", str(config), "run", "--offline", "--as-of", AS_OF)
    db, lock = state / "digest.sqlite3", state / "digest.sqlite3.lock"
    for path in [state, *state.iterdir(), tmp_path / "out", tmp_path / "out" / "site"]:
        os.chown(path, 65534, 65534)
    owned = f"belongs to {other}, and this runs as root: chown it to root, or run as {other}"
    state.chmod(0o700)
    closed = [run_without_root_powers(["--config", str(config), *command]) for command in
              (["status"], ["run", "--offline", "--as-of", AS_OF])]
    doctor = run_without_root_powers(["--config", str(config), "doctor"]).stdout
    state.chmod(0o755)
    lock.chmod(0o666)  # the database alone another user's
    database = run_without_root_powers(["--config", str(config), "status"])
    db.chmod(0o666)
    lock.chmod(0o600)  # the lock alone
    locked = run_without_root_powers(["--config", str(config), "run", "--offline", "--as-of", AS_OF])
    for path in [state, *state.iterdir()]:
        os.chown(path, 0, 0)  # out/ alone
    out = run_without_root_powers(["--config", str(config), "run", "--offline", "--as-of", AS_OF])
    assert one_clear_line(closed[0]) == (f"rl-digest: {db}: cannot open or create the database: "
                                         f"Permission denied ({state} {owned})")
    assert one_clear_line(closed[1]) == (f"rl-digest: {lock}: cannot take the run lock: "
                                         f"Permission denied ({state} {owned})")
    assert one_clear_line(database) == f"rl-digest: {db}: cannot open the database: Permission denied (it {owned})"
    assert one_clear_line(locked) == f"rl-digest: {lock}: cannot take the run lock: Permission denied (it {owned})"
    assert one_clear_line(out) == (f"rl-digest: outputs.dir: {tmp_path / 'out'}: cannot write: "
                                   f"Permission denied; {tmp_path / 'out'} {owned}")
    assert {r.returncode for r in [*closed, database, locked, out]} == {2}
    assert re.search(rf"^locks +FAIL +{re.escape(str(state))}: not writable, .*; {re.escape(f'{state} {owned}')}$",
                     doctor, re.M), doctor
    os.chown(tmp_path / "out", 0, 0)  # out/ given back, its site/ not
    site = tmp_path / "out" / "site"
    (site / "index.html").unlink()  # to be written again
    inside = run_without_root_powers(["--config", str(config), "run", "--offline", "--as-of", AS_OF])
    assert re.fullmatch(rf"rl-digest: {re.escape(str(site))}/[\w.-]+: cannot write: Permission denied "
                        rf"\({re.escape(f'{site} {owned}')}\)", one_clear_line(inside))


def test_a_damaged_database_is_one_line_naming_it(tmp_path, cli):
    db = tmp_path / "state" / "digest.sqlite3"
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", AS_OF)
        before = snapshot(tmp_path / "out")
        good = db.read_bytes()
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        for extra in db.parent.glob("digest.sqlite3-*"):
            extra.unlink()
        db.write_bytes(good[:8192] + b"\xde\xad\xbe\xef" * 3072 + good[20480:])  # pages 3-5
        pages = cli("--config", str(config), "run", "--as-of", NEXT, check=None)
        db.write_bytes(b"this is not an SQLite file, " * 8 + good[224:])  # the header
        header = cli("--config", str(config), "status", check=None)
    one_clear_line(pages, str(db), "not a usable database", "malformed")
    one_clear_line(header, str(db), "not a usable database")
    assert snapshot(tmp_path / "out") == before and leftovers(tmp_path / "out") == []


HOLD_EXCLUSIVE = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
time.sleep(120)
"""


@pytest.mark.slow  # waits out the busy timeout
def test_a_database_locked_by_another_process_fails_after_the_busy_timeout(tmp_path, cli):
    """Another program holds BEGIN EXCLUSIVE: reads go on (WAL), the first write waits
    storage.busy_timeout_seconds and the run exits 75 with one line."""
    db = tmp_path / "state" / "digest.sqlite3"
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, storage={"busy_timeout_seconds": 2})
        cli("--config", str(config), "run", "--as-of", AS_OF)
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_EXCLUSIVE, str(db)], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            status = cli("--config", str(config), "status")
            began = time.monotonic()
            locked = cli("--config", str(config), "run", "--as-of", NEXT, check=None, timeout=90)
            waited = time.monotonic() - began
        finally:
            holder.kill()
            holder.wait()
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        again = cli("--config", str(config), "run", "--as-of", NEXT)
    assert "digests 1" in status.stdout
    one_clear_line(locked, str(db), "locked", "waited 2 s")
    assert locked.returncode == 75
    assert 1.5 < waited < 20
    assert "relevant 1" in again.stdout and integrity(tmp_path) == "ok"


# --- a week of operation --------------------------------------------------------------------

@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
def test_a_week_of_daily_collects_with_outages_publishes_each_paper_once(tmp_path, cli, db_url):
    """Seven daily collects (one day arXiv is down: exit 3), then the Monday publish while
    the mail server is down (exit 1), then `send`. The digest holds exactly the week's
    relevant papers, each once; each reader gets it once."""
    days = [datetime(2026, 10, 26, 12, tzinfo=UTC) + timedelta(days=n) for n in range(7)]
    week = {day.date(): [rl_paper(10 * n + 1, day), rl_paper(10 * n + 2, day)]
            for n, day in enumerate(days)}
    noise = {days[1].date(): [off_topic(1, days[1])], days[4].date(): [off_topic(2, days[4])]}
    revised = replace(rl_paper(1, days[0], version=2), updated=days[4], announce_type="replace")
    relevant = sorted(p.id for papers in week.values() for p in papers)
    port = refused_port()
    with ArxivServer() as arxiv:
        config = config_with(tmp_path, arxiv, port, email_timeout=5, storage={"url": db_url},
                             sources={"arxiv": {"api_url": arxiv.api_url, "categories": ["cs.LG", "cs.CL"],
                                                "page_size": 50, "overlap_hours": 48, "retries": 0,
                                                "lookback_days": 1}})
        collects = []
        for n, day in enumerate(days):
            arxiv.papers = [p for d, papers in week.items() if d <= day.date() for p in papers]
            arxiv.papers += [p for d, papers in noise.items() if d <= day.date() for p in papers]
            if n >= 4:
                arxiv.papers = [revised if p.id == revised.id else p for p in arxiv.papers]
            if n == 2:
                arxiv.script("/api/query", http_error(503))
            collects.append(cli("--config", str(config), "collect", "--as-of", day.date().isoformat(),
                                check=3 if n == 2 else 0))
        down = cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        backends.execute(db_url, "UPDATE deliveries SET next_attempt = NULL")  # the 5-minute backoff passed
        with SmtpServer(port=port) as smtp:
            sent = cli("--config", str(config), "send")
            delivered = copies(smtp)
    one_clear_line(collects[2], arxiv.api_url, "503")
    assert "revised 1" in collects[4].stdout
    assert "deliveries stay queued" in stderr_lines(down)[-1]
    assert "sent 2, pending 0, failed 0" in sent.stdout
    assert delivered == {address: 1 for address in READERS}
    digest = (tmp_path / "out" / "digests" / f"{AS_OF}.md").read_text(encoding="utf-8")
    shown = ids_in(digest)
    assert sorted(shown) == relevant  # exactly the week's relevant papers, none twice
    items = backends.rows(db_url, "SELECT item_key FROM digest_items WHERE digest_id = :d", d=AS_OF)
    assert sorted(r["item_key"] for r in items) == [f"arxiv:{i}" for i in relevant]
    reading = (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")
    assert sorted(ids_in(reading)) == relevant
    assert backends.rows(db_url, "SELECT version FROM papers WHERE id = :i", i=revised.id) == [{"version": 2}]
    assert backends.integrity(db_url) == "ok"


# --- kill -9 at (seeded) random points --------------------------------------------------------

@dataclass(frozen=True)
class Crash:
    stage: str  # rss | api | llm | smtp-rcpt | smtp-data | time
    n: int = 1  # llm: the n-th request stalls
    share: float = 0.0  # time: this share of a whole run after its first arXiv request

    def __str__(self) -> str:
        return {"llm": f"llm-call-{self.n}", "time": f"time-{self.share:.0%}"}.get(self.stage, self.stage)


def crash_points(seed: int = SEED) -> list[Crash]:
    """Every stage once (in the fetch, after the store during enrichment, in the hand-over
    to SMTP) with a random parameter, then kills at random moments; all from `seed`.

    A moment is a share of a whole run measured on this machine (`run_seconds`: from
    the first arXiv request to the exit: collect, store, rank, 7 LLM calls, compose,
    render, files, outbox, 2 emails), so it lands anywhere in the run, SQLite writes
    and renames included, however fast the machine is.
    """
    rng = random.Random(seed)
    points = [Crash("rss"), Crash("api"), Crash("llm", n=rng.randint(1, 6)), Crash("smtp-rcpt"),
              Crash("smtp-data")]
    points += [Crash("time", share=round(rng.uniform(0.0, 0.9), 2)) for _ in range(6)]
    return points


PAPERS = [rl_paper(n, DAY) for n in range(1, 5)]


@contextmanager
def crash_world(folder: Path, db_url: str | None = None):
    """arXiv, LLM and SMTP stand-ins and a config using them all."""
    storage = {"storage": {"url": db_url}} if db_url else {}
    with ArxivServer(PAPERS) as arxiv, OpenAIServer() as llm, WatchedSmtp() as smtp:
        config = config_with(folder, arxiv, smtp.port, **storage, enrich={
            "provider": "openai", "base_url": llm.url, "timeout_seconds": 60,
            "deadline_seconds": 120, "concurrency": 2})
        yield arxiv, llm, smtp, config


@pytest.fixture(scope="module")
def run_seconds(tmp_path_factory) -> float:
    """How long a whole run takes here, from its first arXiv request to its exit."""
    with crash_world(tmp_path_factory.mktemp("calibrate")) as (arxiv, _, _, config):
        proc = start_cli("--config", str(config), "run", "--as-of", AS_OF,
                         env={"OPENAI_API_KEY": KEY})
        assert proc.wait(timeout=60) == 0
        return time.monotonic() - arxiv.requests[0].started


@pytest.mark.slow
@pytest.mark.parametrize("crash", crash_points(), ids=str)
def test_kill_9_at_any_point_then_a_rerun_loses_nothing_and_duplicates_at_most_one_message(
        tmp_path, cli, crash, request, db_url):
    with crash_world(tmp_path, db_url) as (arxiv, llm, smtp, config):
        if crash.stage in ("rss", "api"):
            arxiv.script("/rss/" if crash.stage == "rss" else "/api/query", hang(60))
        elif crash.stage == "llm":
            def script(request):  # the n-th request (by arrival) stalls
                number = next(i for i, r in enumerate(llm.requests) if r is request) + 1
                return stall(60) if number == crash.n else None
            llm.script = script
        elif crash.stage.startswith("smtp"):
            smtp.stall_at, smtp.stall_seconds = crash.stage[5:].upper(), 60
        after = crash.share * request.getfixturevalue("run_seconds") if crash.stage == "time" else 0
        proc = start_cli("--config", str(config), "run", "--as-of", AS_OF,
                         env={"OPENAI_API_KEY": KEY})
        try:
            if crash.stage == "time":
                wait_for(lambda: arxiv.requests, timeout=30, what="the first arXiv request", proc=proc)
                began = arxiv.requests[0].started
                while time.monotonic() - began < after and proc.poll() is None:
                    time.sleep(0.002)
                if proc.poll() is not None:  # faster than the calibration run: no crash
                    pytest.skip(f"the run ended within {after:.2f} s; nothing to crash")
            else:
                reached = {"rss": lambda: any(r.path.startswith("/rss/") for r in arxiv.requests),
                           "api": lambda: any(r.path == "/api/query" for r in arxiv.requests),
                           "llm": lambda: len(llm.requests) >= crash.n,
                           "smtp-rcpt": smtp.stalling.is_set,
                           "smtp-data": lambda: bool(smtp.messages)}[crash.stage]
                wait_for(reached, timeout=30, what=str(crash), proc=proc)
            if not try_kill9(proc):  # it must still be running: the crash happens inside the run
                assert crash.stage == "time", f"it had ended already (exit {proc.returncode})"
                pytest.skip("the run ended between the last look and the kill; nothing to crash")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        llm.script, smtp.stall_seconds = None, 0
        rerun = cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": KEY},
                    check=None)
        smtp_messages = list(smtp.messages)
    assert rerun.returncode == 0, rerun.stderr
    assert "Traceback" not in rerun.stderr
    assert backends.integrity(db_url) == "ok"
    expected = sorted(p.id for p in PAPERS)
    assert sorted(ids_in((tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8"))) == expected
    assert sorted(ids_in((tmp_path / "out" / "digests" / f"{AS_OF}.md").read_text(encoding="utf-8"))) \
        == expected
    assert leftovers(tmp_path / "out") == []
    rows = {r["recipient"]: r for r in backends.rows(db_url, "SELECT * FROM deliveries ORDER BY id")}
    assert sorted(rows) == READERS
    for address, row in rows.items():
        # Every reader gets it; at most one duplicate, and only of a hand-over the crash cut
        # off, with the same Message-ID (mail clients show one).
        assert row["status"] == "sent", row
        got = [str(m.message["Message-ID"]).strip() for m in smtp_messages if address in m.rcpt_tos]
        assert 1 <= len(got) <= 2, (address, got)
        assert set(got) == {row["message_id"]}
        if len(got) == 2:
            assert row["last_error"].startswith("resent after an interrupted hand-over"), row



def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.slow
@pytest.mark.skipif(not months.Helper.usable() or not Path("/proc/self/task").exists(),
                    reason="one core or no fork (builds never split), or no /proc to find the helper")
def test_kill_9_while_a_second_process_renders_the_reading_list_ends_it_and_frees_the_lock(tmp_path, cli,
                                                                                            db_url):
    """A first build of a large reading list forks a helper (pipeline/months.py); a run killed
    meanwhile takes it along: orphaned, it rendered on holding the run lock it inherited (on
    PostgreSQL `send` was refused with exit 75, the holder dead) and wrote into the folder the
    next build's helper uses."""
    config = config_with(tmp_path, storage={"url": db_url})
    store = Store.open(db_url)
    found = [replace(rl_paper(k, DAY - timedelta(hours=2 * k)), id=f"2611.{k:05d}")
             for k in range(reading_list.SPLIT + 500)]
    store.upsert_papers(found)
    store.set_scores([Scored(p.id, 2.0, True, ("grpo",), "algorithms") for p in found])
    store.close()
    spools = set(helpers.CLI_TMP.glob("rl-digest-*"))
    proc = start_cli("--config", str(config), "run", "--offline", "--as-of", AS_OF)
    try:
        wait_for(lambda: children(proc.pid), timeout=60, what="the helper process", proc=proc)
        helper = children(proc.pid)[0]
        kill9(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # its spools stay where it left them: in the session's folder, which pytest removes, not /tmp
    assert set(helpers.CLI_TMP.glob("rl-digest-reading-*")) - spools
    began = time.monotonic()
    while alive(helper) and time.monotonic() - began < 1:
        time.sleep(0.02)
    assert not alive(helper), "the helper rendered on after its run was killed"
    result = cli("--config", str(config), "send", check=None)
    for _ in range(50):  # the server notices the dead session within moments
        if result.returncode != 75:
            break
        time.sleep(0.1)
        result = cli("--config", str(config), "send", check=None)
    assert result.returncode == 0, result.stderr
    assert backends.integrity(db_url) == "ok"


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for init to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False

# --- property tests: title matching ---------------------------------------------------------

THRESHOLD = load(ROOT / "config.yaml").seeds.match_threshold
SEED_TITLES = sorted({e.title for doc in load_seeds([ROOT / "seeds"]) for e in doc.entries})
LONG_TITLES = [t for t in SEED_TITLES if len(normal_title(t)) >= 20]
BOUNDARY_PUNCT = [" ", " - ", ": ", ", ", " — ", "-", " / ", "; "]

words = st.text(alphabet="abcdefghijklm0123456789", min_size=2, max_size=10)
made_up = st.lists(words, min_size=3, max_size=10).map(" ".join).filter(
    lambda t: len(normal_title(t)) >= 20)
titles = st.one_of(st.sampled_from(LONG_TITLES), made_up)


@st.composite
def case_and_punctuation(draw, title: str) -> str:
    """The same words, any case, any punctuation between words and around the title."""
    parts = title.split()
    cased = ["".join(ch.upper() if draw(st.booleans()) else ch.lower() for ch in part)
             for part in parts]
    out = draw(st.sampled_from(["", "\"", "«", "("]))
    for i, part in enumerate(cased):
        out += part + (draw(st.sampled_from(BOUNDARY_PUNCT)) if i < len(cased) - 1 else "")
    return out + draw(st.sampled_from(["", ".", "?", "\"", ")", " ."]))


@st.composite
def one_typo(draw, title: str) -> str:
    """One substituted, dropped, doubled-in or swapped character inside a word."""
    letters = [i for i, ch in enumerate(title) if ch.isalnum()]
    i = draw(st.sampled_from(letters))
    kind = draw(st.sampled_from(["substitute", "delete", "insert", "swap"]))
    other = draw(st.sampled_from("abcdefghijklmnopqrstuvwxyz").filter(lambda c: c != title[i].lower()))
    if kind == "substitute":
        return title[:i] + other + title[i + 1:]
    if kind == "delete":
        return title[:i] + title[i + 1:]
    if kind == "insert":
        return title[:i] + other + title[i:]
    j = i + 1 if i + 1 < len(title) else i - 1
    a, b = sorted((i, j))
    return title[:a] + title[b] + title[a] + title[b + 1:]


def candidates(title: str) -> list[str]:
    """The title among the real seed titles, as the store would hold them."""
    others = [normal_title(t) for t in SEED_TITLES if normal_title(t) != normal_title(title)]
    return others[:17] + [normal_title(title)] + others[17:]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), title=st.one_of(st.sampled_from(SEED_TITLES), made_up))
def test_case_and_punctuation_never_change_the_match(data, title):
    variant = data.draw(case_and_punctuation(title))
    assert normal_title(variant) == normal_title(title)
    pool = candidates(title)
    assert closest(variant, pool, THRESHOLD) == pool.index(normal_title(title))


@settings(max_examples=150, deadline=None)
@given(data=st.data(), title=titles)
def test_one_typo_in_a_title_still_matches_it(data, title):
    variant = data.draw(one_typo(title))
    pool = candidates(title)
    assert closest(variant, pool, THRESHOLD) == pool.index(normal_title(title)), variant


@settings(max_examples=150, deadline=None)
@given(title=made_up, other=st.lists(st.text(alphabet="nopqrstuvwxyz", min_size=2, max_size=10),
                                     min_size=3, max_size=10).map(" ".join))
def test_an_unrelated_title_does_not_match(title, other):
    assert closest(other, [normal_title(title)], THRESHOLD) is None


def test_no_two_seed_titles_match_each_other():
    for title in SEED_TITLES:
        others = [normal_title(t) for t in SEED_TITLES if t != title]
        assert closest(title, others, THRESHOLD) is None, title


# --- property tests: escaping outside text --------------------------------------------------

def _gfm(markdown: str) -> str:
    module = pytest.importorskip("cmarkgfm", reason="GitHub's parser (test extra cmarkgfm)")
    from cmarkgfm.cmark import Options
    return module.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


# Addresses and schemes that GitHub's autolink extension links even where Python's \b
# sees no word start: each must come out dead.
AUTOLINK_EDGE_CASES = ["_@evil.org", "a.@evil.org", "x-@evil.org", "+@evil.org",
                       "mailto:@evil.org", "_www.evil.org", "_http://evil.org", "1http://evil.org",
                       "éhttp://evil.org"]

hostile = st.lists(st.one_of(
    st.sampled_from(list("ab1 _.-+@:/\\|*`[]()<>!#&;~=$\n\t") + [
        "http", "https://", "www.", "&amp;", "&#x41;", "@b.co", "mailto:", "ftp://", "\u2060",
        "<script>", "</td>", "<!--", "```", "1. ", "# ", "- ", "> ", "[x](http://evil.org)",
        "![i](x.png)", "<http://evil.org>", "**", "__", "~~", "$\\alpha_t$", "\\|", "\r\n"]),
    st.characters(codec="utf-8")), max_size=16).map("".join)


def _cell(text: str) -> tuple[int, list[str], str]:
    """md_escape(text) as the middle cell of a GFM table row, through GitHub's parser."""
    row = f"| x | {md_escape(text)} | y |"
    out = _gfm(f"| a | b | c |\n|---|---|---|\n{row}\n")
    rows = re.findall(r"<tr>(.*?)</tr>", out, re.DOTALL)
    return len(rows), re.findall(r"<td>(.*?)</td>", rows[-1], re.DOTALL), row


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(text=hostile)
@example(text="a | b: Pipes | everywhere")
@example(text="line one\nline two | x")
@example(text="see http://evil.org and www.evil.org or mail a@evil.org")
def test_any_text_stays_one_plain_table_cell(text):
    escaped = md_escape(text)
    assert "\n" not in escaped and "\r" not in escaped
    assert len(re.findall(r"(?<!\\)(?:\\\\)*\|", escaped)) == 0  # every | is escaped
    rows, cells, row = _cell(text)
    assert rows == 2 and len(cells) == 3, row
    assert "<" not in cells[1], (row, cells[1])  # no link, emphasis, code or HTML: text only
    assert html.unescape(cells[1]).replace("\u2060", "") == one_line(text).replace("\u2060", "")


@pytest.mark.parametrize("text", AUTOLINK_EDGE_CASES)
def test_autolink_edge_cases_stay_dead_in_a_table_cell(text):
    _, cells, row = _cell(text)
    assert "<a " not in cells[1], (row, cells[1])


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        self.tags.append("/" + tag)

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        self.tags.append("!--")


def tags(markup: str) -> _Tags:
    parser = _Tags()
    parser.feed(markup)
    parser.close()
    return parser


@settings(max_examples=300, deadline=None)
@given(text=hostile)
def test_the_html_env_never_makes_a_tag_of_outside_text(text):
    env = templating.html_env()
    page = tags(env.from_string('<p title="{{ v }}">{{ v }}</p><td>{{ v | xml }}</td>').render(v=text))
    assert page.tags == ["p", "/p", "td", "/td"]
    assert "".join(page.text) == text + escape.xml_text(text)


@settings(max_examples=20, deadline=None)
@given(text=hostile.filter(lambda t: one_line(t)))
def test_the_digest_html_has_the_same_tags_whatever_the_titles_say(text):
    config, digest = fx.config(), fx.digest()
    first = digest.sections[0].entries[0]
    swapped = replace(first, title=text, summary_en=text, summary_zh=text, authors=(text,))
    featured = replace(digest.featured[0], title=text, headline_en=text)
    hostile_digest = replace(digest, sections=(replace(digest.sections[0], entries=(
        swapped, *digest.sections[0].entries[1:])), *digest.sections[1:]),
        featured=(featured, *digest.featured[1:]))
    plain = replace(digest, sections=(replace(digest.sections[0], entries=(
        replace(first, title="x", summary_en="x", summary_zh="x", authors=("x",)),
        *digest.sections[0].entries[1:])), *digest.sections[1:]),
        featured=(replace(digest.featured[0], title="x", headline_en="x"), *digest.featured[1:]))
    assert tags(render.digest_html(config, hostile_digest, 215)).tags == \
        tags(render.digest_html(config, plain, 215)).tags
