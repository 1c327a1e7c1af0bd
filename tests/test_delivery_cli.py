"""Delivery through the real CLI: a crash mid-send, a resend on purpose, a channel added from
a test module, git publishing, --dry-run and --no-email, and a 550 for one reader. Every run
is the real `rl-digest` process against local servers.

The rule (pipeline/deliver/outbox.py): every reader gets every digest. A row becomes
`sending`, with its Message-ID, when its hand-over begins, and `sent` after the server's
250. A process killed in between leaves `sending`; the next run cannot know whether the
server kept the message, so it sends it again with the SAME Message-ID (mail clients
collapse the two) and `status` notes it: at most one duplicate, never a loss.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from tests import toy_channel
from tests.helpers import KEY, full_config, plugin_env, rl_paper
from tests.processes import (
    READERS,
    WatchedSmtp,
    config_with,
    copies,
    db_rows,
    kill9,
    start_cli,
    stderr_lines,
    wait_for,
)
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer
from tests.servers.smtp_server import SmtpServer

DAY = datetime(2026, 10, 29, 12, tzinfo=UTC)
AS_OF = "2026-11-02"
NEXT = "2026-11-09"


def outbox(tmp_path: Path) -> dict[str, dict]:
    return {r["recipient"]: r for r in db_rows(tmp_path, "SELECT * FROM deliveries ORDER BY id")}


# --- A crash between send and mark ---------------------------------------------------------

def message_ids(smtp: SmtpServer, reader: str) -> list[str]:
    return [str(m.message["Message-ID"]).strip() for m in smtp.to(reader)]


def kill_once_a_message_arrives(config, smtp) -> None:
    """A run, killed -9 while the (stalling) server holds its first message."""
    proc = start_cli("--config", str(config), "run", "--as-of", AS_OF)
    try:
        wait_for(lambda: smtp.messages, what="the first message to arrive", proc=proc)
        kill9(proc)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_kill_9_mid_data_then_the_next_run_delivers_that_reader_with_the_same_message_id(
        tmp_path, cli):
    """kill -9 while the server holds the message but has not yet answered 250: the row is
    `sending` with its Message-ID; the next run sends it again with that id (the reader has
    at most two copies that their client shows as one) and `status` says so; the other
    reader, never attempted, gets one copy."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            SmtpServer(stall_at="DATA", stall_seconds=30) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        kill_once_a_message_arrives(config, smtp)
        cut = outbox(tmp_path)
        watched = json.loads(cli("--config", str(config), "status", "--json").stdout)["outbox"]
        smtp.stall_seconds = 0  # the server is well again
        again = cli("--config", str(config), "run", "--as-of", AS_OF)
        status = cli("--config", str(config), "status")
        sent = cli("--config", str(config), "send")  # nothing is left to send
        delivered = copies(smtp)
        ada_ids = message_ids(smtp, "ada@example.org")
    assert cut["ada@example.org"]["status"] == "sending"
    assert cut["ada@example.org"]["message_id"]
    assert cut["alan@example.org"]["status"] == "pending"
    # a monitor reading status --json sees the cut-off hand-over waiting, as status says it
    assert watched["pending"] == 2
    assert {(w["recipient"], w["status"]) for w in watched["waiting"]} == {
        ("ada@example.org", "sending"), ("alan@example.org", "pending")}
    assert delivered == {"ada@example.org": 2, "alan@example.org": 1}
    assert ada_ids == [cut["ada@example.org"]["message_id"]] * 2
    rows = outbox(tmp_path)
    assert {r["status"] for r in rows.values()} == {"sent"}
    assert "sent to 2" in again.stdout
    assert "Traceback" not in again.stderr
    assert (f"{AS_OF} ada@example.org: sent at " in status.stdout
            and "resent after an interrupted hand-over" in status.stdout)
    assert "outbox: 0 pending, 0 failed" in status.stdout
    assert "sent 0, pending 0, failed 0" in sent.stdout


