"""State and config a careless operator cannot poison, through the real CLI."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import yaml

from pipeline.config import load
from pipeline.errors import ConfigError
from pipeline.run import parse_as_of
from pipeline.store import Store
from tests.helpers import CATS, config_for, rl_paper, write_config
from tests.processes import config_with, lock_holder
from tests.servers.arxiv_server import ArxivServer, http_error
from tests.servers.smtp_server import SmtpServer

DAY = datetime(2026, 11, 10, 12, tzinfo=UTC)


def one_line(result: subprocess.CompletedProcess, *words: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# --- as-of and the watermark ---------------------------------------------------------------

def test_an_as_of_far_in_the_future_is_refused_and_moves_nothing(tmp_path, cli):
    config = write_config(tmp_path)
    for command, why in (("run", "a digest can only be made for the past or the present"),
                         ("collect", "a collect reads up to the present, not past it")):
        refused = cli("--config", str(config), command, "--as-of", "2099-01-01", check=2)
        one_line(refused, "--as-of: 2099-01-01 is more than a day ahead", why)  # collect spoke of digests
    too_early = cli("--config", str(config), "run", "--as-of", "0001-01-01", check=2)
    one_line(too_early, "before arXiv began")
    assert not (tmp_path / "out").exists()


def test_tomorrows_date_is_accepted_and_the_day_after_is_not():
    config = load(None)
    today = datetime.now(ZoneInfo(config.schedule.timezone)).date()
    assert parse_as_of((today + timedelta(days=1)).isoformat(), config).date() == today + timedelta(days=1)
    with pytest.raises(ConfigError, match="more than a day ahead"):
        parse_as_of((today + timedelta(days=2)).isoformat(), config)


def test_the_watermark_never_passes_the_present(tmp_path, cli):
    tomorrow = (datetime.now(UTC) + timedelta(hours=20)).isoformat(timespec="seconds")
    with ArxivServer([rl_paper(1, DAY)]) as server:
        config = config_for(tmp_path, server, rss=False)
        cli("--config", str(config), "collect", "--as-of", tomorrow)
    mark = Store.open(load(config).storage.url).watermark()
    assert mark is not None and mark <= datetime.now(UTC)


def test_a_window_cut_at_the_present_is_shown_in_schedule_timezone_and_the_next_starts_there(tmp_path, cli):
    """An as-of later than now (today's date) ends the window at the present: it was shown in
    UTC beside a start in Shanghai, and the next window read "15:35 → 23:35" for no time at all."""
    shanghai = ZoneInfo("Asia/Shanghai")
    with ArxivServer([rl_paper(1, datetime.now(UTC) - timedelta(days=2))]) as server:
        config = config_for(tmp_path, server, rss=False)
        first = cli("--config", str(config), "collect", "--as-of", datetime.now(shanghai).date().isoformat())
        second = cli("--config", str(config), "collect")
    ends = [re.search(r"\((\S+ \S+) → (\S+ \S+)\)", r.stdout).groups() for r in (first, second)]
    shown = datetime.strptime(ends[0][1], "%Y-%m-%d %H:%M").replace(tzinfo=shanghai)
    assert abs(shown - datetime.now(UTC)) < timedelta(minutes=2), ends
    assert ends[1][0] == ends[0][1], ends  # overlap_hours 0: the next window starts where this one ended


def test_a_digest_of_tomorrows_date_ends_its_window_at_the_present(tmp_path, cli):
    """`run --as-of` tomorrow's date (or today's) read what arXiv had announced by now, but
    the digest's window ran to 23:59 of that day: its coverage line counted the evenings
    not announced yet as 'not collected, NOT recovered', and the next digest began after them."""
    shanghai = ZoneInfo("Asia/Shanghai")
    tomorrow = (datetime.now(shanghai) + timedelta(days=1)).date().isoformat()
    with ArxivServer([rl_paper(1, datetime.now(UTC) - timedelta(days=2))]) as server:
        config = config_for(tmp_path, server, rss=False)
        cli("--config", str(config), "run", "--as-of", tomorrow)
    text = (tmp_path / "out" / "digests" / f"{tomorrow}.md").read_text(encoding="utf-8")
    end = re.search(r"Window: \S+ \S+ → (\S+ \S+) \(Asia/Shanghai\)", text).group(1)
    assert abs(datetime.strptime(end, "%Y-%m-%d %H:%M").replace(tzinfo=shanghai)
               - datetime.now(UTC)) < timedelta(minutes=2), end
    assert "GRPO variant 1 " in text and "NOT recovered" not in text


def test_a_watermark_a_fast_clock_left_ahead_does_not_empty_the_window_once_it_went_back(tmp_path, cli):
    """A collect under a clock a day fast leaves the watermark a day ahead; once the clock is
    right again, each collect read the empty window (now, now] and found nothing until then."""
    now = datetime.now(UTC)
    with ArxivServer([rl_paper(1, now - timedelta(days=3))]) as server:
        config = config_for(tmp_path, server, rss=False)
        cli("--config", str(config), "collect")
        ahead = (now + timedelta(days=1)).isoformat(timespec="seconds")
        with Store.open(load(config).storage.url).tx() as conn:  # as the fast clock wrote it
            conn.exec_driver_sql("UPDATE runs SET window_end = ?, as_of = ?", (ahead, ahead))
        server.add(rl_paper(2, now - timedelta(hours=2)))
        again = cli("--config", str(config), "collect")
    assert "new 1" in again.stdout, again.stdout
    assert "is ahead of this machine's clock" in again.stderr
    assert "is ahead of this machine's clock" in cli("--config", str(config), "status").stdout


def test_a_digest_made_by_hand_for_an_earlier_week_has_that_weeks_window(tmp_path, cli):
    """A digest of 11-30 made after the one of 12-03 started its window where the newest
    digest ended: "Window: 2026-12-03 12:00 → 2026-11-30 23:59". Nor does it list a paper
    collected since that was sent after its window (it listed 12-01's, in no later digest)."""
    with ArxivServer([rl_paper(n, datetime(2026, 12, 3, 2, tzinfo=UTC)) for n in (1, 2)]) as server:
        config = config_for(tmp_path, server)
        cli("--config", str(config), "run", "--as-of", "2026-12-03T12:00")
        server.add(*[rl_paper(n, datetime(2026, 11, 28, 12, tzinfo=UTC)) for n in (3, 4)])  # indexed late
        server.add(rl_paper(5, datetime(2026, 12, 3, 8, tzinfo=UTC)))  # sent after 12-03 12:00 in Shanghai
        cli("--config", str(config), "collect", "--since", "2026-11-20")
        ran = cli("--config", str(config), "run", "--as-of", "2026-11-30")
    assert ran.stdout.startswith("2026-11-30: fetched 0, new 0, relevant 2"), ran.stdout
    text = (tmp_path / "out" / "digests" / "2026-11-30.md").read_text(encoding="utf-8")
    assert "Window: 2026-11-23 23:59 → 2026-11-30 23:59 (Asia/Shanghai)" in text  # lookback_days 7
    assert "GRPO variant 3 " in text and "GRPO variant 1 " not in text and "GRPO variant 5 " not in text


def test_a_date_in_basic_iso_form_means_the_end_of_that_day_as_its_extended_form_does(tmp_path, cli):
    """20261110 was read as a datetime by its length: midnight, the start of the day, so the
    day's papers were left out of a digest named by it; 2026-11-10 is its end."""
    with ArxivServer([rl_paper(1, DAY)]) as server:  # submitted 11-10 20:00 in Shanghai
        config = config_for(tmp_path, server, rss=False)
        ran = cli("--config", str(config), "run", "--as-of", "20261110")
    assert ran.stdout.startswith("2026-11-10: fetched 1, new 1, relevant 1"), ran.stdout
    text = (tmp_path / "out" / "digests" / "2026-11-10.md").read_text(encoding="utf-8")
    assert "→ 2026-11-10 23:59 (Asia/Shanghai)" in text and "GRPO variant 1 " in text
    assert parse_as_of("2026-W46-2", load(config)) == parse_as_of("2026-11-10", load(config))


def test_an_as_of_with_another_offset_is_named_by_its_date_in_schedule_timezone(tmp_path, cli):
    """23:30 in Los Angeles on the 10th is 15:30 in Shanghai on the 11th: the digest id, its
    title and its window's end are the 11th (the id was the 10th, under a window ending the 11th)."""
    with ArxivServer([rl_paper(1, DAY)]) as server:
        config = config_for(tmp_path, server, rss=False)
        ran = cli("--config", str(config), "run", "--as-of", "2026-11-10T23:30-08:00")
    assert ran.stdout.startswith("2026-11-11: "), ran.stdout
    assert [p.name for p in (tmp_path / "out" / "digests").glob("*.md")] == ["2026-11-11.md"]
    text = (tmp_path / "out" / "digests" / "2026-11-11.md").read_text(encoding="utf-8")
    assert "Weekly · 2026-11-11" in text and "→ 2026-11-11 15:30 (Asia/Shanghai)" in text
    assert "as of 2026-11-11T15:30:00+08:00" in cli("--config", str(config), "status").stdout


def test_collect_since_reads_a_window_again_on_purpose(tmp_path, cli):
    late = rl_paper(2, DAY - timedelta(days=10))  # indexed late, below the watermark
    with ArxivServer([rl_paper(1, DAY)]) as server:
        config = config_for(tmp_path, server, rss=False)
        cli("--config", str(config), "collect", "--as-of", "2026-11-12")
        server.add(late)
        again = cli("--config", str(config), "collect", "--as-of", "2026-11-12")
        assert "new 0" in again.stdout
        since = cli("--config", str(config), "collect", "--as-of", "2026-11-12", "--since", "2026-10-25")
    assert "new 1" in since.stdout and "2026-10-25 00:00 →" in since.stdout
    assert Store.open(load(config).storage.url).watermark() <= datetime(2026, 11, 13, tzinfo=UTC)


def test_a_disabled_arxiv_api_is_never_called(tmp_path, cli):
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "mine.yaml").write_text(yaml.safe_dump([
        {"title": "A seed paper about RLHF that nobody has resolved", "summary_zh": "本文提出了一个方法。"}],
        allow_unicode=True), encoding="utf-8")
    with ArxivServer([rl_paper(1, DAY)]) as server:
        config = write_config(tmp_path, {"sources": {
            "arxiv": {"enabled": False, "api_url": server.api_url, "categories": CATS},
            "rss": {"urls": [server.rss_url(CATS)]}}, "seeds": {"paths": ["seeds"]}}, seeds=False)
        server.script("/api/query", *[http_error(503)] * 10)
        cli("--config", str(config), "run", "--as-of", "2026-11-12")
        paths = [request.path for request in server.requests]
    assert paths and not any(path.startswith("/api/") for path in paths)  # RSS, and full text (HTML)


