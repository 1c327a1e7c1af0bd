"""Commands. The only place where errors become exit codes and one-line messages: this
group's, with the commands of cli_output.py, cli_send.py and cli_setup.py registered on it.

Each command imports the stages it runs when it runs: `--help`, `--version` and a usage
mistake answer without loading SQLAlchemy, pydantic's models and scikit-learn (about 1 s).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import select
import signal
import sys
import traceback
from collections.abc import Collection
from datetime import datetime, time
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from pipeline import __version__, logs
from pipeline.cli_output import export, preview, render
from pipeline.cli_send import fail_on_delivery_errors, send
from pipeline.cli_setup import config_group, doctor, init, seeds, store_group
from pipeline.cli_state import State, echo, pass_state
from pipeline.errors import ConfigError, DigestError
from pipeline.models import Options, RunReport, paper_key, split_arxiv_id

if TYPE_CHECKING:
    from pipeline.config import Config
    from pipeline.store import Store

log = logging.getLogger("pipeline")
HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click 8.2: a group given no command
# the forms run.read_moment takes
AS_OF_HELP = ("Fix 'now': a date, the end of that day (2026-11-30, 20261130, 2026-W49-1), or a date and "
              "time (2026-11-30T08:00); in schedule.timezone unless it has an offset (+01:00).")


def _reader_gone() -> bool:
    """Whether our stdout is a pipe whose reader has closed it (not a socket of ours that broke)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
    except (OSError, ValueError):  # no real stdout (a test runner's): not a pipe that ended
        return False
    return any(event & select.POLLERR for _, event in poller.poll(0))


class Group(click.Group):
    """Turns the project's errors into exit codes; a traceback only with -v."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, globals_first(args, self.commands))
        except HELP:
            raise
        except click.UsageError as exc:  # the global options' (--bogus, --config without a path)
            _one_line(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            try:
                return super().invoke(ctx)
            except Exception as exc:  # one of templates.dir's: the user's to fix
                problem = _own_template(ctx, exc)
                if problem is None:
                    raise
                raise problem from exc
        except DigestError as exc:
            _failed(ctx, exc)
        except HELP:  # `rl-digest config` alone: its help, whole, as click prints it
            raise
        except click.UsageError as exc:
            _one_line(exc)
        except (click.exceptions.Exit, click.ClickException, click.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:  # a bug or an unforeseen failure: still one line without -v
            if isinstance(exc, BrokenPipeError) and _reader_gone():  # `doctor | head` saw enough
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (Python's signal docs)
                ctx.exit(128 + signal.SIGPIPE)  # as a shell reports a command its pipe ended
            state = ctx.find_object(State)
            what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            if state is not None and state.verbose:
                echo(traceback.format_exc().rstrip(), err=True)
                echo(f"rl-digest: unexpected error: {what}", err=True)
            else:
                echo(f"rl-digest: unexpected error: {what} (run again with -v for the traceback)", err=True)
            ctx.exit(1)


def _own_template(ctx: click.Context, exc: Exception) -> DigestError | None:
    """A failure of a template of templates.dir, as one line naming it; else None."""
    jinja2 = sys.modules.get("jinja2")  # not loaded: no template failed
    if jinja2 is None or not isinstance(exc, jinja2.TemplateError):
        return None
    from pipeline import templating

    state = ctx.find_object(State)
    config = state._config if state is not None else None
    return templating.template_failure(exc, config.templates.dir if config else None)


def _failed(ctx: click.Context, exc: DigestError) -> None:
    """One line, and the error's exit code; the traceback first with -v."""
    state = ctx.find_object(State)
    if state is not None and state.verbose:
        echo(traceback.format_exc().rstrip(), err=True)
    echo(f"rl-digest: {exc}".replace("\n", " "), err=True)
    ctx.exit(exc.exit_code)


