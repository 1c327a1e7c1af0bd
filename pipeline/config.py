"""Typed configuration: the bundled config.yaml, overlaid by the user's file.

Paths in a config resolve relative to that config file, never the working
directory, because cron starts the tool from `/`. Secrets are only ever read
from the environment variables the config names.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from difflib import get_close_matches
from email.headerregistry import Address
from email.utils import getaddresses, parseaddr
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import yaml
from email_validator import EmailNotValidError, validate_email
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pipeline.errors import ConfigError
from pipeline.rank import term_key
from pipeline.text import clean_name

SECRET_KEYS = re.compile(r"(password|passwd|api_?key|token|secret)$", re.IGNORECASE)
# extra_body and header-like names whose values are secrets, however they are spelt
SECRET_NAMES = re.compile(r"(password|passwd|api[-_]?key|token|secret|authorization|auth)", re.IGNORECASE)
MASK = "***"


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """pydantic takes true as 1 and false as 0, and YAML reads yes, no, on and off as
        those: `featured: yes` would be one featured paper, `retries: no` none."""
        if isinstance(value, bool) and info.field_name:
            annotation = cls.model_fields[info.field_name].annotation
            kinds = set(get_args(annotation) or (annotation,)) - {type(None)}
            if kinds <= {int, float}:
                raise ValueError(f"a number, not {str(value).lower()}")
        return value

    @field_validator("*", mode="before")
    @classmethod
    def _no_empty_path(cls, value: Any, info: ValidationInfo) -> Any:
        """An empty path is the config's own folder: `seeds: {paths: ['']}` read every YAML
        file beside the config as seeds, the config too. '.' says that, if it is meant."""
        if info.field_name and (value == "" or (isinstance(value, list) and "" in value)):
            annotation = cls.model_fields[info.field_name].annotation
            kinds = {inner for kind in get_args(annotation) or (annotation,)
                     for inner in get_args(kind) or (kind,)}  # Path | None, list[Path]
            if Path in kinds:
                raise ValueError("an empty path: write the folder or file ('.' for the config's own folder)")
        return value


class Bilingual(Model):
    zh: str
    en: str


class Topic(Model):
    name: Bilingual
    intro: Bilingual


def http_url(value: str | None) -> str | None:
    if value is not None and urlsplit(value).scheme not in ("https", "http"):
        raise ValueError(f"not an http(s):// address: {value!r}")
    return value if value is None else with_port(value)


def with_port(url: str) -> str:
    """`url`, whose port, when it has one, is one there can be (1-65535); else ValueError
    (https://x.org:99999/u was taken, and every link made of it led nowhere)."""
    try:
        port = urlsplit(url).port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError(f"not a port (1-65535) in {url!r}")
    return url


HttpUrl = Annotated[str, AfterValidator(http_url)]  # an address the tool reaches


def env_name(value: str | None) -> str | None:
    """A `*_env` key holds a variable's name: a secret written there instead (api_key_env:
    sk-...) would be shown wherever the name is, in warnings, doctor and config show."""
    if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ValueError("not the name of an environment variable (letters, digits and _): put the "
                         "secret in a variable and write its name here (what is written is not shown)")
    return value


EnvName = Annotated[str, AfterValidator(env_name)]


class ArxivSource(Model):
    enabled: bool = True
    api_url: HttpUrl
    # before sources.fulltext.url: <html_url>/<id>v<N>, still read
    html_url: Annotated[str | None, AfterValidator(http_url)] = None
    categories: list[str] = Field(min_length=1)  # none: each collect, 'unexpected error: ValueError'
    terms: list[str] = Field(min_length=1)
    lookback_days: int = Field(ge=1, le=366)
    overlap_hours: int = Field(ge=0, le=24 * 14)
    page_size: int = Field(ge=1, le=2000)
    delay_seconds: float = Field(ge=0)
    timeout_seconds: float = Field(gt=0)
    deadline_seconds: float = Field(300, gt=0)
    retries: int = Field(ge=0, le=10)
    contact: str
    calendar_files: list[Path] = []  # more announcement calendars (YAML), e.g. next year's

    @field_validator("categories")
    @classmethod
    def _categories(cls, value: list[str]) -> list[str]:
        """An entry that is no category's name ('' or 'cs.LG cs.CL') is asked for and matches nothing."""
        for number, category in enumerate(value, 1):
            if not re.fullmatch(r"[a-z][a-z-]*(\.[A-Za-z-]+)?", category):
                raise ValueError(f"entry {number} ({category!r}) is not an arXiv category, such as cs.LG or "
                                 "stat.ML (one category an entry)")
        return value


class RssSource(Model):
    enabled: bool = True
    urls: list[HttpUrl]
    categories_per_feed: int = Field(1, ge=1)  # a feed caps at 2000 items: split the categories
    poll_minutes: float = Field(90, ge=0)  # wait this long for an expected announcement
    poll_interval_minutes: float = Field(10, gt=0)


class OaiSource(Model):
    enabled: bool = True
    url: HttpUrl


class PluginEntry(BaseModel):
    """One `channels` or `sources.plugins` entry: `type` names the plug-in (see
    pipeline/plugins.py), `name` tells two of a type apart (default: the type); other keys
    are its options."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: str
    name: str | None = None

    @property
    def key(self) -> str:
        return self.name or self.type


def channel_entry(number: int, entry: PluginEntry | Mapping[str, Any]) -> str:
    """How every message names a `channels` entry, as its reader finds it in config.yaml:
    its place in the list, its type, and its name when it has one: channels[1] (slack,
    name 'team'). `entry` is the entry, or the mapping the file holds (a type or a name
    that is no text is left out)."""
    said = {"type": entry.type, "name": entry.name} if isinstance(entry, PluginEntry) else entry
    kind, name = said.get("type"), said.get("name")
    what = ([kind] if isinstance(kind, str) else []) + ([f"name {name!r}"] if isinstance(name, str) else [])
    return f"channels[{number}]" + (f" ({', '.join(what)})" if what else "")


class Fulltext(Model):
    """Where a featured paper's HTML full text is read (pipeline/fulltext.py)."""

    enabled: bool = True
    url: HttpUrl = "https://arxiv.org/html/{id}v{version}"

    @field_validator("url")
    @classmethod
    def _names_the_paper(cls, url: str) -> str:
        if "{id}" not in url:
            raise ValueError("the URL must hold {id} (and usually {version}), e.g. https://arxiv.org/html/{id}v{version}")
        return url


class Sources(Model):
    arxiv: ArxivSource
    rss: RssSource
    max_response_mb: float = Field(50, gt=0)
    oai: OaiSource
    fulltext: Fulltext = Fulltext()
    plugins: list[PluginEntry] = []  # more sources (pipeline/sources/__init__.py)

    @model_validator(mode="after")
    def _html_url(self) -> Sources:
        """A config written before sources.fulltext set sources.arxiv.html_url: it still counts."""
        if self.arxiv.html_url and self.fulltext.url == Fulltext().url:
            url = self.arxiv.html_url.rstrip("/") + "/{id}v{version}"
            object.__setattr__(self, "fulltext", self.fulltext.model_copy(update={"url": url}))
        return self


class Seeds(Model):
    paths: list[Path]
    builtin: bool = True
    match_threshold: float = Field(ge=50, le=100)
    resolve_retry_days: int = Field(ge=0)


# --- relevance and topics (tuned against ../shared/data/arxiv_dev.jsonl) ---
class Relevance(Model):
    """The relevance rule (pipeline/rank.py); see the comments in config.yaml."""

    threshold: float
    title_weight: float = Field(2.0, ge=0)
    title_cap: float = Field(1.5, ge=0)
    rl_terms: dict[str, float]
    lm_terms: dict[str, float]
    negative_terms: dict[str, float] = {}
    not_rl_terms: dict[str, float] = {}
    background_cues: list[str] = []
    comparison_cues: list[str] = []  # background only for what follows them
    background_weight: float = Field(0.3, ge=0, le=1)
    method_cues: list[str] = []
    negation_cues: list[str] = []
    plain_weight: float = Field(1.0, ge=0, le=1)
    edge_weight: float = Field(1.0, ge=0, le=1)
    abstract_cap: float = Field(4.0, gt=0)
    lm_full: float = Field(1.0, ge=0)
    subject_weight: float = Field(1.0, gt=0)
    policy_lm_terms: list[str] = []
    seed_weight: float = Field(0.0, ge=0)
    llm_judge: bool = False
    grey_band: float = Field(0.5, ge=0)
    model: bool = True
    model_grey_band: float = Field(0.15, ge=0, le=1)
    include: list[str] = []
    exclude: list[str] = []
    follow_authors: list[str] = []

    @field_validator("include", "exclude", "follow_authors")
    @classmethod
    def _profile(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """A blank entry matches nothing; a phrase in both lists is only ever an exclude."""
        for number, entry in enumerate(value):
            if not term_key(entry):
                raise ValueError(f"entry {number + 1} is blank: it would match nothing")
            if not any(ch.isalnum() for ch in entry):
                raise ValueError(f"entry {number + 1} ({entry!r}) has no letter or digit: it would "
                                 "match nothing")
            text = entry.strip()
            if text[-1] in SEPARATORS or text[0] in SEPARATORS:
                where, mark = ("ends", text[-1]) if text[-1] in SEPARATORS else ("begins", text[0])
                raise ValueError(f"entry {number + 1} ({entry!r}) {where} with {mark!r}: one phrase "
                                 f"or name an entry, without the {mark!r}")
            if "*" in text and info.field_name != "follow_authors":
                _wildcard(number + 1, entry, text)
        if info.field_name == "exclude":  # compared as the phrases match: any case, hyphen or space alike
            included = {term_key(p) for p in info.data.get("include", [])}
            both = next((p for p in value if term_key(p) in included), None)
            if both is not None:
                raise ValueError(f"{both!r} is in include too; exclude wins over include, so "
                                 "take it out of one")
        return value


SEPARATORS = ",;，；、"  # a list's separators, ASCII or full-width: stray at a profile entry's end


def _wildcard(number: int, entry: str, text: str) -> None:
    """A phrase's `*` matches any ending of its last word ("qwen*", as the rule's terms):
    inside a phrase ("A* search") it matched nothing, and after one letter ("Q*", "A*") it
    kept every paper with a word that starts with it (question, quality, query)."""
    stem = term_key(text[:-1])
    if text.index("*") < len(text) - 1:
        raise ValueError(f"entry {number} ({entry!r}) has a '*' inside: a '*' only ends a phrase, "
                         "matching any ending of its last word ('qwen*'); inside, it matches nothing")
    if len(stem) < 2 and text[-2].isalnum():
        raise ValueError(f"entry {number} ({entry!r}) would keep every paper with a word that starts "
                         f"with {stem!r} (a '*' matches any ending): give two letters or more before it")


class TopicDef(Model):
    key: str
    name: Bilingual
    terms: dict[str, float] | list[str]  # a list means weight 1 for each term


# --- end relevance and topics ---


class Enrich(Model):
    provider: Literal["openai", "none"]
    base_url: HttpUrl
    model: str = Field(min_length=1)  # sent as is: empty, every call fails
    api_key_env: EnvName
    structured: Literal["json_schema", "json_object"]
    timeout_seconds: float = Field(gt=0)
    deadline_seconds: float = Field(gt=0)
    retries: int = Field(2, ge=0, le=10)
    failure_limit: int = Field(3, ge=1)
    concurrency: int = Field(ge=1, le=64)
    max_papers: int = Field(ge=0)
    max_tokens_per_run: int | None = Field(None, ge=1)
    fulltext_tokens: int = Field(6000, ge=0)
    extra_body: dict[str, Any] = {}
    glossary: dict[str, str] = {}


class Importance(Model):
    """Weights of the parts of a paper's importance (pipeline/importance.py)."""

    relevance: float = Field(1.0, ge=0)
    similarity: float = Field(1.0, ge=0)
    code: float = Field(0.1, ge=0)
    venue: float = Field(0.1, ge=0)
    authors: float = Field(0.5, ge=0)
    revision: float = Field(0.3, ge=0)
    irrelevant: float = Field(1.0, ge=0)


class Digest(Model):
    max_papers: int = Field(ge=1)
    max_curated: int = Field(5, ge=0)
    featured: int = Field(ge=0, le=10)
    pair_similarity: float = Field(0.25, ge=0, le=1)
    importance: Importance = Importance()


class GitOutput(Model):
    repo: Path
    branch: str = "main"
    path: str = ""
    push: bool = True
    message: str = "Update RL reading list"


class Outputs(Model):
    dir: Path
    base_url: Annotated[str | None, AfterValidator(http_url)] = None  # where out/ is published, for links
    git: GitOutput | None = None
    site: bool = True  # out/site/: the web edition
    site_url: Annotated[str | None, AfterValidator(http_url)] = None  # where out/site/ is served



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


Mailbox = Annotated[str, AfterValidator(mailbox)]
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


class Serve(Model):
    base_url: Annotated[str | None, AfterValidator(http_url)] = None  # public URL of `rl-digest serve`
    secret_env: EnvName = "RL_DIGEST_SECRET"  # signs the links
    previous_secret_envs: list[EnvName] = []  # secrets before a rotation: their links still check


class Schedule(Model):
    collect_cron: str
    publish_cron: str
    timezone: str
    misfire_grace_seconds: int = Field(ge=1)
    heartbeat_seconds: int = Field(60, ge=1)

    @field_validator("collect_cron", "publish_cron")
    @classmethod
    def _crontab(cls, value: str) -> str:
        return crontab(value)

    def notes(self) -> list[str]:
        """A line for each cron naming both a day of the month and a day of the week: cron
        fires on either, APScheduler on both, which no rewriting gives in general, and on
        which '0 8 1-7 * mon' (the first Monday) relies: a warning, not a refusal."""
        crons = {key: getattr(self, key) for key in ("collect_cron", "publish_cron")}
        return [f"schedule.{key}: {expr!r} names a day of the month and a day of the week: "
                "APScheduler fires it only when both match (cron fires when either does)"
                for key, expr in crons.items() if not any(f.startswith("*") for f in expr.split()[2::2])]

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            # names are case-sensitive files: 'utc' and 'asia/shanghai' are not found
            same = sorted(zone for zone in available_timezones() if zone.lower() == value.strip().lower())
            raise ValueError(f"unknown time zone: {value!r}"
                             + (f" (the IANA name is {same[0]!r})" if same else "")) from None
        return value


class Storage(Model):
    url: str
    busy_timeout_seconds: float = Field(30, gt=0)
    password_env: EnvName | None = None  # the database password, when the URL needs one


class Lock(Model):
    stale_hours: float = Field(6, gt=0)  # a run holding the lock longer is reported loudly
    dir: Path | None = None  # the lock files and heartbeat (default: beside the SQLite file, or state/)


class Templates(Model):
    dir: Path | None = None


class Config(Model):
    topic: Topic
    languages: list[Literal["zh", "en"]] = Field(min_length=1)
    sources: Sources
    seeds: Seeds
    relevance: Relevance
    topics: list[TopicDef] = Field(min_length=1)
    enrich: Enrich
    digest: Digest
    outputs: Outputs
    email: Email
    channels: list[PluginEntry] = []
    serve: Serve = Serve()
    schedule: Schedule
    storage: Storage
    lock: Lock = Lock()
    templates: Templates = Templates()
    path: Path | None = Field(None, exclude=True)  # the user's file, if any

    @model_validator(mode="before")
    @classmethod
    def _path_is_no_setting(cls, data: Any) -> Any:
        """`path` is set from where the file was read (load): one written in it was taken, unused."""
        if isinstance(data, dict) and "path" in data:
            raise ValueError("path: unknown key")
        return data

    @model_validator(mode="after")
    def _unique_languages(self) -> Config:
        if len(set(self.languages)) != len(self.languages):
            raise ValueError("languages: each language once")
        seen: set[str] = set()
        for number, entry in enumerate(self.channels):
            where = channel_entry(number, entry)
            if entry.type == "email":  # a second email channel: every reader mailed twice, email off or on
                raise ValueError(f"{where}.type: email is set up under `email:` (enabled, to, "
                                 "smtp_host...), not in channels")
            if not re.fullmatch(r"[a-z][a-z0-9_-]*", entry.key) or entry.key == "email":
                raise ValueError(f"{where}.name: {entry.key!r} is not a channel name "
                                 "(lower-case letters, digits, - or _; not 'email', which is the "
                                 "email key); give one with `name:`")
            if entry.key in seen:
                raise ValueError(f"{where}.name: {entry.key!r} twice; give each a "
                                 "`name:`")
            seen.add(entry.key)
        return self

    def channel_entry_of(self, key: str) -> str:
        """channel_entry of the `channels` entry called `key` (its name, else its type)."""
        number = next(n for n, entry in enumerate(self.channels) if entry.key == key)
        return channel_entry(number, self.channels[number])

    @property
    def site_url(self) -> str | None:
        """Where out/site/ is served, ending in "/": outputs.site_url, else serve's base_url
        (serve serves out/site/ at its root); None when the site is off or nobody serves it."""
        url = self.outputs.site_url or self.serve.base_url
        return url.rstrip("/") + "/" if url and self.outputs.site else None

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.schedule.timezone)

    def readers(self) -> list[Reader]:
        """email.to plus the lines of email.recipients_file, once per address (the first
        mention wins). A line that names no reader is skipped (recipient_problems says
        which): the other readers still get the week's digest."""
        found = list(self.email.to)
        if self.email.recipients_file:
            found += read_recipients(self.email.recipients_file, self.email.local)[0]
        first: dict[str, Reader] = {}
        for reader in found:
            first.setdefault(reader.address.lower(), reader)
        return list(first.values())

    def recipient_problems(self) -> list[str]:
        """A line for each line of email.recipients_file that names no reader."""
        return read_recipients(self.email.recipients_file, self.email.local)[1] \
            if self.email.recipients_file else []

    def password_env_problem(self) -> tuple[str, str] | None:
        """Why the database password cannot be read (and what to do), or None."""
        name = self.storage.password_env
        if not name or name in os.environ:
            return None
        return (f"storage.password_env: the environment variable {name} is not set",
                f"export {name} with the database password, or set storage.password_env: null "
                "if the server asks for none")

    def secret_values(self) -> list[str]:
        """What the environment variables the config names (every `*_env` key, the chat
        channels' too; not the SMTP user name, which doctor shows) hold: for logs.hide."""
        names: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, dict):
                for key, inner in value.items():
                    if str(key).endswith("_env") and key != "username_env" and isinstance(inner, str):
                        names.append(inner)
                    elif str(key).endswith("_envs") and isinstance(inner, list):  # previous_secret_envs
                        names.extend(name for name in inner if isinstance(name, str))
                    walk(inner)
            elif isinstance(value, list):
                for inner in value:
                    walk(inner)

        walk(self.model_dump(mode="json"))
        return [found for name in names if (found := os.environ.get(name))]

    def secret(self, env_name: str | None) -> str | None:
        return os.environ.get(env_name) if env_name else None

    def database_url(self) -> str:
        """storage.url with the password from storage.password_env, when that is set. A
        variable named but not set is a config error: the server's refusal would say less."""
        problem = self.password_env_problem()
        if problem:
            raise ConfigError(*problem)
        password = self.secret(self.storage.password_env)
        if not password:
            return self.storage.url
        from sqlalchemy.engine import make_url

        return make_url(self.storage.url).set(password=password).render_as_string(hide_password=False)