def test_a_run_cut_off_mid_send_has_already_committed_its_digest_to_git(tmp_path, cli):
    """`send` finishes what the outbox holds, not a commit: the git checkout gets the week's
    files before the first message goes out."""
    remote, checkout = tmp_path / "remote.git", tmp_path / "checkout"
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(remote)], check=True)
    subprocess.run(["git", "clone", "--quiet", str(remote), str(checkout)], check=True)
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            SmtpServer(stall_at="DATA", stall_seconds=30) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, outputs={"git": {
            "repo": str(checkout), "branch": "main", "path": "rl", "push": True}})
        kill_once_a_message_arrives(config, smtp)
    pushed = subprocess.run(["git", "--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert f"rl/digests/{AS_OF}.md" in pushed and "rl/READING_LIST.md" in pushed


@pytest.mark.slow  # make test-slow: a long scenario beside faster ones on the same path
def test_a_week_whose_git_publish_failed_before_copying_is_pushed_later_and_send_pushes(tmp_path, cli):
    """The checkout gone for a week: that week's digest reaches the repo with the next
    run's; a push that waits shows in status, and `send` (an hourly cron) pushes it."""
    remote, checkout = tmp_path / "remote.git", tmp_path / "checkout"
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(remote)], check=True)
    subprocess.run(["git", "clone", "--quiet", str(remote), str(checkout)], check=True)
    moved = tmp_path / "elsewhere"
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, outputs={"git": {
            "repo": str(checkout), "branch": "main", "path": "rl", "push": True}})
        checkout.rename(moved)
        gone = cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        moved.rename(checkout)
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        remote.rename(tmp_path / "remote-away.git")  # and the remote, this time
        unpushed = cli("--config", str(config), "run", "--as-of", NEXT, check=1)
        status = cli("--config", str(config), "status").stdout
        (tmp_path / "remote-away.git").rename(remote)
        sent = cli("--config", str(config), "send")
        later = cli("--config", str(config), "status").stdout
        checkout.rename(moved)  # nothing waits now: send does not touch the checkout at all
        idle = cli("--config", str(config), "send")
    pushed = subprocess.run(["git", "--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert "no such folder (outputs.git.repo)" in gone.stderr and "push failed" in unpushed.stderr
    assert {f"rl/digests/{day}.{fmt}" for day in (AS_OF, NEXT) for fmt in ("md", "html", "txt")} <= set(pushed)
    assert re.search(rf"git {checkout}: failing since 20\S+ — push failed", status)
    assert f"git {checkout}: pushed the commits that waited" in sent.stdout
    assert "push waiting" not in later
    assert idle.stdout.startswith("sent 0, pending 0, failed 0") and "git" not in idle.stdout + idle.stderr


@pytest.mark.slow
def test_kill_before_the_body_went_out_sends_it_once_next_run(tmp_path, cli):
    """kill -9 while the server stalls its answer to RCPT TO: nothing left, and the next run
    sends it exactly once (with the Message-ID stored when the hand-over began)."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            WatchedSmtp(stall_at="RCPT", stall_seconds=30) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        proc = start_cli("--config", str(config), "run", "--as-of", AS_OF)
        try:
            wait_for(smtp.stalling.is_set, what="RCPT TO", proc=proc)
            kill9(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        cut = outbox(tmp_path)
        assert smtp.messages == []
        smtp.stall_seconds = 0
        again = cli("--config", str(config), "run", "--as-of", AS_OF)
        delivered = copies(smtp)
        ada_ids = message_ids(smtp, "ada@example.org")
    assert cut["ada@example.org"]["status"] == "sending"
    assert cut["alan@example.org"]["status"] == "pending"
    assert "sent to 2" in again.stdout
    assert delivered == {"ada@example.org": 1, "alan@example.org": 1}
    assert ada_ids == [cut["ada@example.org"]["message_id"]]
    assert {r["status"] for r in outbox(tmp_path).values()} == {"sent"}


@pytest.mark.slow
def test_a_send_after_a_run_that_failed_writing_the_web_pages_waits_for_the_page_it_links(tmp_path, cli):
    """The digest and its outbox are saved before the web pages are written. A run that failed
    there (a full disk; here a file where out/site/digests/ should be) left messages linking to a
    page not written, and a `send` alone mailed them: every reader's 'View online' was a 404.
    They wait, uncounted, naming the page, until a run writes it; then each goes once."""
    site = "https://digest.example.org/"
    page = tmp_path / "out" / "site" / "digests" / f"{AS_OF}.html"
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, outputs={"site_url": site})
        page.parent.parent.mkdir(parents=True)
        page.parent.write_text("in the way", encoding="utf-8")
        cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        held = cli("--config", str(config), "send", check=1)
        mailed_early, tries = copies(smtp), {r["attempts"] for r in outbox(tmp_path).values()}
        page.parent.unlink()
        cli("--config", str(config), "run", "--as-of", AS_OF)
        delivered = copies(smtp)
        links = [m.message.get_body(("plain",)).get_content() for m in smtp.messages]
    assert mailed_early == {}
    assert "sent 0, pending 2, failed 0" in held.stdout
    assert stderr_lines(held)[0] == (
        f"rl-digest: digest {AS_OF}: its web page {page}, which its messages link to, is not written (the "
        f"run that made the digest stopped before it): `rl-digest run --as-of {AS_OF}` writes it, as "
        "does the next run; 2 deliveries stay queued (ada@example.org, alan@example.org) (the next run "
        "or `rl-digest send` tries again)")
    assert tries == {0}  # no try counted
    assert delivered == {"ada@example.org": 1, "alan@example.org": 1} and page.is_file()
    assert all(f"{site}digests/{AS_OF}.html" in text for text in links)


# --- a resend on purpose ----------------------------------------------------------------------

@pytest.mark.slow
def test_send_digest_reader_resends_one_on_purpose_with_a_new_message_id(tmp_path, cli):
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        cli("--config", str(config), "run", "--as-of", AS_OF)
        first = outbox(tmp_path)["ada@example.org"]["message_id"]
        resent = cli("--config", str(config), "send", "--digest", AS_OF, "--reader", "ada@example.org")
        stranger = cli("--config", str(config), "send", "--digest", AS_OF,
                       "--reader", "grace@example.org", check=2)
        garbled = cli("--config", str(config), "send", "--digest", AS_OF, "--reader", "not-an-address",
                      check=2)
        config = config_with(tmp_path, arxiv, smtp.port, recipients=[*READERS, "Grace <grace@example.org>"])
        newcomer = cli("--config", str(config), "send", "--digest", AS_OF,
                       "--reader", "grace@example.org")
        unknown = cli("--config", str(config), "send", "--digest", "2020-01-06",
                      "--reader", "ada@example.org", check=2)
        typo = cli("--config", str(config), "send", "--digest", "2020-01-06", check=2)
        alone = cli("--config", str(config), "send", "--reader", "ada@example.org", check=2)
        listed = cli("--config", str(config), "status").stdout
        delivered = copies(smtp)
        ada_ids = message_ids(smtp, "ada@example.org")
    assert "sent 1, pending 0, failed 0" in resent.stdout
    assert "sent 1, pending 0, failed 0" in newcomer.stdout  # last week's issue for a new reader
    assert delivered == {"ada@example.org": 2, "alan@example.org": 1, "grace@example.org": 1}
    # A new id: the same one would be collapsed into the copy the reader may still have.
    assert ada_ids[0] == first and ada_ids[1] != first
    assert outbox(tmp_path)["ada@example.org"]["message_id"] == ada_ids[1]
    assert stderr_lines(unknown) == stderr_lines(typo) == [
        "rl-digest: --digest: no digest 2020-01-06 (`rl-digest status` names the newest)"]
    assert f"digests 1 (newest {AS_OF})" in listed  # as the hint says
    assert "--reader needs --digest" in alone.stderr
    # a typo mails no stranger: a new reader goes in the config first (as grace did above)
    assert stderr_lines(stranger) == ["rl-digest: --reader: grace@example.org is not one of the readers "
                                      "(add them to email.to or email.recipients_file first; "
                                      "`rl-digest readers` lists them)"]
    assert stderr_lines(garbled)[0].startswith("rl-digest: --reader: ") and "Traceback" not in garbled.stderr


# --- a channel added from a test module ------------------------------------------------------

@pytest.mark.slow  # make test-slow: a long scenario beside faster ones on the same path
def test_a_toy_channel_from_a_test_module_gets_every_digest_once(tmp_path, cli):
    """Two channels pipeline/ knows nothing of (one through the entry-point group, one as
    module:factory in the config) get each digest once beside email; a resend on purpose
    works for them too."""
    notes, archive = tmp_path / "notes", tmp_path / "archive"
    channels = [{"type": "toy_file", "name": "notes", "folder": str(notes), "readers": ["team", "ada"]},
                {"type": "toy_channel:FileChannel", "name": "archive", "folder": str(archive)}]
    env = plugin_env(tmp_path, "[rl_digest.channels]\ntoy_file = toy_channel:FileChannel\n")
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, channels=channels)
        first = cli("--config", str(config), "run", "--as-of", AS_OF, env=env)
        again = cli("--config", str(config), "run", "--as-of", AS_OF, env=env)
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        week = cli("--config", str(config), "run", "--as-of", NEXT, env=env)
        resend = cli("--config", str(config), "send", "--digest", AS_OF, "--reader", "notes:team",
                     env=env)
        for command in ("status", "doctor", "readers"):
            cli("--config", str(config), command, env=env, check=None)
        delivered = copies(smtp)
    team, ada, inbox = (toy_channel.messages(p) for p in
                        (notes / "team.md", notes / "ada.md", archive / "inbox.md"))
    assert "sent to 5" in first.stdout and "sent to 0" in again.stdout and "sent to 5" in week.stdout
    assert "sent 1, pending 0, failed 0" in resend.stdout
    assert delivered == {"ada@example.org": 2, "alan@example.org": 2}
    assert [len(team), len(ada), len(inbox)] == [3, 2, 2]
    for got in (team, ada, inbox):
        assert "2611.00001" in got[0] and "2611.00002" in got[1]
    assert "2611.00001" in team[2]  # the resend of the first digest
    assert f"Message-ID: <{AS_OF}.team.notes@toy>" in team[0]
    rows = db_rows(tmp_path, "SELECT recipient, status FROM deliveries WHERE digest_id = ?", AS_OF)
    assert sorted(r["recipient"] for r in rows) == [
        "ada@example.org", "alan@example.org", "archive:inbox", "notes:ada", "notes:team"]
    assert {r["status"] for r in rows} == {"sent"}
    # each channel made (to check the config, list a digest's readers, send, check, resend) is closed
    assert toy_channel.unclosed(notes) == toy_channel.unclosed(archive) == 0


def test_a_channel_bug_for_one_reader_is_that_rows_failure_and_every_other_reader_gets_it(tmp_path, cli):
    """A plug-in channel's build raises for one reader, another's send for another: each of
    those rows counts a try, with the exception in one line, and waits like a deferral (the
    one whose hand-over began stays `sending`, to go again with its Message-ID); every other
    row of the batch, of that channel too, is delivered; exit 1, no 'unexpected error'; the
    traceback only with -v; after the usual tries the row fails for good."""
    notes, archive = tmp_path / "notes", tmp_path / "archive"
    channels = [{"type": "toy_channel:FileChannel", "name": "notes", "folder": str(notes),
                 "readers": ["team", "ada"], "broken": {"team": "build"}},
                {"type": "toy_channel:FileChannel", "name": "archive", "folder": str(archive),
                 "readers": ["inbox", "desk"], "broken": {"inbox": "send"}}]
    env = plugin_env(tmp_path, "")
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, channels=channels)
        first = cli("--config", str(config), "run", "--as-of", AS_OF, env=env, check=1)
        cut = outbox(tmp_path)
        status = cli("--config", str(config), "status", env=env).stdout
        again = cli("-v", "--config", str(config), "send", env=env, check=1)
        retried = outbox(tmp_path)
        with sqlite3.connect(tmp_path / "state" / "digest.sqlite3") as conn:  # 24 tries made, its wait over
            conn.execute("UPDATE deliveries SET attempts = 24, next_attempt = NULL WHERE recipient = 'notes:team'")
        last = cli("--config", str(config), "send", env=env, check=1)
        delivered = copies(smtp)
    assert delivered == {"ada@example.org": 1, "alan@example.org": 1}
    assert [len(toy_channel.messages(p)) for p in
            (notes / "ada.md", archive / "desk.md", notes / "team.md", archive / "inbox.md")] == [1, 1, 0, 0]
    for result in (first, again, last):
        assert "unexpected error" not in result.stderr
    assert "Traceback" not in first.stderr and "Traceback" not in last.stderr
    assert "sent to 4" in first.stdout
    assert "last publish: partial at " in status  # the reading list and the site are done
    team, inbox = cut["notes:team"], cut["archive:inbox"]
    assert (team["status"], team["attempts"], team["message_id"]) == ("pending", 1, None)
    assert team["last_error"] == "KeyError: 'no page for team'"
    assert (inbox["status"], inbox["attempts"]) == ("sending", 1)  # it may have reached the other side
    assert inbox["message_id"] == f"<{AS_OF}.inbox.archive@toy>"
    assert inbox["last_error"].startswith("RuntimeError: toy: the hand-over to inbox broke halfway")
    assert "\n" not in inbox["last_error"]
    assert f"rl-digest: notes:team (digest {AS_OF}): KeyError: 'no page for team'; it stays queued" \
        in first.stderr
    assert f"{AS_OF} notes:team: pending after 1 of 25 tries;" in status
    assert "— KeyError: 'no page for team'" in status
    assert "outbox: 2 pending, 0 failed" in status
    # tried again at once, as a deferral: ahead of its backoff it does not count; a hand-over
    # that began always does; -v shows the traceback
    assert "sent 0, pending 2, failed 0" in again.stdout
    assert (retried["notes:team"]["attempts"], retried["archive:inbox"]["attempts"]) == (1, 2)
    assert retried["archive:inbox"]["message_id"] == inbox["message_id"]
    assert 'toy_channel.py", line' in again.stderr and 'toy_channel.py", line' not in first.stderr
    # the 25th try: failed for good, as a server still saying "later" would be
    assert "sent 0, pending 1, failed 1" in last.stdout
    gave_up = outbox(tmp_path)["notes:team"]
    assert (gave_up["status"], gave_up["last_error"]) == (
        "failed", "gave up after 25 tries: KeyError: 'no page for team'")
    assert toy_channel.unclosed(notes) == toy_channel.unclosed(archive) == 0


def test_an_unknown_channel_type_is_a_config_error_naming_the_key(tmp_path, cli):
    config = config_with(tmp_path, channels=[{"type": "carrier-pigeon"}])
    result = cli("--config", str(config), "run", "--offline", "--as-of", AS_OF, check=2)
    assert not (tmp_path / "out").exists()  # refused at start, before anything is done
    for command in ("status", "collect", "schedule"):  # not only the commands that publish
        assert "no channel type 'carrier-pigeon'" in cli("--config", str(config), command, check=2).stderr
    assert stderr_lines(result)[-1].startswith(
        f"rl-digest: {config}: channels[0] (carrier-pigeon).type: no channel type 'carrier-pigeon' (known: dingtalk, email, "
        "feishu, slack, telegram, webhook")
    unnamed = config_with(tmp_path, channels=[{"type": "toy_channel:FileChannel", "folder": "x"}])
    check = cli("--config", str(unnamed), "config", "check", check=2)
    assert "channels[0] (toy_channel:FileChannel).name: 'toy_channel:FileChannel' is not a channel name" \
        in check.stderr


# --- a 550 for one reader -------------------------------------------------------------------

def test_a_550_fails_that_reader_with_the_servers_words_and_the_others_get_it(tmp_path, cli):
    words = "550 5.1.1 <alan@example.org>: Recipient address rejected: User unknown"
    readers = ["ada@example.org", "alan@example.org", "grace@example.org"]
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            SmtpServer(reject={"alan@example.org": words}) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=readers)
        result = cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        status = cli("--config", str(config), "status")
        later = cli("--config", str(config), "send")  # an hourly cron: nothing to retry
        listed = cli("--config", str(config), "readers").stdout  # the organiser sees who bounces
        delivered = copies(smtp)
    assert delivered == {"ada@example.org": 1, "grace@example.org": 1}
    assert f"alan@example.org  lang=zh,en  active  last delivery: never  digest {AS_OF} failed: {words} " \
           "(RCPT TO)\n" in listed
    assert re.search(r"ada@example.org  lang=zh,en  active  last delivery: 20\S+\n", listed)
    assert later.stdout.splitlines() == ["sent 0, pending 0, failed 0", "1 failed earlier, refused for "
        "good: `rl-digest status` lists them; `rl-digest send --digest ID --reader WHO` queues one again"]
    assert "sent to 2" in result.stdout
    lines = stderr_lines(result)
    assert "Traceback" not in result.stderr
    assert lines[-1].startswith(f"rl-digest: alan@example.org (digest {AS_OF}): {words} (RCPT TO)")
    assert f"{AS_OF} alan@example.org: failed after 1 try — {words} (RCPT TO)" in status.stdout
    assert "outbox: 0 pending, 1 failed" in status.stdout
    rows = outbox(tmp_path)
    assert rows["alan@example.org"]["status"] == "failed"  # a 5xx is final: never retried
    assert rows["alan@example.org"]["next_attempt"] is None


def test_a_bouncing_reader_taken_off_the_list_is_no_longer_offered_a_resend(tmp_path, cli):
    """The organiser removed the reader whose server refused the digest: every `send` went on
    saying '1 failed earlier, refused for good: … `rl-digest send --digest ID --reader WHO`
    queues one again', a resend the tool then refuses ('is not one of the readers')."""
    words = "550 5.1.1 <alan@example.org>: Recipient address rejected: User unknown"
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            SmtpServer(reject={"alan@example.org": words, "grace@example.org": words}) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port,
                             recipients=["ada@example.org", "alan@example.org", "grace@example.org"])
        cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        config = config_with(tmp_path, arxiv, smtp.port, recipients=["ada@example.org", "grace@example.org"])
        later = cli("--config", str(config), "send")
        config = config_with(tmp_path, arxiv, smtp.port, recipients=["ada@example.org"])
        gone = cli("--config", str(config), "send")
    assert later.stdout.splitlines() == ["sent 0, pending 0, failed 0", "1 failed earlier, refused for "
        "good: `rl-digest status` lists them; `rl-digest send --digest ID --reader WHO` queues one again"]
    assert gone.stdout.splitlines() == ["sent 0, pending 0, failed 0"]


def test_an_unsubscribe_url_with_recipient_names_each_readers_address_in_header_and_footer(tmp_path, cli):
    """email.unsubscribe_url's {recipient} became 'Ada Lovelace <ada@example.org>', quoted, in
    List-Unsubscribe, and stayed '{recipient}' in the footer link every reader clicks. Only
    the URL's: an abstract's (or an LLM's) 'https://evil.example/a?u={recipient}' stays as
    written, a URL mail clients link, where it named each reader's address for evil.example."""
    hostile = "https://evil.example/a?u={recipient}"
    paper = replace(rl_paper(1, DAY), abstract=f"{rl_paper(1, DAY).abstract} Data: {hostile}")
    with ArxivServer([paper]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port,
                             recipients=["Ada Lovelace <ada@example.org>", "grace@example.org"],
                             email={"unsubscribe_url": "https://lists.example.org/leave?u={recipient}&l=rl"})
        cli("--config", str(config), "run", "--as-of", AS_OF)
    for reader in ("ada@example.org", "grace@example.org"):
        (got,) = smtp.to(reader)
        mine = f"https://lists.example.org/leave?u={reader.replace('@', '%40')}&l=rl"
        assert str(got.message["List-Unsubscribe"]).startswith(f"<{mine}>")
        text, html = (got.message.get_body((kind,)).get_content() for kind in ("plain", "html"))
        assert mine in text and mine.replace("&", "&amp;") in html
        assert hostile in text and hostile in html
        assert "{recipient}" not in (text + html).replace(hostile, "") and "%7Brecipient%7D" not in text + html


def test_an_unsubscribe_url_outside_ascii_goes_in_list_unsubscribe_as_a_uri(tmp_path, cli):
    """An email.unsubscribe_url with Chinese in it made every run 'unexpected error:
    UnicodeEncodeError' with nothing mailed, and the reader's row 'hand-over interrupted' for
    good; a space went into the header as it was, which ends a URI there (RFC 3986). A host
    outside ASCII: test_email.py, test_an_unsubscribe_url_with_a_host_outside_ascii_..."""
    url = "https://lists.example.org/退订?u={recipient}&n=a b"
    header = "https://lists.example.org/%E9%80%80%E8%AE%A2?u=ada%40example.org&n=a%20b"
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=["ada@example.org"],
                             email={"unsubscribe_url": url})
        cli("--config", str(config), "run", "--as-of", AS_OF)
    (got,) = smtp.to("ada@example.org")
    assert got.data.isascii()
    assert str(got.message["List-Unsubscribe"]).split() == [
        f"<{header}>,", "<mailto:digest@example.org?subject=unsubscribe>"]
    assert got.message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_a_public_copy_has_no_personal_unsubscribe_link(tmp_path, cli):
    """An unsubscribe_url with {recipient} was written as is into out/digests/*.md, .html,
    .txt and the site's digest page: '…?u={recipient}', a link that unsubscribes nobody.
    A public copy has no reader: its footer says to reply instead, as with no URL."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=["ada@example.org"],
                             email={"unsubscribe_url": "https://lists.example.org/u?u={recipient}"})
        cli("--config", str(config), "run", "--as-of", AS_OF)
    public = [*(tmp_path / "out" / "digests").glob(f"{AS_OF}.*"), *(tmp_path / "out" / "site").rglob("*.html")]
    assert {p.suffix for p in public} >= {".md", ".html", ".txt"}
    for path in public:
        assert "lists.example.org" not in path.read_text(encoding="utf-8"), path
    assert 'reply "unsubscribe"' in (tmp_path / "out" / "digests" / f"{AS_OF}.md").read_text(encoding="utf-8")
    (got,) = smtp.to("ada@example.org")  # the email keeps the reader's own link
    assert "https://lists.example.org/u?u=ada%40example.org" in got.message.get_body(("plain",)).get_content()


def test_a_failed_reader_queued_again_as_the_hint_says_is_their_row_whatever_the_case(tmp_path, cli):
    """The address typed in another case than the config's made a second row: the reader got
    the digest, yet their first row stayed `failed` in status and in every send's line."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            SmtpServer(reject={"ada@example.org": "550 5.2.2 mailbox full"}) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=["Ada <Ada@Example.org>", READERS[1]])
        cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        smtp.reject.clear()  # she made room
        again = cli("--config", str(config), "send", "--digest", AS_OF, "--reader", "ada@example.org")
        status = cli("--config", str(config), "status").stdout
        delivered = copies(smtp)
    assert again.stdout == "sent 1, pending 0, failed 0\n"
    assert "outbox: 0 pending, 0 failed" in status
    assert sorted(outbox(tmp_path)) == ["Ada@Example.org", READERS[1]]
    assert delivered == {"Ada@Example.org": 1, READERS[1]: 1}


