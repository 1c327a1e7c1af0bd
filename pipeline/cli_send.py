"""`send`, the outbox's own command: what waits goes now, and `--reader` queues a digest again,
`--drop` gives up what waits for a channel taken out; then what still waits and why. Apart from
cli.py because all of it is the outbox's: its rows, their lines, a git push that waited as they
do. `fail_on_delivery_errors` is here too: the exit a delivery's errors give, `run`'s as well.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from pipeline.cli_state import State, echo, pass_state
from pipeline.errors import ConfigError, DeliveryError, LockedError
from pipeline.models import RunReport

if TYPE_CHECKING:
    from pipeline.config import Config
    from pipeline.store import Store

log = logging.getLogger("pipeline")


@click.command()
@click.option("--digest", "digest_id", help="Only this digest (YYYY-MM-DD).")
@click.option("--reader", help="With --digest: send it to this reader again, on purpose, with a "
                               "new Message-ID (CHANNEL:READER for channels other than email).")
@click.option("--drop", metavar="CHANNEL",
              help="Drop what waits for CHANNEL, taken out of the config for good (of --digest "
                   "only, when given): marked skipped, as status shows; --reader queues one again.")
@pass_state
def send(state: State, digest_id: str | None, reader: str | None, drop: str | None) -> None:
    """Deliver everything still waiting in the outbox, now (backoff only paces the scheduler)."""
    from pipeline import lock, reading_list, stopping
    from pipeline.publish import deliver

    config = state.config
    if reader and not digest_id:
        raise ConfigError("--reader needs --digest ID", "`rl-digest status` names the newest digests")
    report = RunReport(as_of=datetime.now(config.zone).isoformat())
    with ExitStack() as held:
        try:
            held.enter_context(lock.held(config))
        except LockedError:
            if state.quiet:  # a run holds the lock and delivers what waits itself: nothing to mail
                raise SystemExit(LockedError.exit_code) from None
            raise
        held.enter_context(stopping.on_signals())
        store = state.store()
        if digest_id and store.digest(digest_id) is None:  # a typo is not "nothing to send"
            raise ConfigError(f"--digest: no digest {digest_id}", "`rl-digest status` names the newest")
        if reader and digest_id:
            _requeue(config, store, digest_id, reader)
        if drop is not None:  # the command's own result: said with -q too
            echo(_drop_held(config, store, drop.strip(), digest_id))
        deliver(config, store, report, reading_list.count(store), digest_id)
        pushed = _push_waiting(config, store, report)
    for warning in report.warnings:
        log.warning("%s", warning)
    # every row tried and still waiting has its error; one without is held for a channel taken out
    idle = not (report.sent or report.failed or pushed or report.delivery_errors or report.shared)
    if state.quiet and idle:
        return  # nothing waited (or only for a channel's return): an hourly cron line stays silent
    for line in _sent_lines(config, store, report, digest_id, pushed):
        echo(line)
    fail_on_delivery_errors(report)


def _requeue(config: Config, store: Store, digest_id: str, reader: str) -> None:
    """`send --digest ID --reader WHO`: the digest queued for that reader again."""
    from pipeline import readers
    from pipeline.deliver.outbox import StoreOutbox

    target = readers.resend_target(config, reader)
    if target.lower() in readers.unsubscribed(store):  # it would be skipped, unsaid
        raise ConfigError(f"--reader: {target} unsubscribed",
                          f"`rl-digest readers --subscribe {target}` first, if they asked "
                          "to be mailed again")
    StoreOutbox(store).requeue(digest_id, target)


def _sent_lines(config: Config, store: Store, report: RunReport, digest_id: str | None,
                pushed: str | None) -> Iterator[str]:
    """What `send` says after delivering: the counts, what still waits and why, a git push,
    and the rows refused for good before, which it did not try again."""
    from pipeline import heartbeat, readers
    from pipeline import status as status_mod
    from pipeline.deliver.outbox import StoreOutbox
    from pipeline.publish import routes

    yield f"sent {report.sent}, pending {report.pending}, failed {report.failed}"
    yield from report.shared  # another config's database: said with -q too
    outbox, ways, beat = StoreOutbox(store), routes(config), heartbeat.read(config, datetime.now(UTC))
    yield from status_mod.waiting_lines(outbox.pending(), ways, beat)
    if pushed:
        yield pushed
    # this call's own are among them (a reader whose line has a typo is not: at least none)
    again = readers.queued_again(config, outbox.rows(("failed",), digest_id), ways)
    earlier = max(0, len(again) - report.failed)
    if earlier:  # refused for good before: not retried, but not to be forgotten either
        yield (f"{earlier} failed earlier, refused for good: `rl-digest status` lists them; "
               "`rl-digest send --digest ID --reader WHO` queues one again")


def _drop_held(config: Config, store: Store, channel: str, digest_id: str | None) -> str:
    """`send --drop CHANNEL`: the rows held for a channel the config does not have now are
    marked skipped, on the record; a channel it has is refused (its rows go when they can)."""
    from pipeline.deliver.outbox import StoreOutbox, held_for_channel
    from pipeline.publish import routes

    ways = routes(config, strict=True) or {}
    if channel in ways:
        raise ConfigError(f"--drop: channel {channel} is in the config, and what waits for it goes "
                          "when it can", "only what waits for a channel taken out of the config "
                          "can be dropped; `rl-digest status` lists what waits")
    dropped = StoreOutbox(store).drop(channel, ways, digest_id)
    if not dropped:
        held = sorted({row.channel for row in StoreOutbox(store).pending(digest_id)
                       if held_for_channel(row, ways)})
        raise ConfigError(f"--drop: nothing waits for channel {channel!r}"
                          + (f" (digest {digest_id})" if digest_id else ""),
                          f"deliveries are held for channel {', '.join(held)}" if held
                          else "no delivery is held for a channel taken out of the config")
    ids = sorted({row.digest_id for row in dropped})
    return (f"dropped {len(dropped)} {'delivery' if len(dropped) == 1 else 'deliveries'} held for "
            f"channel {channel} (digest {', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}): "
            "skipped, as `rl-digest status` shows; with the channel back, "
            "`rl-digest send --digest ID --reader WHO` queues one again")


def _push_waiting(config: Config, store: Store, report: RunReport) -> str | None:
    """A git publish a run left failed or unpushed is tried again, as the outbox's rows are,
    with the files the run wrote (it may have failed before copying them); a line saying
    it went, or None."""
    from pipeline.deliver import git
    from pipeline.publish import written_files

    cfg = config.outputs.git
    if cfg is None or not git.waiting(cfg, store):  # nothing waits: the checkout is not touched
        return None
    result = git.publish(cfg, written_files(config, store), store)
    if not result.ok:
        report.delivery_errors.append(result.error or "git publishing failed")
        return None
    return f"git {cfg.repo}: " + ("pushed the commits that waited" if result.pushed
                                  else "committed the files that waited")


def fail_on_delivery_errors(report: RunReport) -> None:
    for error in report.delivery_errors[1:]:
        log.error("%s", error)
    if report.delivery_errors:
        final = report.failed and not report.pending and len(report.delivery_errors) == report.failed
        hint = "`rl-digest status` shows each reader's row" if final else (
            # some rows failed for good, the first error maybe: not all of it is tried again
            "`rl-digest status` shows each reader's row; what waits goes with the next run or "
            "`rl-digest send`" if report.failed else "the next run or `rl-digest send` tries again")
        raise DeliveryError(report.delivery_errors[0], hint)