# --- file modes ------------------------------------------------------------------------------

@contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "published"), [(0o022, 0o644), (0o077, 0o600)])
def test_published_files_follow_the_umask_and_the_database_is_private(tmp_path, cli, mask, published):
    config = write_config(tmp_path)
    with umask(mask):
        cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    files = [tmp_path / "out" / "READING_LIST.md", *(tmp_path / "out" / "digests").glob("*")]
    assert len(files) >= 4
    assert {mode(path) for path in files} == {published}
    assert mode(tmp_path / "state") == 0o700
    assert mode(tmp_path / "state" / "digest.sqlite3") == 0o600


def test_after_a_command_the_database_file_alone_holds_the_state(tmp_path, cli):
    """A backup (or the Actions recipe's commit) copies digest.sqlite3 alone: no WAL is left."""
    config = write_config(tmp_path)
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    state = tmp_path / "state"
    assert sorted(p.name for p in state.iterdir() if p.name.startswith("digest.sqlite3")) == \
        ["digest.sqlite3", "digest.sqlite3.lock"]
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "digest.sqlite3").write_bytes((state / "digest.sqlite3").read_bytes())
    with Store.open(f"sqlite:///{copy}/digest.sqlite3").engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM seeds").scalar() > 0
        assert conn.exec_driver_sql("SELECT count(*) FROM runs").scalar() == 1


