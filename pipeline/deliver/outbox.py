"""The outbox: one row per (digest, reader of a channel), and the rules that get every
row delivered: a row's states, kept in the store, and when it next goes. Channels
(channels.py) only build and hand over; a batch (outbox_batch.py) hands the waiting rows
over and marks each outcome by these rules.

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
to the message ends a row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from email.utils import parseaddr
from typing import TYPE_CHECKING, Any, Protocol

from pipeline import retry, store_outbox
from pipeline.deliver.channels import Channel

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
DROPPED = "dropped by `rl-digest send --drop {}`: the channel was taken out of the config"


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
        self._move(row, status="sent", attempts=row.attempts + 1, sent_at=iso(at), next_attempt=None,
                   last_error=note)

    def mark_failed(self, row: Delivery, error: str, retry_at: datetime | None = None,
                    interrupted: bool = False, attempts: int | None = None,
                    not_before: datetime | None = None) -> None:
        status = "failed" if retry_at is None else "sending" if interrupted else "pending"
        self._move(row, status=status, attempts=row.attempts + 1 if attempts is None else attempts,
                   last_error=error, next_attempt=iso(retry_at) if retry_at else None,
                   not_before=iso(not_before) if not_before else None)

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


def routes(channels: dict[str, Channel]) -> dict[str, set[str]]:
    """Each open channel's readers, by name (email's are left out: its rows are its own)."""
    return {name: set() if name == EMAIL else set(channel.readers()) for name, channel in channels.items()}


def held_for_channel(row: Delivery, readers_of: dict[str, set[str]] | None) -> bool:
    """The row waits for a channel the config does not have now (`routes`' map; None: not
    known), which no try can bring back."""
    return readers_of is not None and owner(row, readers_of) not in readers_of


def owner(row: Delivery, readers_of: dict[str, set[str]]) -> str:
    """The channel a row goes to: its own, while that still has its reader; else the entry
    that has the reader now (renamed, or a new entry took the old name: posting there would
    send the digest to another group); else its own (the URL's variable renamed)."""
    if row.channel == EMAIL or row.reader in readers_of.get(row.channel, ()):
        return row.channel
    return next((name for name, own in readers_of.items() if row.reader in own), row.channel)


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
    if row.next_attempt is None or row.next_attempt <= aware(now) + longest:
        return row
    return replace(row, next_attempt=None, not_before=None)


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
                    next_attempt=aware(datetime.fromisoformat(when)) if when else None,
                    not_before=aware(datetime.fromisoformat(asked)) if asked else None,
                    queued=aware(datetime.fromisoformat(queued)) if queued else None)


def iso(value: datetime) -> str:
    return value.isoformat(timespec="seconds")


def aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def recipients(channels: dict[str, Channel]) -> list[str]:
    """The outbox rows a new digest gets: one per reader of each channel."""
    return [_column(name, reader) for name, channel in channels.items()
            for reader in channel.readers()]
