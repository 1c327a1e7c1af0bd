"""The config's sections as pydantic models: what each key takes, checked as it is read.

Apart from config.py, which reads a file into them (the bundled defaults overlaid, secrets
refused, paths resolved against the file, the first error worded with the file and key): a
reader after what a setting accepts finds it here, one class a section. The email section,
with its addresses and readers, is in config_email.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pipeline.crontab import crontab
from pipeline.rank import term_key


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