# --- what a spam filter makes of it ---------------------------------------------------------

@pytest.mark.slow  # a whole run and a SpamAssassin run per case: make test-slow
@pytest.mark.skipif(shutil.which("spamassassin") is None, reason="spamassassin is not installed")
@pytest.mark.parametrize("languages", [["zh", "en"], ["en"], ["zh"]])
def test_a_digest_as_the_server_received_it_scores_nothing_in_spamassassin(tmp_path, cli, languages):
    """Every reader gets every digest: one a filter files as spam is not received. The
    message as aiosmtpd took it, scored with SpamAssassin's own rules and no network
    (`-L`, no Bayes: the sender's DNS, SPF and DKIM are its mail server's). A busy Chinese
    week (80 papers) scores 0.6, HTML_OBFUSCATE_05_10: SpamAssassin takes a full-width （ or ：
    right after a link or a bold label for a word split by a tag, which only a space before
    it, against Chinese typesetting, would avoid."""
    with ArxivServer([rl_paper(i, DAY) for i in range(5)]) as arxiv, OpenAIServer() as llm, \
            SmtpServer() as smtp:
        config = full_config(tmp_path, arxiv, llm, smtp_port=smtp.port, languages=languages,
                             serve={"base_url": "https://digest.example.org"})
        cli("--config", str(config), "run", "--as-of", AS_OF,
            env={"OPENAI_API_KEY": KEY, "RL_DIGEST_SECRET": "a-secret-of-24-characters"})
        message = smtp.to("ada@example.org")[0].data  # alan's differs only in his links
    report = subprocess.run(["spamassassin", "-L", "-t", "--cf", "use_bayes 0"], input=message,
                            capture_output=True, timeout=300, check=True).stdout.decode()
    table = report.split("Content analysis details:")[1]
    scored = [rule for points, rule in re.findall(r"(?m)^ *(-?\d+\.\d+) ([A-Z][A-Z0-9_]+) ", table)
              if float(points) > 0]
    assert scored == [], report


