"""One `deliver` call: a batch that hands every waiting row of the outbox over, channel by
channel, marks each outcome on its row by the outbox's rules (outbox.py), and settles at its
end what only the whole batch tells. Apart from outbox.py because a batch lives for one pass
(the run's, `send`'s, the scheduler's) and learns as it goes (`_Batch`); the rows, their
states and their times are what lasts between passes, and `status`, `readers` and the
scheduler read them without handing anything over.

A hand-over cut off (the server took the message and did not answer) leaves the channel's
other rows waiting for the next batch: a server that sick would hold each of them for minutes.
A message posted in parts (a long one on Telegram) stores, as each part is accepted, the
id the rest is built from (`<id>#k`), so a hand-over cut off, by a crash too, posts only
the parts not yet accepted: the one in flight may show twice, no other.
A refusal whose reply names no owner (an SMTP 550 that is not about the reader's address or
mailbox) fails its row, unless the same reply refused every reader its channel was handed in
the batch, two or more, and none was taken: that is the sender's (`_settle`), and the rows wait
as for a "later", each try counted, given up after some five days if it never lifts.
A channel's exception that is none of these outcomes (a bug, an encoding error) is its
row's alone, on the row in one line: raised by `build`, a deferral; by `send`, a hand-over
cut off, as it may have reached. The batch goes on with the other rows.
A digest not ready to go (`unready`: the web page its messages link to is not written, by a
run that stopped after saving it) keeps its rows waiting, uncounted, as for a server down.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email.utils import parseaddr

from pipeline import progress
from pipeline.deliver.channels import HELD, Channel, Deferred, Interrupted, Message, Refused, Unreachable
from pipeline.deliver.outbox import (
    ASKED_CAP,
    EMAIL,
    MAX_ATTEMPTS,
    RESENT,
    Delivery,
    Outbox,
    aware,
    backoff,
    due_by_now,
    held_wait,
    iso,
    owner,
    reader_key,
    routes,
)
from pipeline.errors import DigestError
from pipeline.models import Digest, collapse
from pipeline.stopping import Stopped, checkpoint

log = logging.getLogger("pipeline.deliver.outbox")  # its lines name the outbox, as they always have

UNSUBSCRIBED = "the reader unsubscribed before it was sent"
REMOVED = "the reader was removed from the list before it was sent"
SHARED = (f"the same to all {{}} readers tried, none taken: the server refuses the sender, {HELD} as for a "
          "\"later\" (each try counted, given up after some five days) and go once it accepts; check the "
          "reply, the address in email.from, the login and the sending IP")


@dataclass
class DeliveryReport:
    """What one `deliver` call did.

    sent / failed: rows this call marked so. pending: rows in scope still waiting
    after this call. errors: one line per problem. held: one line per channel the config
    no longer has, whose rows wait for it (not a failure: it was taken out on purpose).
    """

    sent: int = 0
    pending: int = 0
    failed: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.pending == 0 and self.failed == 0



def deliver(outbox: Outbox, channels: dict[str, Channel], digest: Callable[[str], Digest],
            now: datetime, *, digest_id: str | None = None, due_only: bool = False,
            skip: Collection[str] = (), unsubscribed: Collection[str] = (),
            readers: Collection[str] | None = None, max_attempts: int = MAX_ATTEMPTS,
            unready: Callable[[str], str | None] = lambda digest_id: None) -> DeliveryReport:
    """Hand over every waiting row (of `digest_id`, or all), channel by channel.

    `digest(id)` gives the stored digest. `due_only`: skip rows whose backoff has not
    run out (the scheduler); otherwise try them all now (a person or cron). Rows of
    the channels in `skip` are left as they are (`run --no-email`). Email rows of the
    addresses in `unsubscribed` (lower case), queued before the reader unsubscribed, are
    marked skipped, never sent; so are those of addresses no longer among `readers` (lower
    case; None: not known, email is off), removed from the list before it went.
    `unready(id)`: why a digest cannot go yet (a page its messages link to is not written);
    its rows wait, uncounted, as for a server not reached.
    """
    now = aware(now).astimezone(UTC)
    report, batch = DeliveryReport(), _Batch()
    held: dict[str, list[Delivery]] = {}  # rows of a channel the config does not have now
    waits: dict[str, tuple[str, list[Delivery]]] = {}  # a digest: why it cannot go yet ("": it can), its rows
    readers_of = routes(channels)
    try:
        rows = [due_by_now(row, now) for row in outbox.pending(digest_id)]
        for row in progress.track(rows, "sending", len(rows)):
            checkpoint()  # a stop asked for: the rows not yet handed over stay queued
            if row.channel in skip:
                continue
            why = _stopped(row, unsubscribed, readers)
            if why:
                outbox.mark_skipped(row, why)
                report.skipped += 1
                log.info("digest %s to %s skipped: %s", row.digest_id, row.who, why)
                continue
            name = owner(row, readers_of)
            channel = channels.get(name)
            if channel is None:  # taken out of the config (email turned off): kept for its return
                report.pending += 1
                held.setdefault(row.channel, []).append(row)
                continue
            if _not_due(row, now, due_only, report):
                continue
            if row.digest_id not in waits:  # asked once a digest
                waits[row.digest_id] = (unready(row.digest_id) or "", [])
            behind = waits[row.digest_id] if waits[row.digest_id][0] else batch.down.get(name)
            if behind is not None:  # its digest cannot go yet, or its channel is down
                reason, kept = behind
                kept.append(row)
                _wait(outbox, row, reason, now, report)
                continue
            _hand_over(outbox, channel, name, row, digest, now, max_attempts, report, batch)
    finally:
        for channel in channels.values():
            channel.close()
        _settle(outbox, batch, now, max_attempts, report)  # a stop too leaves no refused row claimed
    _sum_up(report, held, batch.alone, [*waits.values(), *batch.down.values()])
    return report



def _not_due(row: Delivery, now: datetime, due_only: bool, report: DeliveryReport) -> bool:
    """The row's time has not come (it stays pending): its backoff has not run out and only
    due rows go (the scheduler), or the other side asked for no try before a later time."""
    if due_only and row.next_attempt is not None and row.next_attempt > now:
        report.pending += 1
        return True
    if row.not_before is not None and row.not_before > now:  # asked: a try now would not be heard
        report.pending += 1
        report.errors.append(f"{row.label}: waits until {iso(row.not_before)}, as the other "
                             "side asked (Retry-After)")
        return True
    return False



def _sum_up(report: DeliveryReport, held: dict[str, list[Delivery]],
            alone: dict[str, list[tuple[Delivery, str]]],
            behind: list[tuple[str, list[Delivery]]]) -> None:
    """The report's lines for the rows left waiting: by a channel the config does not have
    now, by a reply that may be theirs alone, behind a digest not ready or a channel down."""
    for name, rows in held.items():
        ids = sorted({r.digest_id for r in rows})
        report.held.append(f"{len(rows)} {'delivery waits' if len(rows) == 1 else 'deliveries wait'} "
                           f"for channel {name}, which the config does not have now (digest "
                           f"{', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}): "
                           f"they go when it is back, or `rl-digest send --drop {name}` drops "
                           "them for good")
    report.errors += [f"{row.label}: {reason}" for rows in alone.values() for row, reason in rows]
    for reason, rows in behind:
        if rows:  # a hand-over cut off with no row behind it: its own line says it
            report.errors.append(_queued(reason, rows))



def _queued(reason: str, rows: list[Delivery]) -> str:
    """One line for a group of rows left waiting for one reason: 300 readers, not 300 lines."""
    names = ", ".join(r.who for r in rows[:3]) + (", ..." if len(rows) > 3 else "")
    stay = "delivery stays" if len(rows) == 1 else "deliveries stay"
    return f"{reason}; {len(rows)} {stay} queued ({names})"



def _stopped(row: Delivery, unsubscribed: Collection[str], readers: Collection[str] | None) -> str | None:
    """Why an email row is no longer to be sent: its reader unsubscribed, or left the list."""
    if row.channel != EMAIL:
        return None
    address = parseaddr(row.reader)[1].lower()
    if address in unsubscribed:
        return UNSUBSCRIBED
    return REMOVED if readers is not None and address not in readers else None



@dataclass
class _Batch:
    """What one `deliver` call learns of each channel as it goes: why it is down, and its rows;
    rows held by a reply that may be theirs alone; rows refused by a reply that names no owner,
    settled at the end (`_settle`); and how many rows it was handed."""

    down: dict[str, tuple[str, list[Delivery]]] = field(default_factory=dict)
    alone: dict[str, list[tuple[Delivery, str]]] = field(default_factory=dict)
    refused: dict[str, list[tuple[Delivery, str]]] = field(default_factory=dict)
    tried: Counter[str] = field(default_factory=Counter)



def _hand_over(outbox: Outbox, channel: Channel, name: str, row: Delivery,
               digest: Callable[[str], Digest], now: datetime, max_attempts: int,
               report: DeliveryReport, batch: _Batch) -> None:
    message = _build(outbox, channel, row, digest, now, max_attempts, report)
    if message is None or not outbox.claim(row, message.id):
        return  # deferred, or another process is at it: never two hand-overs of one row
    batch.tried[name] += 1
    # each part accepted is stored before the next goes: a kill -9 between two reposts neither
    message = replace(message, progress=lambda resume: outbox.claim(row, resume))
    try:
        words = channel.send(message)
    except Unreachable as exc:
        _wait(outbox, row, exc.reason, now, report)
        _hold(name, row, exc, batch)
    except Deferred as exc:
        _defer(outbox, row, exc.reason, now, max_attempts, report, after=exc.after)
    except Interrupted as exc:
        words = f"{exc.reason} while handing over {message.id}; {_resume_later(outbox, row, exc)}"
        _defer(outbox, row, words, now, max_attempts, report, interrupted=True, after=exc.after)
        batch.down[name] = (f"{name}: {exc.reason}", [])  # a sick server: the rest wait
    except Refused as exc:
        if exc.unowned:  # whose, the other readers' outcomes tell: it stays claimed till then
            batch.refused.setdefault(name, []).append((row, exc.reason))
        else:
            _fail(outbox, row, exc.reason, report)
    except (DigestError, Stopped):
        raise
    except Exception as exc:  # a bug mid-hand-over: it may have reached, as if cut off; this row alone
        words = f"{_unforeseen(row, exc)} while handing over {message.id}; {_again(row)}"
        _defer(outbox, row, words, now, max_attempts, report, interrupted=True)
    else:
        _mark_sent(outbox, name, row, message.id, words, now, report)



def _build(outbox: Outbox, channel: Channel, row: Delivery, digest: Callable[[str], Digest],
           now: datetime, max_attempts: int, report: DeliveryReport) -> Message | None:
    """The row's message; None when building it raised (a bug for this reader, before any
    hand-over): the row is deferred and the others still go."""
    try:
        return channel.build(digest(row.digest_id), row.reader, row.message_id)
    except (DigestError, Stopped):  # the operator's to mend, or a stop: the whole batch's
        raise
    except Exception as exc:
        _defer(outbox, row, _unforeseen(row, exc), now, max_attempts, report)
        return None



def _hold(name: str, row: Delivery, exc: Unreachable, batch: _Batch) -> None:
    """A row the channel could not reach with: held alone, or with the rest of its channel."""
    if exc.alone:  # the next row is tried: its outcome tells whose the reply was
        batch.alone.setdefault(name, []).append((row, exc.reason))
    else:  # the rows held alone before wait with the rest, on one line
        batch.down[name] = (exc.reason, [*(held for held, _ in batch.alone.pop(name, [])), row])
        log.warning("%s; its deliveries stay queued", exc.reason)



def _settle(outbox: Outbox, batch: _Batch, now: datetime, max_attempts: int,
            report: DeliveryReport) -> None:
    """The rows refused by a reply that names no owner (a bare 550 to an email reader), once the
    batch is over. Each reader's own, failed, unless the same reply refused every reader the
    channel was handed, two readers or more, and it took none: one server then judged the one thing
    they share, the sender (its IP, domain, login, or the message), so they wait as for a
    "later": each try counted, retried on the backoff, given up after `max_attempts` (some five
    days) if it never accepts. Readers who each truly cannot be reached wait that long at most,
    not for ever, and fail as soon as a batch has the server take another reader."""
    for name, rows in batch.refused.items():
        shared = (len(rows) == batch.tried[name] and len({words for _, words in rows}) == 1
                  and len({reader_key(row.reader) for row, _ in rows}) >= 2)  # not one reader's two digests
        if not shared:
            for row, words in rows:
                _fail(outbox, row, words, report)
            continue
        words = f"{rows[0][1]}: {SHARED.format(len(rows))}"  # said once for the group, as a held one
        kept = [(row, retry) for row, _ in rows
                if (retry := _defer(outbox, row, words, now, max_attempts, report, said=False))]
        if kept:  # those given up have their own lines, as failed
            report.errors.append(f"{_queued(f'{name}: {words}', [row for row, _ in kept])}; the "
                                 f"scheduler tries again after {iso(min(retry for _, retry in kept))}")
            log.warning("%s: %s; its deliveries stay queued", name, words)



def _resume_later(outbox: Outbox, row: Delivery, exc: Interrupted) -> str:
    """What goes next time after a hand-over cut off: the messages not yet posted (several,
    some posted: where to resume is stored now), else the whole of it again."""
    if exc.resume is None:
        return _again(row)
    outbox.claim(row, exc.resume)
    return "the messages not yet posted are sent next time"



def _mark_sent(outbox: Outbox, name: str, row: Delivery, message_id: str, words: str, now: datetime,
               report: DeliveryReport) -> None:
    note = f"{RESENT} ({message_id})" if row.interrupted else None
    outbox.mark_sent(row, now, note)
    report.sent += 1
    log.info("sent digest %s to %s%s %s: %s%s", row.digest_id, row.who,
             f" (now channel {name})" if name != row.channel else "", message_id, words,
             f" ({RESENT})" if note else "")



def _again(row: Delivery) -> str:
    return ("it is sent again with the same Message-ID" if row.channel == EMAIL
            else "it is posted again with the same Idempotency-Key")



def _unforeseen(row: Delivery, exc: Exception) -> str:
    """A channel's exception that is none of its outcomes (a bug, an encoding error), on one
    line for the row; the traceback goes to the log, shown with -v."""
    log.debug("%s: the channel raised", row.label, exc_info=exc)
    return collapse(f"{type(exc).__name__}: {exc}")[:300]



def _fail(outbox: Outbox, row: Delivery, words: str, report: DeliveryReport) -> None:
    outbox.mark_failed(row, words)
    report.failed += 1
    report.errors.append(f"{row.label}: {words}")
    log.warning("delivery of digest %s to %s failed: %s", row.digest_id, row.who, words)



def _wait(outbox: Outbox, row: Delivery, words: str, now: datetime, report: DeliveryReport) -> None:
    """Our side of the hand-over failed (the server not reached, its login refused, a secret
    unset, the sender held back): nothing counts; the row keeps any later pace."""
    retry = max(now + held_wait(row, now), row.next_attempt or now)
    outbox.mark_failed(row, words, retry, interrupted=row.interrupted, attempts=row.attempts,
                       not_before=row.not_before)
    report.pending += 1



def _defer(outbox: Outbox, row: Delivery, words: str, now: datetime, max_attempts: int,
           report: DeliveryReport, interrupted: bool = False, after: float | None = None,
           said: bool = True) -> datetime | None:
    """The other side said "later", or took the message and went quiet: a try that counts.
    A "later" to a try made ahead of the backoff (a person's or cron's) does not count and
    keeps the row's pace; a hand-over cut off always counts, as each may leave a copy.
    When it next goes (None: given up, failed); not `said`: the caller says it for a group."""
    early = not interrupted and row.next_attempt is not None and row.next_attempt > now
    attempts = row.attempts if early else row.attempts + 1
    if attempts >= max_attempts:
        _fail(outbox, row, f"gave up after {attempts} tries: {words}", report)
        return None
    # cap first: min() keeps it for an 'inf' or 'nan' too
    asked = now + timedelta(seconds=min(ASKED_CAP.total_seconds(), after)) if after else None
    retry = max(now + backoff(attempts), asked or now)
    if early and row.next_attempt is not None:
        retry = max(row.next_attempt, asked or now)
    outbox.mark_failed(row, words, retry, interrupted=interrupted or row.interrupted, attempts=attempts,
                       not_before=asked)
    report.pending += 1
    if said:
        report.errors.append(f"{row.label}: {words}; it stays queued (the scheduler tries again "
                             f"after {iso(retry)})")
        log.warning("delivery of digest %s to %s deferred: %s", row.digest_id, row.who, words)
    return retry
