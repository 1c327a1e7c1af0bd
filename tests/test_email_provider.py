"""A big group behind a real mail provider's limits: a cap on messages per connection, a
rate limit, a daily quota, one address refused for good among hundreds. Every reader gets
exactly one copy, none is lost, and what the provider held back goes with the next `send`,
with the Message-ID it first had. A real aiosmtpd server on 127.0.0.1
(tests/servers/smtp_server.py) plays the provider."""

from __future__ import annotations

import re
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from pipeline import store_outbox
from pipeline.config_email import read_recipients
from pipeline.deliver.channels import HELD, Deferred, Refused, Unreachable
from pipeline.deliver.outbox import StoreOutbox, next_retry
from pipeline.deliver.smtp_replies import refusal
from pipeline.status import waiting_lines
from pipeline.store import Store
from tests.helpers import rl_paper
from tests.processes import config_with, db_rows
from tests.servers.arxiv_server import ArxivServer
from tests.servers.smtp_server import SmtpServer, refused_port
from tests.test_delivery_cli import AS_OF, DAY
from tests.test_email import DIGEST, NOW, cfg, content, rows, save, send_pending

QUOTA = "550 5.4.5 Daily sending quota exceeded"


def people(count: int) -> list[str]:
    return [f"reader{n:04d}@example.org" for n in range(count)]


def copies(smtp: SmtpServer) -> Counter:
    """(reader, Message-ID) -> the copies the provider took."""
    with smtp.lock:
        return Counter((rcpt, str(m.message["Message-ID"]).strip()) for m in smtp.messages
                       for rcpt in m.rcpt_tos)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'state.sqlite3'}")


@pytest.mark.parametrize("stage", ["RCPT", "DATA"])
def test_a_daily_quota_refused_mid_group_is_the_senders_and_the_rest_wait_for_the_next_day(
        store: Store, stage: str) -> None:
    """Gmail's "550 5.4.5 Daily sending quota exceeded" to RCPT TO or the message is a 5xx, but
    the sender's limit, not the reader's (RFC 3463's X.4.5, congestion, is 'useful only as a
    persistent transient error'): every reader after the 10th was marked failed for good, and
    the next day's `send` sent none of them. Now they wait, uncounted, and then go, once each."""
    readers = people(30)
    save(store, readers)
    with SmtpServer(budget=10, over_budget=QUOTA, over_budget_at=stage) as smtp:
        first = send_pending(store, cfg(smtp.port), content, NOW)
        tried = len(smtp.rcpt_attempts)
        smtp.budget = 1000  # the next day
        second = send_pending(store, cfg(smtp.port), content, NOW + timedelta(days=1))
    assert (first.sent, first.pending, first.failed) == (10, 20, 0)
    assert tried == 12  # a second reader tells it is the sender's; not asked for each of the 20
    assert len(first.errors) == 1 and QUOTA in first.errors[0] and "20 deliveries stay queued" in first.errors[0]
    assert "the server holds the sender back (a sending limit or quota), not the reader" in first.errors[0]
    assert (second.sent, second.pending, second.failed) == (20, 0, 0)
    assert sorted(reader for reader, _ in copies(smtp)) == readers  # one copy each
    assert {row["status"] for row in rows(store).values()} == {"sent"}


def test_the_scheduler_backs_off_from_a_spent_daily_quota_as_postfix_does(store: Store) -> None:
    """A provider's daily quota spent at the publish: the scheduler looked every 15 minutes all
    day, 96 new sessions (each a login and a refused RCPT TO) to a provider that said no for
    the day, which counts against the sender's reputation. Now the looks come as Postfix's do
    (after as long as the mail has been queued, up to an hour): 15, 15, 30, then 60 minutes."""
    save(store, people(2))
    queued = StoreOutbox(store).pending()[0].queued
    assert queued is not None
    now, gaps = queued, []
    with SmtpServer(budget=1, over_budget=QUOTA, over_budget_at="RCPT") as smtp:
        for _ in range(4):
            send_pending(store, cfg(smtp.port), content, now, due_only=True)
            look = next_retry(StoreOutbox(store).pending(), None, now)
            assert look is not None
            gaps.append(round((look - now) / timedelta(minutes=1)))
            now = look
    assert gaps == [15, 15, 30, 60]
    assert smtp.connections == 4 and len(smtp.messages) == 1
    assert [row["attempts"] for row in rows(store).values()] == [1, 0]  # the holds counted nothing


