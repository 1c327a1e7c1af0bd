"""Email, the first channel: one message per reader, handed over by SMTP.

`build_message` (email_message.py) makes the message. `connect` opens the
SMTP connection (`security: none | starttls | ssl`, always a verifying TLS
context, login from environment variables). `EmailChannel` is what the outbox
(outbox.py, which holds the delivery rules) drives: one connection serves a batch,
and the SMTP replies become the channel outcomes: 250 accepted, 4xx or a dropped
connection before DATA `Deferred`, no connection at all or a refused MAIL FROM (the
sender refused or rate-limited, a login missing, or a reply to a reader that is the sender's: a
sending limit, a daily quota, the account, its IP or its domain blocked; no reader's fault)
`Unreachable`, another 5xx to a reader `Refused`, and a connection lost
after the content went out `Interrupted` (the server may have queued it: the outbox sends
it again with the same Message-ID).
"""

from __future__ import annotations

import logging
import os
import re
import smtplib
import socket
import ssl
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import parseaddr
from typing import Any, NoReturn
from urllib.parse import quote

from pipeline import render
from pipeline.config_email import Email, Reader
from pipeline.deliver.channels import ChannelSetup, Deferred, Interrupted, Message, Refused, Unreachable
from pipeline.deliver.email_message import build_message, domain_of, message_bytes, wire_address
from pipeline.deliver.smtp_replies import refusal
from pipeline.errors import DeliveryError
from pipeline.links import ADDRESS, RECIPIENT, Links
from pipeline.models import Digest

log = logging.getLogger(__name__)

Content = Callable[[Digest, tuple[str, ...]], tuple[str, str, str | None]]


# --- the connection ------------------------------------------------------------
def connect(cfg: Email, timeout: float | None = None, *,
            ssl_context: ssl.SSLContext | None = None) -> smtplib.SMTP:
    """An SMTP connection as configured, logged in when `username_env` is set.

    TLS always verifies the server: `ssl_context` defaults to
    `ssl.create_default_context()` (tests pass one that trusts their own CA), made only for
    TLS: reading the system's CA store took 70 ms a connection with `security: none`.
    The password is read from the environment at this moment and never logged.
    """
    timeout = cfg.timeout_seconds if timeout is None else timeout
    context = ssl_context
    if context is None and cfg.security != "none":
        context = ssl.create_default_context()
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
                words = reply_words(exc.smtp_code, exc.smtp_error)
                raise DeliveryError(f"login as {user} refused: {words}") from None
    except BaseException:
        _close(smtp)
        raise
    return smtp


# --- the channel -----------------------------------------------------------------
class EmailChannel:
    """Email as a channel: `content(digest, languages) -> (subject, text, html)` is rendered
    once per digest and set of languages, then made each reader's (their unsubscribe and
    feedback links, when `links` is set); `ssl_context` is for tests that trust their own CA."""

    def __init__(self, cfg: Email, readers: list[Reader], content: Content,
                 languages: Sequence[str], links: Links | None = None,
                 ssl_context: ssl.SSLContext | None = None):
        self.cfg = cfg
        self._readers = {reader.address.lower(): reader for reader in readers}
        self.content = content
        self.languages = tuple(languages)
        self.links = links
        self.sender_addr = wire_address(parseaddr(cfg.from_)[1])
        self.list_id = f"rl-digest.{domain_of(self.sender_addr)}"
        self.session = _Session(cfg, ssl_context)
        self._texts: dict[tuple[str, tuple[str, ...]], tuple[str, str, str | None]] = {}

    def readers(self) -> list[str]:
        return [reader.address for reader in self._readers.values()]

    def build(self, digest: Digest, reader: str, message_id: str | None = None) -> Message:
        who = self.reader(reader)
        key = (digest.id, tuple(who.languages or self.languages))
        if key not in self._texts:
            self._texts[key] = self.content(digest, key[1])
        subject, text, html = self._texts[key]
        unsubscribe = self.cfg.unsubscribe_url
        if self.links is not None:
            text = self.links.personal(text, who.address)
            html = self.links.personal(html, who.address) if html is not None else None
            unsubscribe = self.links.url("unsubscribe", who.address)
        elif unsubscribe and RECIPIENT in unsubscribe:  # the footer's link is this reader's too
            mine = quote(who.address, safe="")
            text = text.replace(ADDRESS, mine)
            html = html.replace(ADDRESS, mine) if html is not None else None
        msg = build_message(
            sender=self.cfg.from_, recipient=who.mailbox, subject=subject, text=text, html=html,
            digest_id=digest.id, list_id=self.list_id, unsubscribe_mailto=self.sender_addr,
            unsubscribe_url=unsubscribe, date=datetime.now(UTC), message_id=message_id)
        return Message(reader, str(msg["Message-ID"]), msg)

    def reader(self, key: str) -> Reader:
        """A reader by outbox key: their address (older rows may hold `Name <addr>`), checked
        when it was queued (root@localhost then, say, through a mail server of this machine)."""
        found = self._readers.get(parseaddr(key)[1].lower())
        return found or Reader.parse(key, local=True)

    def send(self, message: Message) -> str:
        return self.session.deliver(message.body, self.sender_addr,
                                    wire_address(self.reader(message.reader).address))

    def close(self) -> None:
        self.session.close()


