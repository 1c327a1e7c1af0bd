"""The outbox: one row per (digest, reader of a channel), and the rules that get every
row delivered. Channels (channels.py) only build and hand over; this module decides.

The rule (the contract's Outputs): every reader gets every digest, exactly once in
the normal case, at most one duplicate after a crash, never a silent loss.

States of a row
---------------
* `pending`: waiting to be handed over. Saved with the digest, before anything is sent.
* `sending`: a hand-over began (`claim`, which also stores the Message-ID) and has not
  been seen to end. A process killed mid-hand-over leaves it so, and so does a
  connection lost after the content went out: nobody knows whether the other side
  kept the message. Such a row is sent again by the next run with the SAME
  Message-ID, so a reader who got both copies sees one (mail clients collapse a
  duplicate Message-ID); once sent, the row keeps the note "resent after an
  interrupted hand-over", which `status` shows. At most one duplicate; never a loss.
  Every caller holds the run lock, so a `sending` row at the start of a batch is
  never another live process's.
* `sent`: the other side accepted it.
* `skipped`: not sent because its reader unsubscribed, or was removed from the list,
  after it was queued (email), or because its channel was taken out of the config for
  good and `rl-digest send --drop CHANNEL` dropped it (`drop`); `rl-digest readers` and
  `status` show it. Never sent later, even after a resubscribe, unless
  `rl-digest send --digest ID --reader WHO` queues it again.
* `failed`: refused for good (a 5xx: the server's words are kept), or still deferred
  by the other side after `MAX_ATTEMPTS` tries. Shown by `status` and in the exit code;
  `rl-digest send --digest ID --reader ADDR` queues it again.

Retries: a deferral (4xx, a timeout or interruption once connected) keeps the row
waiting with `attempts + 1`, `last_error` and `next_attempt = now + backoff`
(5 min x 2^(attempts-1), at most 6 h; longer if the server asked for longer, up to a week): 25
tries span some five days, the give-up time RFC 5321 (4.5.4.1) asks of a sender.
The backoff paces only the scheduler's own retries (`due_only=True`); `run` and
`send`, started by a person or cron, try every waiting row at once, and such a try
ahead of its time does not count. A server or channel that cannot be reached at all
(refused connection, no route, a webhook host that does not answer), or that holds the
sender back (a daily quota, a blocked account) counts nothing: the rows wait, however long
the outage, and every run says so in its exit code; so do a login refused and a secret
variable unset, which the operator mends. The scheduler retries such rows as Postfix does
(qmgr's minimal_backoff_time, maximal_backoff_time): after as long as the row has been
queued, from `UNREACHABLE_WAIT` up to `HELD_CAP`, so soon after a blip, and hourly through
a day's spent quota rather than every few minutes all day. Only the other side's answer
to the message ends a row. A hand-over cut off (the server took the message and did not
answer) leaves the channel's other rows waiting for the next batch: a server that sick
would hold each of them for minutes.
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
from typing import TYPE_CHECKING, Any, Protocol

from pipeline import progress, retry, store_outbox
from pipeline.deliver.channels import HELD, Channel, Deferred, Interrupted, Message, Refused, Unreachable
from pipeline.errors import DigestError
from pipeline.models import Digest, collapse
from pipeline.stopping import Stopped, checkpoint

if TYPE_CHECKING:
    from pipeline.store import Store

log = logging.getLogger(__name__)

BACKOFF_BASE = timedelta(minutes=5)
BACKOFF_CAP = timedelta(hours=6)
MAX_ATTEMPTS = 25
UNREACHABLE_WAIT = timedelta(minutes=15)  # the scheduler's first look after a server was down
HELD_CAP = timedelta(hours=1)  # ... and its longest wait between looks (Postfix's is 4,000 s)
ASKED_CAP = timedelta(days=7)  # the longest Retry-After taken: longer is past the give-up span
LONGEST_WAIT = max(BACKOFF_CAP, UNREACHABLE_WAIT, HELD_CAP)  # the furthest a retry is set, but when asked
RESENT = "resent after an interrupted hand-over"
EMAIL = "email"
SKIPPED = "skipped"
UNSUBSCRIBED = "the reader unsubscribed before it was sent"
REMOVED = "the reader was removed from the list before it was sent"
DROPPED = "dropped by `rl-digest send --drop {}`: the channel was taken out of the config"
SHARED = (f"the same to all {{}} readers tried, none taken: the server refuses the sender, {HELD} as for a "
          "\"later\" (each try counted, given up after some five days) and go once it accepts; check the "
          "reply, the address in email.from, the login and the sending IP")


@dataclass(frozen=True)
class Delivery:
    """One outbox row: a digest for one reader of one channel."""

    id: int
    digest_id: str
    channel: str
    reader: str
    status: str  # pending | sending | sent | skipped | failed
    attempts: int = 0
    last_error: str | None = None
    message_id: str | None = None
    sent_at: str | None = None
    next_attempt: datetime | None = None
    not_before: datetime | None = None  # the other side's Retry-After
    queued: datetime | None = None  # when its digest was saved

    @property
    def who(self) -> str:
        return _column(self.channel, self.reader)

    @property
    def label(self) -> str:
        return f"{self.who} (digest {self.digest_id})"

    @property
    def interrupted(self) -> bool:
        return self.status == "sending"


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


class Outbox(Protocol):
    """What the state machine needs from storage."""

    def pending(self, digest_id: str | None = None) -> list[Delivery]:
        """Rows still waiting (`pending` or `sending`), in order."""

    def claim(self, row: Delivery, message_id: str) -> bool:
        """The hand-over begins: `sending`, with the Message-ID to reuse if cut off. False:
        the row is no longer as read (another process took it first): leave it alone."""

    def mark_sent(self, row: Delivery, at: datetime, note: str | None = None) -> None:
        """Accepted by the other side."""

    def mark_failed(self, row: Delivery, error: str, retry_at: datetime | None = None,
                    interrupted: bool = False, attempts: int | None = None,
                    not_before: datetime | None = None) -> None:
        """Not delivered: waits until `retry_at` (still `sending` if `interrupted`),
        or `failed` for good when there is no `retry_at`; `attempts` now counted (one
        more than before unless given); `not_before`: no try before it, even by hand."""

    def mark_skipped(self, row: Delivery, why: str) -> None:
        """Not to be sent: its reader no longer wants it."""


class StoreOutbox:
    """The outbox in the `deliveries` table. A row's `recipient` column holds the
    reader for email (as it always has) and `channel:reader` for other channels.

    Every change is made only if the row is still as this process last saw it (its status
    and Message-ID as read, or as its own claim left them): the run lock keeps two senders
    apart, but a lock a database restart let go of must not let two hand over one row."""

    def __init__(self, store: Store):
        self.store = store
        self.claimed: dict[int, str] = {}  # row id -> the Message-ID this process claimed it with

    def _move(self, row: Delivery, **values: Any) -> bool:
        mine = self.claimed.pop(row.id, None)
        seen = ("sending", mine) if mine else (row.status, row.message_id)
        moved = store_outbox.update_delivery(self.store, row.id, seen=seen, **values)
        if not moved:
            log.warning("%s: changed by another process meanwhile; left as it is", row.label)
        return moved

    def rows(self, statuses: tuple[str, ...] = (), digest_id: str | None = None,
             noted: str | None = None) -> list[Delivery]:
        return [_record(row) for row in store_outbox.rows(self.store, digest_id, statuses, noted)]

    def pending(self, digest_id: str | None = None) -> list[Delivery]:
        return self.rows(("pending", "sending"), digest_id)

    def claim(self, row: Delivery, message_id: str) -> bool:
        if not self._move(row, status="sending", message_id=message_id):
            return False
        self.claimed[row.id] = message_id  # until its outcome is marked
        return True

    def mark_sent(self, row: Delivery, at: datetime, note: str | None = None) -> None:
        self._move(row, status="sent", attempts=row.attempts + 1, sent_at=_iso(at), next_attempt=None,
                   last_error=note)

    def mark_failed(self, row: Delivery, error: str, retry_at: datetime | None = None,
                    interrupted: bool = False, attempts: int | None = None,
                    not_before: datetime | None = None) -> None:
        status = "failed" if retry_at is None else "sending" if interrupted else "pending"
        self._move(row, status=status, attempts=row.attempts + 1 if attempts is None else attempts,
                   last_error=error, next_attempt=_iso(retry_at) if retry_at else None,
                   not_before=_iso(not_before) if not_before else None)

    def mark_skipped(self, row: Delivery, why: str) -> None:
        self._move(row, status=SKIPPED, last_error=why, next_attempt=None)

    def drop(self, channel: str, readers_of: dict[str, set[str]],
             digest_id: str | None = None) -> list[Delivery]:
        """Mark skipped, on the record, the waiting rows (of `digest_id`, or all) held for
        `channel`, which the config does not have now (`routes`' map): `send --drop`. The
        rows dropped; one another process changed meanwhile is left as it is."""
        held = [row for row in self.pending(digest_id)
                if row.channel == channel and held_for_channel(row, readers_of)]
        return [row for row in held
                if self._move(row, status=SKIPPED, last_error=DROPPED.format(channel), next_attempt=None)]

    def requeue(self, digest_id: str, who: str) -> None:
        """Queue one digest for one reader (`who`: an address, or CHANNEL:READER) again, on
        purpose: a new attempt with a new Message-ID, because a mail client would collapse
        the same id into the copy the reader may still have, and the resend would not show."""
        key = reader_key(who)
        found = [r for r in store_outbox.rows(self.store, digest_id) if reader_key(r["recipient"]) == key]
        if not found:
            store_outbox.add_delivery(self.store, digest_id, who)
            return
        store_outbox.update_delivery(self.store, found[0]["id"], status="pending", attempts=0,
                                     message_id=None, next_attempt=None, not_before=None,
                                     last_error="queued again by hand", sent_at=None)


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
    now = _aware(now).astimezone(UTC)
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
            name = _owner(row, readers_of)
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
        report.errors.append(f"{row.label}: waits until {_iso(row.not_before)}, as the other "
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


def routes(channels: dict[str, Channel]) -> dict[str, set[str]]:
    """Each open channel's readers, by name (email's are left out: its rows are its own)."""
    return {name: set() if name == EMAIL else set(channel.readers()) for name, channel in channels.items()}


def held_for_channel(row: Delivery, readers_of: dict[str, set[str]] | None) -> bool:
    """The row waits for a channel the config does not have now (`routes`' map; None: not
    known), which no try can bring back."""
    return readers_of is not None and _owner(row, readers_of) not in readers_of


def _owner(row: Delivery, readers_of: dict[str, set[str]]) -> str:
    """The channel a row goes to: its own, while that still has its reader; else the entry
    that has the reader now (renamed, or a new entry took the old name: posting there would
    send the digest to another group); else its own (the URL's variable renamed)."""
    if row.channel == EMAIL or row.reader in readers_of.get(row.channel, ()):
        return row.channel
    return next((name for name, own in readers_of.items() if row.reader in own), row.channel)


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
                                 f"scheduler tries again after {_iso(min(retry for _, retry in kept))}")
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


