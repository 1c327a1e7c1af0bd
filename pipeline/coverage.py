"""The coverage ledger: for each arXiv announcement and feed group, whether it was read.

Every collect writes down, per announcement (the evening's date in New York)
and per feed group (the categories of one feed), how it was read (RSS, OAI-PMH,
the API search), the ids it showed (new / cross / replace), how many papers
matched the query, and any gap with its cause. A gap not yet recovered is tried
again by later collects; the digest header and `rl-digest status` summarise
the ledger against what the calendar expected.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta

from pipeline.calendar import Calendar
from pipeline.models import State

_KEY = "coverage.ledger"
KEEP_DAYS = 120  # ledger entries older than this are dropped
RETRY_DAYS = 14  # an unrecovered gap is tried again for this long


@dataclass
class Reading:
    """One feed group's share of one announcement."""

    read: str = ""  # how: "RSS", "OAI-PMH", "the API search"; "" = not read
    new: int = 0
    cross: int = 0
    replace: int = 0
    kept: int = 0  # papers that matched the query
    matched: list[str] = field(default_factory=list)  # their ids: a paper in two feeds of an archive is one
    gap: str = ""  # why it was not read completely: stale, empty, truncated, not collected
    recovered: str = ""  # how the gap was filled, if it was

    def match(self, ids: Iterable[str]) -> None:
        """The papers of the query this reading found; `kept` counts them (a ledger of the
        release before has the count alone)."""
        self.matched = sorted(set(ids))
        self.kept = len(self.matched)

    @property
    def open(self) -> bool:
        return (not self.read or bool(self.gap)) and not self.recovered

    @property
    def counted(self) -> bool:
        """Its ids were counted: a feed listed them, or the OAI-PMH harvest did; the API search
        returns only the papers that match the query, so what it read has no id counts (nor
        has a feed cut at arXiv's cap whose rest the search read: it listed only some; a feed
        read whole counts, though a ledger of the release before marks it the search's too)."""
        searched = bool(self.gap) and self.recovered == "the API search"
        return self.recovered == "OAI-PMH" or bool(self.read) and not searched


@dataclass
class Ledger:
    days: dict[str, dict[str, Reading]] = field(default_factory=dict)

    @classmethod
    def load(cls, store: State) -> Ledger:
        data = store.get_state(_KEY) or {}
        return cls({day: {group: Reading(**r) for group, r in groups.items()}
                    for day, groups in data.items()})

    def save(self, store: State, today: date) -> None:
        oldest = (today - timedelta(days=KEEP_DAYS)).isoformat()
        store.set_state(_KEY, {day: {g: asdict(r) for g, r in groups.items()}
                               for day, groups in sorted(self.days.items()) if day >= oldest})

    def get(self, day: date, group: str) -> Reading:
        return self.days.setdefault(day.isoformat(), {}).setdefault(group, Reading())

    def missed(self, calendar: Calendar, groups: Iterable[str], start: datetime,
               end: datetime, reread: bool = False) -> dict[str, list[date]]:
        """Per group, the announcements that reached a feed in (start, end], as summarise
        counts them, not read completely (every one when `reread`), plus open gaps of the
        last RETRY_DAYS."""
        due = {a.day for a in calendar.between(calendar.fed_by(start), calendar.fed_by(end))}
        since = (end.date() - timedelta(days=RETRY_DAYS)).isoformat()
        found: dict[str, list[date]] = {}
        for group in groups:
            days = {day for day in due if reread or self._open(day.isoformat(), group)}
            days |= {date.fromisoformat(d) for d, entries in self.days.items()
                     if d >= since and group in entries and entries[group].open}
            if days:
                found[group] = sorted(days)
        return found

    def _open(self, day: str, group: str) -> bool:
        reading = self.days.get(day, {}).get(group)
        return reading is None or reading.open


@dataclass(frozen=True)
class GroupSummary:
    """What the header and status say for one archive (cs, stat, eess)."""

    name: str
    expected: int
    read: int
    new: int
    cross: int
    replace: int
    kept: int
    counted: int = 0  # of those read, the announcements whose ids new, cross and replace count


