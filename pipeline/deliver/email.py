"""Email delivery: one message per recipient, sent from the `deliveries` outbox.

`build_message` makes the message (multipart/alternative: text/plain, then
text/html; UTF-8; non-ASCII headers encoded per RFC 2047). `connect` opens the
SMTP connection (`security: none | starttls | ssl`, always a verifying TLS
context, login from environment variables). `send_pending` walks the outbox.

Outbox rules
------------
A row is `pending` until the server has accepted the message for that
recipient, then `sent` (with its Message-ID and time). A 4xx reply, a refused
connection or a timeout keeps it `pending` with `attempts + 1`, `last_error` and
`next_attempt = now + backoff` (5 min x 2^(attempts-1), capped at 6 h); after
`max_attempts` such tries it becomes `failed`. A 5xx reply makes that recipient
`failed` at once, with the server's words, and the others go on.

Crash between the server's acceptance and the `sent` mark: AT-MOST-ONCE
------------------------------------------------------------------------
The contract says a digest reaches a recipient at most once, and for a weekly
newsletter a duplicate is worse than a rare miss: it looks like spam, costs
sender reputation and trust, while the window in which a message can be lost
is a few milliseconds per message. So:

* MAIL FROM, RCPT TO and DATA are sent one by one. Only when the server has
  answered DATA with 354, i.e. right before the message itself goes out, is the
  row marked `sending` (with its Message-ID, and `next_attempt` holding the
  moment the hand-over began). Everything before that point is unambiguous
  (refused, deferred or dropped before any content left) and stays retryable.
* After the server's 250 the row becomes `sent`.
* If the connection dies or times out after the content went out, nobody knows
  whether the server queued it: the row is marked `failed` with an "unknown"
  error naming the Message-ID (so an operator can check the server's log) and
  is never resent.
* A row still `sending` when `send_pending` starts belongs to a process that
  died mid-hand-over. Once it is older than `stale_after` it is marked `failed`
  the same way, never resent. Callers that hold the run lock (the CLI, the
  scheduler) know no other process is sending and pass `stale_after=0`; the
  10-minute default protects a library caller running two senders at once.

An operator who decides to resend sets the row back to `pending` by hand.
"""

from __future__ import annotations

import logging
import os
import re
import smtplib
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email import policy as email_policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr
from typing import Any
from urllib.parse import quote

from pipeline import progress
from pipeline.config import Email
from pipeline.errors import DeliveryError
from pipeline.store import Store

log = logging.getLogger(__name__)

# Build with 7-bit transfer encodings (base64 / quoted-printable are chosen per
# part), so no 8BITMIME support is needed; serialise with CRLF line ends.
BUILD_POLICY = email_policy.default.clone(cte_type="7bit")
WIRE_POLICY = email_policy.SMTP
WIRE_POLICY_UTF8 = email_policy.SMTPUTF8

BACKOFF_BASE = timedelta(minutes=5)
BACKOFF_CAP = timedelta(hours=6)
MAX_ATTEMPTS = 10
STALE_AFTER = timedelta(minutes=10)

Content = Callable[[str], tuple[str, str, str | None]]


@dataclass
class DeliveryReport:
    """What one `send_pending` call did.

    sent / failed: rows this call marked so. pending: rows of the digests in
    scope still waiting after this call (deferred now, not yet due, or in flight
    in another process). errors: one line per problem.
    """

    sent: int = 0
    pending: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.pending == 0 and self.failed == 0


