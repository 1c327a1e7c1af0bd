"""arXiv's announcement calendar, from data: which announcements fall in a window.

An empty feed is only a failure when an announcement was due; the calendar
(calendars/*.yaml, shipped with the package; extended by sources.arxiv.calendar_files)
tells the two apart. Times are exact: 20:00 in America/New_York through zoneinfo,
so daylight saving moves the hour in UTC, not in New York.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from pipeline.config import bundled, parse_yaml
from pipeline.errors import ConfigError

_WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
CUTOFF = time(14)  # arXiv's daily submission deadline in New York, Monday to Friday
_CUTOFF_DAYS = range(5)  # its table: Thursday 14:00 to Friday 14:00 is announced on Sunday,
#                          Friday 14:00 to Monday 14:00 on Monday (info.arxiv.org/help/availability)


@dataclass(frozen=True)
class Announcement:
    """One evening's batch; `day` is the evening's date where arXiv is (its id in ledgers)."""

    at: datetime

    @property
    def day(self) -> date:
        return self.at.date()


@dataclass(frozen=True)
class Calendar:
    zone: ZoneInfo
    time: time
    weekdays: frozenset[int]  # Monday = 0
    no_announcement: dict[date, str] = field(default_factory=dict)
    years: frozenset[int] = frozenset()  # years whose skipped evenings are known: a file's `years`
    zh: dict[date, str] = field(default_factory=dict)  # a holiday's Chinese name, where the file gives one

    def announces(self, day: date) -> bool:
        return day.weekday() in self.weekdays and day not in self.no_announcement

    def why_not(self, day: date) -> str:
        """Why no announcement is due on `day`'s evening, in words."""
        if day in self.no_announcement:
            name = self.no_announcement[day]
            return f"{day:%m-%d} is an arXiv holiday" + (f" ({name})" if name else "")
        return f"arXiv does not announce on {day:%A} evenings"

    def at(self, day: date) -> Announcement:
        return Announcement(datetime.combine(day, self.time, self.zone))

    def between(self, start: datetime, end: datetime) -> list[Announcement]:
        """Announcements made in (start, end]."""
        first, last = start.astimezone(self.zone).date(), end.astimezone(self.zone).date()
        days = (first + timedelta(days=n) for n in range((last - first).days + 1))
        return [self.at(day) for day in days
                if self.announces(day) and start < self.at(day).at <= end]

    def fed_by(self, moment: datetime) -> datetime:
        """The last midnight in New York at `moment`: every announcement made by then is in
        a feed (rebuilt at midnight) and in OAI-PMH; a later one is not readable yet."""
        return datetime.combine(moment.astimezone(self.zone).date(), time(), self.zone)

    def in_feed(self, moment: datetime) -> tuple[Announcement | None, date]:
        """The announcement a feed read at `moment` carries, and that evening's date.

        The feed dated D (rebuilt at midnight in New York) carries the batch of
        the evening before D; on a day after an evening without one it is empty.
        """
        evening = moment.astimezone(self.zone).date() - timedelta(days=1)
        return (self.at(evening) if self.announces(evening) else None), evening

    def announced_on(self, moment: datetime) -> date:
        """The evening a version sent at `moment` is announced: the first announcing day from
        the first deadline after it (14:00 in New York, Monday to Friday: one sent on Friday
        afternoon or at the weekend is Monday's, not Sunday's)."""
        local = moment.astimezone(self.zone)
        day = local.date() + timedelta(days=local.time() >= CUTOFF)
        while day.weekday() not in _CUTOFF_DAYS:
            day += timedelta(days=1)
        while not self.announces(day):
            day += timedelta(days=1)
        return day

    def cutoff(self, day: date) -> datetime:
        """The deadline of the batch announced on `day`'s evening: 14:00 that day, or on the
        Friday before a Sunday; a version sent after it is announced on a later evening."""
        while day.weekday() not in _CUTOFF_DAYS:
            day -= timedelta(days=1)
        return datetime.combine(day, CUTOFF, self.zone)

    def unknown_years(self, start: datetime, end: datetime) -> list[int]:
        """Years whose holidays no calendar file lists, of the evenings due in the window: those
        whose batch reaches a feed in it, as coverage counts them (by the window's dates, a
        collect on New Year's Day, or a run on the Sunday before the year's first evening,
        asked for a file for a year none of whose evenings it reads)."""
        due = self.between(self.fed_by(start), self.fed_by(end))
        return sorted({a.day.year for a in due} - self.years)

    def known(self) -> str:
        """The years whose holidays are known, in words: "2026, 2027" or "none"."""
        return ", ".join(map(str, sorted(self.years))) or "none"