_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_DOW_PART = re.compile(r"^([a-z]+|\d)(?:-([a-z]+|\d))?$", re.IGNORECASE)


def _day(token: str) -> int | None:
    """A day of the week as cron numbers it (Sunday 0 or 7), from a digit or a name; else None."""
    if token.isdigit():
        return int(token) if int(token) <= 7 else None
    return _DAYS.index(token.lower()) if token.lower() in _DAYS else None


def _stepped(part: str) -> str | None:
    """The days a stepped day-of-week ('*/2', '1-5/2', 'mon-fri/2') names in cron, by name
    ('sun,tue,thu,sat'); None when it is no such step."""
    span, _, step = part.partition("/")
    ends = [0, 6] if span == "*" else [_day(token) for token in span.split("-")]
    days = [day for day in ends if day is not None]
    if not step.isdigit() or int(step) < 1 or len(days) < len(ends) or len(days) > 2:
        return None
    return ",".join(_DAYS[day] for day in range(days[0], days[-1] + 1, int(step))) or None


def crontab(expr: str) -> str:
    """A five-field crontab, with cron's day-of-week numbers turned into names.

    APScheduler 3 counts day-of-week numbers from Monday = 0, so a cron user's
    `1-5` would silently mean Tuesday to Saturday; names mean the same to both.
    A range from Sunday (0-6, sun-thu) is no range where the week starts on Monday:
    it becomes sun,mon-thu.
    """
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(f"{expr!r}: a crontab has 5 fields (minute hour day month day-of-week)")
    parts = []
    for part in fields[4].split(","):
        match = _DOW_PART.match(part)
        named = [_day(token) for token in match.groups() if token is not None] if match else [None]
        days = [day for day in named if day is not None]
        if len(days) < len(named):
            if "/" in part:  # cron's */2 is sun,tue,thu,sat; APScheduler's mon,wed,fri,sun
                raise ValueError(f"{expr!r}: a step in day-of-week ({part!r}) counts from Sunday in "
                                 f"cron, from Monday in APScheduler: list the days by name "
                                 f"({_stepped(part) or 'as mon,wed,fri'})")
            if any(ch.isdigit() for ch in part):
                raise ValueError(f"{expr!r}: write day-of-week as names (mon-fri), not {part!r}")
            parts.append(part)  # *, or what APScheduler says is wrong with it
            continue
        first, last = days[0], days[-1]
        if first == 0 and last:  # Sunday to a later day
            parts.append("sun")
            first = 1
        parts.append(_DAYS[first] if first == last else f"{_DAYS[first]}-{_DAYS[last]}")
    fields[4] = ",".join(parts)
    normal = " ".join(fields)
    from apscheduler.triggers.cron import CronTrigger

    try:
        trigger = CronTrigger.from_crontab(normal, timezone="UTC")
    except ValueError as exc:
        raise ValueError(f"{expr!r}: {exc}") from None
    if trigger.get_next_fire_time(None, datetime.now(UTC)) is None:  # 0 8 31 2 *: February 31st
        raise ValueError(f"{expr!r}: matches no date, so it would never fire")
    return normal


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


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """yaml.safe_load's, through libyaml where PyYAML has it (about ten times faster, and
    every command reads the config), that refuses a key given twice in one mapping: YAML
    forbids it, and PyYAML kept the last one, so a setting written above it did nothing."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # a merge (<<: *base) may be overridden below it; that is what it is for
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"{key!r} is given twice in one mapping (also on line {seen[key] + 1}): "
                    "only the last would count", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def parse_yaml(text: str) -> Any:
    """yaml.safe_load, but a key given twice in one mapping is an error (_Loader)."""
    return yaml.load(text, Loader=_Loader)


def bundled(name: str) -> Path:
    """A file shipped with the package: inside it once installed, beside it in a checkout."""
    installed = Path(str(resources.files("pipeline"))) / "bundled" / name
    return installed if installed.exists() else Path(__file__).resolve().parent.parent / name


def default_path() -> Path:
    """--config is handled by the CLI; here: $RL_DIGEST_CONFIG, else ./config.yaml, which
    must exist: a cron line that forgot --config must not run on the defaults."""
    env = os.environ.get("RL_DIGEST_CONFIG")
    return Path(env) if env else Path.cwd() / "config.yaml"


def load(path: Path | None) -> Config:
    """Validate the bundled defaults overlaid by `path`; raise ConfigError naming the key,
    and the file by its absolute path, as every other line names it (Config.path)."""
    base = _read_yaml(bundled("config.yaml"))
    user: dict[str, Any] = {}
    if path is not None:
        path = path.resolve()
        user = _read_yaml(path)
        try:
            _refuse_secrets(user, path)  # it walks every value first
        except RecursionError:
            raise ConfigError(f"{path}: not valid YAML: an alias (*name) stands inside what it names "
                              "(&name), so its settings never end") from None
    merged = _merge(base, user)
    try:
        config = Config.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_first_error(path or bundled("config.yaml"), exc, merged)) from None
    root = (path.parent if path else Path.cwd())
    config = _resolve_paths(config, root, path)
    if "paths" not in (user.get("seeds") or {}):  # the default seeds/ beside a config is optional
        seeds = config.seeds.model_copy(update={"paths": [p for p in config.seeds.paths if p.exists()]})
        config = config.model_copy(update={"seeds": seeds})
    readers = config.email.recipients_file  # and so is the default readers.txt
    if readers and "recipients_file" not in (user.get("email") or {}) and not readers.exists():
        email = config.email.model_copy(update={"recipients_file": None})
        config = config.model_copy(update={"email": email})
    return config


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file", "pass --config PATH or set RL_DIGEST_CONFIG") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: a folder, not a config file",
                          f"pass --config {path / 'config.yaml'}, or another file") from None
    except OSError as exc:  # its strerror alone: str(exc) names the file a second time
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte {exc.object[exc.start]:#04x}): "
                          "save the file as UTF-8") from None
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_error(path, text, exc)) from None
    except (ValueError, TypeError) as exc:  # a tag's value it cannot read: !!int abc, !!timestamp 2026-13-01
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    return data


def _yaml_error(path: Path, text: str, exc: yaml.YAMLError) -> str:
    """`path`:line:column: the problem, and where what it is in began when that is elsewhere
    (an unclosed quote or bracket is found at the end of the file)."""
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow, e.g. NUL
        return f"{path}:{text.count(chr(10), 0, exc.position) + 1}: {exc.reason}"
    mark, context, began = (getattr(exc, name, None) for name in ("problem_mark", "context", "context_mark"))
    if mark is None:
        return f"{path}: not valid YAML"
    problem = getattr(exc, "problem", None) or "not valid YAML"
    lines = text.split("\n")
    if mark.line < len(lines) and lines[mark.line][mark.column:mark.column + 1] == "\t":
        problem = "a tab: YAML indents with spaces only"
    elif context and began is not None and began.line != mark.line:
        problem += f" ({context} begun on line {began.line + 1})"
    return f"{path}:{mark.line + 1}:{mark.column + 1}: {problem}"


def _refuse_secrets(data: Any, path: Path, dotted: str = "", kind: str | None = None,
                    entry: str | None = None) -> None:
    """No secret in the file: neither a key that names one nor credentials inside a URL
    (they would reach logs, errors, status and, for outputs.base_url, every email).
    `entry`: the `channels` entry `data` is in (channel_entry), `kind` its type, whose keys
    the hint names."""
    if isinstance(data, dict):
        for key, value in data.items():
            inner = f"{dotted}.{key}" if dotted else str(key)
            if isinstance(key, str) and SECRET_KEYS.search(key) and not key.endswith("_env"):
                raise ConfigError(
                    f"{path}: {inner}: secrets are not read from the config file",
                    f"put it in an environment variable and set "
                    f"{' or '.join(_env_keys_for(inner, kind, entry))} to its name",
                )
            _refuse_secrets(value, path, inner, kind, entry)
    elif isinstance(data, list):
        for n, value in enumerate(data):
            if dotted == "channels":
                said = value if isinstance(value, dict) else {}
                where, of = channel_entry(n, said), said.get("type")
                _refuse_secrets(value, path, where, of if isinstance(of, str) else None, where)
            else:
                _refuse_secrets(value, path, f"{dotted}[{n}]", kind, entry)
    elif isinstance(data, str) and (what := url_credentials(data)):
        raise ConfigError(
            f"{path}: {dotted}: holds {what} in the URL; secrets are not read from the config file",
            "take it out of the URL, put it in an environment variable and set storage.password_env "
            "to its name" if dotted == "storage.url" else
            f"put the URL in an environment variable and set "
            f"{' or '.join(_env_keys_for(dotted, kind, entry))} to its name"
            if entry is not None and _chat(kind) else
            "take it out of the URL; a secret goes in an environment variable (enrich.api_key_env, "
            "email.password_env, storage.password_env, a channel's *_env)",
        )


def _env_keys(model: type[BaseModel], dotted: str = "") -> list[str]:
    """Every `*_env` key of `model`'s schema, dotted (a channel's or a plug-in's are its own)."""
    found: list[str] = []
    for name, field in model.model_fields.items():
        key = f"{dotted}.{field.alias or name}" if dotted else field.alias or name
        if name.endswith("_env"):
            found.append(key)
        for inner in get_args(field.annotation) or (field.annotation,):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                found += _env_keys(inner, key)
    return found