def test_a_config_folder_whose_name_holds_a_question_mark_or_a_percent_keeps_its_database(tmp_path, cli):
    """storage.url's relative path was read as a URL: a folder called 'digest?v=2' put the
    database in a file called 'digest' beside it (the lock and the empty file status named
    stayed in state/), and '50%41' opened '50A'."""
    folder = tmp_path / "digest?v=2 50%41"
    folder.mkdir()
    config = write_config(folder)
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    status = cli("--config", str(config), "status").stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]
    database = folder / "state" / "digest.sqlite3"
    assert f"database: sqlite:///{database}" in status and re.search(r"seeds [1-9]", status), status
    (tmp_path / "copy.sqlite3").write_bytes(database.read_bytes())
    with Store.open(f"sqlite:///{tmp_path}/copy.sqlite3").engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM runs").scalar() == 1


def test_an_old_world_readable_database_is_made_private(tmp_path, cli):
    config = write_config(tmp_path)
    cli("--config", str(config), "status")
    database = tmp_path / "state" / "digest.sqlite3"
    database.chmod(0o644)
    cli("--config", str(config), "status")
    assert mode(database) == 0o600


def test_a_folder_that_was_there_keeps_its_mode_so_a_web_server_still_reads_out(tmp_path, cli):
    """/var/lib/rl-digest made by the operator, holding the database and out/ (empty at the
    first command): the database is private, the folder is not closed to the web server."""
    shared = tmp_path / "var"
    shared.mkdir()
    shared.chmod(0o755)
    config = write_config(tmp_path, {"storage": {"url": f"sqlite:///{shared}/digest.sqlite3"},
                                     "outputs": {"dir": str(shared / "out")}})
    cli("--config", str(config), "status")
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    assert mode(shared / "digest.sqlite3") == 0o600
    assert mode(shared) == 0o755


