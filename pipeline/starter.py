"""`rl-digest init`: a starter config, a readers list, a secrets example and the seeds/ folder
the config reads, never over a file.

The files themselves are in templates/init/ (bundled with the package), so their wording
is data like every other template.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import jinja2

from pipeline.config import bundled
from pipeline.deliver.files import write_atomic
from pipeline.errors import ConfigError, DigestError

FILES = {"config.yaml": "config.yaml", "readers.txt": "readers.txt", ".env.example": "env.example",
         "seeds/README.md": "seeds_README.md"}  # seeds/: where seeds.paths looks by default


def write(directory: Path) -> tuple[list[Path], str]:
    """Write the starter files into `directory`; the paths and what to do next."""
    source = bundled("templates") / "init"
    targets = [directory / name for name in FILES]
    existing = [path for path in targets if path.exists()]
    if existing:
        raise ConfigError(f"{existing[0]}: already exists; init writes nothing over your files",
                          "pick an empty folder: rl-digest init DIR")
    made: list[Path] = []  # the folders and files this call made, in order
    try:
        for target, name in zip(targets, FILES.values(), strict=True):
            missing = [folder for folder in (target.parent, *target.parent.parents) if not folder.exists()]
            target.parent.mkdir(parents=True, exist_ok=True)
            made += reversed(missing)
            write_atomic(target, (source / name).read_text(encoding="utf-8"))
            made.append(target)
    except (OSError, DigestError) as exc:  # a full or read-only disk: init may simply run again
        _take_back(made)
        if isinstance(exc, DigestError):
            raise
        raise DigestError(f"{exc.filename}: cannot create the folder: {exc.strerror or exc}") from None
    env = jinja2.Environment()
    env.filters["sh"] = shlex.quote  # the steps are commands to paste: a folder may hold a space
    steps = env.from_string((source / "next_steps.txt.j2").read_text(encoding="utf-8"))
    return targets, steps.render(dir=directory, command=shell_command(sys.argv[0]))


def _take_back(made: list[Path]) -> None:
    """Remove what a write that failed halfway made: a second `init` would refuse its
    config.yaml as a file of the user's."""
    for path in reversed(made):
        try:
            path.rmdir() if path.is_dir() else path.unlink()
        except OSError:
            pass


def shell_command(argv0: str) -> str:
    """How the steps start this rl-digest: `rl-digest` when PATH finds this one, else its
    path (a venv's bin/ is often not on PATH: /opt/rl-digest/.venv/bin/rl-digest init
    /etc/rl-digest printed steps whose `rl-digest` the shell did not find)."""
    script = Path(argv0)
    if script.name == "__main__.py":  # python -m pipeline: its venv's script, else the same again
        beside = Path(sys.executable).parent / "rl-digest"
        return shell_command(str(beside)) if beside.exists() else f"{shlex.quote(sys.executable)} -m pipeline"
    if script.name != "rl-digest" or "/" not in argv0:  # found by PATH (./rl-digest was not)
        return "rl-digest"
    found = shutil.which("rl-digest")
    if found and Path(found).resolve() == script.resolve():
        return "rl-digest"
    return shlex.quote(str(script.absolute()))