def test_no_link_of_the_email_reads_as_a_host_it_does_not_go_to(tmp_path, cli):
    """With outputs.base_url (say the reading list's GitHub repository) the footer's link read
    'READING_LIST.md' and a trimmed email's link to its whole copy '2026-11-02.md': .md is
    Moldova's top-level domain, so filters took the text for the host reading_list.md while the
    link went to github.com (rspamd's PHISHING, 2 points on every such digest)."""
    reading = "https://github.com/me/reading/blob/main/READING_LIST.md"
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=["ada@example.org"],
                             outputs={"base_url": reading.removesuffix("READING_LIST.md")})
        cli("--config", str(config), "run", "--as-of", AS_OF)
    (got,) = smtp.to("ada@example.org")
    html = next(p for p in got.message.walk() if p.get_content_type() == "text/html").get_content()
    links = [(a.attributes["href"], a.text().strip()) for a in HTMLParser(html).css("a")]
    assert reading in dict(links)
    shown = [(href, text) for href, text in links if (host := _HOST.fullmatch(text))
             and host.group(1).lower() != urlsplit(href).hostname]
    assert shown == []


# A link text a filter reads as an address: a host name (labels, a dot, a top-level domain),
# with or without a scheme and a path.
_HOST = re.compile(r"(?:https?://)?([\w-]+(?:\.[\w-]+)*\.[a-z]{2,})(?:[/:?#]\S*)?", re.IGNORECASE)


