"""Email through the outbox, against a real SMTP server (aiosmtpd on 127.0.0.1): the email
channel (pipeline/deliver/email.py) driven by the outbox state machine (outbox.py, outbox_batch.py)."""

from __future__ import annotations

import base64
import logging
import re
import shutil
import smtplib
import ssl
import subprocess
import time
from datetime import UTC, datetime, timedelta
from email.header import decode_header, make_header
from email.utils import parseaddr, parsedate_to_datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from pipeline import compose, publish, store_outbox
from pipeline import config as config_mod
from pipeline.config_email import Email
from pipeline.deliver.email import EmailChannel
from pipeline.deliver.email_message import build_message, message_bytes
from pipeline.deliver.outbox import MAX_ATTEMPTS, RESENT, StoreOutbox, backoff
from pipeline.deliver.outbox_batch import DeliveryReport, _defer, deliver
from pipeline.models import RunReport
from pipeline.store import Store
from pipeline.store_schema import deliveries
from tests import fixtures_digest as fx
from tests.helpers import write_config
from tests.servers.smtp_server import TEST_PASSWORD, TEST_USER, SmtpServer, refused_port

# The test server requires AUTH over plain TCP on 127.0.0.1 on purpose (no certificate needed).
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")

NOW = datetime(2025, 1, 6, 0, 30, tzinfo=UTC)
DIGEST = "2025-01-06"
SENDER = "强化学习周报 <digest@example.org>"
SUBJECT = "强化学习周报 · RL for LLMs weekly · 2025-01-06"
TEXT = "本周论文\nThis week's papers: GRPO, DAPO.\n.a line that starts with a dot\n"
HTML = "<html><body><h1>本周论文</h1><p>This week's papers</p></body></html>"
PEOPLE = ["ada@example.org", "bo@example.net", "chen@example.com"]


def content(digest_id: str) -> tuple[str, str, str]:
    assert digest_id == DIGEST
    return SUBJECT, TEXT, HTML


def send_pending(store: Store, cfg: Email, content, now: datetime, *, due_only: bool = False,
                 max_attempts: int = MAX_ATTEMPTS,
                 ssl_context: ssl.SSLContext | None = None) -> DeliveryReport:
    """One batch as `run`/`send` (due_only=False) or the scheduler (due_only=True) does it."""
    channel = EmailChannel(cfg, [], lambda digest, languages: content(digest.id), ["zh", "en"],
                           ssl_context=ssl_context)
    return deliver(StoreOutbox(store), {"email": channel}, lambda did: SimpleNamespace(id=did), now,
                   due_only=due_only, max_attempts=max_attempts)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'state.sqlite3'}")


def save(store: Store, recipients: list[str] = PEOPLE, digest_id: str = DIGEST) -> None:
    window = (NOW - timedelta(days=7), NOW)
    store.save_digest(digest_id, window, {"title": "test"}, [], recipients)


def cfg(port: int, **over) -> Email:
    values = {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": port, "security": "none",
              "username_env": None, "password_env": None, "from_": SENDER, "to": [],
              "timeout_seconds": 2,
              "unsubscribe_url": "https://example.org/unsubscribe?u={recipient}"}
    values.update(over)
    return Email(**values)


def rows(store: Store) -> dict[str, dict]:
    return {row["recipient"]: row for row in store_outbox.rows(store, DIGEST)}


# --- the message ---------------------------------------------------------------------
def test_one_message_per_recipient_with_headers_and_parts(store: Store) -> None:
    save(store)
    with SmtpServer() as server:
        before = datetime.now(UTC).replace(microsecond=0)
        report = send_pending(store, cfg(server.port), content, NOW)
    assert (report.sent, report.pending, report.failed, report.errors) == (3, 0, 0, [])
    assert report.ok
    assert sorted(server.recipients) == sorted(PEOPLE)
    state = rows(store)
    for person in PEOPLE:
        (got,) = server.to(person)
        assert got.rcpt_tos == [person]
        assert got.mail_from == "digest@example.org"
        msg = got.message
        raw = got.data.decode("ascii")  # 7-bit clean on the wire
        # headers
        assert msg.get_all("To") == [person]
        head = raw.split("\r\n\r\n", 1)[0]
        assert "From: =?utf-8?b?5by65YyW5a2m5Lmg5ZGo5oql?= <digest@example.org>" in head
        assert "Subject: =?utf-8?" in head
        assert "强化学习周报" not in raw
        (sender,) = msg["From"].addresses
        assert (sender.display_name, sender.addr_spec) == ("强化学习周报", "digest@example.org")
        assert str(msg["Subject"]) == SUBJECT
        assert before <= parsedate_to_datetime(msg["Date"]) <= datetime.now(UTC)
        message_id = str(msg["Message-ID"]).strip()  # a long id may be folded onto its own line
        assert message_id.startswith("<") and message_id.endswith("@example.org>")
        assert str(msg["List-Id"]) == "<rl-digest.example.org>"
        unsubscribe = str(msg["List-Unsubscribe"])
        assert "<mailto:digest@example.org?subject=unsubscribe>" in unsubscribe
        assert f"<https://example.org/unsubscribe?u={person.replace('@', '%40')}>" in unsubscribe
        assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        # parts: multipart/alternative, text first, HTML last, UTF-8
        assert msg.get_content_type() == "multipart/alternative"
        parts = list(msg.iter_parts())
        assert [p.get_content_type() for p in parts] == ["text/plain", "text/html"]
        assert all(p.get_content_charset() == "utf-8" for p in parts)
        assert parts[0].get_content().replace("\r\n", "\n") == TEXT
        assert parts[1].get_content().strip() == HTML
        # the outbox row
        row = state[person]
        assert row["status"] == "sent"
        assert row["message_id"] == message_id
        assert row["attempts"] == 1 and row["sent_at"] and row["next_attempt"] is None


