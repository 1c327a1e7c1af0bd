"""Commands that write out again what the store holds: a stored digest (render, preview)
and the reading list (export). They read the store and change nothing.
"""

from __future__ import annotations

import logging
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipeline import export as export_mod  # its FORMATS are --format's choices
from pipeline.cli_state import OUTPUT, State, echo, pass_state
from pipeline.deliver.files import atomic, onto_stdout, write_atomic
from pipeline.errors import ConfigError, DigestError
from pipeline.models import Digest

if TYPE_CHECKING:
    from pipeline.store import Store

log = logging.getLogger("pipeline")


@click.command()
@click.option("--digest", "digest_id", help="Digest id (YYYY-MM-DD); default: the latest.")
@click.option("--format", "fmt", type=click.Choice(["md", "html", "txt"]), default="md",
              show_default=True, help="Markdown, HTML or plain text.")
@OUTPUT
@pass_state
def render(state: State, digest_id: str | None, fmt: str, output: Path | None) -> None:
    """Re-render a stored digest."""
    from pipeline import reading_list
    from pipeline import render as render_mod

    config = state.config
    store = state.store()
    text = render_mod.digest_as(render_mod.Settings.of(config), _stored_digest(store, digest_id), fmt,
                                reading_count=reading_list.count(store))
    if output:
        write_atomic(output, text)
        echo(str(output))
    else:
        echo(text, nl=False)


@click.command()
@click.option("--format", "fmt", type=click.Choice(list(export_mod.FORMATS)), required=True)
@click.option("--topic", help="Only this topic (its key in the config's topics).")
@click.option("--since", metavar="DATE", help="Only papers dated this day (YYYY-MM-DD) or later.")
@OUTPUT
@pass_state
def export(state: State, fmt: str, topic: str | None, since: str | None, output: Path | None) -> None:
    """The reading list for reference managers: BibTeX, RIS, CSL-JSON or JSON lines."""
    from pipeline import reading_list

    config = state.config
    keys = [t.key for t in config.topics]
    if topic is not None and topic not in keys:
        raise ConfigError(f"--topic: no topic {topic!r}", f"one of {', '.join(keys)}")
    try:
        day = date.fromisoformat(since) if since else None
    except ValueError:
        raise ConfigError(f"--since: not a date: {since!r}", "write it as YYYY-MM-DD") from None
    found = (export_mod.in_languages(e, config.languages)
             for e in export_mod.select(reading_list.entries(config, state.store()), topic, day))
    if output:
        with atomic(output) as handle:
            n = export_mod.write(fmt, found, handle)
        log.info("%s: %d entries", output, n)
        echo(str(output))
    else:
        with onto_stdout():
            export_mod.write(fmt, found, sys.stdout)


@click.command()
@click.option("--digest", "digest_id", help="Digest id (YYYY-MM-DD); default: the latest.")
@pass_state
def preview(state: State, digest_id: str | None) -> None:
    """Write a stored digest's email HTML to a file and print its path, to open in a browser."""
    from pipeline import reading_list
    from pipeline import render as render_mod

    config = state.config
    store = state.store()
    digest = _stored_digest(store, digest_id)
    path = config.outputs.dir / "preview" / f"{digest.id}.html"
    html = render_mod.digest_as(render_mod.Settings.of(config), digest, "html",
                                reading_count=reading_list.count(store))
    echo(str(write_atomic(path, html)))


def _stored_digest(store: Store, digest_id: str | None) -> Digest:
    from pipeline import compose

    stored = store.digest(digest_id)
    if stored is None and digest_id:  # an id that names no digest is bad usage (exit 2), as for send
        raise ConfigError(f"--digest: no digest {digest_id}", "`rl-digest status` names the newest")
    if stored is None:
        raise DigestError("no digest yet", "run `rl-digest run` first")
    return compose.digest_from_dict(stored["data"])