def how_to_add(year: int) -> str:
    """What to do about a year whose holidays no file lists (doctor and each collect say it)."""
    return (f"add a file for {year} (years: [{year}] and its no_announcement days) to "
            "sources.arxiv.calendar_files (README: The calendar)")


def load_calendar(extra: Iterable[Path] = ()) -> Calendar:
    """The bundled calendars overlaid by the user's files; ConfigError names a bad file."""
    files = sorted(bundled("calendars").glob("*.yaml"))
    data: dict[str, Any] = {"no_announcement": {}, "years": set(), "zh": {}}
    for path in [*files, *extra]:
        _overlay(data, path)
    try:
        zone = ZoneInfo(data["timezone"])
        hour, minute = (int(part) for part in str(data["time"]).split(":"))
        at = time(hour, minute)  # in the try: 25:00 is 'hour must be in 0..23'
        weekdays = frozenset(_WEEKDAYS.index(day) for day in data["weekdays"])
    except (KeyError, TypeError, ValueError, ZoneInfoNotFoundError) as exc:
        raise ConfigError(f"arXiv calendar: timezone, time (HH:MM) and weekdays are needed ({exc})") from None
    return Calendar(zone, at, weekdays, data["no_announcement"],
                    frozenset(data["years"]), data["zh"])


def _overlay(data: dict[str, Any], path: Path) -> None:
    loaded = _read(path)
    for key in ("timezone", "time", "weekdays"):
        if key in loaded:
            data[key] = loaded[key]
    skipped = loaded.get("no_announcement") or {}
    if not isinstance(skipped, dict):
        raise ConfigError(f"{path}: no_announcement maps dates (YYYY-MM-DD) to a reason")
    for day, reason in skipped.items():
        if not isinstance(day, date) or isinstance(day, datetime):  # 2027-01-18 00:00:00 would never match
            raise ConfigError(f"{path}: no_announcement: {day} is not a date (YYYY-MM-DD)")
        names = reason if isinstance(reason, dict) else {"en": reason}  # {en: Thanksgiving, zh: 感恩节}
        if set(names) - {"en", "zh"}:
            raise ConfigError(f"{path}: no_announcement: {day} gives a reason, "
                              "or its names as {en: ..., zh: ...}")
        # a day alone (2027-01-18:) is a holiday without a name
        data["no_announcement"][day] = "" if names.get("en") is None else str(names["en"])
        data["zh"][day] = "" if names.get("zh") is None else str(names["zh"])
    years = loaded.get("years") or []
    if not isinstance(years, list) or not all(re.fullmatch(r"[0-9]+", str(year)) for year in years):
        raise ConfigError(f"{path}: years lists the years whose holidays the file gives, e.g. [2027]")
    data["years"].update(int(year) for year in years)  # a day alone does not make its year known


def _read(path: Path) -> dict[str, Any]:
    """One calendar file as a mapping; ConfigError says why it is none."""
    try:
        loaded = parse_yaml(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:  # its strerror alone: str(exc) names the file a second time
        raise ConfigError(f"{path}: cannot read the arXiv calendar ({exc.strerror or exc})") from None
    except (yaml.YAMLError, ValueError, TypeError) as exc:  # ValueError: a day of no month (2026-13-01)
        raise ConfigError(f"{path}: cannot read the arXiv calendar ({' '.join(str(exc).split())})") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: an arXiv calendar is a mapping (timezone, time, weekdays, ...)")
    return loaded