def _one_line(exc: click.UsageError) -> NoReturn:
    """click's usage error runs to a usage block: one line, as ours, naming the help to read."""
    where = exc.ctx.command_path if exc.ctx else "rl-digest"
    echo(f"rl-digest: {' '.join(exc.format_message().split())} ({where} --help)", err=True)
    raise click.exceptions.Exit(exc.exit_code)


def globals_first(args: list[str], commands: Collection[str]) -> list[str]:
    """`rl-digest run -q --config x.yaml` as `rl-digest -q --config x.yaml run`: the global
    options are the group's, but people type them after the command too (no command has
    options of those names)."""
    at = 0
    while at < len(args) and args[at] not in commands:
        at += 2 if args[at] == "--config" else 1
    moved: list[str] = []
    kept: list[str] = []
    rest = iter(args[at + 1:])
    for arg in rest:
        if arg == "--":
            kept += [arg, *rest]
        elif arg in ("--quiet", "--verbose") or re.fullmatch(r"-[qv]+|--config=.*", arg):  # -qv too
            moved.append(arg)
        elif arg == "--config":
            moved += [arg, *islice(rest, 1)]
        else:
            kept.append(arg)
    return [*args[:at], *moved, *args[at:at + 1], *kept] if at < len(args) else args


def _streams_that_write_chinese() -> None:
    """stdout and stderr in UTF-8, as every file rl-digest writes, when the locale's encoding
    cannot write Chinese at all (cron on a machine whose locale is en_US, ISO-8859-1: status,
    config show, render and run --dry-run ended 'unexpected error: UnicodeEncodeError', and
    log lines showed \\u escapes). One that can (UTF-8, GB18030) is left as the locale says;
    no LANG and LANG=C are UTF-8 already (Python's UTF-8 mode)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            "中文".encode(stream.encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            if hasattr(stream, "reconfigure"):  # a TextIOWrapper; not a test runner's capture
                stream.reconfigure(encoding="utf-8")


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", envvar="RL_DIGEST_CONFIG",
              type=click.Path(readable=False),  # config.load says why it cannot read one
              help="Config file (default: $RL_DIGEST_CONFIG, else ./config.yaml).")
@click.option("-v", "--verbose", count=True,
              help="More logging, tracebacks on errors; -vv adds the HTTP libraries' lines.")
@click.option("-q", "--quiet", is_flag=True,
              help="No log lines but errors; a command's own result line stays.")
@click.version_option(__version__, prog_name="rl-digest")
@click.pass_context
def main(ctx: click.Context, config_path: str | None, verbose: int, quiet: bool) -> None:
    """Weekly bilingual digest of reinforcement learning for LLMs papers from arXiv."""
    _streams_that_write_chinese()
    logs.setup(verbose, quiet)
    if config_path == "":  # `--config "$CONF"` with CONF unset: as a Path, the working folder
        raise ConfigError("--config: the path is empty", "a variable not set? name a config file, or "
                          "leave --config out for $RL_DIGEST_CONFIG or ./config.yaml")
    from_variable = ctx.get_parameter_source("config_path") is click.core.ParameterSource.ENVIRONMENT
    named_by = ("RL_DIGEST_CONFIG" if from_variable else "--config") if config_path else None
    ctx.obj = State(Path(config_path) if config_path else None, verbose, quiet, named_by)


@main.command()
@click.option("--as-of", metavar="DATE", help=AS_OF_HELP)
@click.option("--dry-run", is_flag=True,
              help="Collect as a run does, then print the digest; write, send and record no digest.")
@click.option("--offline", is_flag=True, help="No network: seeds and stored papers only.")
@click.option("--no-email", is_flag=True,
              help="Write and record the digest but mail it to no one, now or later (chat channels "
                   "and git still get it).")
@pass_state
def run(state: State, as_of: str | None, dry_run: bool, offline: bool, no_email: bool) -> None:
    """One whole cycle: collect, rank, enrich, compose, render, deliver."""
    from pipeline import lock, stopping
    from pipeline.run import parse_as_of, run_digest, summary_line

    config = state.config
    options = Options(parse_as_of(as_of, config), offline=offline, dry_run=dry_run, no_email=no_email)
    with lock.held(config), stopping.on_signals():
        report = run_digest(config, state.store(), options)
    for warning in report.warnings:
        log.warning("%s", warning)
    echo(summary_line(report), err=dry_run)
    fail_on_delivery_errors(report)


@main.command()
@pass_state
def schedule(state: State) -> None:
    """Long-running: collect and publish on the configured crontabs; catch up a missed publish."""
    from pipeline import collect, reading_list, sources
    from pipeline import schedule as schedule_mod
    from pipeline.publish import deliver
    from pipeline.run import collect_and_rank, run_digest, summary_line

    config = state.config
    store = state.store()

    def collect_job() -> None:
        report, _, _ = collect_and_rank(config, store, sources.configured(config),
                                        collect.make_fetcher(config),
                                        datetime.now(config.zone).replace(microsecond=0))
        for warning in report.warnings:  # as `collect` logs them: a stale feed, an unknown year
            log.warning("%s", warning)
        log.info("collect: fetched %d, new %d, revised %d", report.fetched, len(report.new),
                 len(report.revised))

    def publish_job(as_of: datetime | None) -> None:
        report = run_digest(config, store, Options(as_of or datetime.now(config.zone).replace(microsecond=0)))
        for warning in report.warnings:
            log.warning("%s", warning)
        log.info("%s", summary_line(report))
        for error in report.delivery_errors:
            log.error("%s", error)

    def outbox_job() -> None:
        report = RunReport(as_of=datetime.now(config.zone).isoformat())
        deliver(config, store, report, reading_list.count(store), due_only=True)
        log.info("outbox: sent %d, pending %d, failed %d", report.sent, report.pending, report.failed)
        for line in report.shared:
            log.warning("%s", line)
        for error in report.delivery_errors:
            log.error("%s", error)

    schedule_mod.serve(config, collect_job, publish_job, store, outbox_job)


@main.command("collect")
@click.option("--as-of", metavar="DATE", help=AS_OF_HELP)
@click.option("--since", metavar="DATE",
              help="Read again from this date (its start) or date and time, in schedule.timezone, "
                   "whatever the watermark says.")
@pass_state
def collect_cmd(state: State, as_of: str | None, since: str | None) -> None:
    """Fetch new papers from arXiv and store them; publish nothing."""
    from pipeline import collect, lock, sources, stopping
    from pipeline import status as status_mod
    from pipeline.run import collect_and_rank, parse_as_of

    config = state.config
    moment = parse_as_of(as_of, config, why="a collect reads up to the present, not past it")
    start = _since(since, config) if since else None
    if start is not None and start > moment:  # the window would be empty: 'fetched 0', unsaid why
        raise ConfigError(f"--since: {since} is after the window's end ({moment:%Y-%m-%d %H:%M})",
                          "it reads again from that day up to --as-of, or up to now")
    with lock.held(config), stopping.on_signals():
        store = state.store()
        report, _, _ = collect_and_rank(config, store, sources.configured(config),
                                        collect.make_fetcher(config), moment, since=start)
    for warning in report.warnings:
        log.warning("%s", warning)
    start, end = report.window
    echo(f"{end.date()}: fetched {report.fetched}, new {len(report.new)}, "
         f"revised {len(report.revised)} ({start:%Y-%m-%d %H:%M} → {end:%Y-%m-%d %H:%M})")
    # a source's note and the coverage can say the same (an arXiv holiday): once
    for line in dict.fromkeys(report.notes + status_mod.coverage_lines(collect.as_dict(report)["coverage"])):
        echo(line)


def _since(value: str, config: Config) -> datetime:
    """--since DATE: the start of that day (a datetime as given) in schedule.timezone; not
    after now (a collect reads from it up to now)."""
    from pipeline.run import read_moment

    moment = read_moment(value, config, "--since", time(0))
    now = datetime.now(config.zone)
    if moment > now:
        raise ConfigError(f"--since: {value} is in the future (today is {now:%Y-%m-%d, %H:%M} in "
                          f"{config.schedule.timezone})",
                          "collect reads again from that day up to now: give today or a day before")
    return moment


@main.command()
@click.argument("paper_id")
@click.option("--relevant", is_flag=True,
              help="Your verdict; it overrides the score and teaches the model from the next run.")
@click.option("--irrelevant", is_flag=True, help="The other verdict.")
@click.option("--undo", is_flag=True, help="Take your verdict on this paper back.")
@pass_state
def mark(state: State, paper_id: str, relevant: bool, irrelevant: bool, undo: bool) -> None:
    """Record your verdict on a paper: the digest learns your taste."""
    if relevant + irrelevant + undo != 1:
        raise click.UsageError("give one of --relevant, --irrelevant or --undo")
    from pipeline import store_readers
    from pipeline.store_schema import YOU

    ident, _ = split_arxiv_id(paper_id)
    store = state.store()
    had = next((bool(v["verdict"]) for v in store_readers.verdicts_given(store, paper_key(ident))
                if v["reader"] == YOU), None)
    if undo and had is None:
        if not store.papers([ident]):
            raise ConfigError(f"{ident}: no such paper in the database", _not_stored_hint(store, ident))
        echo(f"{ident}: no verdict of yours to take back; nothing changed")
        return
    if not store_readers.set_verdict(store, ident, None if undo else relevant):
        raise ConfigError(f"{ident}: no such paper in the database", _not_stored_hint(store, ident))
    said = "verdict taken back" if undo else f"marked {'relevant' if relevant else 'irrelevant'}"
    if not undo and had == relevant:  # the same verdict again: the model has nothing new to learn
        echo(f"{ident}: already {said}; nothing changed")
        return
    after = ("the next run refits the model" if state.config.relevance.model
             else "it overrides the score (relevance.model is off: no model learns from it)")
    echo(f"{ident}: {said}; {after}")


def _not_stored_hint(store: Store, ident: str) -> str:
    """What to do about a paper the store lacks: a collect reads only what arXiv announced
    since the watermark, and keeps only papers of sources.arxiv's categories and terms."""
    from pipeline.calendar import load_calendar

    kept = "only papers in sources.arxiv.categories that match sources.arxiv.terms are collected"
    watermark = store.watermark()
    if watermark is None:
        return "run `rl-digest collect` first"
    since = f"{watermark.astimezone(load_calendar().zone):%y%m}"  # arXiv numbers by its month of announcement
    if re.fullmatch(r"\d{4}\.\d{4,5}", ident) and ident[:4] >= since:  # maybe announced since
        return f"run `rl-digest collect` to read what arXiv announced since {watermark:%Y-%m-%d}; {kept}"
    return f"{kept} and can be marked, and this one was not"


