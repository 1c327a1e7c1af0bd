"""The real CLI, run as a user or cron would: offline cycle, seeds listing, the lock."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, cli_command, cli_env, start_warm_cli, write_config
from tests.processes import lock_holder


def test_seeds_lists_all_38_entries_from_any_directory(tmp_path, cli):
    result = cli("--config", str(ROOT / "config.yaml"), "seeds", cwd=tmp_path)
    assert result.stdout.strip().endswith("38 entries from 2 files")
    assert "PRISM" in result.stdout and "2026-05-12" in result.stdout
    assert "强化学习 第4页" not in result.stdout


def test_seeds_reports_a_bad_line_and_keeps_the_rest(tmp_path, cli):
    config = write_config(tmp_path)
    (tmp_path / "seeds" / "mine.yaml").write_text(
        "- title: Good entry\n  summary_zh: 本文提出了一个方法。\n- title: Bad entry\n  colour: red\n",
        encoding="utf-8")
    result = cli("--config", str(config), "seeds")
    assert "Good entry" in result.stdout and "Bad entry" not in result.stdout
    assert "mine.yaml:4" in result.stderr and "colour" in result.stderr
    assert "39 entries from 3 files" in result.stdout


def test_seeds_counts_the_files_it_read_and_names_those_it_read_nothing_from(tmp_path, cli):
    """A file in another encoding, a path that is gone and a file of another kind were
    counted among the files read ('38 entries from 5 files'): the count is of files read,
    and the line names the ones nothing was read from, which the warnings above explain."""
    config = write_config(tmp_path, {"seeds": {"paths": ["seeds", "gone.txt"]}})
    (tmp_path / "seeds" / "latin.txt").write_bytes("Müller（2026-08-03）：摘要。\n".encode("gb18030"))
    (tmp_path / "seeds" / "notes.md").write_text("# our notes\n", encoding="utf-8")
    result = cli("--config", str(config), "seeds")
    assert result.stdout.strip().splitlines()[-1] == (
        "38 entries from 2 files; nothing read from latin.txt, gone.txt (warnings above)")
    assert "latin.txt:1: not UTF-8 text" in result.stderr
    assert f"{tmp_path / 'gone.txt'}: no such file or directory" in result.stderr


def test_offline_run_from_root_writes_next_to_the_config(tmp_path, cli):
    config = write_config(tmp_path)
    result = cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02", cwd="/")
    assert result.stdout.startswith("2026-11-02: fetched 0, new 0, relevant 7 (7 seeds), summarised 0")
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    reading = (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")
    assert "## 精选解读 · Featured" in digest or "## 精选 · Featured" in digest
    assert "### PRISM" in digest and "### Exploration Hacking" in digest
    assert "综合洞察" in digest  # the seed page's own synthesis, not invented
    assert "cs.LG" not in digest.split("\n\n")[1]  # offline: the header names no arXiv source
    # Seeds are never this week's papers: at most max_curated (5) in their own section.
    assert "## 本周论文" not in digest or "📌" not in digest.split("## 本周论文", 1)[1].split("## 收录", 1)[0]
    curated = digest.split("## 收录 · From the reading list", 1)[1].split("\n---\n", 1)[0]
    assert curated.count("- **") == 5
    assert "38 " in reading and "BroRL: Scaling Reinforcement Learning via Broadened Exploration" in reading
    assert (tmp_path / "state" / "digest.sqlite3").exists()


def test_without_a_config_a_command_stops_and_writes_nothing(tmp_path, cli):
    """A cron line that forgot --config runs from a folder with no config.yaml. A --config or
    RL_DIGEST_CONFIG naming no file, or a folder, was told 'pass --config PATH or set
    RL_DIGEST_CONFIG', which the user had just done."""
    result = cli("status", cwd=tmp_path, check=2)
    assert result.stderr.strip().splitlines()[0] == (
        f"rl-digest: {tmp_path}/config.yaml: no such file (pass --config PATH or set RL_DIGEST_CONFIG)")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "elsewhere").mkdir()
    config = write_config(tmp_path / "elsewhere")
    assert "database: " in cli("status", env={"RL_DIGEST_CONFIG": str(config)}).stdout
    # a path the user gave: the hint names where it came from, not 'pass --config PATH'
    gone, folder = tmp_path / "gone.yaml", tmp_path / "elsewhere"
    starter = "check the path, or write a starter one with `rl-digest init DIR`"
    assert cli("--config", str(gone), "status", check=2).stderr.strip() == (
        f"rl-digest: {gone}: no such file (the file --config names: {starter})")
    assert cli("status", env={"RL_DIGEST_CONFIG": str(gone)}, check=2).stderr.strip() == (
        f"rl-digest: {gone}: no such file (the file RL_DIGEST_CONFIG names: {starter})")
    assert cli("status", env={"RL_DIGEST_CONFIG": str(folder)}, check=2).stderr.strip() == (
        f"rl-digest: {folder}: a folder, not a config file (set RL_DIGEST_CONFIG to {config}, or another file)")