def test_a_readers_own_mailbox_over_quota_still_fails_that_reader_alone(store: Store) -> None:
    """A quota that is the reader's (their mailbox full) is no sending limit: that reader's row
    fails with the server's words, the others still go."""
    readers = people(3)
    save(store, readers)
    words = "552 5.2.2 The email account that you tried to reach is over quota"
    with SmtpServer(reject={readers[1]: words}) as smtp:
        report = send_pending(store, cfg(smtp.port), content, NOW)
    assert (report.sent, report.pending, report.failed) == (2, 0, 1)
    assert rows(store)[readers[1]]["status"] == "failed" and words in rows(store)[readers[1]]["last_error"]


# Each provider's documented reply that is the sender's, not the reader's (to RCPT TO, or
# after the message: the stage it comes at).
SENDERS = [
    ("554 Message rejected: Sending paused for this account", "RCPT"),  # Amazon SES
    ("454 Throttling failure: Daily message quota exceeded", "DATA"),
    ("454 Throttling failure: Maximum sending rate exceeded", "DATA"),
    ("550 5.7.708 Service unavailable. Access denied, traffic not accepted from this IP.", "RCPT"),  # Microsoft 365
    ("550 5.7.705 Access denied, tenant has exceeded threshold.", "RCPT"),
    ("550 5.7.750 Service unavailable. Client blocked from sending from unregistered domains.", "RCPT"),
    ("550 5.1.8 Access denied, bad outbound sender", "RCPT"),
    ("550 5.1.90 Your message can't be sent because you've reached your daily limit for message "
     "recipients", "RCPT"),
    ("451 4.7.650 The mail server [192.0.2.1] has been temporarily rate limited due to IP reputation.",
     "RCPT"),  # Outlook.com
    ("550 5.7.26 Unauthenticated email from example.org is not accepted due to domain's DMARC policy.",
     "DATA"),  # Gmail
    ("550 5.7.1 Our system has detected an unusual rate of unsolicited mail originating from your IP "
     "address. To protect our users from spam, mail sent from your IP address has been blocked.", "DATA"),
    ("553 5.7.1 <digest@example.org>: Sender address rejected: not owned by user digest-bot", "RCPT"),  # Postfix
    # Microsoft 365's NDR table: the sending IP, the sending account or domain, the From address
    ("550 5.7.606 Access denied, banned sending IP [192.0.2.1]. To request removal from this list please "
     "visit https://sender.office.com/ and follow the directions.", "RCPT"),
    ("550 5.7.511 Access denied, banned sender[192.0.2.1]. To request removal from this list, forward this "
     "message to delist@microsoft.com.", "RCPT"),
    ("550 5.7.501 Access denied, spam abuse detected", "RCPT"),
    ("550 5.7.509 Access denied, sending domain [example.org] does not pass DMARC verification and has a "
     "DMARC policy of reject.", "DATA"),
    ("550 5.7.512 Access denied, message must be RFC 5322 section 3.6.2 compliant", "DATA"),
    ("550 5.7.800 Access denied, banned sender", "RCPT"),
    ("451 4.7.500 Access denied, please try again later", "RCPT"),
    ("554 5.2.2 Submission quota exceeded", "RCPT"),
    ("550 5.7.1 Unfortunately, messages from [192.0.2.1] weren't sent. Please contact your Internet service "
     "provider since part of their network is on our block list (S3140).", "RCPT"),  # Outlook.com
    # Gmail: the IP's reverse DNS, authentication, a flood from the sender
    ("550 5.7.1 [192.0.2.1] The IP address sending this message does not have a PTR record setup. As a "
     "policy, Gmail does not accept messages from IPs with missing PTR records.", "DATA"),
    ("550 5.7.25 The IP address sending this message does not have a PTR record setup, or the "
     "corresponding forward DNS entry does not point to the sending IP.", "DATA"),
    ("550 5.7.26 This mail has been blocked because the sender is unauthenticated. Gmail requires all "
     "senders to authenticate with either SPF or DKIM.", "DATA"),
    ("550 5.7.27 The sender's SPF record does not authorize this IP.", "DATA"),
    ("550 5.7.28 Our system has detected an unusual rate of unsolicited mail.", "DATA"),
    # Postfix: a blocklist of the client's IP (RBL), its HELO name
    ("550 5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org; "
     "https://www.spamhaus.org/query/ip/192.0.2.1", "RCPT"),
    ("554 5.7.1 Service unavailable; Client host [192.0.2.1] blocked using bl.spamcop.net", "RCPT"),
    ("504 5.5.2 <localhost>: Helo command rejected: need fully-qualified hostname", "RCPT"),
]
# ... and replies that are one reader's: their row alone fails (5xx) or waits, counted (4xx).
READERS = [
    "550 5.1.1 The email account that you tried to reach does not exist.",  # Gmail
    "550 5.2.1 The email account that you tried to reach is disabled.",
    "452 4.2.2 The email account that you tried to reach is over quota.",
    "450 4.2.1 The user you are trying to contact is receiving mail at a rate that prevents additional "
    "messages from being delivered.",
    "554 delivery error: dd This account has been disabled or discontinued [#102].",  # Yahoo
    "550 5.7.1 <b@example.org>: Recipient address rejected: Access denied",  # Postfix
    "550 5.4.1 Recipient address rejected: Access denied",  # Microsoft 365
    "550 5.7.504 <b@example.org>: Recipient address rejected: Access denied",
    "550 5.7.507 Access denied, rejected by recipient",  # the reader's organisation blocked the IP
    "550 5.7.513 Service unavailable, Client host [192.0.2.1] blocked by example.net using Customer Block "
    "list (AS16012607)",
    *(LATER := [  # the reader's, but later: their mailbox takes no more this hour (deferred, a 5xx)
        "550 5.2.121 Recipient's per hour message receive limit from specific sender exceeded",
        "550 5.2.122 Recipient's per hour message receive limit exceeded",
        "550 5.2.1 The user you are trying to contact is receiving mail at a rate that prevents "
        "additional messages from being delivered. x1si2 - gsmtp",
    ]),
    # whose, the reply does not say: the reader's, as before
    "550 5.7.1 Delivery not authorized, message refused",
    "554 5.7.1 <b@example.org>: Relay access denied",
    "554 Message rejected: Email address is not verified. The following identities failed the check in "
    "region US-EAST-1: b@example.org",
]