def _env_keys_for(secret: str, channel: str | None = None, entry: str | None = None) -> list[str]:
    """The `*_env` keys that name the variable for the secret written at `secret` (dotted):
    in a `channels` entry (`entry`, channel_entry) of a built-in `channel` type, those that
    type reads; else `secret`_env where that is a key (a plug-in's entry keeps its own), else
    those of its kind (password, api_key...) in its section, else its section's, else anywhere."""
    if entry is not None and (chat := _chat(channel)):
        return [f"{entry}.{key}" for key in chat.secret_keys(channel, secret.rsplit(".", 1)[-1])]
    if f"{secret}_env" in _env_keys(Config) or entry is not None or secret.startswith("sources.plugins["):
        return [f"{secret}_env"]
    kind = SECRET_KEYS.search(secret)
    word = {"passwd": "password", "apikey": "api_key"}.get(kind[1].lower(), kind[1].lower()) if kind else ""
    secrets = [k for k in _env_keys(Config) if not k.endswith(".username_env")]
    same = [k for k in secrets if k.rsplit(".", 1)[-1] == f"{word}_env"]
    section = [k for k in secrets if k.split(".")[0] == secret.split(".")[0]]
    return [k for k in same if k in section] or section or same or [f"a channel's {word}_env"]


def _chat(kind: str | None) -> Any:
    """pipeline.deliver.chat when `kind` is one of its platforms, else None."""
    from pipeline.deliver import chat  # it imports this module: only an error's hint needs it

    return chat if kind in chat.PLATFORMS else None