@main.command()
@click.option("--paper", "paper_id", help="Show one paper: its score, reasons and topic.")
@click.option("--json", "as_json", is_flag=True, help="Everything as one JSON object, for monitoring.")
@click.option("--check-heartbeat", is_flag=True,
              help="Only check the scheduler's heartbeat: exit 1 if it is missing, stopped or old.")
@pass_state
def status(state: State, paper_id: str | None, as_json: bool, check_heartbeat: bool) -> None:
    """Last runs, counts, watermark, pending deliveries, the scheduler's heartbeat."""
    from pipeline import heartbeat

    config = state.config
    if check_heartbeat:  # the container's healthcheck, every minute: reads a file, loads no stage
        beat = heartbeat.read(config, datetime.now(config.zone))
        line = heartbeat.line(beat, config)
        if not (beat and beat["alive"]):
            raise DigestError(line)
        echo(line)
        return
    from pipeline import status as status_mod

    if as_json and not paper_id:
        failed = None
        try:
            found = status_mod.snapshot(config, state.store())
        except DigestError as exc:  # a monitor still reads an object: what failed, the scheduler
            failed = exc
            found = {"database": config.storage.url, "error": str(exc),
                     "scheduler": heartbeat.read(config, datetime.now(config.zone))}
        echo(json.dumps(found, ensure_ascii=False, indent=1, default=str))
        if failed is not None:
            raise failed
        return
    store = state.store()
    if paper_id:
        echo(status_mod.paper(state.config, store, split_arxiv_id(paper_id)[0]), nl=False)
    else:
        echo(status_mod.overview(config, store), nl=False)