# Gmail's reply of several lines, each with the enhanced code: read as one, "... a PTR 5.7.1 record
# setup" matched none of the words above
GMAIL_PTR = ("550-5.7.1 [192.0.2.1] The IP address sending this message does not have a PTR\r\n"
             "550-5.7.1 record setup. As a policy, Gmail does not accept messages from IPs\r\n"
             "550 5.7.1 with missing PTR records. x1si2 - gsmtp")


@pytest.mark.parametrize(("wire", "stage"), [SENDERS[0], SENDERS[1], SENDERS[12], (GMAIL_PTR, "DATA")],
                         ids=["5xx-RCPT", "4xx-DATA", "banned-IP-RCPT", "lines-DATA"])
def test_a_reply_that_is_the_senders_holds_the_group_uncounted(store: Store, wire: str, stage: str) -> None:
    """Amazon SES's "554 Message rejected: Sending paused for this account", Microsoft 365's
    "550 5.7.708 ... traffic not accepted from this IP" and the like name no sending quota, so
    each reader after the first was offered the digest, refused, and marked failed for good:
    the whole group lost the week for the sender's problem (a 4xx such as SES's "454 Throttling
    failure" after the message counted a try against each). Now the rest wait, uncounted; so
    they do behind Microsoft's "550 5.7.606 Access denied, banned sending IP" and Gmail's PTR
    reply of several lines, which failed each reader."""
    readers = people(3)
    save(store, readers)
    words = re.sub(r"\r\n[0-9]{3}[ -]5\.7\.1", "", wire).replace("550-", "550 ")  # as one line
    with SmtpServer(budget=1, over_budget=wire, over_budget_at=stage) as smtp:
        report = send_pending(store, cfg(smtp.port), content, NOW)
        tried = len(smtp.rcpt_attempts)
    assert (report.sent, report.pending, report.failed) == (1, 2, 0), report.errors
    assert tried == 3  # the next reader tells it is the sender's; the provider is not asked for each
    assert [row["attempts"] for row in rows(store).values() if row["status"] == "pending"] == [0, 0]
    held = refusal(f"{words} ({'RCPT TO' if stage == 'RCPT' else 'after DATA'})")
    assert isinstance(held, Unreachable) and HELD in held.reason
    assert report.errors == [f"smtp 127.0.0.1:{smtp.port}: {held.reason}; 2 deliveries stay queued "
                             f"({readers[1]}, {readers[2]})"]
    shown = "\n".join(waiting_lines(StoreOutbox(store).pending(), None, None))  # as status and send say it
    assert shown.count(words) == 1 and shown.startswith("  2 deliveries wait for the sender: "), shown