def url_credentials(value: str) -> str | None:
    """What secret a URL carries before its host, or None: a password anywhere, and in a
    web address a user too, since a token often stands there (https://TOKEN@host/); a
    database URL's user is a role name."""
    if "://" not in value or "@" not in value:
        return None
    try:
        parts = urlsplit(value.strip())
        if parts.password is not None:
            return "a password"
        return "a user or token" if parts.username and parts.scheme in ("http", "https") else None
    except ValueError:
        return None  # not a URL: the key's own check says so


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; anything else in `over` replaces the default."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merged[key] = _merge(base[key], value)
        else:
            merged[key] = value
    return merged


def _first_error(path: Path, exc: ValidationError, data: dict[str, Any]) -> str:
    """The first of `exc`'s errors, naming its key in `data` as the file holds it: a list's
    item by its place (`email.to[1]`), a `channels` entry by channel_entry."""
    errors = exc.errors()
    first = errors[0]
    parts = [f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]]
    if len(parts) > 1 and parts[0] == ".channels" and isinstance(number := first["loc"][1], int):
        entry = (data.get("channels") or [])[number]
        parts[:2] = [channel_entry(number, entry if isinstance(entry, dict) else {})]
    loc = "".join(parts).removeprefix(".")
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = unknown_key(str(first["loc"][-1]), _keys_at(first["loc"][:-1]))
    msg = msg.removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    where = f"{loc}: " if loc else ""  # a check across keys names them in its message
    return f"{path}: {where}{msg}{more}"