def test_the_variable_wins_over_a_config_in_the_folder_as_the_help_says(tmp_path, cli):
    """--help read 'default ./config.yaml, or $RL_DIGEST_CONFIG', which says the folder's
    file comes first; the variable does (README: Global options)."""
    (tmp_path / "config.yaml").write_text("languages: [fr]\n", encoding="utf-8")  # would exit 2
    (tmp_path / "elsewhere").mkdir()
    config = write_config(tmp_path / "elsewhere")
    checked = cli("config", "check", cwd=tmp_path, env={"RL_DIGEST_CONFIG": str(config)})
    assert checked.stdout.startswith(f"{config}: ok")
    assert "(default: $RL_DIGEST_CONFIG, else ./config.yaml)" in " ".join(cli("--help").stdout.split())
    assert "[default: md]" in cli("render", "--help").stdout  # what render writes without --format


def test_offline_is_a_preview_that_records_nothing(tmp_path, cli):
    """A preview of a day never published (a Thursday's `make demo`) stayed in out/digests/
    and on the site for good, its index listing it among the digests sent: the next run
    removes it, and the index and its page say it is a preview while it is there. Only a
    preview's files: a digest's the database does not hold (a database reset) stay."""
    config = write_config(tmp_path)
    out = tmp_path / "out"
    kept = out / "digests" / "2026-10-01.md"  # the archive of a database since reset
    kept.parent.mkdir(parents=True)
    kept.write_text("# kept\n", encoding="utf-8")
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-10-29")
    preview = [out / "digests" / f"2026-10-29.{fmt}" for fmt in ("md", "html", "txt")] + [
        out / "site" / "digests" / "2026-10-29.html"]
    assert all(path.is_file() for path in preview)
    index = (out / "site" / "index.html").read_text(encoding="utf-8")
    assert '2026-10-29</a> · <em><span lang="zh-CN" data-l="zh">预览，未发送</span>' in index
    assert 'preview, not sent</span></h1>' in preview[-1].read_text(encoding="utf-8")
    again = cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    assert "relevant 7 (7 seeds)" in again.stdout  # the same seeds: nothing was marked published
    assert "digests 0" in cli("--config", str(config), "status").stdout
    assert "BroRL" in (out / "READING_LIST.md").read_text(encoding="utf-8")
    assert not any(path.exists() for path in preview) and kept.is_file()
    assert "2026-10-29" not in (out / "site" / "index.html").read_text(encoding="utf-8")


def test_a_second_concurrent_run_exits_75(tmp_path, cli):
    config = write_config(tmp_path)
    with lock_holder(config):
        started = time.monotonic()
        result = cli("--config", str(config), "run", "--offline", timeout=60, check=75)
        assert "another rl-digest run holds" in result.stderr
        assert "another rl-digest run holds state/digest.sqlite3.lock" in result.stderr
        assert time.monotonic() - started < 30  # did not wait for the holder


def test_help_lists_every_contract_command(cli):
    out = cli("--help").stdout
    for command in ("run", "schedule", "collect", "render", "send", "seeds", "status", "eval"):
        assert f"  {command} " in out or f"  {command}\n" in out, command


def test_doctor_help_names_every_line_doctor_prints(cli):
    """It named neither git nor the lock folder nor the calendar, which doctor checks too."""
    out = " ".join(cli("doctor", "--help").stdout.split())
    for what in ("config", "database", "lock folder", "arXiv", "calendar", "LLM", "SMTP", "git",
                 "chat channel"):
        assert what in out, what


def test_run_help_says_what_no_email_still_delivers(cli):
    """'Write files but send no email.': a run with --no-email records the digest for good
    and still posts it to the chat channels and git, which the help did not say."""
    out = " ".join(cli("run", "--help").stdout.split())
    assert "--no-email Write and record the digest but mail it to no one, now or later (chat " \
        "channels and git still get it)." in out