# A reply no table holds, whose owner it does not say: a small provider's words for its block.
POOR = "554 5.7.1 Your access to this mail system has been rejected due to the sending MTA's poor reputation."


def test_the_same_refusal_to_every_reader_is_the_senders_and_they_go_once_it_lifts(store: Store) -> None:
    """A provider no table knows refused the sender with the same 554 to each of the 3 readers:
    each was marked failed for good, and the send after it lifted sent none. One server saying
    the same to every reader it was offered, taking none, judged what they share, the sender:
    they wait as for a "later" (counted, given up after some five days) and go once it lifts,
    each once, with the Message-ID of its first try."""
    readers = people(3)
    save(store, readers)
    with SmtpServer(budget=0, over_budget=POOR, over_budget_at="RCPT") as smtp:
        first = send_pending(store, cfg(smtp.port), content, NOW)
        held = rows(store)
        shown = "\n".join(waiting_lines(StoreOutbox(store).pending(), None, None))
        smtp.budget = 100
        second = send_pending(store, cfg(smtp.port), content, NOW + timedelta(days=1))
        got = copies(smtp)
    assert (first.sent, first.pending, first.failed) == (0, 3, 0), first.errors
    assert len(first.errors) == 1, first.errors  # one line for the group, as a held one: not one a reader
    assert f"{POOR} (RCPT TO): the same to all 3 " in first.errors[0]
    assert f"; 3 deliveries stay queued ({readers[0]}, {readers[1]}, {readers[2]})" in first.errors[0]
    assert [(row["status"], row["attempts"]) for row in held.values()] == [("pending", 1)] * 3
    assert all(POOR in row["last_error"] and HELD in row["last_error"] for row in held.values())
    assert shown.startswith(f"  3 deliveries wait for the sender: {POOR} (RCPT TO): the same to all 3 "), shown
    assert (second.sent, second.pending, second.failed) == (3, 0, 0)
    assert sorted(got) == sorted((reader, row["message_id"]) for reader, row in held.items())
    assert set(got.values()) == {1}


def test_the_same_refusal_to_readers_is_theirs_once_another_reader_is_taken(store: Store) -> None:
    """Two readers refused with the same words that say not whose (Exim's "550 Unrouteable
    address" for two mistyped addresses) wait as the sender's while no one else is tried; the
    next batch, where the server takes a new digest's reader, fails them. A reply about the
    reader's own mailbox (RFC 3463's X.1.1) fails them at once, the same to both or not."""
    readers, unknown = people(3), "550 Unrouteable address"

    def any_week(digest_id: str) -> tuple[str, str, str]:
        return content(DIGEST)

    save(store, readers[:2])
    with SmtpServer(reject={readers[0]: unknown, readers[1]: unknown}) as smtp:
        first = send_pending(store, cfg(smtp.port), content, NOW)
        save(store, readers, digest_id="2025-01-13")
        second = send_pending(store, cfg(smtp.port), any_week, NOW + timedelta(days=7))
    assert (first.sent, first.pending, first.failed) == (0, 2, 0)
    assert (second.sent, second.pending, second.failed) == (1, 0, 4)
    assert {(row["recipient"], row["status"]) for row in store_outbox.rows(store, None)} == {
        (readers[0], "failed"), (readers[1], "failed"), (readers[2], "sent")}
    mailbox = people(2)
    save(store, mailbox, digest_id="2025-01-20")
    with SmtpServer(reject=dict.fromkeys(mailbox, "550 5.1.1 <x>: user unknown")) as smtp:
        third = send_pending(store, cfg(smtp.port), any_week, NOW + timedelta(days=14))
    assert (third.sent, third.pending, third.failed) == (0, 0, 2)
    alone = "reader0009@example.org"  # one reader, two digests waiting: the same words are theirs
    save(store, [alone], digest_id="2025-01-27")
    save(store, [alone], digest_id="2025-02-03")
    with SmtpServer(reject={alone: unknown}) as smtp:
        fourth = send_pending(store, cfg(smtp.port), any_week, NOW + timedelta(days=28))
    assert (fourth.sent, fourth.pending, fourth.failed) == (0, 0, 2)