def unknown_key(key: str, known: Iterable[str]) -> str:
    """What a key the schema does not have is called, with the closest one it has."""
    near = get_close_matches(key, list(known), n=1)
    return "unknown key" + (f" (did you mean {near[0]}?)" if near else "")


def _keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys the schema has at `loc` (a mapping's place, e.g. ("digest",)), or []."""
    model: Any = Config
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        inner = [t for t in get_args(field.annotation) or (field.annotation,)
                 if isinstance(t, type) and issubclass(t, BaseModel)] if field else []
        if not inner:
            return []
        model = inner[0]
    return [field.alias or name for name, field in model.model_fields.items()]


def _resolve_paths(config: Config, root: Path, path: Path | None) -> Config:
    def at(p: Path | None) -> Path | None:  # ~/ is the home folder, as a shell reads it
        return None if p is None else root / p.expanduser()  # (an absolute path stays)

    outputs = config.outputs
    git = outputs.git.model_copy(update={"repo": at(outputs.git.repo)}) if outputs.git else None
    return config.model_copy(
        update={
            "path": path.resolve() if path else None,
            "seeds": config.seeds.model_copy(update={"paths": [at(p) for p in config.seeds.paths]}),
            "sources": config.sources.model_copy(update={"arxiv": config.sources.arxiv.model_copy(
                update={"calendar_files": [at(p) for p in config.sources.arxiv.calendar_files]})}),
            "outputs": outputs.model_copy(update={"dir": at(outputs.dir), "git": git}),
            "email": config.email.model_copy(
                update={"recipients_file": at(config.email.recipients_file)}
            ),
            "templates": Templates(dir=at(config.templates.dir)),
            "lock": config.lock.model_copy(update={"dir": at(config.lock.dir)}),
            "storage": config.storage.model_copy(update={"url": _sqlite_at(config.storage.url, root)}),
        }
    )


_SQLITE = re.compile(r"sqlite(\+pysqlite)?:///")  # SQLAlchemy's tutorial names the driver


def _sqlite_at(url: str, root: Path) -> str:
    """sqlite:///state/x.db is relative to the config file; sqlite:////abs stays;
    sqlite:///~/x.db is in the home folder."""
    prefix, path = _SQLITE.match(url), sqlite_file(url)
    if prefix is None or path is None or path.is_absolute():
        return url
    return prefix[0] + str(root / path.expanduser())


def sqlite_file(url: str) -> Path | None:
    prefix = _SQLITE.match(url)
    return Path(url[prefix.end():]) if prefix and ":memory:" not in url else None


def masked(config: Config) -> dict[str, Any]:
    """The effective config for `config show`: every `*_env` key's variable name shown with
    set/unset (the channels' and plug-ins' too) and secret-looking extra_body entries as ***
    (a URL holds no credentials: load refuses them)."""
    data = config.model_dump(mode="json", by_alias=True, exclude={"path"})
    extra = data["enrich"]["extra_body"]  # sent to the LLM as written: its keys name no variable
    data = _mark_envs(data)
    data["enrich"]["extra_body"] = _mask_names(extra)
    return data


def _mark_envs(value: Any) -> Any:
    """`value` with each `*_env` key's variable name (each of an `*_envs` key's) followed by
    (set) or (unset)."""
    if isinstance(value, dict):
        return {k: _marked(v) if str(k).endswith("_env") and isinstance(v, str) and v else
                [_marked(name) for name in v] if str(k).endswith("_envs") and isinstance(v, list)
                else _mark_envs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark_envs(v) for v in value]
    return value


def _marked(name: str) -> str:
    return f"{name} ({'set' if os.environ.get(name) else 'unset'})"


def _mask_names(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: MASK if SECRET_NAMES.search(str(k)) else _mask_names(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_names(v) for v in value]
    return value
