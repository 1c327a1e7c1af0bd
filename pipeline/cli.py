"""Commands. The only place where errors become exit codes and one-line messages."""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path

import click
import yaml

from pipeline import __version__, config as config_mod, lock
from pipeline.errors import DigestError
from pipeline.run import Options, parse_as_of, run_digest, seed_documents, summary_line
from pipeline.store import Store

log = logging.getLogger("pipeline")


class State:
    def __init__(self, config_path: Path | None, verbose: int, quiet: bool):
        self.config_path = config_path
        self.verbose = verbose
        self.quiet = quiet
        self._config: config_mod.Config | None = None

    @property
    def config(self) -> config_mod.Config:
        if self._config is None:
            self._config = config_mod.load(self.config_path or config_mod.default_path())
        return self._config

    def store(self) -> Store:
        return Store.open(self.config.storage.url)


pass_state = click.make_pass_decorator(State)


class Group(click.Group):
    """Turns the project's errors into exit codes; a traceback only with -v."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except DigestError as exc:
            state = ctx.find_object(State)
            if state is not None and state.verbose:
                traceback.print_exc()
            click.echo(f"rl-digest: {exc}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", type=click.Path(path_type=Path), envvar="RL_DIGEST_CONFIG",
              help="Config file (default ./config.yaml, or $RL_DIGEST_CONFIG).")
@click.option("-v", "--verbose", count=True, help="More logging; tracebacks on errors.")
@click.option("-q", "--quiet", is_flag=True, help="Only errors.")
@click.version_option(__version__, prog_name="rl-digest")
@click.pass_context
def main(ctx: click.Context, config_path: Path | None, verbose: int, quiet: bool) -> None:
    """Weekly bilingual digest of reinforcement learning for LLMs papers from arXiv."""
    level = logging.ERROR if quiet else logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if not verbose:
        for noisy in ("httpx", "openai", "arxiv", "urllib3", "apscheduler"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    ctx.obj = State(config_path, verbose, quiet)


@main.command()
@click.option("--as-of", help="Fix 'now': an ISO date (end of that day) or datetime.")
@click.option("--dry-run", is_flag=True, help="Render to stdout; write, send and record nothing.")
@click.option("--offline", is_flag=True, help="No network: seeds and stored papers only.")
@click.option("--no-email", is_flag=True, help="Write files but send no email.")
@pass_state
def run(state: State, as_of: str | None, dry_run: bool, offline: bool, no_email: bool) -> None:
    """One whole cycle: collect, rank, enrich, compose, render, deliver."""
    config = state.config
    options = Options(parse_as_of(as_of, config), offline=offline, dry_run=dry_run, no_email=no_email)
    with lock.held(config):
        report = run_digest(config, state.store(), options)
    for warning in report.warnings:
        log.warning("%s", warning)
    click.echo(summary_line(report), err=dry_run)


@main.command()
@pass_state
def seeds(state: State) -> None:
    """Parse the seed documents and list their entries, with warnings for unreadable lines."""
    documents = seed_documents(state.config)
    count = 0
    for doc in documents:
        for entry in doc.entries:
            count += 1
            flags = f" [{', '.join(entry.flags)}]" if entry.flags else ""
            day = entry.date.isoformat() if entry.date else "----------"
            click.echo(f"{day}  {entry.title}  ({entry.source}:{entry.line}){flags}")
        for warning in doc.warnings:
            click.echo(f"warning: {warning}", err=True)
    click.echo(f"{count} entries from {len(documents)} files")


@main.group("config")
def config_group() -> None:
    """Check or show the effective configuration."""


@config_group.command("check")
@pass_state
def config_check(state: State) -> None:
    """Validate the configuration; exit 2 naming the key if it is wrong."""
    config = state.config
    config.recipients()
    click.echo(f"{config.path or 'built-in defaults'}: ok")


@config_group.command("show")
@pass_state
def config_show(state: State) -> None:
    """Print the effective configuration (defaults merged, secrets masked)."""
    click.echo(yaml.safe_dump(config_mod.masked(state.config), allow_unicode=True, sort_keys=False))