def backoff(attempts: int) -> timedelta:
    """Wait before try number attempts+1: 5, 10, 20, ... minutes, at most 6 hours."""
    return timedelta(seconds=retry.backoff(attempts - 1, BACKOFF_BASE.total_seconds(),
                                           BACKOFF_CAP.total_seconds()))


def held_wait(row: Delivery, now: datetime) -> timedelta:
    """The scheduler's wait before it tries a row held on our side again: as long as the row
    has been queued (Postfix's qmgr), at least UNREACHABLE_WAIT, at most HELD_CAP: looks at
    15, 30, 60 minutes, then hourly, not 96 a day against a provider's spent daily quota."""
    queued = now - row.queued if row.queued is not None else UNREACHABLE_WAIT
    return min(max(queued, UNREACHABLE_WAIT), HELD_CAP)


def next_retry(rows: list[Delivery], readers_of: dict[str, set[str]] | None = None,
               now: datetime | None = None) -> datetime | None:
    """When the scheduler should next look at the outbox: the earliest due row (of the
    channels in `readers_of`, `routes`' map, when given: one held for a channel taken out
    waits for its return, which no look brings)."""
    now = datetime.now(UTC) if now is None else now
    times = [due_by_now(row, now).next_attempt or datetime.min.replace(tzinfo=UTC) for row in rows
             if not held_for_channel(row, readers_of)]
    return min(times) if times else None


