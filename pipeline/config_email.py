"""The config's email section and the readers it names: each address checked as a mail
server would take it, and the recipients file read one reader a line.

Apart from the other sections (config_sections.py): addresses are their own craft
(email-validator; a domain without a period only for this machine's own mail system), and
its Reader is what the sender, doctor and `readers` pass around.
"""

from __future__ import annotations

import functools
import re
from email.headerregistry import Address
from email.utils import getaddresses, parseaddr
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from email_validator import EmailNotValidError, validate_email
from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from pipeline.config_sections import EnvName, Model, with_port
from pipeline.errors import ConfigError
from pipeline.text import clean_name

_ADDRESS = re.compile(r"[^\s@<>,;]+@[^\s@<>,;]+")  # what looks like one address, to count them
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')  # a quoted name, where a comma is part of the name
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")  # smtp_host values that are this machine's own MTA


def local_host(smtp_host: str) -> bool:
    """`email.smtp_host` is this machine's own mail system."""
    return smtp_host.lower() in LOCAL_HOSTS


def mailbox(value: str, local: bool = False) -> str:
    """One address, bare or as `Name <addr>`, checked by email-validator; else ValueError.
    `local`: the domain may be a host name without a period (root@localhost, digest@mailhost),
    as the sender of a server whose own mail system takes the message and names it, or a
    reader that mail system delivers to; else such a domain is a typo (alice@gmailcom)."""
    if any(ch in value for ch in "\r\n"):
        raise ValueError(f"a line break is not allowed in an address: {value!r}")
    found = getaddresses([value])
    # A comma or semicolon outside quotes: Python 3.13's getaddresses (3.12.6's, 3.11.10's)
    # finds no address, an older one drops it and takes `a@x.org,`: refused on every one
    stray = any(sep in _QUOTED.sub("", value) for sep in ",;")
    if len(found) != 1 or not found[0][1] or stray:
        several = "," in value or len(_ADDRESS.findall(value)) > 1
        raise ValueError(f"one address per entry (a list gets one entry per reader): {value!r}"
                         if several else f"not an email address: {value!r}")
    name, address = found[0]
    if value.count("@") != address.count("@") + name.count("@"):
        raise ValueError(f"one address per entry: {value!r}")
    user, _, domain = address.rpartition("@")
    try:  # email-validator refuses localhost outright: its local part is what is left to check
        validate_email(f"{user}@example.org" if domain.lower() == "localhost" else address,
                       check_deliverability=False, globally_deliverable=False)
    except EmailNotValidError as exc:
        raise ValueError(f"not an email address: {value!r} ({exc})") from None
    try:
        if not local:
            validate_email(address, check_deliverability=False)
    except EmailNotValidError as exc:
        raise ValueError(f"not an email address: {value!r} ({exc} Such a domain is taken only when "
                         "email.smtp_host is localhost, 127.0.0.1 or ::1, a mail server on this machine)") \
            from None
    return value.strip()


Sender = Annotated[str, AfterValidator(lambda value: mailbox(value, local=True))]


Language = Literal["zh", "en"]


class Reader(Model):
    """One email reader: the address keys them (outbox rows, status, verdicts); the name
    goes in To; `languages` (default: the top-level `languages`) picks their email's."""

    address: str
    name: str | None = None
    languages: list[Language] | None = Field(None, min_length=1)

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        checked = mailbox(value, local=True)  # a domain without a period: Email._to and parse say
        if parseaddr(checked)[0]:
            raise ValueError(f"the address alone (the name goes in `name`): {value!r}")
        return checked

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        """A name is outside text that reaches the To: header: no bidi override, one line."""
        return clean_name(value) or None

    @model_validator(mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return cls.parse(value, local=True).model_dump() if isinstance(value, str) else value

    @property
    def mailbox(self) -> str:
        return str(Address(display_name=self.name, addr_spec=self.address)) if self.name \
            else self.address

    @classmethod
    def parse(cls, value: str, languages: list[str] | None = None, local: bool = False) -> Reader:
        """`addr` or `Name <addr>`; ValueError naming what is wrong with it. `local`: a domain
        without a period is taken (`Email.local`, the mail server is this machine's)."""
        name, address = parseaddr(mailbox(value, local))
        return cls(address=address, name=name or None, languages=languages)


class Email(Model):
    enabled: bool
    smtp_host: str = Field(min_length=1)  # empty: "please run connect() first" at each send
    smtp_port: int = Field(ge=1, le=65535)
    security: Literal["none", "starttls", "ssl"]
    username_env: EnvName | None = None
    password_env: EnvName | None = None
    from_: Sender = Field(alias="from")
    to: list[Reader] = []
    recipients_file: Path | None = None
    timeout_seconds: float = Field(gt=0)
    # the wait for the server's verdict on a message it has taken in (RFC 5321: 10 min)
    reply_timeout_seconds: float = Field(default=600, gt=0)
    unsubscribe_url: str | None = None

    @property
    def local(self) -> bool:
        """The mail goes to this machine's own mail system, which takes root@localhost."""
        return local_host(self.smtp_host)

    @field_validator("to")
    @classmethod
    def _to(cls, value: list[Reader], info: ValidationInfo) -> list[Reader]:
        local = local_host(info.data.get("smtp_host", ""))
        for reader in value:
            mailbox(reader.address, local)
        return value

    @field_validator("unsubscribe_url")
    @classmethod
    def _unsubscribe(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if any(ch in value for ch in "\r\n") or urlsplit(value.strip()).scheme.lower() not in (
                "https", "http", "mailto"):
            raise ValueError(f"not an https:// (or mailto:) address on one line: {value!r}")
        return with_port(value.strip())


_LANG = re.compile(r"(.*?)\s+lang=\s*(\S*)")


def read_recipients(path: Path, local: bool = False) -> tuple[list[Reader], list[str]]:
    """One reader a line: `addr` or `Name <addr>`, then optionally `lang=en`, `lang=zh`
    or `lang=zh,en`; `#` starts a comment. The readers, and a line for each line skipped.
    `local`: as Reader.parse's."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:  # the key too: a bare path did not say which setting names it
        raise ConfigError(f"email.recipients_file: {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a list saved as Latin-1 ('Müller <m@…>')
        line = exc.object[:exc.start].count(b"\n") + 1
        raise ConfigError(f"email.recipients_file: {path}:{line}: not UTF-8 text "
                          f"(byte {exc.object[exc.start]:#04x}): save the file as UTF-8") from None
    found, problems = _recipients(path, text, local)
    return list(found), list(problems)


@functools.lru_cache(maxsize=4)
def _recipients(path: Path, text: str, local: bool) -> tuple[tuple[Reader, ...], tuple[str, ...]]:
    """read_recipients' work, done once for each text of the file: a run, a send and serve's
    every click ask for the readers several times, and checking a thousand takes a second."""
    found, problems = [], []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        languages = None
        match = _LANG.fullmatch(line)
        if match:
            line, languages = match.group(1), match.group(2).split(",")
            if not set(languages) <= {"zh", "en"} or len(set(languages)) != len(languages):
                problems.append(f"{path}:{number}: lang= takes zh, en or zh,en, not "
                                f"{match.group(2)!r}; line skipped")
                continue
        try:
            found.append(Reader.parse(line, languages, local))
        except ValueError as exc:
            problems.append(f"{path}:{number}: {exc}; line skipped")
    return tuple(found), tuple(problems)