@main.command("readers")
@click.option("--unsubscribe", "stop", metavar="ADDR", multiple=True,
              help="Unsubscribe a reader who asked by mail (a reply, the mailto: link).")
@click.option("--subscribe", "start", metavar="ADDR", multiple=True,
              help="Subscribe an unsubscribed reader again.")
@click.option("--forget", metavar="ADDR", multiple=True,
              help="Erase what the store keeps about a reader taken off the list (GDPR erasure).")
@pass_state
def readers_cmd(state: State, stop: tuple[str, ...], start: tuple[str, ...], forget: tuple[str, ...]) -> None:
    """Each reader, email or chat channel: languages, status (active, unsubscribed, removed),
    last delivery."""
    from pipeline import lock, readers

    for who, status in [*((w, readers.UNSUBSCRIBED) for w in stop), *((w, readers.ACTIVE) for w in start)]:
        echo(f"{readers.set_status(state.config, state.store(), who, status)}: {status}")
    if forget:
        with lock.held(state.config):  # a run's report must not name them again meanwhile
            for line in readers.forget(state.config, state.store(), forget):
                echo(line)
    for row in readers.listing(state.config, state.store()):
        who = f"{row['name']} <{row['address']}>" if row["name"] else row["address"]
        languages = ",".join(row["languages"] or []) or "-"
        skipped = f"  digest {row['skipped'][0]} skipped: {row['skipped'][1].removeprefix('the reader ')}" \
            if row["skipped"] else ""
        failed = f"  digest {row['failed'][0]} failed: {row['failed'][1]}" if row["failed"] else ""
        echo(f"{who}  lang={languages}  {row['status']}  last delivery: "
             f"{row['last_delivery'] or 'never'}{skipped}{failed}")
    for problem in state.config.recipient_problems():  # a line that names no reader is no reader
        echo(f"warning: {problem}", err=True)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535),
              help="Port to listen on.")
