"""Phase two of a run: write the files, record the digest and its outbox, deliver.

An offline run is a preview: it writes the files and stops there, so a later online
run of the same day publishes normally. The next run removes a preview's files when
no digest of its day was published (PREVIEWS says which ids were previews).

Files are written atomically first; then the digest, its items and one outbox
row per reader of each channel are recorded in one transaction, before anything
is sent. Delivery and git failures stay queued and make the run exit 1; they
never undo what was already published.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from pipeline import (
    compose,
    lock,
    months,
    readers,
    reading_list,
    reading_list_markdown,
    render,
    site,
    site_papers,
)
from pipeline.config import Config
from pipeline.deliver import channels, git, outbox, outbox_batch
from pipeline.deliver.files import clear_killed_writes, onto_stdout, write_atomic
from pipeline.errors import DigestError
from pipeline.links import Links
from pipeline.models import Digest, Options, RunReport, safe_id
from pipeline.store import Store

log = logging.getLogger(__name__)


def publish(config: Config, store: Store, options: Options, digest: Digest | None,
             report: RunReport) -> None:
    out, settings = config.outputs.dir, render.Settings.of(config)
    count = reading_list.count(store)
    if digest is not None:
        report.digest = digest.id
        report.seeds = digest.seeds
        report.relevant = digest.new + digest.revised + digest.seeds
    if options.dry_run:
        _dry_run(config, digest, count)
        return
    if not options.offline:  # published once, and not by a run that lost its lock unseen
        lock.still_held()
    report.shared += _other_config_wrote(config, out)
    _clear_killed_writes(out)
    _previews(out, store, digest, options.offline)
    files: dict[str, Path] = {}
    if digest is not None:
        for fmt, path in digest_files(out, digest.id).items():
            files[f"digests/{path.name}"] = write_atomic(path, render.digest_as(settings, digest, fmt, count))
        _record(config, store, options, digest, count)
    changed = last_change(store, options.as_of)
    updated = changed.isoformat()
    shown = StoredDigests(store, digest)  # this run's digest as written above, even when only a preview
    links = Links.of(config) if config.outputs.site else None
    feedback = links.on_the_web if links else None  # 👍/👎 on the web pages with serve.base_url
    moved = reading_list.tied(config, store) if config.outputs.site else {}
    with ExitStack() as stack:  # one pass over the store feeds the Markdown and the web pages
        papers = [stack.enter_context(site_papers.Papers(config, store, settings, out / "site", shown,
                                                         updated, feedback, moved))
                  ] if config.outputs.site else []
        files.update(reading_list.publish(config, store, changed.date().isoformat(), also=papers))
    published = StoredDigests(store)  # what both feeds list: the published digests, not a preview
    files["feed.xml"] = write_atomic(out / "feed.xml", render.feed_xml(settings, published, updated))
    report.files += [str(path) for path in files.values()]
    if config.outputs.site:
        stored = {did: fp for did, fp in store.digest_fingerprints().items()  # this run's is rendered
                  if digest is None or did != digest.id}
        report.files += [str(path) for path in site.build(settings, out / "site", shown, updated,
                                                          feedback, moved, stored, published)]
        report.files += [str(path) for path in papers[0].changed]
    if options.offline:  # a preview: files only, nothing sent, nothing recorded
        return
    # Committed before the sending starts, which can take long and be cut off: `send` and
    # the scheduler finish an outbox, not a commit.
    _commit(config, store, files, report)
    deliver(config, store, report, count, email=not options.no_email)


def _record(config: Config, store: Store, options: Options, digest: Digest, count: int) -> None:
    """Store a new digest, its items and one outbox row per reader of each channel, in one
    transaction, before anything is sent. A preview (offline) records nothing, nor does a
    rerun of a day already published."""
    if store.digest(digest.id) is not None or options.offline:
        return
    if not options.no_email:
        readers.keep(config, store)
    with channels.opened(config, count, email=not options.no_email,
                         unsubscribed=readers.unsubscribed(store)) as opened:
        recipients = outbox.recipients(opened)
    store.save_digest(digest.id, _window(digest), compose.digest_to_dict(digest),
                      _items(digest), recipients, snapshots=compose.snapshots(digest))
    _made_here(config, store, digest.id)


def _commit(config: Config, store: Store, files: dict[str, Path], report: RunReport) -> None:
    """Hand outputs.git, when set, this run's files and every stored digest's (a week whose
    push never began is not lost); a failure is the run's, as a delivery's is."""
    if config.outputs.git is None:
        return
    result = git.publish(config.outputs.git, {**stored_files(store, config.outputs.dir), **files}, store,
                         prune=(reading_list_markdown.FOLDER,))
    if not result.ok:
        report.delivery_errors.append(result.error or "git publishing failed")


def deliver(config: Config, store: Store, report: RunReport, reading_count: int,
            digest_id: str | None = None, *, email: bool = True, due_only: bool = False) -> None:
    """Hand over what the outbox holds; what fails stays there. `email=False` (--no-email)
    leaves email rows alone; `due_only` is the scheduler's pacing. `reading_count` is
    reading_list.count's, the one count every digest shows."""
    report.shared += _other_config_made(config, store)
    gone = readers.unsubscribed(store)
    unread = config.recipient_problems() if config.email.enabled and email else []
    report.warnings += unread  # said by every run and send, as a bad seed line is
    report.unread = unread
    opened = channels.open_channels(config, reading_count, email=email, unsubscribed=gone)
    # a reader whose line has a typo is not "removed": their rows wait for the line's fix
    listed = {r.address.lower() for r in config.readers()} if config.email.enabled and not unread else None
    result = outbox_batch.deliver(outbox.StoreOutbox(store), opened, lambda did: stored_digest(store, did),
                                  datetime.now(UTC), digest_id=digest_id, due_only=due_only,
                                  skip=() if email else ("email",), unsubscribed=gone, readers=listed,
                                  unready=lambda did: unwritten_page(config, did))
    report.sent += result.sent
    report.pending += result.pending
    report.failed += result.failed
    report.delivery_errors += result.errors
    report.warnings += result.held  # a channel taken out on purpose: no failure, every run says so