def test_a_reply_that_reads_as_the_senders_but_is_one_readers_holds_that_reader_alone(store: Store) -> None:
    """A reply the table reads as the sender's may be one reader's own (a server's words for
    a block on one address): it held every reader after it, week after week, on every try,
    since the same reader was tried first. The next reader's acceptance tells: that reader
    waits, uncounted, and the others get their digest."""
    readers = people(4)
    save(store, readers)
    blocked = "550 5.7.1 mail from your IP is not accepted for this mailbox"
    with SmtpServer(reject={readers[0]: blocked}) as smtp:
        report = send_pending(store, cfg(smtp.port), content, NOW)
        got = sorted(reader for reader, _ in copies(smtp))
    assert (report.sent, report.pending, report.failed) == (3, 1, 0), report.errors
    assert got == readers[1:]
    assert [(row["status"], row["attempts"]) for reader, row in rows(store).items() if reader == readers[0]] \
        == [("pending", 0)]


def test_each_providers_reply_is_told_the_senders_or_one_readers() -> None:
    """Every reply in SENDERS holds the group; every one in READERS is that reader's alone (a
    5xx fails them, a 4xx defers them, and so does a 5xx that says later: a reader's hourly
    receive limit failed them for good): the table is the providers' documented meaning."""
    told = {words: type(refusal(words)) for words, _ in SENDERS} | {words: type(refusal(words)) for words in READERS}
    assert {words: kind for words, kind in told.items() if words in dict(SENDERS) and kind is not Unreachable} == {}
    assert {words: kind for words, kind in told.items() if words in READERS
            and kind is not (Refused if words.startswith("5") and words not in LATER else Deferred)} == {}


def test_a_rate_limit_to_mail_from_holds_the_rest_of_the_group_without_asking_for_each(store: Store) -> None:
    """A provider's "451 4.7.1 rate limited" to MAIL FROM names no reader: the sender is held
    back. Each of the 20 readers after it was offered anyway (20 more refusals to a provider
    that escalates a limit into a block), each try counted toward giving up the reader, and
    the run's errors were a line each. Now the rest wait, uncounted, on one line."""
    readers = people(30)
    save(store, readers)
    with SmtpServer(budget=10) as smtp:
        first = send_pending(store, cfg(smtp.port), content, NOW)
        asked, waiting = smtp.mail_attempts, rows(store)
        smtp.budget = 1000  # the next minute
        second = send_pending(store, cfg(smtp.port), content, NOW + timedelta(minutes=1))
    assert (first.sent, first.pending, first.failed) == (10, 20, 0)
    assert asked <= 12  # 10 taken, then the limit, on this connection and once on a new one
    assert len(first.errors) == 1
    assert "451 4.7.1 rate limited, try later (MAIL FROM); 20 deliveries stay queued" in first.errors[0]
    assert {row["attempts"] for row in waiting.values() if row["status"] == "pending"} == {0}
    assert (second.sent, second.pending, second.failed) == (20, 0, 0)
    assert sorted(reader for reader, _ in copies(smtp)) == readers  # one copy each