def due_by_now(row: Delivery, now: datetime) -> Delivery:
    """The row, due now if its next try lies further ahead than any wait the outbox sets (a
    Retry-After's when asked): the clock went back since it was set (an NTP step, a machine
    restored from a snapshot), and a 5-minute backoff would wait for the clock to catch up."""
    longest = ASKED_CAP if row.not_before is not None else LONGEST_WAIT
    if row.next_attempt is None or row.next_attempt <= _aware(now) + longest:
        return row
    return replace(row, next_attempt=None, not_before=None)


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
                             f"after {_iso(retry)})")
        log.warning("delivery of digest %s to %s deferred: %s", row.digest_id, row.who, words)
    return retry


def _column(channel: str, reader: str) -> str:
    return reader if channel == EMAIL else f"{channel}:{reader}"


def _split(recipient: str) -> tuple[str, str]:
    """(channel, reader) of a row's `recipient` column."""
    head, sep, tail = recipient.partition(":")
    return (head, tail) if sep and "@" not in head else (EMAIL, recipient)


def reader_key(recipient: str) -> str:
    """Who a row is for, as readers are told apart: an email reader by their address in lower
    case (older rows hold `Name <addr>`), any other by CHANNEL:READER."""
    channel, reader = _split(recipient)
    return recipient if channel != EMAIL else parseaddr(reader)[1].lower() or reader.lower()


def _record(row: dict[str, Any]) -> Delivery:
    recipient = row["recipient"]
    channel, reader = _split(recipient)
    when, asked, queued = row["next_attempt"], row["not_before"], row.get("queued")
    return Delivery(id=row["id"], digest_id=row["digest_id"], channel=channel, reader=reader,
                    status=row["status"], attempts=row["attempts"], last_error=row["last_error"],
                    message_id=row["message_id"], sent_at=row["sent_at"],
                    next_attempt=_aware(datetime.fromisoformat(when)) if when else None,
                    not_before=_aware(datetime.fromisoformat(asked)) if asked else None,
                    queued=_aware(datetime.fromisoformat(queued)) if queued else None)


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="seconds")


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def recipients(channels: dict[str, Channel]) -> list[str]:
    """The outbox rows a new digest gets: one per reader of each channel."""
    return [_column(name, reader) for name, channel in channels.items()
            for reader in channel.readers()]