def unwritten_page(config: Config, digest_id: str) -> str | None:
    """Why a digest's messages wait: the web page they link to (render.digest_url) is not
    written, as when the run that saved the digest (and its outbox) failed or was killed
    before writing its pages: a reader would follow a broken link. None: it is there, or
    the messages link to no page of out/site."""
    page = site_page(config.outputs.dir, digest_id)
    if config.site_url is None or page.is_file():
        return None
    return (f"digest {digest_id}: its web page {page}, which its messages link to, is not written "
            f"(the run that made the digest stopped before it): `rl-digest run --as-of {digest_id}` "
            "writes it, as does the next run")


def digest_files(out: Path, digest_id: str) -> dict[str, Path]:
    """A digest's files in out/digests/, by format."""
    return {fmt: out / "digests" / f"{digest_id}.{fmt}" for fmt in ("md", "html", "txt")}


def site_page(out: Path, digest_id: str) -> Path:
    """A digest's page of the web edition."""
    return out / "site" / site.digest_href(digest_id)


MADE_BY = "made_by"  # the database's newest digest: the machine and config file whose run made it
WROTE = "written-by"  # in outputs.dir's cache folder: the machine and config file that wrote it last
PREVIEWS = "previews"  # in outputs.dir's cache folder: the id whose files an offline run wrote


def _previews(out: Path, store: Store, digest: Digest | None, offline: bool) -> None:
    """Remove the files of the previews earlier offline runs wrote (their ids in PREVIEWS) of a
    day no digest was published for, and record this run's when it is one: a preview stays
    until the next run, and is never kept beside the digests sent. Only recorded ids: the files
    of a digest the database no longer holds (a database reset) are a user's archive."""
    record, this = out / months.FOLDER / PREVIEWS, digest.id if digest is not None else None
    try:
        earlier = set(record.read_text(encoding="utf-8").split())
    except (OSError, UnicodeDecodeError):
        earlier = set()
    stored = set(store.digest_ids())
    for old in map(safe_id, earlier - stored - {this}):
        for path in (*digest_files(out, old).values(), site_page(out, old)):
            path.unlink(missing_ok=True)
    # Recorded before its files are written (a run killed then left a preview); an online run
    # of a preview's day keeps it until its digest is stored, which that run may not reach.
    if this is not None and this not in stored and (offline or this in earlier):
        write_atomic(record, f"{this}\n")
    else:
        record.unlink(missing_ok=True)


def _made_here(config: Config, store: Store, digest_id: str) -> None:
    if config.path is not None:
        store.set_state(MADE_BY, {"host": socket.gethostname(), "config": str(config.path),
                                  "digest": digest_id})


def _other_config_made(config: Config, store: Store) -> list[str]:
    """Said when the database's newest digest was made on this machine by another config file:
    two configs on one storage.url (two groups on one server) share one digest a week and one
    outbox. (Machines sharing PostgreSQL have configs of their own: one group's, it is taken.)"""
    made = store.get_state(MADE_BY)
    if config.path is None or not isinstance(made, dict) or made.get("host") != socket.gethostname() \
            or made.get("config") in (None, str(config.path)):
        return []
    return [f"storage.url: digest {made.get('digest')} in this database was made by another config, "
            f"{made['config']}: two configs on one database share one digest a week and one outbox "
            "(the one that runs second that week mails its readers nothing, and each one's send takes "
            "the other's waiting mail for readers removed, never to be sent); give each config its own "
            "storage.url and outputs.dir (a config that moved: its next digest ends this warning)"]


def _other_config_wrote(config: Config, out: Path) -> list[str]:
    """Said when outputs.dir was last written on this machine by another config file (two
    configs on one outputs.dir write over each other's files); this config is its writer now."""
    if config.path is None:
        return []
    marker, here = out / months.FOLDER / WROTE, f"{socket.gethostname()} {config.path}"
    try:
        before = marker.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        before = ""
    if before == here:
        return []
    write_atomic(marker, f"{here}\n")
    host, _, path = before.partition(" ")
    if host != socket.gethostname() or not path:
        return []
    return [f"outputs.dir: {out} was last written by another config, {path}: two configs on one "
            "outputs.dir write over each other's digests, reading list and web pages; give each "
            "config its own outputs.dir (a config that moved: this is said once)"]