# --- the message ---------------------------------------------------------------
def build_message(
    *,
    sender: str,
    recipient: str,
    subject: str,
    text: str,
    html: str | None,
    digest_id: str,
    list_id: str,
    unsubscribe_mailto: str | None = None,
    unsubscribe_url: str | None = None,
    date: datetime,
) -> EmailMessage:
    """One message for one recipient (`To` holds only them).

    `sender` is a header value such as "强化学习周报 <digest@example.org>";
    `list_id` an id such as "rl-digest.example.org" (or a full "Name <id>");
    `unsubscribe_mailto` an address that receives "subject=unsubscribe" mails;
    `unsubscribe_url` an https URL for one-click unsubscribe (RFC 8058), in
    which "{recipient}" is replaced by the URL-quoted address.
    """
    sender_addr = parseaddr(sender)[1]
    if "@" not in sender_addr:
        raise DeliveryError(f"email.from: not an address: {sender!r}")
    msg = EmailMessage(policy=BUILD_POLICY)
    msg["From"] = sender
    msg["To"] = recipient
    msg["Subject"] = " ".join(subject.split())
    msg["Date"] = format_datetime(_aware(date))
    msg["Message-ID"] = make_msgid(idstring=digest_id, domain=_domain(sender_addr))
    msg["List-Id"] = list_id if "<" in list_id else f"<{list_id}>"
    targets = []
    if unsubscribe_mailto:
        targets.append(f"<mailto:{unsubscribe_mailto}?subject=unsubscribe>")
    if unsubscribe_url:
        targets.append("<" + unsubscribe_url.replace("{recipient}", quote(recipient, safe="")) + ">")
    if targets:
        msg["List-Unsubscribe"] = ", ".join(targets)
    if unsubscribe_url and unsubscribe_url.lower().startswith("https://"):
        msg["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(text, subtype="plain", charset="utf-8")
    if html is not None:
        msg.add_alternative(html, subtype="html", charset="utf-8")
        for part in msg.iter_parts():
            del part["MIME-Version"]
    return msg


def message_bytes(msg: EmailMessage, international: bool = False) -> bytes:
    """The message as it goes on the wire (CRLF; UTF-8 headers only with SMTPUTF8)."""
    return msg.as_bytes(policy=WIRE_POLICY_UTF8 if international else WIRE_POLICY)


# --- the connection ------------------------------------------------------------
def connect(cfg: Email, timeout: float | None = None, *,
            ssl_context: ssl.SSLContext | None = None) -> smtplib.SMTP:
    """An SMTP connection as configured, logged in when `username_env` is set.

    TLS always verifies the server: `ssl_context` defaults to
    `ssl.create_default_context()` (tests pass one that trusts their own CA).
    The password is read from the environment at this moment and never logged.
    """
    timeout = cfg.timeout_seconds if timeout is None else timeout
    context = ssl_context if ssl_context is not None else ssl.create_default_context()
    if cfg.security == "ssl":
        smtp: smtplib.SMTP = smtplib.SMTP_SSL(cfg.smtp_host, cfg.smtp_port, timeout=timeout,
                                              context=context)
    else:
        smtp = smtplib.SMTP(cfg.smtp_host, cfg.smtp_port, timeout=timeout)
    try:
        smtp.ehlo()
        if cfg.security == "starttls":
            smtp.starttls(context=context)
            smtp.ehlo()
        user = os.environ.get(cfg.username_env) if cfg.username_env else None
        if user:
            password = os.environ.get(cfg.password_env) if cfg.password_env else None
            if password is None:
                raise DeliveryError(
                    f"email.password_env: {cfg.password_env or '(not configured)'} is not set "
                    f"(needed to log in as {user})")
            if cfg.security == "none":
                log.warning("logging in to %s as %s without TLS (email.security: none)",
                            cfg.smtp_host, user)
            try:
                smtp.login(user, password)
            except smtplib.SMTPAuthenticationError as exc:
                words = _words(exc.smtp_code, exc.smtp_error)
                raise DeliveryError(f"login as {user} refused: {words}") from None
    except BaseException:
        _close(smtp)
        raise
    return smtp


# --- the outbox ------------------------------------------------------------------
def send_pending(
    store: Store,
    cfg: Email,
    content: Content,
    now: datetime,
    max_attempts: int = MAX_ATTEMPTS,
    *,
    digest_id: str | None = None,
    list_id: str | None = None,
    stale_after: timedelta = STALE_AFTER,
    ssl_context: ssl.SSLContext | None = None,
) -> DeliveryReport:
    """Send every due `pending` delivery (of `digest_id`, or of all digests).

    `content(digest_id) -> (subject, text, html)`. `now` should be the wall
    clock (it dates the messages and schedules retries). One SMTP connection
    serves the batch; if the server drops it, one reconnect is tried.
    """
    now = _aware(now).astimezone(UTC)
    report = DeliveryReport()
    _recover_stale(store, digest_id, now, stale_after, report)

    due, waiting = [], 0
    for row in store.deliveries(digest_id, ("pending", "sending")):
        if row["status"] == "sending" or not _is_due(row, now):
            waiting += 1
        else:
            due.append(row)
    if not due:
        report.pending += waiting
        return report

    sender = cfg.from_
    sender_addr = parseaddr(sender)[1]
    list_id = list_id or f"rl-digest.{_domain(sender_addr)}"
    texts: dict[str, tuple[str, str, str | None]] = {}
    session = _Session(cfg, ssl_context)
    try:
        for index, row in enumerate(progress.track(due, "sending", len(due))):
            if row["digest_id"] not in texts:
                texts[row["digest_id"]] = content(row["digest_id"])
            subject, text, html = texts[row["digest_id"]]
            msg = build_message(
                sender=sender, recipient=row["recipient"], subject=subject, text=text, html=html,
                digest_id=row["digest_id"], list_id=list_id, unsubscribe_mailto=sender_addr,
                unsubscribe_url=cfg.unsubscribe_url, date=now)
            try:
                outcome, words = session.deliver(store, row, msg, sender_addr, now)
            except _ConnectionLost as lost:
                # No connection to be had: this row and every later one wait.
                rest = due[index:]
                for other in rest:
                    _defer(store, other, lost.reason, now, max_attempts, report, quiet=True)
                names = ", ".join(r["recipient"] for r in rest[:3]) + (", ..." if len(rest) > 3 else "")
                report.errors.append(
                    f"{session.where}: {lost.reason}; {len(rest)} deliveries stay queued ({names})")
                log.warning("%s: %s; %d deliveries stay queued", session.where, lost.reason, len(rest))
                break
            if outcome == "sent":
                store.update_delivery(row["id"], status="sent", attempts=row["attempts"] + 1,
                                      message_id=msg["Message-ID"], sent_at=now.isoformat(),
                                      next_attempt=None, last_error=None)
                report.sent += 1
                log.info("sent digest %s to %s %s", row["digest_id"], row["recipient"],
                         msg["Message-ID"])
            elif outcome == "failed":
                _fail(store, row, words, report)
            elif outcome == "unknown":
                _fail(store, row, f"{words}; the server may have accepted {msg['Message-ID']}, "
                                  "so it is not resent (at-most-once)", report, unknown=True)
            else:
                _defer(store, row, words, now, max_attempts, report)
    finally:
        session.close()
    report.pending += waiting
    return report


def backoff(attempts: int) -> timedelta:
    """Wait before try number attempts+1: 5, 10, 20, ... minutes, at most 6 hours."""
    return min(BACKOFF_BASE * (2 ** max(attempts - 1, 0)), BACKOFF_CAP)


class _ConnectionLost(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _Session:
    """One SMTP connection for a batch, with one reconnect when a used one drops."""

    def __init__(self, cfg: Email, ssl_context: ssl.SSLContext | None):
        self.cfg = cfg
        self.ssl_context = ssl_context
        self.smtp: smtplib.SMTP | None = None
        self.used = False  # has this connection completed a transaction?
        self.where = f"smtp {cfg.smtp_host}:{cfg.smtp_port}"

    def open(self) -> smtplib.SMTP:
        if self.smtp is None:
            try:
                self.smtp = connect(self.cfg, ssl_context=self.ssl_context)
            except DeliveryError as exc:
                raise _ConnectionLost(exc.message) from None
            except smtplib.SMTPResponseException as exc:
                raise _ConnectionLost(_words(exc.smtp_code, exc.smtp_error)) from None
            except (smtplib.SMTPException, OSError) as exc:
                raise _ConnectionLost(_reason(exc)) from None
            self.used = False
        return self.smtp

    def close(self) -> None:
        if self.smtp is not None:
            _close(self.smtp, polite=True)
            self.smtp = None

    def deliver(self, store: Store, row: dict, msg: EmailMessage, sender_addr: str,
                now: datetime) -> tuple[str, str]:
        """("sent" | "failed" | "deferred" | "unknown", server words)."""
        while True:
            smtp = self.open()
            reused = self.used
            try:
                outcome = _transaction(smtp, store, row, msg, sender_addr, now)
            except _Dropped as exc:
                _close(smtp)
                self.smtp = None
                if reused:  # a connection that worked went away (idle, per-connection limit)
                    continue
                raise _ConnectionLost(exc.reason) from None
            except _Unknown as exc:
                self.smtp = None
                return "unknown", str(exc)
            self.used = True
            return outcome


class _Unknown(Exception):
    """The connection failed after the message content went out: delivery unknown."""


class _Dropped(Exception):
    """The connection failed before any of the message content left."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _transaction(smtp: smtplib.SMTP, store: Store, row: dict, msg: EmailMessage,
                 sender_addr: str, now: datetime) -> tuple[str, str]:
    recipient = row["recipient"]
    international = not (sender_addr + recipient).isascii()
    options: list[str] = []
    if international:
        if not smtp.has_extn("smtputf8"):
            return "failed", "non-ASCII address, and the server does not offer SMTPUTF8"
        options = ["SMTPUTF8", "BODY=8BITMIME"]
    data = message_bytes(msg, international)
    try:
        code, resp = smtp.mail(sender_addr, options)
        if code != 250:
            return _refused(smtp, code, resp, "MAIL FROM")
        code, resp = smtp.rcpt(recipient)
        if code not in (250, 251):
            return _refused(smtp, code, resp, "RCPT TO")
        code, resp = smtp.docmd("DATA")
        if code != 354:
            return _refused(smtp, code, resp, "DATA")
    except (smtplib.SMTPServerDisconnected, OSError) as exc:
        raise _Dropped(_reason(exc)) from None
    # From here on the server may take the message: mark the row first.
    store.update_delivery(row["id"], status="sending", message_id=msg["Message-ID"],
                          next_attempt=now.isoformat())
    try:
        smtp.send(_dot_stuff(data))
        code, resp = smtp.getreply()
    except (smtplib.SMTPServerDisconnected, OSError) as exc:
        _close(smtp)
        raise _Unknown(_reason(exc) + " after the message was sent") from None
    if code == 250:
        return "sent", _words(code, resp)
    return ("failed" if code >= 500 else "deferred"), _words(code, resp) + " (after DATA)"


def _refused(smtp: smtplib.SMTP, code: int, resp: bytes, stage: str) -> tuple[str, str]:
    words = f"{_words(code, resp)} ({stage})"
    if code == 421:  # the server is closing the connection
        raise _Dropped(words)
    try:
        smtp.rset()
    except (smtplib.SMTPException, OSError):
        pass
    return ("failed" if code >= 500 else "deferred"), words


def _dot_stuff(data: bytes) -> bytes:
    data = re.sub(rb"(?m)^\.", b"..", data)
    if not data.endswith(b"\r\n"):
        data += b"\r\n"
    return data + b".\r\n"


# --- row bookkeeping -------------------------------------------------------------
def _recover_stale(store: Store, digest_id: str | None, now: datetime, stale_after: timedelta,
                   report: DeliveryReport) -> None:
    for row in store.deliveries(digest_id, ("sending",)):
        began = _parse(row["next_attempt"])
        if began is not None and began + stale_after > now:
            continue  # another live process may be handing it over right now
        _fail(store, row, "interrupted while the server was receiving "
                          f"{row['message_id'] or 'the message'}; it may have been delivered, "
                          "so it is not resent (at-most-once)", report, unknown=True)


def _fail(store: Store, row: dict, words: str, report: DeliveryReport,
          unknown: bool = False) -> None:
    values: dict[str, Any] = {} if unknown else {"message_id": None}  # keep the id to look up
    store.update_delivery(row["id"], status="failed", attempts=row["attempts"] + 1,
                          last_error=words, next_attempt=None, **values)
    report.failed += 1
    report.errors.append(f"{row['recipient']} (digest {row['digest_id']}): {words}")
    log.warning("delivery of digest %s to %s failed: %s", row["digest_id"], row["recipient"], words)


def _defer(store: Store, row: dict, words: str, now: datetime, max_attempts: int,
           report: DeliveryReport, quiet: bool = False) -> None:
    attempts = row["attempts"] + 1
    if attempts >= max_attempts:
        _fail(store, row, f"gave up after {attempts} attempts: {words}", report)
        return
    retry = now + backoff(attempts)
    store.update_delivery(row["id"], status="pending", attempts=attempts, last_error=words,
                          next_attempt=retry.isoformat(timespec="seconds"), message_id=None)
    report.pending += 1
    if not quiet:
        report.errors.append(f"{row['recipient']} (digest {row['digest_id']}): {words}; "
                             f"retry after {retry.isoformat(timespec='seconds')}")
        log.warning("delivery of digest %s to %s deferred: %s", row["digest_id"],
                    row["recipient"], words)


# --- small helpers ---------------------------------------------------------------
def _is_due(row: dict, now: datetime) -> bool:
    when = _parse(row["next_attempt"])
    return when is None or when <= now


def _parse(value: str | None) -> datetime | None:
    return _aware(datetime.fromisoformat(value)) if value else None


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _domain(address: str) -> str:
    return address.rpartition("@")[2] or socket.getfqdn()


def _words(code: int, resp: Any) -> str:
    text = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else str(resp)
    return f"{code} {' '.join(text.split())}"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)) or "timed out" in str(exc):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {exc.verify_message}"
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        return f"server does not support it: {exc}"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def _close(smtp: smtplib.SMTP, polite: bool = False) -> None:
    try:
        if polite and smtp.sock is not None:
            smtp.quit()
        else:
            smtp.close()
    except (smtplib.SMTPException, OSError):
        smtp.close()


__all__ = ["DeliveryReport", "backoff", "build_message", "connect", "message_bytes",
           "send_pending"]
