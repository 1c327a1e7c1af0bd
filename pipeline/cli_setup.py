"""Commands that set an install up and check it: init, doctor, config check and show, seeds
(the seed documents as a run reads them), store copy (into another database).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from pipeline import logs
from pipeline.cli_state import State, echo, pass_state
from pipeline.errors import ConfigError, DigestError


@click.command()
@pass_state
def seeds(state: State) -> None:
    """Parse the seed documents and list their entries, with warnings for unreadable lines."""
    from pipeline.run import seed_documents
    from pipeline.sources.seeds import in_reading_order, same_paper, unread

    documents = seed_documents(state.config)
    entries = [entry for doc in documents for entry in doc.entries]
    for doc in documents:
        for entry in doc.entries:
            flags = f" [{', '.join(entry.flags)}]" if entry.flags else ""
            day = entry.date.isoformat() if entry.date else "----------"
            echo(f"{day}  {entry.title}  ({entry.source}:{entry.line}){flags}")
        for warning in doc.warnings:
            echo(f"warning: {warning}", err=True)
    used = in_reading_order(entries)
    same = same_paper(used)  # by the arxiv_id they give (a run also warns of those tied by title)
    for warning in same:
        echo(f"warning: {warning}", err=True)
    counted = [f"{len(entries) - len(used)} repeated titles"] if len(entries) > len(used) else []
    counted += [f"{len(same)} naming a paper another entry names"] if same else []
    repeated = f" ({', '.join(counted)}, each counted once)" if counted else ""
    files = [doc for doc in documents if doc.entries or not doc.warnings]  # not unread, nor skipped
    nothing = [doc.source for doc in documents if unread(doc)]
    missed = f"; nothing read from {', '.join(nothing)} (warnings above)" if nothing else ""
    count = len(used) - len(same)
    echo(f"{count} {'entry' if count == 1 else 'entries'} from {len(files)} "
         f"{'file' if len(files) == 1 else 'files'}{repeated}{missed}")


@click.command()
@pass_state
def doctor(state: State) -> None:
    """Check config, database, the lock folder, arXiv and its calendar, the LLM, SMTP, git and
    each chat channel, one line each; publish nothing."""
    from pipeline import doctor as doctor_mod

    checks = doctor_mod.run(state.config)
    for check in checks:
        echo(check.line())
    failed = [check.name for check in checks if check.status == "fail"]
    if failed:
        raise DigestError(f"doctor: {', '.join(failed)} failed")


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
def init(directory: Path) -> None:
    """Write a starter config.yaml, readers.txt, .env.example and seeds/ into DIRECTORY (default: here)."""
    from pipeline import starter

    written, next_steps = starter.write(directory)
    for path in written:
        echo(f"wrote {path}")
    echo(next_steps)


@click.group("config")
def config_group() -> None:
    """Check or show the effective configuration."""


@config_group.command("check")
@pass_state
def config_check(state: State) -> None:
    """Validate the configuration; exit 2 naming the key if a run would stop on it. What
    would only weaken a run (summaries falling back, a reader line skipped) is a warning."""
    from pipeline import doctor as doctor_mod

    config = state.load(note=False)
    where = config.path or "built-in defaults"
    errors, warnings = doctor_mod.config_problems(config)
    warnings += config.schedule.notes()
    errors += doctor_mod.own_line_problems(config)
    for problem in warnings:
        echo(f"warning: {where}: {problem}", err=True)
    for problem in errors[1:]:
        echo(f"rl-digest: {where}: {problem}", err=True)
    if errors:
        raise ConfigError(f"{where}: {errors[0]}")
    echo(f"{where}: ok" + (f" ({len(warnings)} warning{'s' * (len(warnings) > 1)} above)"
                           if warnings else ""))


@config_group.command("show")
@pass_state
def config_show(state: State) -> None:
    """Print the effective configuration (defaults merged, secrets masked)."""
    import yaml

    from pipeline import config as config_mod

    echo(yaml.safe_dump(config_mod.masked(state.config), allow_unicode=True, sort_keys=False))


@click.group("store")
def store_group() -> None:
    """Copy the store into another database."""


@store_group.command("copy")
@click.argument("target", metavar="TARGET_URL")
@click.option("--password-env", metavar="NAME",
              help="The environment variable holding the target's password.")
@pass_state
def store_copy_cmd(state: State, target: str, password_env: str | None) -> None:
    """Copy the whole store (storage.url) into an empty database at TARGET_URL: SQLite to
    PostgreSQL, PostgreSQL to a SQLite file (a backup), SQLite to SQLite."""
    from pipeline import lock, stopping, store_copy, templating
    from pipeline.store_connect import where

    config = state.config
    url = store_copy.target_url(target, password_env)
    logs.hide([os.environ[password_env]] if password_env else [])
    with lock.held(config):
        source = state.store()
        engine = store_copy.open_target(url, config.storage.busy_timeout_seconds)
        place = where(engine)
        try:
            with stopping.on_signals((f"mid-copy; the copy was rolled back: {place} holds no rl-digest data",
                                      None)):
                copied = store_copy.copy(source, engine)
        finally:
            engine.dispose()  # SQLite folds its WAL in: the file alone is the whole copy
    text = templating.text_env(config.templates.dir).get_template("store/copied.txt.j2").render(
        target=place, tables=copied, source=where(source.engine), config=config.path or "the config",
        url=store_copy.pasted(engine, target), password_env=password_env)
    echo(text, nl=False)