def test_an_unsubscribe_url_with_a_host_outside_ascii_goes_in_list_unsubscribe_as_its_a_label() -> None:
    """The host's case of test_delivery_cli.py's test_an_unsubscribe_url_outside_ascii_...,
    whose run builds its message here: the header holds a URI, the message goes as ASCII."""
    msg = build_message(sender="RL Digest <digest@example.org>", recipient="Ada <ada@example.org>",
                        subject="周报", text="t", html="<p>h</p>", digest_id=DIGEST, list_id="rl.example.org",
                        unsubscribe_mailto="digest@example.org", unsubscribe_url="https://例子.example/u?u={recipient}",
                        date=NOW)
    assert message_bytes(msg).isascii()
    assert str(msg["List-Unsubscribe"]).split() == [
        "<https://xn--fsqu00a.example/u?u=ada%40example.org>,", "<mailto:digest@example.org?subject=unsubscribe>"]
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_build_message_without_unsubscribe_url() -> None:
    msg = build_message(sender="RL Digest <digest@example.org>", recipient="a@example.org",
                        subject="周报", text="t", html="<p>h</p>", digest_id=DIGEST,
                        list_id="RL Digest <rl.example.org>", unsubscribe_mailto="digest@example.org",
                        unsubscribe_url=None, date=NOW)
    assert msg["List-Unsubscribe"] == "<mailto:digest@example.org?subject=unsubscribe>"
    assert msg["List-Unsubscribe-Post"] is None
    assert msg["List-Id"] == "RL Digest <rl.example.org>"
    assert msg.get_content_type() == "multipart/alternative"
    assert "multipart/digest" not in msg.as_string()


def test_quoted_printable_lines_and_header_lines_with_encoded_words_keep_to_76_characters(
        store: Store) -> None:
    """RFC 2045 (6.7) limits a quoted-printable line to 76 characters, its soft break's "="
    counted, and RFC 2047 (2) a header line holding an encoded-word to 76: the email's HTML
    (inlined CSS, long lines) went out in lines of 77 and 78, and so did a From or Subject
    with Chinese in it (SpamAssassin tolerates 78 since its bug 5491; RFC 2045 does not)."""
    html = ("<html><head><style>" + "p { margin: 0 0 6px; line-height: 1.65; } " * 8 + "</style></head>"
            + "<body>" + "<p style=\"font-size: 15px\">This week's papers: GRPO, DAPO. 本周</p>" * 40
            + "</body></html>")
    text = "This week's papers " * 30 + "\n" + "本周论文 · 2025-01-06\n"
    save(store, PEOPLE[:1])
    with SmtpServer() as server:
        report = send_pending(store, cfg(server.port, from_='"强化学习周报, RL Weekly" <digest@example.org>'),
                              lambda _: ("强化学习周报 Reinforcement Learning for LLMs Weekly · 2025-01-06 · 8 papers",
                                         text, html), NOW)
    assert report.sent == 1, report.errors
    (got,) = server.messages
    head, _, body = got.data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if b"=?" in line and not line.startswith(b"List-Unsubscribe:"):
            assert len(line) <= 76, line
    parts = list(got.message.iter_parts())
    assert [p["Content-Transfer-Encoding"] for p in parts] == ["quoted-printable"] * 2
    for part in parts:
        for line in part.get_payload().splitlines():
            assert len(line) <= 76, line
    assert got.message.get_body(("html",)).get_content().strip() == html
    assert got.message.get_body(("plain",)).get_content().replace("\r\n", "\n") == text
    assert got.message["From"].addresses[0].display_name == "强化学习周报, RL Weekly"


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff(n) for n in (1, 2, 3)] == [timedelta(minutes=m) for m in (5, 10, 20)]
    assert backoff(30) == timedelta(hours=6)


def test_non_ascii_address_goes_out_with_smtputf8(store: Store) -> None:
    save(store, ["张三@example.org"])
    with SmtpServer() as server:
        report = send_pending(store, cfg(server.port), content, NOW)
    assert report.sent == 1, report.errors
    (got,) = server.messages
    assert got.rcpt_tos == ["张三@example.org"]
    assert got.message["To"] == "张三@example.org"
    assert str(got.message["Subject"]) == SUBJECT


@pytest.mark.parametrize("text", [
    "Featured · GRPO\n\nFrom the reading list\n" + "From " + "x" * 71 + "\nFrom the end\n",
    "Featured: GRPO\n\nFrom the reading list\n",  # ASCII, short lines: it went 7bit
])
def test_a_line_that_begins_from_is_not_one_an_mbox_store_mangles(store: Store, text: str) -> None:
    """An English email's text part had a line 'From the reading list' (the heading) as it
    was, which an mbox store (its own separator) turns into '>From the reading list': its F
    goes as =46 (RFC 2049 3 (8)), in quoted-printable lines still 76 at most."""
    save(store, PEOPLE[:1])
    html = "<p>" + "x" * 72 + "From the reading list</p>"  # a quoted-printable line break before "From"
    with SmtpServer() as server:
        report = send_pending(store, cfg(server.port), lambda _: ("Weekly", text, html), NOW)
    assert report.sent == 1, report.errors
    (got,) = server.messages
    body = got.data.partition(b"\r\n\r\n")[2]
    assert not [line for line in body.split(b"\r\n") if line.startswith(b"From ")]
    for part in got.message.iter_parts():
        assert all(len(line) <= 76 for line in part.get_payload().splitlines())
    assert got.message.get_body(("plain",)).get_content().replace("\r\n", "\n") == text
    assert got.message.get_body(("html",)).get_content().strip() == html