@dataclass(frozen=True)
class Gap:
    group: str
    day: str  # MM-DD
    cause: str
    recovered: str
    # an evening before every collect's window (a digest made by hand for an earlier week): no
    # later collect reads it, `collect --since` this date (its first evening, ISO) does
    since: str = ""


@dataclass(frozen=True)
class Holiday:
    """An evening arXiv skips, for a digest's line that names a window's holidays once."""

    day: str  # MM-DD
    zh: str  # its Chinese name, if the calendar file gives one
    en: str = ""  # its name in the calendar file, if it gives one


@dataclass(frozen=True)
class Summary:
    first: str | None  # first and last announcement expected (MM-DD)
    last: str | None
    expected: int
    read: int  # announcements every feed group read (directly or recovered)
    groups: tuple[GroupSummary, ...]
    gaps: tuple[Gap, ...]
    no_announcement: tuple[str, ...]  # holidays in the window, in words
    unknown_years: tuple[int, ...] = ()  # of the gaps not recovered: years whose holidays no file lists
    holidays: tuple[Holiday, ...] = ()  # the days of no_announcement, with their Chinese names
    # evenings (MM-DD) of years whose holidays no file lists, read through a catch-up alone: no
    # feed showed a batch, so each was an announcement or a holiday, which is not known
    unsure: tuple[str, ...] = ()
    unsure_years: tuple[int, ...] = ()


def summarise(ledger: Ledger, calendar: Calendar, groups: list[str], start: datetime,
              end: datetime) -> Summary:
    """The window's announcements against the ledger, per archive: those that reached a
    feed in it. One made minutes before `end` (a digest at 20:00:30 New York time, 08:00 in
    Beijing in summer) is not readable yet: it counts in the next window, not as a gap."""
    announcements = calendar.between(calendar.fed_by(start), calendar.fed_by(end))
    days = [a.day.isoformat() for a in announcements]
    by_archive: dict[str, list[str]] = {}
    for group in groups:
        by_archive.setdefault(group.split(".")[0].split("+")[0], []).append(group)
    summaries, gaps = [], []
    complete = sum(1 for day in days if all(
        (r := ledger.days.get(day, {}).get(g)) is not None and not r.open for g in groups))
    for archive, members in by_archive.items():
        summaries.append(_archive(ledger, archive, members, days))
    unknown: set[int] = set()  # a day not recovered in such a year may be a holiday: the digest says so
    first = min(ledger.days, default=None)  # every collect's window gives its evenings an entry
    for day in days:
        for group in groups:
            r = ledger.days.get(day, {}).get(group)
            if r is not None and r.read and not r.gap:
                continue
            if r is None and first is not None and day < first:  # no collect looked for it
                gaps.append(Gap(group, day[5:], "before the first collect", "", since=day))
            else:
                gaps.append(Gap(group, day[5:], r.gap if r and r.gap else "not collected",
                                r.recovered if r else ""))
            if not gaps[-1].recovered and int(day[:4]) not in calendar.years:
                unknown.add(int(day[:4]))
    # a skipped evening is placed as an announcement is, by when its batch would reach a feed
    # (by its date, a collect on 12-31 before 20:00 in New York named it, the next one again)
    after, until = calendar.fed_by(start), calendar.fed_by(end)
    holidays = [day for day in sorted(calendar.no_announcement) if day.weekday() in calendar.weekdays
                and after < calendar.at(day).at <= until]
    unsure = [day for day in days if int(day[:4]) not in calendar.years and all(
        (r := ledger.days.get(day, {}).get(g)) is not None and not r.open and not r.read for g in groups)]
    merged = _merge(gaps, [day[5:] for day in days], {day[5:] for day in unsure})
    return Summary(days[0][5:] if days else None, days[-1][5:] if days else None, len(days), complete,
                   tuple(summaries), tuple(merged),
                   tuple(calendar.why_not(d) for d in holidays),
                   tuple(sorted(unknown)),
                   tuple(Holiday(f"{d:%m-%d}", calendar.zh.get(d, ""), calendar.no_announcement[d])
                         for d in holidays),
                   tuple(day[5:] for day in unsure), tuple(sorted({int(day[:4]) for day in unsure})))