# --- --dry-run and --no-email ---------------------------------------------------------------

def test_dry_run_prints_the_digest_and_writes_records_and_sends_nothing(tmp_path, cli):
    with ArxivServer([rl_paper(1, DAY), rl_paper(2, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        dry = cli("--config", str(config), "run", "--as-of", AS_OF, "--dry-run")
        assert smtp.messages == []
        assert not (tmp_path / "out").exists()
        assert db_rows(tmp_path, "SELECT id FROM digests") == []
        assert db_rows(tmp_path, "SELECT id FROM deliveries") == []
        assert db_rows(tmp_path, "SELECT id FROM runs WHERE kind = 'publish'") == []
        real = cli("--config", str(config), "run", "--as-of", AS_OF)
        delivered = copies(smtp)
    assert dry.stdout.startswith("# ")
    for n in (1, 2):
        assert f"https://arxiv.org/abs/2611.{n:05d}" in dry.stdout
    assert dry.stderr.splitlines()[-1].startswith(f"{AS_OF}: fetched 2, new 2, relevant 2")
    # The dry run lost nothing: the real run publishes the same papers and mails them once.
    digest = (tmp_path / "out" / "digests" / f"{AS_OF}.md").read_text(encoding="utf-8")
    assert all(f"https://arxiv.org/abs/2611.{n:05d}" in digest for n in (1, 2))
    assert "sent to 2" in real.stdout
    assert ", new 0, relevant 2" in real.stdout  # what the dry run fetched was kept (README)
    assert delivered == {"ada@example.org": 1, "alan@example.org": 1}


def test_no_email_writes_files_and_that_digest_is_never_mailed_later(tmp_path, cli):
    """--no-email is a decision about that digest: no outbox rows are made, so neither a
    later `send` (nothing queued) nor a re-run of the same week mails it; a user who only
    wants a look uses --dry-run. The next week's digest is mailed as usual."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port)
        quiet = cli("--config", str(config), "run", "--as-of", AS_OF, "--no-email")
        assert (tmp_path / "out" / "digests" / f"{AS_OF}.md").exists()
        assert (tmp_path / "out" / "READING_LIST.md").exists()
        assert [r["id"] for r in db_rows(tmp_path, "SELECT id FROM digests")] == [AS_OF]
        assert db_rows(tmp_path, "SELECT id FROM deliveries") == []
        rerun = cli("--config", str(config), "run", "--as-of", AS_OF)
        assert smtp.messages == []
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        week = cli("--config", str(config), "run", "--as-of", "2026-11-09")
        delivered = [(m.rcpt_tos[0], str(m.message["Subject"])) for m in smtp.messages]
    assert "sent to 0" in quiet.stdout
    assert "sent to 0" in rerun.stdout and "sent to 2" in week.stdout
    assert sorted(r for r, _ in delivered) == READERS
    assert all("2026-11-09" in subject for _, subject in delivered)


# --- git publishing through the CLI ---------------------------------------------------------

@pytest.fixture
def git_env(tmp_path: Path) -> dict:
    """No global or system git config (no identity), as on a fresh server."""
    return {"HOME": str(tmp_path / "home"), "GIT_CONFIG_GLOBAL": str(tmp_path / "no-gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1"}


def git(*args: str, env: dict) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **env}).stdout.strip()


def remote_commits(remote: Path, env: dict) -> list[str]:
    try:
        return git("--git-dir", str(remote), "log", "--format=%H %s", "main", env=env).splitlines()
    except subprocess.CalledProcessError:
        return []


def test_git_publishing_commits_pushes_skips_an_empty_week_and_retries_a_rejected_push(
        tmp_path, cli, git_env):
    remote, checkout = tmp_path / "remote.git", tmp_path / "checkout"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(remote), env=git_env)
    git("clone", "--quiet", str(remote), str(checkout), env=git_env)
    gitcfg = {"repo": str(checkout), "branch": "main", "path": "reading", "push": True,
              "message": "Update RL reading list"}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, outputs={"git": gitcfg})
        first = cli("--config", str(config), "run", "--as-of", AS_OF, env=git_env)
        log1 = remote_commits(remote, git_env)
        files = git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main",
                    env=git_env).splitlines()
        listed = git("--git-dir", str(remote), "show", "main:reading/READING_LIST.md", env=git_env)
        written = (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")

        empty = cli("--config", str(config), "run", "--as-of", "2026-11-09", env=git_env)
        log2 = remote_commits(remote, git_env)
        moved = git("-C", str(checkout), "diff", "--stat", "HEAD~1", env=git_env) \
            if len(log2) > 1 else ""

        marker = tmp_path / "rejected-once"
        hook = remote / "hooks" / "pre-receive"
        hook.write_text(f'#!/bin/sh\nif [ ! -e "{marker}" ]; then\n  touch "{marker}"\n'
                        '  echo "push refused once for the test" >&2\n  exit 1\nfi\nexit 0\n')
        hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        arxiv.add(rl_paper(2, datetime(2026, 11, 12, 12, tzinfo=UTC)))
        rejected = cli("--config", str(config), "-q", "run", "--as-of", "2026-11-16", env=git_env,
                       check=1)
        log3 = remote_commits(remote, git_env)
        retried = cli("--config", str(config), "run", "--as-of", "2026-11-16", env=git_env)
        log4 = remote_commits(remote, git_env)
        latest = git("--git-dir", str(remote), "show", "main:reading/READING_LIST.md", env=git_env)
    outputs = first.stderr + empty.stderr + rejected.stderr + retried.stderr
    assert "Traceback" not in outputs
    assert [c.split(" ", 1)[1] for c in log1] == ["Update RL reading list"]
    assert {"reading/READING_LIST.md", f"reading/digests/{AS_OF}.md", f"reading/digests/{AS_OF}.html",
            f"reading/digests/{AS_OF}.txt", "reading/feed.xml", "reading/reading-list/2026-10.md"} <= set(files)
    topics = [f for f in files if f.startswith("reading/reading-list/") and not f[21].isdigit()]
    assert len(topics) == 1  # the one paper's topic file, beside its month's
    assert listed == written.strip() and "2611.00001" in listed
    # A week with nothing new: the same bytes, so no commit (and no push).
    assert "relevant 0" in empty.stdout
    assert log2 == log1, f"a commit for a week with nothing new:\n{moved}"
    # A rejected push: exit 1, one line naming the checkout and git's words; kept locally.
    lines = stderr_lines(rejected)
    assert len(lines) == 1, rejected.stderr
    assert str(checkout) in lines[0] and "pre-receive hook declined" in lines[0]
    assert "push refused once for the test" in lines[0]
    assert log3 == log1
    assert (tmp_path / "out" / "digests" / "2026-11-16.md").exists()  # the rest was published
    # The next run (nothing new) pushes the commit it kept.
    assert len(log4) == 2 and "2611.00002" in latest


def published_checkout(tmp_path: Path, env: dict) -> tuple[Path, Path]:
    """A bare remote and a checkout of it with one commit on main pushed (not unborn)."""
    remote, checkout = tmp_path / "remote.git", tmp_path / "checkout"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(remote), env=env)
    git("clone", "--quiet", str(remote), str(checkout), env=env)
    git("-C", str(checkout), "-c", "user.name=Someone", "-c", "user.email=someone@example.org",
        "commit", "--quiet", "--allow-empty", "-m", "start", env=env)
    git("-C", str(checkout), "push", "--quiet", "origin", "main", env=env)
    return remote, checkout


def git_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "git" in line]


def failed_run_seen(cli, config, env: dict) -> tuple:
    """A run whose git publishing fails (exit 1), then what `status` and `doctor` say."""
    failed = cli("--config", str(config), "-q", "run", "--as-of", AS_OF, env=env, check=1)
    status = cli("--config", str(config), "status", env=env).stdout
    return failed, status, cli("--config", str(config), "doctor", env=env, check=None).stdout


def test_a_publish_that_failed_before_its_commit_is_in_status_and_doctor_and_send_finishes_it(
        tmp_path, cli, git_env):
    """A typo in outputs.git.branch: the run exits 1 saying send tries again, and it does:
    `status` names the failure (and the partial run's error), `doctor` fails the git line,
    and once the typo is fixed `send` commits and pushes the week's files."""
    remote, checkout = published_checkout(tmp_path, git_env)
    gitcfg = {"repo": str(checkout), "branch": "mian", "path": "rl", "push": True}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, outputs={"git": gitcfg})
        failed, status, doctor = failed_run_seen(cli, config, git_env)
        still = cli("--config", str(config), "send", env=git_env, check=1)
        config = config_with(tmp_path, arxiv, outputs={"git": {**gitcfg, "branch": "main"}})
        sent = cli("--config", str(config), "send", env=git_env)
        later = cli("--config", str(config), "status", env=git_env).stdout
    wrong = f"git {checkout}: the checkout is on branch main, not mian (outputs.git.branch)"
    assert stderr_lines(failed) == [f"rl-digest: {wrong} (the next run or `rl-digest send` tries again)"]
    assert re.search(rf"git {checkout}: failing since 20\S+ — the checkout is on branch main, not mian "
                     r"\(outputs.git.branch\) \(the next run", status)
    assert f"    delivery error: {wrong}" in status
    assert re.search(rf"git +FAIL +{re.escape(wrong)}", doctor)
    assert wrong in still.stderr
    assert f"git {checkout}: pushed the commits that waited" in sent.stdout
    pushed = git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main", env=git_env).split()
    assert {f"rl/digests/{AS_OF}.md", "rl/READING_LIST.md", "rl/feed.xml"} <= set(pushed)
    assert git_lines(later.split("recent runs:")[0]) == [] and "failing since" not in later


def test_a_push_ended_by_a_stop_to_the_whole_group_says_so_and_send_pushes_and_mails_it(
        tmp_path, cli, git_env):
    """Ctrl-C or a service stop signals git too (it shares the run's process group): the push
    it ended is told as ended by that signal (it read `push failed: no message`), the reader
    stays queued, and `send` pushes the week and mails it once."""
    remote, checkout = published_checkout(tmp_path, git_env)
    hook, pushing, stall = remote / "hooks" / "pre-receive", tmp_path / "pushing", tmp_path / "stall"
    hook.write_text(f"#!/bin/sh\ntouch {pushing}\n[ -e {stall} ] && sleep 30\ncat >/dev/null\n")
    hook.chmod(0o755)
    stall.touch()
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=READERS[:1], outputs={"git": {
            "repo": str(checkout), "branch": "main", "path": "rl", "push": True}})
        with (tmp_path / "run.log").open("w") as log:
            proc = start_cli("--config", str(config), "run", "--as-of", AS_OF, env=git_env,
                             stderr=log, start_new_session=True)
            try:
                wait_for(pushing.exists, timeout=60, what="the push", proc=proc)
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        status = cli("--config", str(config), "status", env=git_env).stdout
        assert smtp.messages == []
        stall.unlink()
        sent = cli("--config", str(config), "send", env=git_env)
        delivered = copies(smtp)
    ended = f"git {checkout}: push failed: git push was ended by SIGTERM"
    assert "no message" not in (tmp_path / "run.log").read_text() + status
    assert re.search(rf"git {checkout}: failing since 20\S+ — push failed: git push was ended by SIGTERM",
                     status), status
    assert ended not in sent.stdout + sent.stderr
    assert f"git {checkout}: pushed the commits that waited" in sent.stdout
    pushed = git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main", env=git_env).split()
    assert f"rl/digests/{AS_OF}.md" in pushed
    assert delivered == {READERS[0]: 1}


def test_a_rebase_left_half_done_with_its_index_lock_is_one_line_and_doctor_fails_it(
        tmp_path, cli, git_env):
    """What a kill -9 mid-rebase leaves (.git/rebase-merge and a stale .git/index.lock) is
    named in one line saying how to clear it, by the run and by doctor; once cleared, `send`
    publishes the week."""
    remote, checkout = published_checkout(tmp_path, git_env)
    other = tmp_path / "other"
    git("clone", "--quiet", str(remote), str(other), env=git_env)
    who = ("-c", "user.name=Someone", "-c", "user.email=someone@example.org")
    for where, text in ((other, "theirs\n"), (checkout, "mine\n")):
        (where / "notes.md").write_text(text, encoding="utf-8")
        git("-C", str(where), "add", "notes.md", env=git_env)
        git("-C", str(where), *who, "commit", "--quiet", "-m", "notes", env=git_env)
    git("-C", str(other), "push", "--quiet", "origin", "main", env=git_env)
    git("-C", str(checkout), "fetch", "--quiet", "origin", env=git_env)
    halted = subprocess.run(["git", "-C", str(checkout), *who, "rebase", "origin/main"],
                            capture_output=True, env={**os.environ, **git_env})
    assert halted.returncode != 0 and (checkout / ".git" / "rebase-merge").is_dir()
    (checkout / ".git" / "index.lock").touch()
    gitcfg = {"repo": str(checkout), "branch": "main", "path": "rl", "push": True}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, outputs={"git": gitcfg})
        failed = cli("--config", str(config), "-q", "run", "--as-of", AS_OF, env=git_env, check=1)
        doctor = cli("--config", str(config), "doctor", env=git_env, check=None).stdout
        (checkout / ".git" / "index.lock").unlink()
        git("-C", str(checkout), "rebase", "--abort", env=git_env)
        git("-C", str(checkout), "reset", "--quiet", "--hard", "origin/main", env=git_env)
        sent = cli("--config", str(config), "send", env=git_env)
    half = (f"git {checkout}: a rebase was left half-done in the checkout: if no git runs there, "
            "remove .git/index.lock and run `git rebase --abort`")
    assert stderr_lines(failed) == [f"rl-digest: {half} (the next run or `rl-digest send` tries again)"]
    assert re.search(rf"git +FAIL +{re.escape(half)}", doctor)
    assert f"git {checkout}: pushed the commits that waited" in sent.stdout
    pushed = git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main", env=git_env).split()
    assert {f"rl/digests/{AS_OF}.md", "notes.md"} <= set(pushed)


@pytest.mark.parametrize("push", [(), ("--push",)])
def test_a_token_in_the_checkouts_remote_url_is_refused_and_never_repeated(tmp_path, cli, git_env, push):
    """git prints the remote's URL in some errors (here: nothing listens there); a token in it
    would reach stderr, the database and `status`. The push is refused, naming the remote.
    A push URL of its own (`git remote set-url --push`) was not looked at: it was pushed to,
    and `doctor` said OK after the fetch URL answered."""
    token = "ghp_SECRETTOKEN1234567890"
    remote, checkout = published_checkout(tmp_path, git_env)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    git("-C", str(checkout), "remote", "set-url", *push, "origin",
        f"http://x:{token}@127.0.0.1:{port}/remote.git", env=git_env)
    gitcfg = {"repo": str(checkout), "branch": "main", "path": "rl", "push": True}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, outputs={"git": gitcfg})
        failed, status, doctor = failed_run_seen(cli, config, git_env)
    url = "push URL" if push else "URL"
    refused = (f"git {checkout}: the {url} of remote origin (http://***@127.0.0.1:{port}/remote.git) holds "
               f"a password; take it out (git remote set-url {' '.join([*push, 'origin'])} URL) and use "
               "git's credential helper")
    assert stderr_lines(failed) == [f"rl-digest: {refused} (the next run or `rl-digest send` tries again)"]
    assert re.search(rf"git +FAIL +{re.escape(refused)}", doctor)
    stored = b"".join(path.read_bytes() for path in (tmp_path / "state").rglob("*") if path.is_file())
    assert b"SQLite format 3" in stored  # the database is among the files read
    assert token not in failed.stderr + status + doctor and token.encode() not in stored