@pytest.mark.parametrize("subject", [
    "大模型 强化学习周报 · 2026-11-30 · 4 篇论文",
    "强化学习周报 LLM Alignment Weekly · 2026-11-30 · 8 papers",
    "LLM — × 智能体 — Ünïcode周报 · 2026-11-30 · 64 篇论文",
])
def test_a_subject_reads_back_with_every_space(store: Store, subject: str) -> None:
    """Python folds a long Subject between two encoded-words at one of its spaces, which
    every reader then drops (RFC 2047 6.2: white space between encoded-words is not text):
    a topic named '大模型 强化学习' was mailed as '… 2026-11-30· 4 篇论文'."""
    save(store, PEOPLE[:1])
    with SmtpServer() as server:
        report = send_pending(store, cfg(server.port), lambda _: (subject, TEXT, HTML), NOW)
    assert report.sent == 1, report.errors
    (got,) = server.messages
    assert str(got.message["Subject"]) == subject
    head = got.data.partition(b"\r\n\r\n")[0]
    assert all(len(line) <= 76 for line in head.split(b"\r\n") if b"=?" in line)


@pytest.mark.parametrize("reader, sender", [
    ("Dr Dr Alexander Humboldt-Smith 施朱八", "强化学习周报"),  # To in a line of 77
    ("强卫韩 沈赵研 尤研吕杨吴沈孙朱 十王 RL", "强化学习周报"),  # folded at the space before 十王
    ("ada", "Reader the Humboldt-Smith Alexander Humboldt-Smith Reader 杨施 Research 孙 沈郑研九"),
    ("ada", "GroupResearchGroup施RL卫何沈八"),  # From in a line of 77
])
def test_a_long_chinese_and_latin_name_reads_back_in_lines_of_76(store: Store, reader: str,
                                                                  sender: str) -> None:
    """A reader's (or the sender's) name of Chinese and Latin words went in a To (From) line of
    77 or 78, the address after the name's encoded-words (RFC 2047 2 holds such a line to 76),
    or with a space between two encoded-words, which every reader drops (RFC 2047 6.2)."""
    save(store, [f'"{reader}" <reader@example.org>'])
    with SmtpServer() as server:
        report = send_pending(store, cfg(server.port, from_=f'"{sender}" <d@example.org>'), content, NOW)
    assert report.sent == 1, report.errors
    (got,) = server.messages
    head = got.data.partition(b"\r\n\r\n")[0].decode()
    assert all(len(line) <= 76 for line in head.split("\r\n") if "=?" in line)
    unfolded = re.sub(r"\r\n(?=[ \t])", "", head)
    for field, name, address in (("To", reader, "reader@example.org"), ("From", sender, "d@example.org")):
        value = re.search(rf"^{field}: (.*)$", unfolded, re.M).group(1)
        as_read = str(make_header(decode_header(value)))  # RFC 2047 6.2, as mail clients read it
        assert parseaddr(as_read) == (name, address)


@pytest.mark.parametrize("where", ["before the content", "after the content"])
def test_a_bug_mid_data_leaves_the_next_reader_a_fresh_connection(store: Store, monkeypatch,
                                                                  where: str) -> None:
    """An exception inside one reader's transaction that is no SMTP reply (a bug raising
    mid-DATA) is that reader's alone; the next reader gets a new connection: on the old one
    their MAIL FROM went as the first message's content (no answer until the timeout, then
    the channel called unreachable) or read the first message's 250 as its own reply."""
    save(store, PEOPLE[:2])
    sent = smtplib.SMTP.send
    calls: list[bytes] = []

    def buggy(self: smtplib.SMTP, data: bytes | str) -> None:
        body = data.encode() if isinstance(data, str) else data
        if body.endswith(b"\r\n.\r\n"):
            calls.append(body)
            if len(calls) == 1:
                if where == "after the content":
                    sent(self, data)
                raise RuntimeError("a bug mid-DATA")
        sent(self, data)

    monkeypatch.setattr(smtplib.SMTP, "send", buggy)
    with SmtpServer() as server:
        started = time.monotonic()
        report = send_pending(store, cfg(server.port, timeout_seconds=5), content, NOW)
        took = time.monotonic() - started
    state = rows(store)
    assert report.sent == 1 and state[PEOPLE[1]]["status"] == "sent", report.errors
    assert "RuntimeError: a bug mid-DATA" in state[PEOPLE[0]]["last_error"]
    assert took < 4  # no wait for a reply that never comes
    assert [m.rcpt_tos for m in server.messages][-1] == [PEOPLE[1]]
    assert all(b"MAIL FROM" not in m.data for m in server.messages)