def _archive(ledger: Ledger, archive: str, members: list[str], days: list[str]) -> GroupSummary:
    """One archive's announcements read by every feed group of it, and its feeds' counts."""
    totals = {"read": 0, "new": 0, "cross": 0, "replace": 0, "kept": 0, "counted": 0}
    for day in days:
        readings = [ledger.days.get(day, {}).get(g) for g in members]
        if all(r is not None and not r.open for r in readings):
            totals["read"] += 1
            # a feed of the archive counted that evening's ids, if not every feed of it
            totals["counted"] += any(r is not None and r.counted for r in readings)
        for r in readings:
            if r is not None:  # ids a feed listed of an evening read in the end by a search are some of them
                for key in ("new", "cross", "replace") if r.counted or r.open else ():
                    totals[key] += getattr(r, key)
        # a paper listed by two feeds of the archive matched once (a ledger written before the
        # ids were kept has its counts alone)
        totals["kept"] += len({pid for r in readings if r is not None for pid in r.matched}) + sum(
            r.kept for r in readings if r is not None and not r.matched)
    return GroupSummary(archive, len(days), **totals)


def _merge(gaps: list[Gap], expected: list[str], unsure: Collection[str] = ()) -> list[Gap]:
    """Many groups with the same gap on a day read as one ('17 feeds'), and a run of
    announcements next to each other in `expected` (the window's, in order) with the same
    groups, cause and repair as one span ('11-02 → 11-20, 14 announcements'); days apart, with
    announcements read fine between them, are listed ('11-02, 11-04'). The `unsure` days
    (Summary.unsure) in a span are not counted as announcements: each was one or a holiday
    ('12-27 → 01-05 (5 announcements, 2 evenings that may have been holidays)')."""
    per_day: dict[tuple[str, str, str, bool], list[Gap]] = {}
    for gap in gaps:
        per_day.setdefault((gap.day, gap.cause, gap.recovered, bool(gap.since)), []).append(gap)
    spans: dict[tuple[str, str, str, bool], list[str]] = {}
    since: dict[tuple[str, str, str, bool], str] = {}  # of the span's first evening: gaps come in order
    for (day, cause, recovered, unread), found in per_day.items():
        label = found[0].group if len(found) == 1 else f"{len(found)} feeds"
        spans.setdefault((label, cause, recovered, unread), []).append(day)
        since.setdefault((label, cause, recovered, unread), found[0].since)
    return [Gap(label, ", ".join(run[0] if len(run) == 1 else
                                 f"{run[0]} → {run[-1]} ({_evenings(run, unsure)})"
                                 for run in _runs(days, expected)), cause, recovered,
                since[(label, cause, recovered, unread)])
            for (label, cause, recovered, unread), days in spans.items()]


def _runs(days: list[str], expected: list[str]) -> list[list[str]]:
    """`days` (in `expected`'s order) cut where an announcement of `expected` lies between two."""
    runs: list[list[str]] = []
    for day in days:
        if runs and expected.index(day) == expected.index(runs[-1][-1]) + 1:
            runs[-1].append(day)
        else:
            runs.append([day])
    return runs


def _evenings(days: list[str], unsure: Collection[str]) -> str:
    """What a span's days were: announcements, and evenings that may have been holidays (all
    of them such: 'evenings', beside the line's words on why they may have been)."""
    maybe = sum(1 for day in days if day in unsure)
    if maybe == len(days):
        return f"{maybe} evenings"
    known = f"{len(days) - maybe} announcement{'s' * (len(days) - maybe > 1)}"
    if not maybe:
        return known
    return known + (f", {maybe} evenings that may have been holidays" if maybe > 1
                    else ", 1 evening that may have been a holiday")
