"""Readers: who gets the email, in which languages, and what they told us themselves.

The config (`email.to`, `email.recipients_file`) says who the readers are. What a reader
said through `serve`'s links is kept in the store's tables, keyed by their address:
unsubscribed (`readers`), so it survives any edit to the file, and their 👍/👎 on papers
(`verdicts`, beside the install's own `rl-digest mark`). A reader removed from the file
stops receiving; added back, they keep the status they had.
"""

from __future__ import annotations

import re
from email.utils import parseaddr
from typing import Any

from pipeline import store_outbox, store_readers, templating
from pipeline.config import Config
from pipeline.config_email import Reader
from pipeline.deliver import channels
from pipeline.deliver.outbox import EMAIL, SKIPPED, Delivery, StoreOutbox, held_for_channel, reader_key
from pipeline.errors import ConfigError, DigestError
from pipeline.store import Store
from pipeline.store_readers import FORGOTTEN
from pipeline.store_schema import YOU

ACTIVE, UNSUBSCRIBED = "active", "unsubscribed"
VERDICTS = {"up": True, "down": False}


def unsubscribed(store: Store) -> frozenset[str]:
    """The addresses (lower case) of readers who unsubscribed."""
    return frozenset(a for a, row in store_readers.known(store).items() if row["status"] == UNSUBSCRIBED)


def keep(config: Config, store: Store) -> None:
    """Note the config's readers in the store (new ones active; known ones keep their status)."""
    if config.email.enabled:
        store_readers.keep_readers(store, ((r.address, r.name) for r in config.readers()))


def listing(config: Config, store: Store) -> list[dict[str, Any]]:
    """Each reader with status, last delivery, and the newest digest skipped or refused for good
    (a bouncing address); readers no longer in the config that once were (kept in the store,
    or delivered to) show as `removed`. A chat channel's reader (or a plug-in channel's) is one
    too, named CHANNEL:READER as `send --reader` takes it: `active`, or `removed` once the
    config no longer has it."""
    last: dict[str, str] = {}
    skipped: dict[str, tuple[str, str]] = {}  # the newest digest skipped, and why
    failed: dict[str, tuple[str, str]] = {}  # the newest digest refused for good, and the server's words
    got: dict[str, str] = {}  # the newest digest sent
    for done in StoreOutbox(store).rows((SKIPPED, "failed")):
        if done.reader.startswith(FORGOTTEN):  # erased: the digests' history keeps them, nameless
            continue
        held = skipped if done.status == SKIPPED else failed
        key = reader_key(done.who)
        held[key] = max(held.get(key, ("", "")), (done.digest_id, done.last_error or ""))
    # a row each reader, not each digest sent
    for recipient, digest_id, sent_at in store_outbox.last_sent(store):
        if recipient.startswith(FORGOTTEN):
            continue
        key = reader_key(recipient)
        got[key] = max(got.get(key, ""), digest_id)
        if sent_at and sent_at > last.get(key, ""):
            last[key] = sent_at
    stored = store_readers.known(store)
    rows = [{"key": r.address.lower(), "address": r.address, "name": r.name,
             "languages": r.languages or config.languages,
             "status": stored.get(r.address.lower(), {}).get("status", ACTIVE)}
            for r in config.readers()]
    rows += [{"key": who, "address": who, "name": None, "languages": languages, "status": ACTIVE}
             for who, languages in _channel_readers(config)]
    known = {r["key"] for r in rows}
    for key in sorted((set(stored) | set(last) | set(failed) | set(skipped)) - known):
        rows.append({"key": key, "address": key, "name": None, "languages": None, "status": "removed"})
    for row in rows:
        row["last_delivery"] = last.get(row["key"])
        row["skipped"] = skipped.get(row["key"])
        refused = failed.get(row["key"])  # until a later digest reached them
        row["failed"] = refused if refused and refused[0] > got.get(row["key"], "") else None
    return rows


def _channel_readers(config: Config) -> list[tuple[str, list[Any]]]:
    """Each reader of the `channels` entries (CHANNEL:READER) and the languages of its posts;
    none when they cannot be opened (a run or send says why)."""
    entries = {entry.key: entry.model_dump() for entry in config.channels}
    try:
        with channels.opened(config, email=False) as opened:
            return [(f"{name}:{reader}", entries.get(name, {}).get("languages") or config.languages)
                    for name, channel in opened.items() for reader in channel.readers()]
    except DigestError:
        return []