# --- email addresses -------------------------------------------------------------------------

@pytest.mark.parametrize(("email", "key", "words"), [
    ({"from": "Digest <digest@example.org>\r\nBcc: all@example.org"}, "email.from", "line break"),
    ({"from": "a@example.org, b@example.org"}, "email.from", "one address per entry"),
    ({"from": "a@example.org b@example.org"}, "email.from", "one address per entry"),
    # Python 3.13's getaddresses finds no address in it, 3.11.7's took it, comma and all
    ({"from": "digest@example.org,"}, "email.from", "one address per entry"),
    ({"to": ["alice@example.org, bob@example.org"]}, "email.to[0]", "one address per entry"),
    ({"to": ["ok@example.org", "alice"]}, "email.to[1]", "not an email address"),
    ({"to": ["bad@@example..org"]}, "email.to[0]", "not an email address"),  # no list: no "one per entry"
    ({"unsubscribe_url": "javascript:alert(1)"}, "email.unsubscribe_url", "https://"),
    ({"unsubscribe_url": "https://example.org/u\r\nX-Evil: 1"}, "email.unsubscribe_url", "one line"),
])
def test_bad_email_settings_are_refused_by_config_check_naming_the_key(tmp_path, cli, email, key, words):
    config = write_config(tmp_path, {"email": email})
    refused = cli("--config", str(config), "config", "check", check=2)
    one_line(refused, f"{config}: {key}:", words)


def test_every_command_refuses_a_header_injection_before_doing_anything(tmp_path, cli):
    config = write_config(tmp_path, {"email": {"from": "d@example.org\nBcc: all@example.org"}})
    one_line(cli("--config", str(config), "run", "--offline", check=2), "email.from", "line break")
    assert not (tmp_path / "out").exists()


def test_names_and_quoted_commas_are_good_addresses(tmp_path, cli):
    (tmp_path / "readers.txt").write_text("# readers\nZoë <zoe@example.org>\nbob@example.org\n",
                                          encoding="utf-8")
    config = write_config(tmp_path, {"email": {
        "from": "RL Digest <digest@example.org>", "recipients_file": "readers.txt",
        "to": ['"Doe, Jane" <jane@example.org>', "Alice <alice@example.org>"],
        "unsubscribe_url": "https://example.org/unsubscribe?r={recipient}"}})
    cli("--config", str(config), "config", "check")


def test_a_bad_line_in_the_recipients_file_names_file_and_line(tmp_path, cli):
    (tmp_path / "readers.txt").write_text("ok@example.org\nalice, bob@example.org\n", encoding="utf-8")
    config = write_config(tmp_path, {"email": {"recipients_file": "readers.txt"}})
    one_line(cli("--config", str(config), "config", "check"), "warning: ", "readers.txt:2:", "one address")


def test_a_bad_reader_line_is_named_once_and_skipped_and_the_others_get_the_digest(tmp_path, cli):
    """A typo in one reader's line costs that line, reported, not the whole group's week
    (as a bad seed line costs that line); `config check` and doctor warn of it."""
    (tmp_path / "readers.txt").write_text("ok@example.org\nbob@exmaple..org\n", encoding="utf-8")
    with ArxivServer([rl_paper(1, datetime(2026, 10, 29, 12, tzinfo=UTC))]) as arxiv, SmtpServer() as smtp:
        email = {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": smtp.port, "security": "none",
                 "recipients_file": "readers.txt", "from": "RL Digest <digest@ada-lab.org>"}
        config = config_for(tmp_path, arxiv, email=email, outputs={"base_url": "https://example.org/rl/"})
        ran = cli("--config", str(config), "run", "--as-of", "2026-11-02")
        checked = cli("--config", str(config), "config", "check")
        listed = cli("--config", str(config), "readers")
        received = len(smtp.to("ok@example.org"))
    assert "sent to 1" in ran.stdout and received == 1
    warned = [line for line in ran.stderr.splitlines() if "readers.txt:2:" in line]
    assert len(warned) == 1 and "not an email address" in warned[0] and "line skipped" in warned[0]
    one_line(checked, "warning: ", "readers.txt:2:", "not an email address")
    one_line(listed, "warning: ", "readers.txt:2:", "not an email address")
    assert "ok@example.org" in listed.stdout and "exmaple" not in listed.stdout


