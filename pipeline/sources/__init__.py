"""Where papers and seed entries come from: a small `Source` protocol and its registry.

A source is asked for one window and answers with records and a report; it never
touches the database. Built in: the seed documents, the arXiv RSS feeds, the arXiv API
search and the OAI-PMH catch-up, read in that order (the feeds write down which
announcements they read; the API or the catch-up fill what they missed). A plug-in
source is one more `sources.plugins` entry in the config, whose `type` names it as
channels are named (pipeline/plugins.py): an `rl_digest.sources` entry point or
`module:factory`. Its factory gets a `SourceSetup` and returns the source, or None
when it is turned off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Protocol

from pipeline import plugins
from pipeline.calendar import Calendar
from pipeline.coverage import Ledger
from pipeline.errors import ConfigError
from pipeline.models import Paper, SeedDocument

if TYPE_CHECKING:
    from pipeline.config import Config
    from pipeline.sources.http import Fetcher

GROUP = "rl_digest.sources"
REGISTRY = {  # in the order they are read
    "seeds": "pipeline.sources.seeds:seed_source",
    "rss": "pipeline.sources.arxiv_rss:rss_source",
    "arxiv": "pipeline.sources.arxiv_api:api_source",
    "oai": "pipeline.sources.arxiv_oai:oai_source",
}
CREDITS = ("arXiv API", "RSS", "OAI-PMH", "seeds")  # how a digest names the built-in ones


@dataclass
class Window:
    """What to read: papers announced in (start, end], as of `as_of`.

    `ledger` is shared by the sources of one collect: the feeds write down what they
    read, the catch-up what it recovered; `memory` is what this source kept last time.
    """

    start: datetime
    end: datetime
    as_of: datetime
    calendar: Calendar
    groups: list[str]  # the category groups coverage is kept for
    ledger: Ledger
    first_run: bool = False
    memory: Any = None
    reread: bool = False  # `collect --since`: every announcement of the window counts as missed

    def missed(self) -> dict[str, list[date]]:
        """Per group, the announcements not read completely, each with the cause of its gap."""
        missed = self.ledger.missed(self.calendar, self.groups, self.start, self.as_of, self.reread)
        for group, days in missed.items():
            for day in days:
                reading = self.ledger.get(day, group)
                if not reading.read and not reading.gap:
                    reading.gap = "before the first collect" if self.first_run else "not collected"
        return missed


FEED_ERROR = "feed error"  # a ledger gap no source can mend: arXiv has no such category
CALENDAR = "calendar"  # the run report's key for the calendar's and the clock's warnings: a key, not a source


@dataclass
class SourceReport:
    """What one source did, for the run report and `rl-digest status`."""

    requests: int = 0
    seen: int = 0
    new: int = 0
    revised: int = 0
    duplicates: int = 0
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what is normal but worth saying
    seconds: float = 0.0


@dataclass
class Found:
    """What one source returned for a window."""

    papers: list[Paper] = field(default_factory=list)
    updates: list[Paper] = field(default_factory=list)  # new versions of papers perhaps held (id, version)
    documents: list[SeedDocument] = field(default_factory=list)
    report: SourceReport | None = field(default_factory=SourceReport)  # None: nothing to report
    memory: Any = None  # to keep for this source's next window; None: unchanged


class Source(Protocol):
    """One place papers come from."""

    name: str  # its key in the run report and the state ("rss", "oai", ...)
    label: str  # as a digest names it ("RSS")
    online: bool  # needs the network: an --offline run leaves it out

    def fetch(self, window: Window, fetcher: Fetcher) -> Found:
        """Read the window; raise SourceError when it cannot be read completely."""
        ...


@dataclass(frozen=True)
class SourceSetup:
    """What a factory gets: its name, the config and its own entry's options."""

    name: str
    config: Config
    options: Mapping[str, Any] = field(default_factory=dict)


Factory = Callable[[SourceSetup], "Source | None"]


def configured(config: Config, offline: bool = False) -> list[Source]:
    """The enabled sources in the order they are read: the built-in ones, then the plug-ins."""
    made = [plugins.load(name, f"sources.{name}", REGISTRY, GROUP, "source")(SourceSetup(name, config))
            for name in REGISTRY]
    taken = {*REGISTRY, "api", CALENDAR}  # the built-in ones' report keys
    for number, entry in enumerate(config.sources.plugins):
        if entry.key in taken:
            raise ConfigError(f"sources.plugins[{number}].name: {entry.key!r} is a built-in source's "
                              "name; give it another with `name:`")
        taken.add(entry.key)
        factory: Factory = plugins.load(entry.type, f"sources.plugins[{number}].type", REGISTRY,
                                        GROUP, "source")
        made.append(factory(SourceSetup(entry.key, config, entry.model_dump(exclude={"type", "name"}))))
    return [s for s in made if s is not None and not (offline and s.online)]


def credits(config: Config, used: list[Source], offline: bool) -> list[str]:
    """How the digest names its sources: the arXiv API whenever it is on (it also completes
    feed records and ties seeds), the feeds, the catch-up, the seeds when there are any (a
    path or the built-in pages), then the plug-ins."""
    on = {"arXiv API": config.sources.arxiv.enabled and not offline,
          "RSS": config.sources.rss.enabled and not offline,
          "OAI-PMH": config.sources.oai.enabled and not offline,
          "seeds": bool(config.seeds.paths) or config.seeds.builtin}
    return [name for name in CREDITS if on[name]] + [s.label for s in used if s.label not in CREDITS]