def resend_target(config: Config, who: str) -> str:
    """The outbox row `send --reader WHO` queues: a configured reader's address, or
    CHANNEL:READER of a configured chat channel. Anything else is bad usage: a typo must
    not mail the group's digest to a stranger (a new reader goes in the config first)."""
    who = who.strip()
    channel, colon, reader = who.partition(":")
    if channel_of(config, who):
        with channels.opened(config, email=False) as opened:
            own = opened[channel].readers()
        if reader in own:
            return who
        raise ConfigError(f"--reader: channel {channel!r} has no reader {reader!r}",  # a new row would
                          f"its reader is {', '.join(f'{channel}:{r}' for r in own)}")  # post it anew
    if colon and re.fullmatch(r"[A-Za-z][\w-]*", channel):  # CHANNEL:READER, of a channel not there
        there = ", ".join(f"{e.key} ({e.type})" for e in config.channels)
        raise ConfigError(f"--reader: no channel called {channel!r}",
                          f"the channels are {there}; CHANNEL:READER as `rl-digest readers` lists it"
                          if there else "no channel is configured besides email: give an email address")
    return reader_address(config, who, "--reader", "an email address, or CHANNEL:READER")


def queued_again(config: Config, rows: list[Delivery],
                 readers_of: dict[str, set[str]] | None) -> list[Delivery]:
    """The rows `send --reader` can queue again: of a reader the config still has (a reader
    taken off the list, or a channel taken out, is not offered a resend it would refuse)."""
    listed = {r.address.lower() for r in config.readers()}
    return [row for row in rows if (parseaddr(row.reader)[1].lower() in listed if row.channel == EMAIL
                                    else not held_for_channel(row, readers_of))]


def reader_address(config: Config, who: str, option: str, expected: str | None = None) -> str:
    """The address of one of the configured readers, as `who` names them; else exit 2.
    `expected`: what else `option` takes, said after the validator's own words."""
    try:
        address = Reader.parse(who.strip(), local=config.email.local).address
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc}", expected) from None
    if address.lower() not in {r.address.lower() for r in config.readers()}:
        raise ConfigError(f"{option}: {address} is not one of the readers",
                          "add them to email.to or email.recipients_file first; "
                          "`rl-digest readers` lists them")
    return address


def channel_of(config: Config, who: str) -> str | None:
    """The configured chat channel `who` names a reader of, as `readers` lists it (CHANNEL:READER)."""
    channel, colon, _ = who.strip().partition(":")
    return channel if colon and channel in {entry.key for entry in config.channels} else None


def email_reader_only(config: Config, who: str, option: str) -> None:
    """Exit 2 when `who` is a chat channel's reader: it has no subscription to change or
    erase, and its posts stop when its entry leaves `channels`."""
    if channel_of(config, who):
        raise ConfigError(f"{option}: {who.strip()} is a chat channel's reader, and {option} is for email "
                          "readers", "a channel's posts stop when its entry leaves `channels`")


def set_status(config: Config, store: Store, who: str, status: str) -> str:
    """Unsubscribe (or subscribe again) one of the readers, as their link would; the address."""
    option = "--unsubscribe" if status == UNSUBSCRIBED else "--subscribe"
    email_reader_only(config, who, option)
    address = reader_address(config, who, option)
    store_readers.set_reader_status(store, address, status)
    return address


def forget(config: Config, store: Store, who: tuple[str, ...]) -> list[str]:
    """Erase readers the config no longer lists (store_readers.forget_reader): a line each of what was
    done. One still listed is refused, before anyone is erased: the next run would mail them,
    and keep them, again."""
    addresses = []
    for each in who:
        email_reader_only(config, each, "--forget")
        try:
            address = Reader.parse(each.strip(), local=config.email.local).address
        except ValueError as exc:
            raise ConfigError(f"--forget: {exc}") from None
        if address.lower() in {r.address.lower() for r in config.readers()}:
            raise ConfigError(f"--forget: {address} is still one of the readers",
                              "take them out of email.to or email.recipients_file first: "
                              "the next run would mail them again")
        addresses.append(address)
    said = templating.text_env(config.templates.dir).get_template("readers/forgotten.txt.j2")
    return [said.render(address=address, done=store_readers.forget_reader(store, address)).strip()
            for address in addresses]


def record_verdict(store: Store, address: str, paper: str, action: str | None) -> None:
    """A reader's 👍 (`up`) or 👎 (`down`) on a paper; a later click replaces it, and None
    takes it back (the refit then learns nothing from them on it, as after `mark --undo`)."""
    store_readers.record_verdict(store, paper, address, VERDICTS[action] if action else None)


def verdicts(store: Store, paper: str) -> dict[str, bool]:
    """Who said what on one paper: `you` (rl-digest mark) and each reader by address."""
    return {("you" if row["reader"] == YOU else row["reader"]): row["verdict"]
            for row in store_readers.verdicts_given(store, paper)}
