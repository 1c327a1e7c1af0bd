"""Email, the first channel: one message per reader, handed over by SMTP.

`build_message` makes the message (multipart/alternative: text/plain, then
text/html; UTF-8; non-ASCII headers encoded per RFC 2047). `connect` opens the
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
from email import policy as email_policy
from email.header import Header
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr
from typing import Any, NoReturn
from urllib.parse import quote, urlsplit, urlunsplit

from email_validator import EmailNotValidError, validate_email

from pipeline import render
from pipeline.config_email import Email, Reader
from pipeline.deliver.channels import ChannelSetup, Deferred, Interrupted, Message, Refused, Unreachable
from pipeline.errors import DeliveryError
from pipeline.links import ADDRESS, RECIPIENT, Links
from pipeline.models import Digest

log = logging.getLogger(__name__)

# Build with 7-bit transfer encodings (base64 / quoted-printable are chosen per
# part), so no 8BITMIME support is needed; serialise with CRLF line ends.
BUILD_POLICY = render.MAIL_POLICY


class _WirePolicy(email_policy.EmailPolicy):
    """The wire's policy, but a List-Unsubscribe header is folded only between its
    targets: Python folds a URL longer than a line as RFC 2047 encoded-words, which no
    mail client decodes there, and one-click unsubscribe (RFC 8058) then has no URL.
    A Subject Python would fold at a space between two encoded-words, which every reader
    drops (RFC 2047 6.2), goes as encoded-words alone, its spaces inside them. So does the
    name of a From or To with a space Python put between two encoded-words (on a line or
    where it folds), or with a line holding one longer than 76 (77 or 78: the address after
    the name's encoded-words)."""

    def _fold(self, name: str, value: Any, refold_binary: bool = False) -> str:
        if name.lower() == "list-unsubscribe":
            return f"{name}: " + ("," + self.linesep + " ").join(_TARGET.findall(str(value))) + self.linesep
        folded: str = super()._fold(name, value, refold_binary)  # type: ignore[misc]
        if name.lower() == "subject" and _read_back(folded) != str(value):
            folded = f"{name}: {self._words(name, str(value))}{self.linesep}"
        elif len(getattr(value, "addresses", ())) == 1 and not self.utf8 and (
                _SPLIT_WORDS.search(folded) or self._too_long(folded)):
            (address,) = value.addresses
            words, spec = self._words(name, address.display_name), f"<{address.addr_spec}>"
            last = words.rpartition(self.linesep)[2] if self.linesep in words else f"{name}: {words}"
            gap = " " if len(last) + 1 + len(spec) <= (self.max_line_length or 76) else self.linesep + " "
            folded = f"{name}: {words}{gap}{spec}{self.linesep}"
        return folded

    def _words(self, name: str, text: str) -> str:
        """Text as encoded-words alone, folded between them (each space inside one)."""
        return Header(text, "utf-8", header_name=name).encode(linesep=self.linesep,
                                                              maxlinelen=self.max_line_length)

    def _too_long(self, folded: str) -> bool:
        """A line holding an encoded-word is longer than RFC 2047 (2) allows."""
        return any(len(line) > (self.max_line_length or 76) and "=?" in line
                   for line in folded.split(self.linesep))


def _read_back(folded: str) -> str:
    """A folded header's value as a reader decodes it."""
    value = re.sub(r"\r?\n(?=[ \t])", "", folded).partition(":")[2]
    return str(email_policy.default.header_factory("subject", value.strip()))


_TARGET = re.compile(r"<[^<>]*>")
_SPLIT_WORDS = re.compile(r"\?=\s+=\?")  # two encoded-words: a reader drops the space between
# Header lines of 76 at most: RFC 2047 (2) holds a line with an encoded-word to that.
WIRE_POLICY = _WirePolicy(linesep="\r\n", max_line_length=76)  # email.policy.SMTP
WIRE_POLICY_UTF8 = WIRE_POLICY.clone(utf8=True)  # email.policy.SMTPUTF8

Content = Callable[[Digest, tuple[str, ...]], tuple[str, str, str | None]]


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
    message_id: str | None = None,
) -> EmailMessage:
    """One message for one recipient (`To` holds only them).

    `sender` is a header value such as "强化学习周报 <digest@example.org>";
    `list_id` an id such as "rl-digest.example.org" (or a full "Name <id>");
    `unsubscribe_mailto` an address that receives "subject=unsubscribe" mails;
    `unsubscribe_url` an https URL for one-click unsubscribe (RFC 8058), in
    which "{recipient}" is replaced by the URL-quoted address; `message_id`
    reuses an id (a resend after an interrupted hand-over), else a new one is made.
    """
    sender, recipient = _on_wire(sender), _on_wire(recipient)
    sender_addr = parseaddr(sender)[1]
    if "@" not in sender_addr:
        raise DeliveryError(f"email.from: not an address: {sender!r}")
    msg = EmailMessage(policy=BUILD_POLICY)
    msg["From"] = sender
    msg["To"] = recipient
    msg["Subject"] = " ".join(subject.split())
    msg["Date"] = format_datetime(_aware(date))
    msg["Message-ID"] = message_id or make_msgid(idstring=digest_id, domain=_domain(sender_addr))
    msg["List-Id"] = list_id if "<" in list_id else f"<{list_id}>"
    targets = []  # the one-click URL first: a client takes the first it can use (RFC 2369)
    if unsubscribe_url:
        address = quote(parseaddr(recipient)[1], safe="")  # the address, not "Name <address>"
        targets.append("<" + _header_uri(unsubscribe_url.replace(RECIPIENT, address)) + ">")
    if unsubscribe_mailto:
        targets.append("<" + _header_uri(f"mailto:{unsubscribe_mailto}?subject=unsubscribe") + ">")
    if targets:
        msg["List-Unsubscribe"] = ", ".join(targets)
    if unsubscribe_url and unsubscribe_url.lower().startswith("https://"):
        msg["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(text, subtype="plain", charset="utf-8", cte=_cte(text))
    if html is not None:
        msg.add_alternative(html, subtype="html", charset="utf-8", cte=_cte(html))
        for part in msg.iter_parts():
            del part["MIME-Version"]
    for part in msg.walk():
        if part["Content-Transfer-Encoding"] == "quoted-printable":
            part.set_payload(_guard_from(str(part.get_payload())))
    return msg


# A line that begins "From " is one an mbox store takes for its own separator and writes
# as ">From " (the English heading "From the reading list" read ">From the reading list"):
# quoted-printable writes its F as =46 (RFC 2049 3, item 8); base64 has no such line.
_FROM_LINE = re.compile(r"(?m)^From .*$")
_QP_LINE = BUILD_POLICY.max_line_length or 76  # a quoted-printable line at most (RFC 2045 6.7)


def _cte(body: str) -> str | None:
    """None (as email chooses: 7bit, quoted-printable or base64), but quoted-printable
    rather than 7bit for a body with a line that begins "From "."""
    seven = body.isascii() and all(len(line) <= _QP_LINE for line in body.splitlines())
    return "quoted-printable" if seven and _FROM_LINE.search(body) else None


def _guard_from(payload: str) -> str:
    """A quoted-printable payload with each line's leading "From " as "=46rom ", a line
    still 76 characters at most (else "=46=" on a line of its own, a soft break)."""
    def guarded(found: re.Match[str]) -> str:
        line = found.group(0)
        fits = len(line) + 2 <= _QP_LINE
        return ("=46" if fits else "=46=\n") + line[1:]
    return _FROM_LINE.sub(guarded, payload)


def wire_address(address: str) -> str:
    """An address as the wire carries it: an internationalised domain as its A-label
    (ida@xn--bcher-kva.example) when the local part is ASCII, so that no SMTPUTF8 is needed
    of the server (RFC 6531 is for what has no ASCII form); anything else as it is."""
    local, _, domain = address.rpartition("@")
    if domain.isascii() or not local.isascii():
        return address
    try:
        checked = validate_email(address, check_deliverability=False, globally_deliverable=False)
    except EmailNotValidError:
        return address
    return checked.ascii_email or address


def _on_wire(mailbox: str) -> str:
    """A `Name <addr>` (or bare) mailbox with its address as `wire_address` has it."""
    name, address = parseaddr(mailbox)
    ascii_address = wire_address(address)
    if ascii_address == address:
        return mailbox
    return str(Address(display_name=name, addr_spec=ascii_address)) if name else ascii_address


def _header_uri(url: str) -> str:
    """A URL as a header carries it, a URI (RFC 3987 3.1): a host outside ASCII as its A-label,
    a space or any other character a URI may not hold percent-encoded as UTF-8."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2].partition(":")[0]
    if not host.isascii():
        parts = parts._replace(netloc=parts.netloc.replace(host, wire_address(f"x@{host}").partition("@")[2]))
    return quote(urlunsplit(parts), safe="!#$%&'()*+,/:;=?@[]~")


def message_bytes(msg: EmailMessage, international: bool = False) -> bytes:
    """The message as it goes on the wire (CRLF; UTF-8 headers only with SMTPUTF8)."""
    return msg.as_bytes(policy=WIRE_POLICY_UTF8 if international else WIRE_POLICY)


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
        self.list_id = f"rl-digest.{_domain(self.sender_addr)}"
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
        """A reply that reads as the sender's (`_SENDER`) holds that reader, uncounted; on the
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
    raise _refusal(words + " (after DATA)")


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
    raise _refusal(words)


# Replies to one reader's RCPT TO or message that are the sender's, as each provider documents
# them: every reader after would get the same, so none is failed or counted and all wait (once
# two readers in a row get one: `_Session._held`). Anything else is the reader's: a 5xx fails
# their row, a 4xx defers it.
_SENDER = tuple(re.compile(pattern, re.IGNORECASE) for pattern in (
    # RFC 3463 X.4.5 congestion, "useful only as a persistent transient error": Gmail's
    # "550 5.4.5 Daily user sending quota exceeded"
    r"^[45]\d\d [45]\.4\.5\b",
    # RFC 3463 X.1.7 / X.1.8, the sender's address: Microsoft 365's "550 5.1.8 Access denied,
    # bad outbound sender" (an account blocked for sending)
    r"^[45]\d\d [45]\.1\.[78]\b",
    # RFC 7372 X.7.20 to X.7.27, the sender's DKIM, SPF or DMARC checks failed: Gmail's
    # "550 5.7.26 Unauthenticated email from example.org is not accepted due to domain's DMARC policy"
    r"^[45]\d\d [45]\.7\.2[0-7]\b",
    # Microsoft 365: 5.7.705 "tenant has exceeded threshold", 5.7.708 "traffic not accepted
    # from this IP", 5.7.750 "Client blocked from sending from unregistered domains"
    r"^[45]\d\d [45]\.7\.7(05|08|50)\b",
    # a sending limit: Gmail's "Daily SMTP relay limit exceeded", Amazon SES's "454 Throttling
    # failure: Daily message quota exceeded", Microsoft 365's "5.1.90 ... your daily limit
    # for message recipients", Outlook.com's "4.7.650 ... temporarily rate limited"
    r"\b(sending|relay|daily|hourly|rate)\b.{0,40}\b(quota|limit)|\bthrottl",
    # the account or its IP held back: Amazon SES's "554 Message rejected: Sending paused for
    # this account", Gmail's "mail sent from your IP address has been blocked", "The IP you're
    # using to send mail is not authorized"
    r"\bsending (is )?(paused|suspended|disabled)\b|\b(from|your|the) (this |your )?IP\b",
    # Postfix's sender and client restrictions, the same for every recipient: "Sender address
    # rejected: not owned by user", "Client host rejected", "Client host [...] blocked using"
    r"\b(sender address|client host) rejected\b|\bblocked using\b",
))


def _refusal(words: str) -> Refused | Deferred | Unreachable:
    """A reply to one reader: a 5xx fails their row, a 4xx defers it, but one that is the
    sender's (`_SENDER`) is no reader's failure: it waits, uncounted, for the limit to lift or
    the block to be mended, as for a server not reached (and the readers after it, `_held`)."""
    if any(pattern.search(words) for pattern in _SENDER):
        return Unreachable(f"{words}: a limit or block on the sender, not on the reader: the "
                           "readers wait, no try counted, until it lifts or is mended")
    return Refused(words) if words.startswith("5") else Deferred(words)


def _dot_stuff(data: bytes) -> bytes:
    data = re.sub(rb"(?m)^\.", b"..", data)
    if not data.endswith(b"\r\n"):
        data += b"\r\n"
    return data + b".\r\n"


# --- small helpers ---------------------------------------------------------------
def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _domain(address: str) -> str:
    return address.rpartition("@")[2] or socket.getfqdn()


def reply_words(code: int, resp: Any) -> str:
    """An SMTP reply on one line: `535 5.7.8 Authentication credentials invalid`."""
    text = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else str(resp)
    return f"{code} {' '.join(text.split())}"


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


__all__ = ["EmailChannel", "build_message", "connect", "email_channel", "failure", "message_bytes",
           "reply_words", "sender_refused", "wire_address"]