def routes(config: Config, strict: bool = False) -> dict[str, set[str]] | None:
    """outbox.routes of the channels the config has now (opened to ask their readers, then
    closed); None when they cannot be opened (a readers' file gone: a run or send says why),
    or with `strict` that error."""
    try:
        with channels.opened(config) as opened:
            return outbox.routes(opened)
    except DigestError:
        if strict:
            raise
        return None


def next_look(config: Config, store: Store) -> datetime | None:
    """When the scheduler's outbox job next has a row to try (outbox.next_retry), among the
    channels the config has now; None: nothing it could send waits."""
    return outbox.next_retry(outbox.StoreOutbox(store).pending(), routes(config))


def stored_files(store: Store, out: Path) -> dict[str, Path]:
    """The files in out/digests/ of every digest the database holds: a preview of a week not
    yet published is not among them (a rerun of a published week writes its files anew)."""
    return {f"digests/{path.name}": path for digest_id in store.digest_ids()
            for path in digest_files(out, digest_id).values()
            if path.is_file()}


def written_files(config: Config, store: Store) -> dict[str, Path]:
    """What a run hands git, as outputs.dir holds it now: `send` offers it again after a
    publish that failed before its commit (a wrong branch, a stale lock)."""
    out = config.outputs.dir
    files = stored_files(store, out)
    files.update({name: out / name for name in ("READING_LIST.md", "feed.xml") if (out / name).is_file()})
    files.update({f"{reading_list_markdown.FOLDER}/{path.name}": path
                  for path in sorted((out / reading_list_markdown.FOLDER).glob("*.md"))})
    return files


def stored_digest(store: Store, digest_id: str) -> Digest:
    stored = store.digest(digest_id)
    if stored is None:
        raise DigestError(f"no digest {digest_id} in the database")
    return compose.digest_from_dict(stored["data"])


def last_change(store: Store, as_of: datetime) -> datetime:
    """When the reading list and feed last changed: the newest digest's end, else as_of.

    Not the clock: a run with nothing new then writes the same bytes, and git makes
    no commit that only moves a date.
    """
    return store.last_digest_end() or as_of


class StoredDigests(Mapping[str, Digest]):
    """Every digest the database holds, by id, each read when asked for and not kept: years
    of weekly digests are never in memory at once. `also` is this run's digest, in place of
    the stored one of its id (a preview is stored nowhere)."""

    def __init__(self, store: Store, also: Digest | None = None):
        self.store, self.also = store, also
        self.ids = sorted({*store.digest_ids(), *([also.id] if also else [])})

    def __getitem__(self, digest_id: str) -> Digest:
        if self.also is not None and digest_id == self.also.id:
            return self.also
        if digest_id not in self:
            raise KeyError(digest_id)
        return stored_digest(self.store, digest_id)

    def __contains__(self, digest_id: object) -> bool:
        return digest_id in self.ids

    def updates(self) -> dict[str, list[tuple[str, tuple[tuple[str, str, str], ...]]]]:
        """Each digest's Updates, (paper key, changes) by id, read without the rest of each
        digest: decoding every digest whole for them took a run 5.7 s at 300 digests."""
        found = {did: [(u["key"], tuple(map(tuple, u["changes"]))) for u in updates]
                 for did, updates in self.store.digest_updates().items()}
        if self.also is not None:
            found[self.also.id] = [(u.key, u.changes) for u in self.also.updates]
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


def _dry_run(config: Config, digest: Digest | None, count: int) -> None:
    """Print the digest and say what a real run would write and whom it would mail."""
    out = config.outputs.dir
    if digest is not None:
        with onto_stdout():
            print(render.digest_as(render.Settings.of(config), digest, "md", count))
        for path in digest_files(out, digest.id).values():
            log.info("would write %s", path)
        if config.email.enabled:
            for reader in config.readers():
                log.info("would mail %s", reader.address)
    log.info("would write %s and %s", out / "READING_LIST.md", out / "feed.xml")
    if config.outputs.site:
        log.info("would write the web edition in %s", out / "site")


def _clear_killed_writes(out: Path) -> None:
    """What a killed run left half-written anywhere in outputs.dir (a file written only when
    it changes would leave it there for good), once a publish: a walk of a few hundred names."""
    for folder, subfolders, _ in os.walk(out):
        subfolders[:] = [name for name in subfolders if name != ".git"]
        clear_killed_writes(Path(folder))


def _window(digest: Digest) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(digest.window_start), datetime.fromisoformat(digest.window_end)


def _items(digest: Digest) -> list[tuple[str, bool]]:
    """Every entry the digest lists (an older digest may name some it left out)."""
    return [(key, True) for key in compose.listed_keys(digest)] + [(k, False) for k in digest.left_out]