@pass_state
def serve(state: State, host: str, port: int) -> None:
    """Serve the web edition (out/site/) and the reader links: unsubscribe, 👍/👎."""
    from pipeline import serve as serve_mod
    from pipeline.links import Links

    config = state.config
    here = f"http://{host}:{port}/"
    if config.serve.base_url or config.secret(config.serve.secret_env):
        links = Links.signed(config, config.serve.base_url or here)
        said = f"serving on {here} (links signed for {links.base})"
    else:  # no link was signed to check: a key nobody has refuses every one (403)
        links = Links(here, secrets.token_hex(32))
        said = (f"serving on {here} (the web edition only: reader links need serve.base_url and "
                f"{config.serve.secret_env})")
    serve_mod.run(config, state.store(), links, host, port, listening=lambda: echo(said))


@main.command("eval")
@click.option("--labels", type=click.Path(path_type=Path), required=True,
              help="JSONL with id, title, abstract, label (0/1).")
@pass_state
def eval_cmd(state: State, labels: Path) -> None:
    """Precision, recall and F1 of the relevance filter on labelled papers."""
    from pipeline import status as status_mod

    rows = status_mod.read_labels(labels)
    echo(status_mod.evaluation(state.config, state.store(), rows), nl=False)


for command in (send, render, export, preview, init, doctor, seeds, config_group, store_group):
    main.add_command(command)
