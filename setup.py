"""Ship templates/, seeds/, calendars/ and config.yaml inside the package as pipeline/bundled/.

They live at the top of the repository (the contract's layout); an installed
`rl-digest` must still find them from any working directory.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED = ("templates", "seeds", "calendars", "config.yaml")


class BuildWithBundled(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "pipeline" / "bundled"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for name in BUNDLED:
            source = Path(name)
            if source.is_dir():
                shutil.copytree(source, target / name)
            else:
                shutil.copy2(source, target / name)


setup(cmdclass={"build_py": BuildWithBundled})