def test_an_internationalised_domain_needs_no_smtputf8(store: Store) -> None:
    """A reader (or a sender) at a domain such as bücher.example goes out with the domain's
    A-label, in the envelope and in To/From, to any server: it went out as UTF-8 with SMTPUTF8,
    and a server without it (many a relay) refused that reader for good, though an ASCII
    local part needs none (RFC 6531 is for what has no ASCII form)."""
    save(store, ["ida@bücher.example", "张三@example.org"])
    with SmtpServer(smtputf8=False) as server:
        report = send_pending(store, cfg(server.port, from_="强化学习周报 <digest@straße.example>"),
                              content, NOW)
    assert (report.sent, report.failed) == (1, 1), report.errors
    (got,) = server.messages
    assert got.rcpt_tos == ["ida@xn--bcher-kva.example"]
    assert got.mail_from == "digest@xn--strae-oqa.example"
    assert "SMTPUTF8" not in got.mail_options
    assert got.data.isascii()
    assert got.message["To"] == "ida@xn--bcher-kva.example"
    assert got.message["From"].addresses[0].addr_spec == "digest@xn--strae-oqa.example"
    assert str(got.message["Subject"]) == SUBJECT
    assert "SMTPUTF8" in rows(store)["张三@example.org"]["last_error"]  # that one has no ASCII form
    assert rows(store)["ida@bücher.example"]["status"] == "sent"  # the reader is who they were


@pytest.mark.parametrize("sender", ["root@localhost", "RL Digest <digest@mailhost>"])
def test_a_sender_of_a_local_mail_server_needs_no_period_in_its_domain(store: Store, sender) -> None:
    """A server relaying through its own MTA sends as root@localhost (that MTA names it)."""
    save(store, PEOPLE[:1])
    with SmtpServer() as server:
        report = send_pending(store, cfg(server.port, from_=sender), content, NOW)
    assert report.sent == 1, report.errors
    (got,) = server.messages
    assert got.message["From"] == sender
    assert got.message["Message-ID"].endswith(sender.rstrip(">").rpartition("@")[2] + ">")


# --- faults ----------------------------------------------------------------------------
def test_451_once_stays_pending_then_sent_after_backoff(store: Store) -> None:
    save(store, PEOPLE[:2])
    with SmtpServer(data_replies=["451 4.3.0 Try again later"]) as server:
        first = send_pending(store, cfg(server.port), content, NOW)
        assert (first.sent, first.pending, first.failed) == (1, 1, 0)
        deferred = rows(store)[PEOPLE[0]]
        assert deferred["status"] == "pending" and deferred["attempts"] == 1
        assert "451 4.3.0 Try again later" in deferred["last_error"]
        assert datetime.fromisoformat(deferred["next_attempt"]) == NOW + timedelta(minutes=5)
        assert PEOPLE[0] in first.errors[0] and "451" in first.errors[0]

        paced = send_pending(store, cfg(server.port), content, NOW + timedelta(minutes=1),
                             due_only=True)
        assert (paced.sent, paced.pending) == (0, 1)  # the scheduler waits for the backoff

        later = send_pending(store, cfg(server.port), content, NOW + timedelta(minutes=6),
                             due_only=True)
        assert (later.sent, later.pending, later.failed) == (1, 0, 0)
    assert sorted(server.recipients) == sorted(PEOPLE[:2])  # each exactly once
    assert rows(store)[PEOPLE[0]]["status"] == "sent"
    assert rows(store)[PEOPLE[0]]["attempts"] == 2
    assert rows(store)[PEOPLE[0]]["last_error"] is None


def test_a_backoff_set_before_the_clock_went_back_does_not_wait_for_it_to_catch_up(store: Store) -> None:
    """A 451 while the clock ran a day fast set the next try a day and 5 minutes ahead of the
    clock set right: the scheduler held the mail for that day, status said it would."""
    save(store, PEOPLE[:1])
    with SmtpServer(data_replies=["451 4.3.0 Try again later"]) as server:
        fast = send_pending(store, cfg(server.port), content, NOW + timedelta(days=1))
        assert fast.pending == 1
        paced = send_pending(store, cfg(server.port), content, NOW + timedelta(minutes=1), due_only=True)
    assert (paced.sent, paced.pending) == (1, 0) and server.recipients == PEOPLE[:1]


def test_a_person_or_cron_tries_a_deferred_row_at_once(store: Store) -> None:
    """`run` and `send` ignore the backoff: a server that is back is used at once."""
    save(store, PEOPLE[:1])
    with SmtpServer(data_replies=["451 4.3.0 Try again later"]) as server:
        send_pending(store, cfg(server.port), content, NOW)
        now = send_pending(store, cfg(server.port), content, NOW + timedelta(seconds=5))
    assert (now.sent, now.pending) == (1, 0)
    assert server.recipients == [PEOPLE[0]]


def test_550_fails_one_recipient_and_not_the_others(store: Store) -> None:
    save(store)
    words = "550 5.1.1 <bo@example.net>: Recipient address rejected: User unknown"
    with SmtpServer(reject={"bo@example.net": words}) as server:
        report = send_pending(store, cfg(server.port), content, NOW)
        again = send_pending(store, cfg(server.port), content, NOW + timedelta(days=1))
    assert (report.sent, report.pending, report.failed) == (2, 0, 1)
    assert not report.ok
    assert report.errors == [f"bo@example.net (digest {DIGEST}): {words} (RCPT TO)"]
    state = rows(store)
    assert state["bo@example.net"]["status"] == "failed"
    assert words in state["bo@example.net"]["last_error"]
    assert {state[p]["status"] for p in ("ada@example.org", "chen@example.com")} == {"sent"}
    assert (again.sent, again.failed, again.pending) == (0, 0, 0)  # a failed row is not retried
    assert server.rcpt_attempts.count("bo@example.net") == 1


