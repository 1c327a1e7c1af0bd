"""Readers: who gets the email, in which languages, and what they told us themselves.

The config (`email.to`, `email.recipients_file`) says who the readers are. What a reader
said through `serve`'s links is kept in the store, keyed by their address: unsubscribed
(state key `readers`), so it survives any edit to the file, and their verdicts on papers
(state key `feedback`). A reader removed from the file stops receiving; added back, they
keep the status they had.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pipeline.config import Config
from pipeline.store import Store

READERS = "readers"
FEEDBACK = "feedback"
ACTIVE, UNSUBSCRIBED = "active", "unsubscribed"
VERDICTS = ("up", "down")


def statuses(store: Store) -> dict[str, dict[str, Any]]:
    """address (lower case) -> {status, changed}, for readers who changed theirs."""
    return dict(store.get_state(READERS) or {})


def status(store: Store, address: str) -> str:
    return statuses(store).get(address.lower(), {}).get("status", ACTIVE)


def set_status(store: Store, address: str, value: str, now: datetime | None = None) -> None:
    found = statuses(store)
    found[address.lower()] = {"status": value, "changed": _iso(now)}
    store.set_state(READERS, found)


def unsubscribed(store: Store) -> frozenset[str]:
    """The addresses (lower case) of readers who unsubscribed."""
    return frozenset(a for a, row in statuses(store).items() if row.get("status") == UNSUBSCRIBED)


def listing(config: Config, store: Store) -> list[dict[str, Any]]:
    """Each reader with status and last delivery; readers no longer in the config that
    once were (a status or a delivery) show as `removed`."""
    last: dict[str, str] = {}
    for row in store.deliveries(statuses=("sent",)):
        key = row["recipient"].lower()
        if row["sent_at"] and row["sent_at"] > last.get(key, ""):
            last[key] = row["sent_at"]
    stored = statuses(store)
    rows = [{"address": r.address, "name": r.name, "languages": r.languages or config.languages,
             "status": stored.get(r.address.lower(), {}).get("status", ACTIVE),
             "last_delivery": last.get(r.address.lower())} for r in config.readers()]
    known = {r["address"].lower() for r in rows}
    for address in sorted((set(stored) | {a for a in last if "@" in a}) - known):
        rows.append({"address": address, "name": None, "languages": None, "status": "removed",
                     "last_delivery": last.get(address)})
    return rows


def record_verdict(store: Store, address: str, paper: str, verdict: str,
                   now: datetime | None = None) -> None:
    """A reader's 👍 (`up`) or 👎 (`down`) on a paper; a later click replaces it."""
    found = dict(store.get_state(FEEDBACK) or {})
    found.setdefault(paper, {})[address.lower()] = {"verdict": verdict, "at": _iso(now)}
    store.set_state(FEEDBACK, found)


def verdicts(store: Store, paper: str) -> dict[str, str]:
    """address -> up | down, for one paper."""
    return {a: v["verdict"] for a, v in (store.get_state(FEEDBACK) or {}).get(paper, {}).items()}


def _iso(now: datetime | None) -> str:
    return (now or datetime.now(UTC)).isoformat(timespec="seconds")