def email_channel(setup: ChannelSetup) -> EmailChannel:
    """The registered factory: readers from email.to and email.recipients_file, less those
    who unsubscribed; each in their languages."""
    config, count = setup.config, setup.reading_count

    def content(digest: Digest, languages: tuple[str, ...]) -> tuple[str, str, str | None]:
        shown = render.Settings.of(config.model_copy(update={"languages": list(languages)}))
        return (render.digest_subject(shown, digest),
                render.digest_text(shown, digest, count, personal=True),
                render.digest_html(shown, digest, count, personal=True))

    readers = [r for r in config.readers() if r.address.lower() not in setup.unsubscribed]
    return EmailChannel(config.email, readers, content, config.languages, Links.of(config))


class _Session:
    """One SMTP connection for a batch, with one reconnect when a used one drops."""

    def __init__(self, cfg: Email, ssl_context: ssl.SSLContext | None):
        self.cfg = cfg
        self.ssl_context = ssl_context
        self.smtp: smtplib.SMTP | None = None
        self.used = False  # has this connection completed a transaction?
        self.shut = False  # did the last reader's try end in a 421 that closed the connection?
        self.held = False  # ... in a reply that reads as the sender's?
        self.where = f"smtp {cfg.smtp_host}:{cfg.smtp_port}"

    def open(self) -> smtplib.SMTP:
        if self.smtp is not None and self.smtp.sock is None:  # closed after a 421 to a message
            self.smtp = None
        if self.smtp is None:
            try:
                self.smtp = connect(self.cfg, ssl_context=self.ssl_context)
            except DeliveryError as exc:
                raise Unreachable(f"{self.where}: {exc.message}") from None
            except smtplib.SMTPResponseException as exc:
                raise Unreachable(f"{self.where}: {reply_words(exc.smtp_code, exc.smtp_error)}") from None
            except (smtplib.SMTPException, OSError) as exc:
                raise Unreachable(f"{self.where}: {failure(exc)}") from None
            self.used = False
        return self.smtp

    def close(self) -> None:
        if self.smtp is not None:
            _close(self.smtp, polite=True)
            self.smtp = None

    def deliver(self, msg: EmailMessage, sender_addr: str, recipient: str) -> str:
        """The server's words on acceptance; otherwise a channel error."""
        while True:
            smtp = self.open()
            reused = self.used
            try:
                words = _transaction(smtp, msg, sender_addr, recipient, self.cfg)
            except _Dropped as exc:
                _close(smtp)
                self.smtp = None
                if reused:  # a connection that worked went away (idle, per-connection limit)
                    continue
                if exc.reader:  # a 421 to this reader's RCPT TO: the others still go
                    raise self._shut(exc.reason) from None
                raise Unreachable(f"{self.where}: {exc.reason}") from None
            except Interrupted:
                self.smtp = None
                raise
            except Unreachable as exc:  # a reply that reads as the sender's
                raise self._held(exc.reason) from None
            except (Deferred, Refused) as exc:  # the reader's own "later" or refusal
                if isinstance(exc, Deferred) and smtp.sock is None:  # a 421 to the message closed it
                    raise self._shut(exc.reason) from None
                self.shut = self.held = False
                raise
            except BaseException:  # no SMTP reply (a bug mid-DATA): where the dialogue is, nobody knows
                _close(smtp)
                self.smtp = None  # the next reader gets a new connection
                raise
            self.used, self.shut, self.held = True, False, False
            return words

    def _shut(self, reason: str) -> Deferred:
        """A 421 that closed the connection on one reader is that reader's "later"; on the next
        too, the server's (a provider's rate limit): the rest wait rather than each get a new
        connection the server closes again."""
        again, self.shut, self.held = self.shut, True, False
        return Unreachable(f"{self.where}: {reason}") if again else Deferred(reason)

    def _held(self, reason: str) -> Unreachable:
        """A reply that reads as the sender's (smtp_replies.py) holds that reader, uncounted; on the
        next reader too, the rest of the group: a reply misread as the sender's that is one
        reader's own then holds that reader alone, never every reader after it."""
        again, self.held, self.shut = self.held, True, False
        return Unreachable(f"{self.where}: {reason}", alone=not again)