def test_554_after_data_fails_that_recipient(store: Store) -> None:
    save(store, PEOPLE[:2])
    with SmtpServer(data_replies=["554 5.7.1 Message rejected as spam"]) as server:
        report = send_pending(store, cfg(server.port), content, NOW)
    assert (report.sent, report.failed) == (1, 1)
    assert "554 5.7.1 Message rejected as spam" in rows(store)[PEOPLE[0]]["last_error"]
    assert server.recipients == [PEOPLE[1]]


def test_a_421_to_one_reader_defers_that_reader_and_the_others_still_get_it(store: Store) -> None:
    """A server that closes the connection with a 421 to one reader's RCPT TO (a policy
    limit on that mailbox) said "later" to that reader: it was taken for the server being
    down, and every reader queued after them waited, uncounted, batch after batch."""
    save(store)
    words = "421 4.7.0 Try again later, closing connection"
    with SmtpServer(reject={PEOPLE[0]: words}) as server:
        first = send_pending(store, cfg(server.port), content, NOW)
        second = send_pending(store, cfg(server.port), content, NOW + timedelta(hours=1))
    assert (first.sent, first.pending, first.failed) == (2, 1, 0)
    assert sorted(server.recipients) == sorted(PEOPLE[1:])
    row = rows(store)[PEOPLE[0]]
    assert row["status"] == "pending" and row["attempts"] == 2  # a "later" that counts
    assert words in row["last_error"]
    assert (second.sent, second.pending) == (0, 1)


def test_a_421_after_one_readers_message_lets_the_next_reader_reconnect(store: Store) -> None:
    save(store, PEOPLE[:2])
    with SmtpServer(data_replies=["421 4.3.2 System not accepting network messages"]) as server:
        report = send_pending(store, cfg(server.port), content, NOW)
    assert (report.sent, report.pending, report.failed) == (1, 1, 0)
    assert server.recipients == [PEOPLE[1]]
    assert rows(store)[PEOPLE[0]]["attempts"] == 1


def test_server_down_keeps_all_pending_then_each_sent_exactly_once(store: Store) -> None:
    save(store)
    port = refused_port()
    first = send_pending(store, cfg(port), content, NOW)
    assert (first.sent, first.pending, first.failed) == (0, 3, 0)
    assert len(first.errors) == 1 and "connection refused" in first.errors[0]
    assert all(p in first.errors[0] for p in PEOPLE)
    second = send_pending(store, cfg(port), content, NOW + timedelta(minutes=5))  # cron's `send`
    assert second.pending == 3
    assert {r["attempts"] for r in rows(store).values()} == {0}  # a server never reached counts no try
    assert {r["status"] for r in rows(store).values()} == {"pending"}
    with SmtpServer(port=port) as server:
        not_yet = send_pending(store, cfg(port), content, NOW + timedelta(minutes=6), due_only=True)
        assert not_yet.sent == 0  # the scheduler looks again UNREACHABLE_WAIT after the last try
        up = send_pending(store, cfg(port), content, NOW + timedelta(minutes=20), due_only=True)
        after = send_pending(store, cfg(port), content, NOW + timedelta(days=1))
    assert (up.sent, up.pending, up.failed) == (3, 0, 0)
    assert (after.sent, after.pending) == (0, 0)
    assert sorted(server.recipients) == sorted(PEOPLE)


def test_two_senders_on_one_database_never_hand_over_one_row_twice(db_url: str) -> None:
    """The run lock keeps two senders apart, but a database restart can let go of a
    PostgreSQL lock unseen: a sender working from rows read before the other sent them
    must send none of them again, nor put them back in the queue."""
    first, second = Store.open(db_url), Store.open(db_url)
    save(first)

    class Late(StoreOutbox):  # read its rows, then was overtaken before handing any over
        def __init__(self, store: Store, rows: list) -> None:
            super().__init__(store)
            self.seen = rows

        def pending(self, digest_id: str | None = None) -> list:
            return self.seen

    late = Late(second, StoreOutbox(second).pending())
    with SmtpServer() as server:
        done = send_pending(first, cfg(server.port), content, NOW)
        channel = EmailChannel(cfg(server.port), [], lambda digest, languages: content(digest.id), ["zh", "en"])
        again = deliver(late, {"email": channel}, lambda did: SimpleNamespace(id=did), NOW)
        assert done.sent == 3 and again.sent == 0
        assert sorted(server.recipients) == sorted(PEOPLE)  # one copy each
        # nor does a stale row's "later" undo what the other did
        late.mark_failed(late.seen[0], "connection refused", NOW + timedelta(hours=1))
    assert {r["status"] for r in rows(first).values()} == {"sent"}
    first.close()
    second.close()