def test_the_runs_summary_line_says_how_many_wait_and_how_many_failed(tmp_path: Path, cli) -> None:
    """The one line a run ends with said "sent to 2" of 6 readers, silent on the 3 the
    provider's daily quota held back and the 1 it refused for good."""
    readers = people(6)
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            SmtpServer(budget=2, over_budget=QUOTA, over_budget_at="RCPT",
                       reject={readers[1]: "550 5.1.1 user unknown"}) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=readers)
        ran = cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
    assert "sent to 2 (3 waiting, 1 failed)," in ran.stdout


@pytest.mark.slow  # five runs of the CLI: 2.9 s
def test_a_banned_sending_ip_is_said_once_by_status_and_send_and_the_readers_go_once_delisted(
        tmp_path: Path, cli) -> None:
    """Microsoft 365's "550 5.7.606 Access denied, banned sending IP" to each reader after the
    first two: the run failed each of them for good. Now they wait; `status` and `send` say
    once that the server refuses the sender and what to check (they gave the reply on each
    waiting reader's line, a group of hundreds' worth), exit 1 while it lasts, and once the
    IP is delisted `send` delivers each of them once, a reader tried before with the
    Message-ID of that try."""
    readers = people(6)
    banned = SENDERS[12][0]
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            SmtpServer(budget=2, over_budget=banned, over_budget_at="RCPT",
                       reject={readers[1]: "550 5.1.1 user unknown"}) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=readers)
        ran = cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        tried = {r["recipient"]: r["message_id"] for r in db_rows(tmp_path, "SELECT * FROM deliveries")
                 if r["status"] == "pending"}
        status = cli("--config", str(config), "status").stdout
        again = cli("--config", str(config), "send", check=1).stdout  # still banned: exit 1
        smtp.budget = 100  # delisted
        sent = cli("--config", str(config), "send").stdout
        got = copies(smtp)
    assert "sent to 2 (3 waiting, 1 failed)," in ran.stdout
    once = (f"  3 deliveries wait for the sender: smtp 127.0.0.1:{smtp.port}: {banned} (RCPT TO): the "
            "server refuses the sender, not the reader: the readers wait, no try counted, and go once it "
            "accepts; check the sending IP: the blocklist or provider the reply names (delist it there) and "
            "its reverse DNS (PTR)\n")
    for out in (status.split("\noutbox:")[1], again):  # in status, below the run's own errors
        assert out.count(banned) == 1 and once in out, out
        assert re.findall(r"  2026-11-02 (\S+): pending; .* — held with the sender, as said above\n", out) \
            == readers[3:], out
    assert "outbox: 3 pending, 1 failed" in status and again.startswith("sent 0, pending 3, failed 0\n")
    assert sent.startswith("sent 3, pending 0, failed 0\n") and banned not in sent
    assert sorted(reader for reader, _ in got) == sorted(set(readers) - {readers[1]})
    assert set(got.values()) == {1}  # one copy each
    assert tried[readers[3]] and all(got[(reader, mid)] == 1 for reader, mid in tried.items() if mid)


def test_a_cap_on_messages_per_connection_opens_a_new_one_and_each_reader_gets_one_copy(
        store: Store) -> None:
    """Gmail and Exchange cap the messages of one session ("421 4.7.0 Too many messages,
    closing"): the connection is reused up to the cap, then opened again, and nobody is lost."""
    readers = people(25)
    save(store, readers)
    with SmtpServer(per_connection=10) as smtp:
        report = send_pending(store, cfg(smtp.port), content, NOW)
    assert (report.sent, report.pending, report.failed) == (25, 0, 0)
    assert smtp.connections == 3  # not one a reader
    assert sorted(reader for reader, _ in copies(smtp)) == readers


