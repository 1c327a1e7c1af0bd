"""`rl-digest init`: a starter config, a readers list, a secrets example and the seeds/ folder
the config reads, never over a file.

The files themselves are in templates/init/ (bundled with the package), so their wording
is data like every other template.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import jinja2

from pipeline.config import bundled
from pipeline.deliver.files import write_atomic
from pipeline.errors import ConfigError

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
    for target, name in zip(targets, FILES.values(), strict=True):
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, (source / name).read_text(encoding="utf-8"))
    env = jinja2.Environment()
    env.filters["sh"] = shlex.quote  # the steps are commands to paste: a folder may hold a space
    steps = env.from_string((source / "next_steps.txt.j2").read_text(encoding="utf-8"))
    return targets, steps.render(dir=directory)