def test_gives_up_after_max_attempts_the_server_deferred_and_only_those(store: Store) -> None:
    """Only the other side's "later", on tries that were due, counts toward giving up."""
    save(store, PEOPLE[:1])
    with SmtpServer(reject={PEOPLE[0]: "450 4.2.1 Mailbox busy, try later"}) as server:
        send_pending(store, cfg(server.port), content, NOW, max_attempts=2)
        early = send_pending(store, cfg(server.port), content, NOW + timedelta(minutes=1), max_attempts=2)
        assert (early.failed, early.pending) == (0, 1)  # an hourly cron's try ahead of the backoff
        assert rows(store)[PEOPLE[0]]["attempts"] == 1
        report = send_pending(store, cfg(server.port), content, NOW + timedelta(hours=1), max_attempts=2)
    assert (report.failed, report.pending) == (1, 0)
    row = rows(store)[PEOPLE[0]]
    assert row["status"] == "failed" and row["last_error"].startswith("gave up after 2 tries")
    assert "450 4.2.1 Mailbox busy" in row["last_error"]


@pytest.mark.slow  # days of retries: make test-slow (in .ci/run)
def test_a_server_down_for_days_never_fails_a_readers_digest(store: Store) -> None:
    """An hourly `send` through a week of a refused connection: the digest waits, then goes."""
    save(store, PEOPLE[:1])
    port = refused_port()
    for hour in range(7 * 24):
        report = send_pending(store, cfg(port), content, NOW + timedelta(hours=hour))
        assert (report.failed, report.pending) == (0, 1)
    with SmtpServer(port=port) as server:
        back = send_pending(store, cfg(port), content, NOW + timedelta(days=7, hours=1))
    assert (back.sent, back.failed) == (1, 0) and server.recipients == PEOPLE[:1]


def test_stall_past_timeout_leaves_pending(store: Store) -> None:
    save(store)
    with SmtpServer(stall_at="MAIL", stall_seconds=3) as server:
        started = time.monotonic()
        report = send_pending(store, cfg(server.port, timeout_seconds=0.5), content, NOW)
        elapsed = time.monotonic() - started
    assert (report.sent, report.pending, report.failed) == (0, 3, 0)
    assert "timed out" in report.errors[0]
    assert elapsed < 2.5  # one timeout for the batch, not one per recipient
    assert {r["status"] for r in rows(store).values()} == {"pending"}
    assert server.messages == []


def test_server_dropping_the_connection_is_reconnected(store: Store) -> None:
    save(store)
    with SmtpServer(drop_after_each=True) as server:
        report = send_pending(store, cfg(server.port), content, NOW)
    assert (report.sent, report.pending, report.failed) == (3, 0, 0)
    assert sorted(server.recipients) == sorted(PEOPLE)


# --- an interrupted hand-over: sent again with the same Message-ID ---------------------
def test_lost_reply_after_the_message_went_out_is_resent_with_the_same_message_id(
        store: Store) -> None:
    """The server takes the message but its 250 never arrives in time: the row stays
    `sending` with its Message-ID, and the next batch sends it again with that id."""
    save(store, PEOPLE[:1])
    with SmtpServer(stall_at="DATA", stall_seconds=1.5) as server:  # stores it, then stalls
        report = send_pending(store, cfg(server.port, timeout_seconds=0.3, reply_timeout_seconds=0.3),
                              content, NOW)
        cut = rows(store)[PEOPLE[0]]
        server.stall_seconds = 0  # the server is well again (the next batch waited out its 1.5 s)
        again = send_pending(store, cfg(server.port, timeout_seconds=5), content,
                             NOW + timedelta(minutes=1))
    assert (report.failed, report.pending, report.sent) == (0, 1, 0)
    assert cut["status"] == "sending" and cut["message_id"]
    assert "timed out after the message was sent" in cut["last_error"]
    assert "same Message-ID" in cut["last_error"]
    assert (again.sent, again.pending, again.failed) == (1, 0, 0)
    # Two copies at most, both with one Message-ID, which mail clients collapse.
    assert server.recipients == [PEOPLE[0], PEOPLE[0]]
    assert {str(m.message["Message-ID"]).strip() for m in server.messages} == {cut["message_id"]}
    row = rows(store)[PEOPLE[0]]
    assert row["status"] == "sent" and row["message_id"] == cut["message_id"]
    assert row["last_error"].startswith(RESENT)


def test_a_server_slow_to_answer_a_message_it_took_gets_it_once(store: Store) -> None:
    """Its verdict on the final dot may take longer than any other reply (RFC 5321 allows
    10 minutes): waiting only `timeout_seconds` sent the message again on every retry."""
    save(store, PEOPLE[:1])
    with SmtpServer(stall_at="DATA", stall_seconds=1.5) as server:
        report = send_pending(store, cfg(server.port, timeout_seconds=0.3), content, NOW)
    assert (report.sent, report.pending, report.failed) == (1, 0, 0)
    assert server.recipients == PEOPLE[:1]
    assert rows(store)[PEOPLE[0]]["last_error"] is None


def test_a_server_that_went_quiet_after_one_message_leaves_the_others_for_the_next_batch(
        store: Store) -> None:
    """Each reader would wait the whole reply_timeout_seconds on such a server (600 s: 100
    readers held the run lock for 16 hours): one cut-off hand-over, the rest wait uncounted."""
    save(store)
    with SmtpServer(stall_at="DATA", stall_seconds=2) as server:
        report = send_pending(store, cfg(server.port, timeout_seconds=0.3, reply_timeout_seconds=0.3),
                              content, NOW)
        assert len(server.messages) == 1
    assert (report.sent, report.pending, report.failed) == (0, 3, 0)
    states = sorted((r["status"], r["attempts"]) for r in rows(store).values())
    assert states == [("pending", 0), ("pending", 0), ("sending", 1)]