@pytest.mark.parametrize("rule", ["pushurl", "pushInsteadOf"])
def test_doctor_asks_the_url_a_push_uses_not_the_fetch_url(tmp_path, cli, git_env, rule):
    """A push URL of the checkout's own (`git remote set-url --push`, a pushInsteadOf rule)
    that leads nowhere: every push fails, and doctor said OK because the fetch URL answered."""
    remote, checkout = published_checkout(tmp_path, git_env)
    gone = tmp_path / "gone" / "remote.git"
    if rule == "pushurl":
        git("-C", str(checkout), "remote", "set-url", "--push", "origin", str(gone), env=git_env)
    else:
        git("-C", str(checkout), "config", f"url.{tmp_path}/gone/.pushInsteadOf", f"{tmp_path}/",
            env=git_env)
    gitcfg = {"repo": str(checkout), "branch": "main", "path": "rl", "push": True}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = config_with(tmp_path, arxiv, outputs={"git": gitcfg})
        doctor = cli("--config", str(config), "doctor", env=git_env, check=None).stdout
        failed = cli("--config", str(config), "-q", "run", "--as-of", AS_OF, env=git_env, check=1)
        if rule == "pushurl":
            git("-C", str(checkout), "remote", "set-url", "--push", "origin", str(remote), env=git_env)
        else:
            git("-C", str(checkout), "config", "--remove-section", f"url.{tmp_path}/gone/", env=git_env)
        fixed = cli("--config", str(config), "doctor", env=git_env, check=None).stdout
    assert f"'{gone}' does not appear to be a git repository" in failed.stderr
    assert re.search(rf"git +FAIL +git {re.escape(str(checkout))}: the push URL of remote origin "
                     rf"\({re.escape(str(gone))}\) does not answer: fatal: '{re.escape(str(gone))}' "
                     "does not appear to be a git repository", doctor), git_lines(doctor)
    assert re.search(rf"git +OK +{re.escape(str(checkout))} pushes to origin, which answers", fixed)


