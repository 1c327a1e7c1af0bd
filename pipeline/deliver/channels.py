"""Channels: how a digest reaches its readers. The outbox (outbox.py) decides when and
whether to send; a channel only builds a message and hands it over.

A channel is looked up by the `type` of its config entry (pipeline/plugins.py): the
built-in `REGISTRY` below, the `rl_digest.channels` entry-point group, or
`module:factory` written out in the config.

A factory takes a `ChannelSetup` and returns an object with the `Channel` methods.
`send` says what happened by returning (accepted) or raising one of the
errors below; anything else it (or `build`) raises is a bug, which fails that reader's row
for now (outbox_batch.py) and not the others. One whose message goes as
several posts calls `message.progress` after each (a channel that does not is sent again
whole after a crash).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline import plugins
from pipeline.config import Config
from pipeline.config_sections import channel_entry
from pipeline.models import Digest

GROUP = "rl_digest.channels"
REGISTRY = {
    "email": "pipeline.deliver.email:email_channel",
    **{kind: f"pipeline.deliver.chat:{kind}" for kind in ("slack", "feishu", "dingtalk", "telegram",
                                                          "webhook")},
}


@dataclass(frozen=True)
class Message:
    """One digest for one reader, ready to hand over.

    `id` is stored in the outbox when the hand-over starts; a hand-over that was cut
    off is built again with the same id, so a reader who got both copies sees one.
    `progress`, set by the outbox: a channel that posts the message in several parts
    calls it with the id to resume from (as `Interrupted.resume`) once a part is accepted,
    before the next goes, and it is stored then, so a crash between parts reposts none.
    """

    reader: str
    id: str
    body: Any
    progress: Callable[[str], object] = field(default=lambda resume: None, compare=False, repr=False)


@dataclass(frozen=True)
class ChannelSetup:
    """What a factory gets: its name (the outbox key), the config, its own entry's options,
    the reading-list size, and the readers who unsubscribed (lower-case addresses)."""

    name: str
    config: Config
    options: dict[str, Any] = field(default_factory=dict)
    reading_count: int = 0
    unsubscribed: frozenset[str] = frozenset()


class Channel(Protocol):
    def readers(self) -> list[str]:
        """Who gets each digest on this channel (addresses, chat ids, file names...)."""

    def build(self, digest: Digest, reader: str, message_id: str | None = None) -> Message:
        """The message for one reader; `message_id` set means: reuse this id."""

    def send(self, message: Message) -> str:
        """Hand the message over; return the other side's words on success."""

    def close(self) -> None:
        """Let go of connections; called once after a batch."""


HELD = "not the reader: the readers wait"  # in a reply held as the sender's: `status` says it once


class Deferred(Exception):
    """Not handed over, try again later (a 4xx, a timeout before any content left);
    `after`: the seconds the other side asked to be left alone, when it said."""

    def __init__(self, reason: str, after: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.after = after


class Unreachable(Deferred):
    """The channel itself is down: every row of it waits, without trying each one;
    `alone`: only this row waits, uncounted, and the next is tried (a reply that reads as the
    channel's but may be this reader's: the next reader's outcome tells)."""

    def __init__(self, reason: str, alone: bool = False):
        super().__init__(reason)
        self.alone = alone


class Refused(Exception):
    """Refused for good (a 5xx): that reader's row fails; the others go on. `unowned`: the reply
    does not say whose it is, the reader's or the sender's; the same to every reader of a batch
    is the sender's (outbox_batch.py's `_settle`)."""

    def __init__(self, reason: str, unowned: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.unowned = unowned


class Interrupted(Exception):
    """Cut off after content left: the other side may have it. Sent again later with
    the same id (at most one duplicate, never a loss), or with `resume`, the id a channel
    whose digest is several messages builds the ones not yet posted from; `after`, as for
    Deferred (a later part refused with Retry-After)."""

    def __init__(self, reason: str, resume: str | None = None, after: float | None = None):
        super().__init__(reason)
        self.reason, self.resume, self.after = reason, resume, after


Factory = Callable[[ChannelSetup], Channel]


def factory(kind: str, where: str) -> Factory:
    """The factory for a channel `type`; `where` names the config key in errors."""
    factory: Factory = plugins.load(kind, where, REGISTRY, GROUP, "channel")
    return factory


def open_channels(config: Config, reading_count: int, email: bool = True,
                  unsubscribed: frozenset[str] = frozenset()) -> dict[str, Channel]:
    """Every configured channel by name: email (when enabled) and each `channels` entry."""
    found: dict[str, Channel] = {}
    if email and config.email.enabled:
        found["email"] = factory("email", "email")(
            ChannelSetup("email", config, {}, reading_count, unsubscribed))
    for number, entry in enumerate(config.channels):
        options = entry.model_dump(exclude={"type", "name"})
        make = factory(entry.type, f"{channel_entry(number, entry)}.type")
        found[entry.key] = make(ChannelSetup(entry.key, config, options, reading_count))
    return found


@contextmanager
def opened(config: Config, reading_count: int = 0, email: bool = True,
           unsubscribed: frozenset[str] = frozenset()) -> Iterator[dict[str, Channel]]:
    """open_channels for a block that only asks them (their readers, a check), closed when
    it ends: a plug-in channel may connect when made (outbox_batch.deliver closes those it sends on)."""
    found = open_channels(config, reading_count, email, unsubscribed)
    try:
        yield found
    finally:
        for channel in found.values():
            channel.close()
