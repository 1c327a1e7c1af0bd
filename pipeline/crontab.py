"""A crontab line as cron reads it, rewritten so that APScheduler reads it the same.

Apart from config_sections.py (schedule.collect_cron and publish_cron are checked with it):
cron and APScheduler number the days of the week differently, and this is the one place
that knows both.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

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