@pytest.mark.slow  # a thousand messages: about a minute on 2 busy cores
def test_a_thousand_readers_behind_a_providers_limits_get_one_copy_each(tmp_path: Path, cli) -> None:
    """1,000 readers in email.recipients_file; a provider that closes each session after 100
    messages, refuses one address for good, and stops at its daily quota after 600. The run
    says what went and what waits; the next day's `send` sends the rest, a reader held back
    at RCPT TO with the Message-ID their try had; each reader ends with one copy, one failed."""
    readers = people(1000)
    (tmp_path / "readers.txt").write_text("".join(f"Reader {n} <{a}>\n" for n, a in enumerate(readers)))
    gone = readers[500]
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, \
            SmtpServer(per_connection=100, budget=600, over_budget=QUOTA, over_budget_at="RCPT",
                       reject={gone: "550 5.1.1 user unknown"}) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=[],
                             email={"recipients_file": str(tmp_path / "readers.txt")})
        ran = cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        held = {r["recipient"]: r["message_id"] for r in db_rows(tmp_path, "SELECT * FROM deliveries")
                if r["status"] == "pending" and r["message_id"]}
        status = cli("--config", str(config), "status").stdout
        smtp.budget = 10_000  # the next day
        sent = cli("--config", str(config), "send")
        after = cli("--config", str(config), "status").stdout
    assert "sent to 600 (399 waiting, 1 failed)" in ran.stdout
    assert "outbox: 399 pending, 1 failed" in status
    assert sent.stdout.startswith("sent 399, pending 0, failed 0\n")
    assert "outbox: 0 pending, 1 failed" in after
    got = copies(smtp)
    assert set(got.values()) == {1} and sorted(r for r, _ in got) == sorted(set(readers) - {gone})
    assert held and all(got[(reader, mid)] == 1 for reader, mid in held.items())
    assert smtp.connections <= 12  # a session per 100 messages, not one a reader


@pytest.mark.parametrize("stage", ["RCPT", "DATA"])
def test_a_provider_closing_on_every_reader_with_a_421_is_not_reconnected_once_a_reader(
        store: Store, stage: str) -> None:
    """Gmail's rate limit, "421 4.7.0 Try again later, closing connection", to RCPT TO or the
    message: each of the 20 readers after it got a connection of their own (and, after DATA,
    the whole message uploaded again), 20 more sessions to a provider that asked to be left
    alone. A 421 to two readers in a row is the provider's: the rest wait, on one line."""
    readers = people(30)
    save(store, readers)
    words = "421 4.7.0 Try again later, closing connection"
    with SmtpServer(budget=10, over_budget=words, over_budget_at=stage) as smtp:
        first = send_pending(store, cfg(smtp.port), content, NOW)
        sessions = smtp.connections
        smtp.budget = 1000  # the next minute
        second = send_pending(store, cfg(smtp.port), content, NOW + timedelta(minutes=1))
    assert (first.sent, first.pending, first.failed) == (10, 20, 0)
    assert sessions <= 4
    assert f"{words} ({'RCPT TO' if stage == 'RCPT' else 'after DATA'}); 19 deliveries stay queued" \
        in first.errors[-1]
    assert (second.sent, second.pending, second.failed) == (20, 0, 0)
    assert sorted(reader for reader, _ in copies(smtp)) == readers  # one copy each


@pytest.mark.slow  # 3,000 readers checked
def test_an_hourly_send_with_nothing_waiting_checks_a_big_readers_file_once(tmp_path: Path, cli) -> None:
    """An hourly cron `send` of a 3,000-reader group with nothing waiting checked every line of
    email.recipients_file five times over (its problems, the email channel, who is still listed,
    the channels' readers, the resend hint): 4.5 s more than a one-reader group's on 2 busy
    cores, where one check of the file takes 1.3 s."""
    def send_time(count: int) -> float:
        folder = tmp_path / str(count)
        folder.mkdir()
        (folder / "readers.txt").write_text("".join(f"Reader {n} <{a}>\n" for n, a in enumerate(people(count))))
        config = config_with(folder, smtp_port=refused_port(), recipients=[],
                             email={"recipients_file": str(folder / "readers.txt")})
        cli("--config", str(config), "send")  # the warm CLI's first start
        began = time.perf_counter()
        assert cli("--config", str(config), "send").stdout == "sent 0, pending 0, failed 0\n"
        return time.perf_counter() - began

    one, group = send_time(1), send_time(3000)
    checked_once = min(group - one, 60.0)  # what reading and checking the file once or more took
    began = time.perf_counter()
    read_recipients(tmp_path / "3000" / "readers.txt")
    once = time.perf_counter() - began
    assert checked_once < 2 * once + 0.3, (checked_once, once)