class _Dropped(Exception):
    """The connection failed, or the server refused the sender (any reply but 250 to MAIL
    FROM), before any of the message content left; `reader`: the server closed it with a 421
    to one reader's RCPT TO, a "later" for that reader alone."""

    def __init__(self, reason: str, reader: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.reader = reader


def _transaction(smtp: smtplib.SMTP, msg: EmailMessage, sender_addr: str, recipient: str,
                 cfg: Email) -> str:
    international = not (sender_addr + recipient).isascii()
    if international and not smtp.has_extn("smtputf8"):
        raise Refused("non-ASCII address, and the server does not offer SMTPUTF8")
    data = message_bytes(msg, international)
    _envelope(smtp, sender_addr, recipient, international, cfg)
    code, resp = _content(smtp, data, cfg)
    words = reply_words(code, resp)
    if code == 250:
        return words
    if code == 421:  # the server closes the connection: the next reader gets a new one
        _close(smtp)
        raise Deferred(words + " (after DATA)")
    raise refusal(words + " (after DATA)")


def _envelope(smtp: smtplib.SMTP, sender_addr: str, recipient: str, international: bool,
              cfg: Email) -> None:
    """MAIL FROM, RCPT TO and DATA, up to the server's go-ahead (354): nothing of the
    message has left, so a connection lost here is `_Dropped`."""
    options = ["SMTPUTF8", "BODY=8BITMIME"] if international else []
    try:
        code, resp = smtp.mail(sender_addr, options)
        # The sender refused, or held back (a 4xx: a rate limit), whoever reads: all wait.
        if code != 250 and not international:
            raise _Dropped(sender_refused(code, resp, cfg))
        if code != 250:
            _refused(smtp, code, resp, "MAIL FROM")
        code, resp = smtp.rcpt(recipient)
        if code not in (250, 251):
            _refused(smtp, code, resp, "RCPT TO")
        code, resp = smtp.docmd("DATA")
        if code != 354:
            _refused(smtp, code, resp, "DATA")
    except (smtplib.SMTPServerDisconnected, OSError) as exc:
        raise _Dropped(failure(exc)) from None


def _content(smtp: smtplib.SMTP, data: bytes, cfg: Email) -> tuple[int, bytes]:
    """The message sent, then the server's reply to it; a connection lost now is
    `Interrupted`: the server may have kept it."""
    try:
        smtp.send(_dot_stuff(data))
        # The message is out: wait for the verdict as long as RFC 5321 (4.5.3.2.6) asks; a
        # slow server that had taken it, cut off sooner, got it again on every retry.
        if smtp.sock is not None:
            smtp.sock.settimeout(max(cfg.timeout_seconds, cfg.reply_timeout_seconds))
        code, resp = smtp.getreply()
        if smtp.sock is not None:
            smtp.sock.settimeout(cfg.timeout_seconds)
    except (smtplib.SMTPServerDisconnected, OSError) as exc:
        _close(smtp)
        raise Interrupted(failure(exc) + " after the message was sent") from None
    return code, resp


def sender_refused(code: int, resp: bytes, cfg: Email) -> str:
    """The server's words on a MAIL FROM it refused; for a 530 (RFC 4954: authentication
    required) without a login, why none was made."""
    words = f"{reply_words(code, resp)} (MAIL FROM)"
    if code == 530 and not (cfg.username_env and os.environ.get(cfg.username_env)):
        words += (f"; no login, as {cfg.username_env} (email.username_env) is not set" if cfg.username_env
                  else "; no login is configured (email.username_env)")
    return words


def _refused(smtp: smtplib.SMTP, code: int, resp: bytes, stage: str) -> NoReturn:
    words = f"{reply_words(code, resp)} ({stage})"
    if code == 421:  # the server is closing the connection
        raise _Dropped(words, reader=stage == "RCPT TO")
    try:
        smtp.rset()
    except (smtplib.SMTPException, OSError):
        pass
    raise refusal(words)


def _dot_stuff(data: bytes) -> bytes:
    data = re.sub(rb"(?m)^\.", b"..", data)
    if not data.endswith(b"\r\n"):
        data += b"\r\n"
    return data + b".\r\n"


# --- small helpers ---------------------------------------------------------------
def reply_words(code: int, resp: Any) -> str:
    """An SMTP reply on one line: `535 5.7.8 Authentication credentials invalid`; one of several
    lines with its enhanced status code once, at the start."""
    text = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else str(resp)
    first, *more = text.split("\n")
    code_of = _ENHANCED.match(first)  # each line of a reply of several repeats it (RFC 2034)
    if code_of:  # "... a PTR\n5.7.1 record setup": the words read on, as the server meant them
        more = [line.removeprefix(code_of.group(0)) for line in more]
    return f"{code} {' '.join(' '.join([first, *more]).split())}"


_ENHANCED = re.compile(r"[245]\.\d{1,3}\.\d{1,3} ")


def failure(exc: BaseException) -> str:
    """What went wrong with a connection, in a few words (smtplib's errors carry no strerror)."""
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


__all__ = ["EmailChannel", "connect", "email_channel", "failure", "reply_words", "sender_refused"]