def test_a_cut_off_hand_over_counts_even_ahead_of_its_time_and_a_retry_after_is_kept(store: Store) -> None:
    """Each cut-off hand-over may leave a copy, so an hourly cron's early tries count; and a
    server's Retry-After outlasts the backoff of an early try."""
    save(store, PEOPLE[:1])
    outbox = StoreOutbox(store)
    row = outbox.pending()[0]
    _defer(outbox, row, "4.7.0 slow down", NOW, MAX_ATTEMPTS, DeliveryReport())
    row = outbox.pending()[0]
    assert row.attempts == 1 and row.next_attempt == NOW + backoff(1)
    early = NOW + timedelta(minutes=1)
    _defer(outbox, row, "429", early, MAX_ATTEMPTS, DeliveryReport(), after=7200)
    row = outbox.pending()[0]
    assert row.attempts == 1 and row.next_attempt == early + timedelta(seconds=7200)
    send_pending(store, cfg(refused_port()), content, early)  # a relay down: the pace stays
    row = outbox.pending()[0]
    assert row.attempts == 1 and row.next_attempt == early + timedelta(seconds=7200)
    _defer(outbox, row, "cut off", early, MAX_ATTEMPTS, DeliveryReport(), interrupted=True)
    assert outbox.pending()[0].attempts == 2


def test_a_sending_row_left_by_a_dead_process_is_resent_with_its_message_id(store: Store) -> None:
    """A crash mid-hand-over leaves `sending`; the next batch (callers hold the run lock,
    so no other process owns it) sends it again with the same id, the others once."""
    save(store)
    crashed = rows(store)[PEOPLE[0]]
    store_outbox.update_delivery(store, crashed["id"], status="sending", message_id="<crash@example.org>")
    with SmtpServer() as server:
        report = send_pending(store, cfg(server.port), content, NOW, due_only=True)
    assert (report.sent, report.pending, report.failed) == (3, 0, 0)
    assert sorted(server.recipients) == sorted(PEOPLE)
    (resent,) = server.to(PEOPLE[0])
    assert str(resent.message["Message-ID"]).strip() == "<crash@example.org>"
    row = rows(store)[PEOPLE[0]]
    assert row["status"] == "sent" and row["last_error"] == f"{RESENT} (<crash@example.org>)"
    assert all(rows(store)[p]["last_error"] is None for p in PEOPLE[1:])


def test_a_row_of_a_channel_no_longer_configured_stays_queued_and_says_so(store: Store) -> None:
    save(store, ["ada@example.org", "chat:team-room"])
    with SmtpServer() as server:
        report = send_pending(store, cfg(server.port), content, NOW)
    assert (report.sent, report.pending) == (1, 1)
    assert report.errors == []  # taken out on purpose: not a failure
    assert report.held == [f"1 delivery waits for channel chat, which the config does not have now "
                           f"(digest {DIGEST}): they go when it is back, or `rl-digest send --drop chat` "
                           "drops them for good"]
    assert rows(store)["chat:team-room"]["status"] == "pending"


def test_a_digest_whose_web_page_is_not_written_waits_for_it(tmp_path: Path) -> None:
    """The outbox is saved with the digest, before the web pages are written: after a run that
    failed or was killed in between, a `send` (or the scheduler's retry) mailed a 'View online'
    link to a page not there. Its rows wait, uncounted, naming the page, until a run writes it."""
    with SmtpServer() as server:
        config = config_mod.load(write_config(tmp_path, {
            "outputs": {"site_url": "https://digest.example.org/"},
            "email": {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": server.port,
                      "security": "none", "to": ["ada@example.org"]}}, seeds=False))
        store = Store.open(config.storage.url)
        digest = fx.digest()
        store.save_digest(digest.id, (NOW, NOW), compose.digest_to_dict(digest), [], ["ada@example.org"])
        page = config.outputs.dir / "site" / "digests" / f"{digest.id}.html"
        held = RunReport(as_of=NOW.isoformat())
        publish.deliver(config, store, held, 0)
        early = list(server.recipients)
        row = store_outbox.rows(store, digest.id)[0]
        page.parent.mkdir(parents=True)
        page.write_text("<html></html>", encoding="utf-8")
        sent = RunReport(as_of=NOW.isoformat())
        publish.deliver(config, store, sent, 0)
    assert early == [] and (held.sent, held.pending, held.failed) == (0, 1, 0)
    assert held.delivery_errors == [
        f"digest {digest.id}: its web page {page}, which its messages link to, is not written (the run "
        f"that made the digest stopped before it): `rl-digest run --as-of {digest.id}` writes it, as "
        "does the next run; 1 delivery stays queued (ada@example.org)"]
    assert (row["status"], row["attempts"]) == ("pending", 0) and str(page) in row["last_error"]
    assert (sent.sent, sent.pending) == (1, 0) and server.recipients == ["ada@example.org"]
    text = server.messages[0].message.get_body(("plain",)).get_content()
    assert f"https://digest.example.org/digests/{digest.id}.html" in text


def test_a_second_row_for_the_same_digest_and_recipient_is_impossible(store: Store) -> None:
    save(store, PEOPLE[:1])
    with pytest.raises(sa.exc.IntegrityError), store.tx() as conn:
        conn.execute(deliveries.insert().values(
            digest_id=DIGEST, recipient=PEOPLE[0], status="pending", attempts=0))
    assert len(store_outbox.rows(store, DIGEST)) == 1


