"""What every command shares: the `State` it reads the config and the store through, `echo`,
and the -o option.

Apart from cli.py so that the command modules (cli.py, cli_output.py, cli_setup.py) import
it without importing one another; cli.py registers them all on its group, which turns
their errors into exit codes and messages.
"""

from __future__ import annotations

import logging
import os
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipeline import logs
from pipeline.deliver.files import onto_stdout
from pipeline.errors import ConfigError
from pipeline.text import for_terminal

if TYPE_CHECKING:
    from pipeline.config import Config
    from pipeline.store import Store

log = logging.getLogger("pipeline")


class State:
    """What the global options said (--config, -v, -q), and the config and store a command
    asks for, each read only when first asked: `--help` and `--version` read neither."""

    def __init__(self, config_path: Path | None, verbose: int, quiet: bool, named_by: str | None = None):
        self.config_path = config_path
        self.named_by = named_by  # --config or RL_DIGEST_CONFIG: where a path given came from
        self.verbose = verbose
        self.quiet = quiet
        self._config: Config | None = None

    @property
    def config(self) -> Config:
        return self.load()

    def load(self, note: bool = True) -> Config:
        """The config, read once; `note`: log what it warns of (config check echoes it instead)."""
        if self._config is None:
            from pipeline import config as config_mod
            from pipeline.deliver import channels

            config = config_mod.load(self.config_path or config_mod.default_path(), self.named_by)
            logs.hide(config.secret_values(), config.addresses(), config.public_addresses())
            for line in config.schedule.notes() if note else ():  # every command says it
                log.warning("%s: %s", config.path or "built-in defaults", line)
            if config.channels:  # an entry a publish would refuse stops every command at start
                try:
                    with channels.opened(config, email=False):
                        pass
                except ConfigError as exc:
                    where = config.path or "built-in defaults"
                    raise ConfigError(f"{where}: {exc.message}", exc.hint) from None
            self._config = config
        return self._config

    def store(self) -> Store:
        """The database, closed when the command ends."""
        from pipeline.store import Store

        store = Store.open(self.config.database_url(), self.config.storage.busy_timeout_seconds)
        click.get_current_context().call_on_close(store.close)
        return store


pass_state = click.make_pass_decorator(State)


def _in_a_folder(_ctx: click.Context, _param: click.Parameter, path: Path | None) -> Path | None:
    """-o into a folder that exists and this user can write: a typo in a path must not leave
    new folders behind, and a folder not yours is a usage mistake (exit 2), not a failure."""
    if path is not None and not path.absolute().parent.is_dir():
        raise click.BadParameter(f"{path.parent}: no such folder")
    if path is not None and not os.access(path.absolute().parent, os.W_OK | os.X_OK):
        raise click.BadParameter(f"{path.parent}: this user cannot write there")
    return path


OUTPUT = click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
                      callback=_in_a_folder, help="Write here instead of stdout (into a folder that exists).")


def echo(message: object = "", err: bool = False, nl: bool = True) -> None:
    """click.echo without control characters: feed text never drives the terminal."""
    with nullcontext() if err else onto_stdout():
        click.echo(logs.redact(for_terminal(str(message))), err=err, nl=nl)
