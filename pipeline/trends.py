"""Trends: relevant papers per topic per week over the last 26 weeks, and the week's movers.

A paper counts in the week of the digest that first listed it (the week it was announced,
as the reader met it) under its primary topic; seed entries are never a week's papers
and are not counted. Weeks end on the digest's day. A week without a digest is unknown
(None), not zero: the tool did not run then, or the database is younger. The record is
made when the digest is composed and kept with it, so a re-render shows that week's figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, timedelta

from pipeline.config_sections import TopicDef
from pipeline.models import Entry, Mover, TopicWeeks, Trends

WEEKS = 26
MOVERS = 3  # at most this many topics in the movers line
MIN_CHANGE = 3  # papers: a smaller change is a week's noise, not a mover
MIN_SHARE = 0.2  # ... and so is a change under this share of the larger count

Listed = Iterable[tuple[str, str | None, int]]  # (digest id, topic, papers): week.history


def span(end: date, weeks: int = WEEKS) -> tuple[str, str]:
    """The digest ids (after, until] that fall in the weeks ending on `end`."""
    return (end - timedelta(days=7 * weeks)).isoformat(), end.isoformat()


def record(listed: Listed, current: Iterable[Entry], end: date, topics: Sequence[TopicDef],
           weeks: int = WEEKS) -> Trends | None:
    """The weeks up to `end` from the earlier digests' counts (`listed`) and this digest's
    papers (`current`); None when no earlier week has a digest: a first run says nothing
    rather than something wrong. Weeks before the first digest are left out."""
    known = [False] * weeks
    per: dict[str, list[int]] = {}
    for day, topic, n in listed:
        back = (end - date.fromisoformat(day)).days // 7
        if not 0 <= back < weeks:
            continue
        known[weeks - 1 - back] = True
        if topic:
            per.setdefault(topic, [0] * weeks)[weeks - 1 - back] += n
    if not any(known[:-1]):
        return None
    known[-1] = True
    for entry in current:
        if not entry.curated:
            per.setdefault(entry.topic, [0] * weeks)[-1] += 1
    start = known.index(True)
    names = {t.key: t.name for t in topics}
    order = [t.key for t in topics] + sorted(per.keys() - names.keys())
    found = tuple(
        TopicWeeks(key, names[key].zh if key in names else key, names[key].en if key in names else key,
                   tuple(n if k else None for n, k in zip(per[key][start:], known[start:], strict=True)))
        for key in order if any(per.get(key, ())))
    ends = [(end - timedelta(days=7 * back)).isoformat() for back in range(weeks - 1 - start, -1, -1)]
    return Trends(weeks=tuple(ends), topics=found, movers=movers(found))


def movers(topics: Sequence[TopicWeeks]) -> tuple[Mover, ...]:
    """The topics whose count changed most against the week before, largest change first
    (the taxonomy's order on ties).

    Against the previous week, not the mean of the four before: the figure it names ("up
    from 19") is one the reader saw in last week's digest, a whole number they can check,
    and it needs one earlier week, not four. The mean would smooth a holiday week, but
    the reader could check it nowhere; instead a change of fewer than MIN_CHANGE papers,
    or under MIN_SHARE of the larger count, is left out as noise. No digest last week:
    no movers (a gap is not zero papers).
    """
    found = []
    for t in topics:
        now, before = (t.counts[-1], t.counts[-2]) if len(t.counts) > 1 else (None, None)
        if now is None or before is None:
            continue
        change = abs(now - before)
        if change >= MIN_CHANGE and change >= MIN_SHARE * max(now, before):
            found.append(Mover(t.topic, t.name_zh, t.name_en, now, before))
    found.sort(key=lambda m: -abs(m.now - m.before))
    return tuple(found[:MOVERS])