# --- secrets ---------------------------------------------------------------------------------

def test_config_show_masks_secret_looking_extra_body_entries(tmp_path, cli):
    config = write_config(tmp_path, {"enrich": {"extra_body": {
        "api-key": "sk-extra-secret", "options": {"Authorization": "Bearer tok"}, "temperature": 0.2}}})
    shown = cli("--config", str(config), "config", "show").stdout
    for secret in ("sk-extra-secret", "Bearer tok"):
        assert secret not in shown
    assert "temperature: 0.2" in shown


@pytest.mark.parametrize(("overrides", "key", "secret"), [
    ({"enrich": {"base_url": "https://user:hunter2@llm.example.org/v1"}}, "enrich.base_url", "hunter2"),
    ({"outputs": {"base_url": "https://deploy-token-123@pages.example.org/"}}, "outputs.base_url",
     "deploy-token-123"),
    ({"sources": {"arxiv": {"api_url": "http://mirror:MIRRORPASS-55@127.0.0.1:9/api/query"}}},
     "sources.arxiv.api_url", "MIRRORPASS-55"),
    ({"sources": {"rss": {"urls": ["https://rss.arxiv.org/rss/cs.LG", "http://u:RSSPASS@127.0.0.1:9/rss"]}}},
     "sources.rss.urls[1]", "RSSPASS"),
])
def test_credentials_inside_any_url_are_refused_naming_the_key(tmp_path, cli, overrides, key, secret):
    """They would reach doctor's lines, the logs, status and the database (and, in
    outputs.base_url, every email): every command stops before it does anything."""
    config = write_config(tmp_path, overrides)
    for command in (("config", "check"), ("config", "show"), ("doctor",), ("run", "--offline")):
        refused = cli("--config", str(config), *command, check=2)
        one_line(refused, f"{config}: {key}: holds a ", "in the URL; secrets are not read from the config file")
        assert secret not in refused.stdout + refused.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


def test_a_database_user_is_shown_the_same_way_everywhere(tmp_path, cli):
    """A role name is no secret (a web URL's user may be a token, and is masked)."""
    url = "postgresql+psycopg://digest@127.0.0.1:9/digest"
    config = write_config(tmp_path, {"storage": {"url": url}})
    assert f"url: {url}" in cli("--config", str(config), "config", "show").stdout
    status = cli("--config", str(config), "status", check=1)  # nothing listens on port 9
    assert status.stderr.startswith(f"rl-digest: {url}: "), status.stderr


def test_a_database_password_comes_from_storage_password_env_and_is_never_shown(tmp_path, cli):
    inline = write_config(tmp_path / "inline", {"storage": {
        "url": "postgresql+psycopg://digest:inline-pw@127.0.0.1:9/digest", "password_env": "DB_PW"}})
    refused = cli("--config", str(inline), "config", "show", check=2)
    assert "storage.url: holds a password" in one_line(refused) and "inline-pw" not in refused.stderr
    config = write_config(tmp_path, {"storage": {
        "url": "postgresql+psycopg://digest@127.0.0.1:9/digest", "password_env": "DB_PW"}})
    shown = cli("--config", str(config), "config", "show", env={"DB_PW": "env-pw"}).stdout
    assert "env-pw" not in shown
    assert "postgresql+psycopg://digest@127.0.0.1:9/digest" in shown
    assert "DB_PW (set)" in shown
    status = cli("--config", str(config), "status", env={"DB_PW": "env-pw"}, check=None)
    assert status.returncode in (1, 2)  # no server there, or no driver: one line either way
    one_line(status)
    assert "env-pw" not in status.stderr + status.stdout


# --- the lock --------------------------------------------------------------------------------

def test_a_lock_held_past_stale_hours_is_reported_loudly_with_pid_and_start(tmp_path, cli):
    config = write_config(tmp_path, {"lock": {"stale_hours": 0.0001}})  # a third of a second
    with lock_holder(config) as holder:
        time.sleep(1)  # past stale_hours
        locked = cli("--config", str(config), "run", "--offline", check=75)
    line = one_line(locked, "STALE LOCK", f"pid {holder.pid}", "started ", "lock.stale_hours")
    assert "it may be hung" in line