# --- authentication --------------------------------------------------------------------
def auth_cfg(port: int, **over) -> Email:
    return cfg(port, username_env="RL_TEST_SMTP_USER", password_env="RL_TEST_SMTP_PASS", **over)


def secret_forms() -> list[str]:
    plain = base64.b64encode(f"\0{TEST_USER}\0{TEST_PASSWORD}".encode()).decode()
    return [TEST_PASSWORD, base64.b64encode(TEST_PASSWORD.encode()).decode(), plain]


def test_auth_with_credentials_from_the_environment(store: Store, monkeypatch, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("RL_TEST_SMTP_USER", TEST_USER)
    monkeypatch.setenv("RL_TEST_SMTP_PASS", TEST_PASSWORD)
    save(store, PEOPLE[:2])
    with SmtpServer(auth=True) as server:
        report = send_pending(store, auth_cfg(server.port), content, NOW)
    assert (report.sent, report.pending) == (2, 0)
    assert {m.login for m in server.messages} == {TEST_USER}
    assert any("sent digest" in r.getMessage() for r in caplog.records)
    for secret in secret_forms():
        assert secret not in caplog.text


def test_wrong_password_keeps_pending_and_never_logs_it(store: Store, monkeypatch, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("RL_TEST_SMTP_USER", TEST_USER)
    monkeypatch.setenv("RL_TEST_SMTP_PASS", "wrong-" + TEST_PASSWORD)
    save(store, PEOPLE[:1])
    with SmtpServer(auth=True) as server:
        report = send_pending(store, auth_cfg(server.port), content, NOW)
    assert (report.sent, report.pending) == (0, 1)
    assert "login as digest-bot refused: 535" in report.errors[0]
    row = rows(store)[PEOPLE[0]]
    for text in (caplog.text, " ".join(report.errors), row["last_error"]):
        assert TEST_PASSWORD not in text
    assert server.messages == []


def test_missing_password_variable_is_named(store: Store, monkeypatch) -> None:
    monkeypatch.setenv("RL_TEST_SMTP_USER", TEST_USER)
    monkeypatch.delenv("RL_TEST_SMTP_PASS", raising=False)
    save(store, PEOPLE[:1])
    with SmtpServer(auth=True) as server:
        report = send_pending(store, auth_cfg(server.port), content, NOW)
    assert report.pending == 1 and "RL_TEST_SMTP_PASS is not set" in report.errors[0]


def test_without_username_variable_no_login_is_tried(store: Store, monkeypatch) -> None:
    monkeypatch.delenv("RL_TEST_SMTP_USER", raising=False)
    save(store, PEOPLE[:1])
    with SmtpServer() as server:
        report = send_pending(store, auth_cfg(server.port), content, NOW)
    assert report.sent == 1 and server.messages[0].login is None


def test_a_server_that_wants_a_login_nobody_made_keeps_every_reader_waiting(store: Store,
                                                                             monkeypatch) -> None:
    """SMTP_USERNAME unset (a cron line without the .env): no login is tried, and the server
    answers MAIL FROM with 530. That is the sender's fault, not a reader's: each row failed for
    good, the week lost for everyone, while README promises a variable unset only waits."""
    monkeypatch.delenv("RL_TEST_SMTP_USER", raising=False)
    monkeypatch.setenv("RL_TEST_SMTP_PASS", TEST_PASSWORD)
    save(store, PEOPLE[:2])
    with SmtpServer(auth=True) as server:
        report = send_pending(store, auth_cfg(server.port), content, NOW)
        monkeypatch.setenv("RL_TEST_SMTP_USER", TEST_USER)  # the operator mends it
        mended = send_pending(store, auth_cfg(server.port), content, NOW + timedelta(minutes=1))
    assert (report.sent, report.pending, report.failed) == (0, 2, 0)
    assert "530 5.7.0 Authentication required (MAIL FROM); no login, as RL_TEST_SMTP_USER " \
           "(email.username_env) is not set" in report.errors[0]
    assert (mended.sent, mended.pending, mended.failed) == (2, 0, 0)
    assert sorted(server.recipients) == PEOPLE[:2]


# --- TLS (a throwaway self-signed certificate made with the openssl command) -----------
@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    key, crt = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(crt), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True)
    return crt, key


def trusting(crt: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(crt))


@pytest.mark.parametrize("security", ["starttls", "ssl"])
def test_tls_with_auth(store: Store, monkeypatch, cert, security: str) -> None:
    monkeypatch.setenv("RL_TEST_SMTP_USER", TEST_USER)
    monkeypatch.setenv("RL_TEST_SMTP_PASS", TEST_PASSWORD)
    save(store, PEOPLE[:1])
    with SmtpServer(auth=True, auth_require_tls=True, tls=cert,
                    implicit_tls=security == "ssl") as server:
        report = send_pending(store, auth_cfg(server.port, security=security), content, NOW,
                              ssl_context=trusting(cert[0]))
    assert (report.sent, report.pending) == (1, 0), report.errors
    assert server.messages[0].login == TEST_USER


def test_tls_verifies_the_server_certificate(store: Store, cert) -> None:
    save(store, PEOPLE[:1])
    with SmtpServer(tls=cert) as server:
        report = send_pending(store, cfg(server.port, security="starttls"), content, NOW)
    assert (report.sent, report.pending) == (0, 1)
    assert "certificate" in report.errors[0]
    assert server.messages == []