def test_readers_at_localhost_get_the_digest_through_this_machines_mail_server(tmp_path, cli):
    """Cron mails its operator at root@localhost: with smtp_host 127.0.0.1 (or localhost, ::1)
    a reader's domain needs no period, in email.to, recipients_file and the commands that name
    a reader (it was exit 2, 'It should have a period'); through another server it still is
    exit 2, saying why, as alice@gmailcom is a typo there."""
    (tmp_path / "readers.txt").write_text("Root <root@localhost> lang=en\n", encoding="utf-8")
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=["ops@localhost"],
                             email={"recipients_file": "readers.txt"})
        run = cli("--config", str(config), "-q", "run", "--as-of", AS_OF)
        delivered = copies(smtp)
        stop = cli("--config", str(config), "readers", "--unsubscribe", "ops@localhost")
        config.write_text(config.read_text(encoding="utf-8").replace("127.0.0.1", "smtp.example.org"),
                          encoding="utf-8")
        remote = cli("--config", str(config), "config", "check", check=2)
    assert "Traceback" not in run.stderr + stop.stderr and stderr_lines(run) == []
    assert delivered == {"ops@localhost": 1, "root@localhost": 1}
    assert "ops@localhost" in stop.stdout
    assert stderr_lines(remote) == [
        f"rl-digest: {config}: email.to: not an email address: 'ops@localhost' (The part after the @-sign "
        "is not valid. It should have a period. Such a domain is taken only when email.smtp_host is localhost, "
        "127.0.0.1 or ::1, a mail server on this machine)"]
