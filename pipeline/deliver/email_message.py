"""The email's message, apart from its hand-over by SMTP (email.py): what goes on the
wire, made without a connection.

`build_message` makes the message (multipart/alternative: text/plain, then text/html;
UTF-8; non-ASCII headers encoded per RFC 2047); `message_bytes` writes it as the wire
carries it (CRLF, headers folded where every reader decodes them); `wire_address` gives
an address the form that needs no SMTPUTF8 where one exists.
"""

from __future__ import annotations

import re
import socket
from datetime import UTC, datetime
from email import policy as email_policy
from email.header import Header
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from email_validator import EmailNotValidError, validate_email

from pipeline import render
from pipeline.errors import DeliveryError
from pipeline.links import RECIPIENT

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
    msg["Message-ID"] = message_id or make_msgid(idstring=digest_id, domain=domain_of(sender_addr))
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


# --- small helpers ---------------------------------------------------------------
def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def domain_of(address: str) -> str:
    """An address's domain, else this machine's name: a Message-ID's and the List-Id's."""
    return address.rpartition("@")[2] or socket.getfqdn()