def test_as_of_help_says_the_forms_taken_and_the_timezone(cli):
    """'Fix 'now': an ISO date (end of that day) or datetime.' said neither that the date is
    read in schedule.timezone nor which forms are taken (20261130 and 2026-W49-1 are too)."""
    for command in ("run", "collect"):
        out = " ".join(cli(command, "--help").stdout.split())
        assert "--as-of DATE Fix 'now': a date, the end of that day (2026-11-30, 20261130, 2026-W49-1), " \
            "or a date and time (2026-11-30T08:00); in schedule.timezone unless it has an offset (+01:00)." in out
    out = " ".join(cli("collect", "--help").stdout.split())
    assert "--since DATE Read again from this date (its start) or date and time, in schedule.timezone, " \
        "whatever the watermark says." in out


SITE = "c0ffee00-1234-4abc-8def-0123456789ab"  # a site served under a UUID, as some hosts give


def test_render_and_preview_rebuild_a_stored_digest(tmp_path, cli):
    from tests.servers.arxiv_server import ArxivServer

    with ArxivServer() as arxiv:  # an online run records the digest; it finds nothing new
        config = write_config(tmp_path, {
            "sources": {"arxiv": {"api_url": arxiv.api_url, "retries": 1},
                        "rss": {"urls": [arxiv.rss_url(["cs.LG"])]}},
            "enrich": {"provider": "none"}, "outputs": {"base_url": f"https://digest.example.org/{SITE}/"},
            "email": {"unsubscribe_url": "https://lists.example.org/leave?list=rl-digest"}})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
    text = cli("--config", str(config), "render", "--digest", "2026-11-02", "--format", "txt").stdout
    assert text == (tmp_path / "out" / "digests" / "2026-11-02.txt").read_text(encoding="utf-8")
    assert f"/{SITE}/" in text  # its links: a public address is no secret to mask, though token-like
    assert "leave?list=rl-digest" in text  # nor a query in one
    shown = cli("--config", str(config), "preview").stdout.strip()
    assert shown.endswith("2026-11-02.html")
    assert "<html" in open(shown, encoding="utf-8").read()
    missing = cli("--config", str(config), "render", "--digest", "1999-01-01", check=2)  # bad usage
    assert "--digest: no digest 1999-01-01" in missing.stderr


def test_a_template_copied_from_an_older_release_is_one_line_naming_it(tmp_path, cli):
    """templates.dir holding a partials/labels.j2 copied from an older release, before the
    macros this release's templates import from it: exit 2 and one line naming the folder
    and the file (it was 'unexpected error: UndefinedError', exit 1, after an upgrade)."""
    from tests.servers.arxiv_server import ArxivServer

    settings = {"enrich": {"provider": "none"}}
    with ArxivServer() as arxiv:
        settings["sources"] = {"arxiv": {"api_url": arxiv.api_url, "retries": 1},
                               "rss": {"urls": [arxiv.rss_url(["cs.LG"])]}}
        config = write_config(tmp_path, settings)
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
    partials = tmp_path / "mine" / "partials"
    partials.mkdir(parents=True)
    (partials / "labels.j2").write_text("{%- macro both(key) -%}{{ key }}{%- endmacro -%}\n", encoding="utf-8")
    config = write_config(tmp_path, {**settings, "templates": {"dir": "mine"}})
    failed = cli("--config", str(config), "render", "--digest", "2026-11-02", check=2)
    line, = failed.stderr.splitlines()
    assert line.startswith(f"rl-digest: templates.dir {tmp_path / 'mine'}: ")
    assert "(your partials/labels.j2 replaces the built-in file of that name, and a copy from an older " \
           "release lacks what this one needs: update it from " in line and line.endswith(", or move it aside)")


def test_output_into_a_pipe_closed_early_ends_quietly(tmp_path):
    """`rl-digest doctor | head -3`: the reader stopped reading; no "unexpected error" line."""
    config = write_config(tmp_path, {"enrich": {"provider": "none"}}, seeds=False)
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first line
    try:
        result = subprocess.run([*cli_command(), "--config", str(config), "doctor"], stdout=write,
                                stderr=subprocess.PIPE, text=True, cwd="/", env=cli_env(), timeout=120)
    finally:
        os.close(write)
    assert result.returncode == 141  # 128 + SIGPIPE, as a shell reports it: no digest or delivery code
    assert result.stderr == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_into_a_file_on_a_full_disk_is_one_line_naming_it(tmp_path):
    """`rl-digest export > refs.bib`, or cron's `>> run.log`, on a full disk: every command
    ended 'unexpected error: OSError: [Errno 28] No space left on device', naming no file.
    /dev/full is such a disk: every write to it fails so."""
    config = write_config(tmp_path, {"enrich": {"provider": "none"}})
    err = tmp_path / "stderr"
    listing = start_warm_cli("--config", str(config), "seeds", stdout=Path("/dev/full"), stderr=err)
    assert listing.wait(timeout=60) == 1
    assert err.read_text(encoding="utf-8") == \
        "rl-digest: /dev/full (stdout): cannot write: No space left on device\n"