def test_lock_dir_moves_the_lock_files_out_of_a_read_only_config_folder(tmp_path, cli):
    """A service may see its config's folder read-only (systemd's ProtectSystem=strict):
    lock.dir takes the run lock, the scheduler's lock and heartbeat elsewhere."""
    config = write_config(tmp_path, {"lock": {"dir": "locks"},  # doctor below reaches nothing outside
                                     "sources": {"arxiv": {"enabled": False}, "rss": {"enabled": False}}})
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    assert (tmp_path / "locks" / "digest.sqlite3.lock").exists()
    assert not (tmp_path / "state" / "digest.sqlite3.lock").exists()
    doctor = cli("--config", str(config), "doctor", check=None).stdout
    assert re.search(rf"^locks +OK +{re.escape(str(tmp_path / 'locks'))}: writable", doctor, re.M), doctor


def test_a_readers_txt_beside_the_config_is_read_without_naming_it(tmp_path, cli):
    """The default `email.recipients_file` is readers.txt beside the config, optional as the
    default seeds/ is; a file the config names must exist."""
    config = write_config(tmp_path, {"email": {"to": ["ada@example.org"]}})
    assert "ada@example.org" in cli("--config", str(config), "readers").stdout
    (tmp_path / "readers.txt").write_text("Bob <bob@example.org> lang=en\n", encoding="utf-8")
    listed = cli("--config", str(config), "readers").stdout
    assert "ada@example.org" in listed and "bob@example.org" in listed
    named = write_config(tmp_path, {"email": {"recipients_file": "team.txt"}})
    for command in (("readers",), ("config", "check")):
        one_line(cli("--config", str(named), *command, check=2),
                 f"email.recipients_file: {tmp_path / 'team.txt'}: No such file")


# --- two configs on one database or one outputs.dir -----------------------------------------

@pytest.mark.slow
def test_two_configs_on_one_database_are_told_so_by_every_run_and_send_of_the_other(tmp_path, cli):
    """Two groups on one server, both configs' storage.url one file: the group that ran second
    got no digest that week ('sent to 0', exit 0), and its hourly send marked the first group's
    waiting mail 'the reader was removed', never sent; nothing was said."""
    shared = {"url": f"sqlite:///{tmp_path}/shared.sqlite3"}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        configs = []
        for name in ("one", "two"):
            (tmp_path / name).mkdir()
            configs.append(config_with(tmp_path / name, arxiv, smtp.port, recipients=[f"{name}@example.org"],
                                       storage=shared))
        first = cli("--config", str(configs[0]), "run", "--as-of", "2026-11-16")
        again = cli("--config", str(configs[0]), "run", "--as-of", "2026-11-16")
        second = cli("--config", str(configs[1]), "run", "--as-of", "2026-11-16")
        sent = cli("--config", str(configs[1]), "-q", "send")
        got = smtp.recipients
    said = (f"storage.url: digest 2026-11-16 in this database was made by another config, {configs[0]}: "
            "two configs on one database share one digest a week and one outbox")
    assert "sent to 0" in second.stdout and got == ["one@example.org"]
    assert said in second.stdout and said in sent.stdout  # with -q too, as cron runs them
    assert "another config" not in first.stdout + first.stderr + again.stdout + again.stderr


@pytest.mark.slow
def test_two_configs_on_one_outputs_dir_are_told_so(tmp_path, cli):
    """Each with its own database, both writing out/: the second run wrote its digest over the
    first's of the same date, and its reading list and site over the other's, unsaid."""
    out = tmp_path / "out"
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        configs = []
        for name in ("one", "two"):
            (tmp_path / name).mkdir()
            configs.append(config_with(tmp_path / name, arxiv, outputs={"dir": str(out)}))
        runs = [cli("--config", str(config), "-q", "run", "--as-of", "2026-11-16").stdout
                for config in (configs[0], configs[0], configs[1], configs[1], configs[0])]
    said = "outputs.dir: {out} was last written by another config, {config}: two configs on one outputs.dir"
    assert [said.format(out=out, config=configs[0]) in runs[2], said.format(out=out, config=configs[1]) in runs[4]] \
        == [True, True]
    assert "another config" not in runs[0] + runs[1] + runs[3]  # said once a change of writer