def test_a_quiet_run_without_the_llm_key_says_so_on_its_one_line(tmp_path, cli):
    """cron runs `-q run`: no warning is printed there, so the summary line names the cause
    of a digest whose summaries all fell back."""
    config = write_config(tmp_path, {"sources": {"arxiv": {"enabled": False}, "rss": {"enabled": False}},
                                     "enrich": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1"}})
    assert "OPENAI_API_KEY" not in cli_env()  # tests/conftest.py: _isolated
    result = cli("--config", str(config), "-q", "run", "--as-of", "2026-11-02")
    assert result.stderr == ""
    (line,) = result.stdout.splitlines()
    assert line.endswith("; LLM off: enrich.api_key_env: the environment variable OPENAI_API_KEY is not set")


def test_help_loads_no_stage(cli):
    """The CLI imported every stage at start (SQLAlchemy, pydantic, scikit-learn...): --help
    (and --version) spent a second of CPU before a word. A command loads its stages as it runs."""
    shown = cli("--help", env={"PYTHONPROFILEIMPORTTIME": "1"})  # a fresh process naming each import
    loaded = {line.rpartition("|")[2].strip().partition(".")[0] for line in shown.stderr.splitlines()}
    assert loaded & {"sqlalchemy", "pydantic", "numpy", "sklearn", "apscheduler", "jinja2"} == set()
    assert "doctor" in shown.stdout  # every command listed still


def test_global_options_work_after_the_command_too(tmp_path, cli):
    config = write_config(tmp_path, {"sources": {"arxiv": {"enabled": False}, "rss": {"enabled": False}}})
    before = cli("-q", "--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    after = cli("run", "--offline", "--as-of", "2026-11-02", "-q", f"--config={config}")
    same = re.compile(r", [\d.]+ s$")  # all but the time it took
    assert same.sub("", after.stdout) == same.sub("", before.stdout)  # the same config, run again
    assert after.stderr == before.stderr == ""  # quiet
    plain = cli("run", "--as-of", "not-a-date", "--config", str(config), check=2)
    loud = cli("run", "--as-of", "not-a-date", "--config", str(config), "-v", check=2)
    assert "Traceback" in loud.stderr and "Traceback" not in plain.stderr
    both = cli("run", "--as-of", "not-a-date", "--config", str(config), "-qv", check=2)  # as click takes them
    assert "Traceback" in both.stderr and "No such option" not in both.stderr
    wrong = cli("status", "--config", str(tmp_path / "missing.yaml"), check=None)
    assert wrong.returncode == 2 and "missing.yaml" in wrong.stderr  # it is this --config that is read
    # A value that looks like one of them is still the command's own, after `--`.
    assert cli("mark", "--config", str(config), "--", "-q", "--relevant", check=None).returncode == 2


def test_a_usage_mistake_is_one_line_naming_the_help_to_read(tmp_path, cli):
    config = write_config(tmp_path, {"sources": {"arxiv": {"enabled": False}, "rss": {"enabled": False}}})
    cases = [  # what was wrong (click's words, whatever its release), and the help to read
        (("export",), "--format", "rl-digest export --help"),
        (("run", "--bogus"), "--bogus", "rl-digest run --help"),
        (("bogus",), "bogus", "rl-digest --help"),
        (("mark", "2611.00001", "--relevant", "--irrelevant"), "give one of --relevant, --irrelevant or --undo",
         "rl-digest mark --help"),
        (("export", "--format", "ris", "-o", str(tmp_path / "no-such" / "x.ris")),
         f"{tmp_path / 'no-such'}: no such folder", "rl-digest export --help"),
        (("serve", "--port", "70000"), "70000", "rl-digest serve --help"),
        # the global options' own: click printed its usage block (Usage:, Try..., Error:)
        (("--bogus", "run"), "--bogus", "rl-digest --help"),
        (("--config",), "--config", "rl-digest --help"),
    ]
    for args, what, where in cases:
        result = cli("--config", str(config), *args, check=2)
        (line,) = result.stderr.splitlines()
        assert line.startswith("rl-digest: ") and what in line and line.endswith(f"({where})"), (args, line)
    assert not (tmp_path / "no-such").exists()  # no folder left behind


@pytest.mark.slow  # make test-slow: a long scenario beside faster ones on the same path
def test_an_unreadable_config_is_one_line_naming_it(tmp_path):
    """click refused it before the command ran, with its usage block: 'Usage: ... Try ...
    Error: Invalid value for '--config': Path ... is not readable.'"""
    config = write_config(tmp_path)
    config.chmod(0)
    # root reads any file: run it without the capabilities that let it (a plain user, as cron's)
    drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--"]
    for args, env in (((*cli_command(), "--config", str(config), "run"), None),
                      ((*cli_command(), "config", "check"), {"RL_DIGEST_CONFIG": str(config)})):
        result = subprocess.run([*drop, *args] if os.geteuid() == 0 else args, cwd="/", env=cli_env(env),
                                capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [f"rl-digest: {config}: cannot read: Permission denied"]


def test_output_into_a_folder_this_user_cannot_write_is_a_usage_line(tmp_path):
    """`render -o` or `export -o` into a folder not the user's ended 'cannot write: Permission
    denied', exit 1, after the work was done: a usage mistake, said first, exit 2."""
    config = write_config(tmp_path)
    locked = tmp_path / "theirs"
    locked.mkdir(mode=0o555)
    drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--"]
    args = (*cli_command(), "--config", str(config), "export", "--format", "ris", "-o", str(locked / "x.ris"))
    result = subprocess.run([*drop, *args] if os.geteuid() == 0 else args, cwd="/", env=cli_env(),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert f"{locked}: this user cannot write there" in line and line.endswith(" export --help)"), line


def test_a_command_group_given_no_command_prints_its_help_whole(tmp_path, cli):
    """`rl-digest config` alone printed its help flattened into one 'rl-digest: Usage: ...' line."""
    config = write_config(tmp_path)
    result = cli("--config", str(config), "config", check=None)
    assert result.returncode in (0, 2) and not result.stderr.startswith("rl-digest: "), result.stderr
    shown = result.stdout + result.stderr  # click 8.1 prints it on stdout, 8.2 on stderr
    assert shown.startswith("Usage: ") and "\nCommands:\n  check " in shown, shown


def test_serve_says_where_it_serves_only_once_it_listens(tmp_path, cli):
    config = write_config(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = cli("--config", str(config), "serve", "--port", str(port), check=1)
    assert "serving on" not in busy.stdout and "cannot listen on 127.0.0.1" in busy.stderr
    unknown = cli("--config", str(config), "serve", "--host", "no-such-host.invalid", check=2)
    (line,) = unknown.stderr.splitlines()
    assert line.startswith("rl-digest: serve: --host no-such-host.invalid: ") and "port" not in line
    # an address of another machine (TEST-NET-1): exit 1, 'another server may hold the port'
    elsewhere = cli("--config", str(config), "serve", "--host", "192.0.2.1", check=2)
    assert elsewhere.stderr.splitlines() == ["rl-digest: serve: --host 192.0.2.1: Cannot assign requested address "
                                             "(an address of this machine, or a name it resolves)"]


@pytest.mark.slow
def test_chinese_output_under_a_locale_that_cannot_write_it_is_utf8_not_an_error(tmp_path, cli):
    """cron on a machine whose locale is en_US (ISO-8859-1; PYTHONIOENCODING stands in for it):
    config show, run --dry-run, render and status ended 'unexpected error: UnicodeEncodeError',
    and a warning's Chinese went to the log as \\u escapes."""
    config = write_config(tmp_path)
    (tmp_path / "seeds" / "mine.yaml").write_text("- title: Bad entry\n  颜色: red\n", encoding="utf-8")
    latin1 = {"PYTHONIOENCODING": "latin-1"}
    shown = cli("--config", str(config), "config", "show", env=latin1)
    assert "强化学习" in shown.stdout
    listed = cli("--config", str(config), "seeds", env=latin1)
    assert "mine.yaml:2: unknown key '颜色'" in listed.stderr and "\\u" not in listed.stderr
    preview = cli("--config", str(config), "run", "--offline", "--dry-run", "--as-of", "2026-11-02", env=latin1)
    assert preview.stdout.startswith("# 强化学习 · Reinforcement Learning for LLMs — 周报 Weekly · 2026-11-02\n")
