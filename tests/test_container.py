"""The Dockerfile and compose.yaml: checked as files everywhere, built where Docker runs.

The build needs a Docker daemon (and PyPI); without one the build test skips and says so.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

from pipeline import config
from tests.helpers import ROOT


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), " ".join(rest.split())))
    return found


def test_dockerfile_runs_the_scheduler_as_a_user_with_state_in_volumes():
    steps = instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    users = [args for word, args in steps if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    volumes = yaml.safe_load(next(args for word, args in steps if word == "VOLUME"))
    assert {"/data/state", "/data/out"} <= set(volumes)
    workdir = [args for word, args in steps if word == "WORKDIR"][-1]
    assert workdir == "/data"  # relative paths of a config in /data land in the volumes
    assert yaml.safe_load(next(args for word, args in steps if word == "ENTRYPOINT")) == ["rl-digest"]
    assert yaml.safe_load(next(args for word, args in steps if word == "CMD")) == ["schedule"]
    health = next(args for word, args in steps if word == "HEALTHCHECK")
    assert '"status", "--check-heartbeat"' in health


def test_dockerfile_copies_only_what_exists_and_what_the_package_bundles():
    for word, args in instructions():
        if word == "COPY":
            *sources, _target = shlex.split(args)
            for source in sources:
                assert (ROOT / source).exists(), source
    copied = " ".join(args for word, args in instructions() if word == "COPY")
    for bundled in ("pipeline", "templates", "seeds", "config.yaml", "setup.py", "pyproject.toml"):
        assert bundled in copied


def test_compose_runs_the_scheduler_beside_postgresql():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    scheduler, db = compose["services"]["scheduler"], compose["services"]["db"]
    assert scheduler["build"] == "."
    assert "command" not in scheduler  # the image's default: rl-digest schedule
    assert db["image"].startswith("postgres:")
    assert scheduler["depends_on"]["db"]["condition"] == "service_healthy"
    assert "pg_isready" in db["healthcheck"]["test"]
    mounts = {volume.split(":")[1] for volume in scheduler["volumes"]}
    assert {"/data/state", "/data/out", "/data/config.yaml"} <= mounts
    assert set(compose["volumes"]) >= {"state", "out", "db"}
    # secrets come from the environment (.env), never from the compose file itself
    assert scheduler["env_file"] == ".env"
    assert db["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD")


def _docker(*args: str) -> subprocess.CompletedProcess | None:
    if shutil.which("docker") is None:
        return None
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return None


def test_compose_file_is_valid_for_docker_compose(tmp_path):
    probe = _docker("compose", "version")
    if probe is None or probe.returncode != 0:
        pytest.skip("docker compose is not available here")
    shutil.copy(ROOT / "compose.yaml", tmp_path / "compose.yaml")
    (tmp_path / ".env").write_text("POSTGRES_PASSWORD=only-for-this-check\n", encoding="utf-8")
    checked = _docker("compose", "--project-directory", str(tmp_path), "-f", str(tmp_path / "compose.yaml"),
                      "config", "--quiet")
    assert checked is not None and checked.returncode == 0, checked and checked.stderr


@pytest.mark.slow  # builds the package as the Dockerfile does
def test_what_the_dockerfile_copies_builds_a_package_with_its_templates(tmp_path):
    """The image's `pip install` step, without Docker: a wheel from the COPY'd files alone."""
    source = tmp_path / "src"
    source.mkdir()
    for word, args in instructions():
        if word == "COPY":
            for name in shlex.split(args)[:-1]:
                if (ROOT / name).is_dir():
                    shutil.copytree(ROOT / name, source / name,
                                    ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy(ROOT / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                            "-w", str(tmp_path / "wheel"), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheel").glob("rl_digest-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for bundled in ("templates/init/config.yaml", "templates/prompts/doctor.j2", "config.yaml",
                    "seeds/README.md"):
        assert f"pipeline/bundled/{bundled}" in names, bundled


def test_the_image_builds_and_runs_as_a_user():
    info = _docker("info")
    if info is None or info.returncode != 0:
        pytest.skip("no Docker daemon here (docker info failed); the image was not built")
    built = _docker("build", "-q", "-t", "rl-digest:test", str(ROOT))
    assert built is not None and built.returncode == 0, built and built.stderr
    version = _docker("run", "--rm", "rl-digest:test", "--version")
    assert version is not None and version.returncode == 0 and "rl-digest" in version.stdout
    whoami = _docker("run", "--rm", "--entrypoint", "id", "rl-digest:test", "-un")
    assert whoami is not None and whoami.stdout.strip() == "rl-digest"


def test_the_readmes_docker_steps_work_in_a_copy_of_the_repository(tmp_path):
    """The first shell block of README "Run with Docker", run in a copy of what it needs:
    it leaves the files compose mounts and reads."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Run with Docker", 1)[1]
    script = section.split("```sh\n", 1)[1].split("```", 1)[0]
    shutil.copytree(ROOT / "templates" / "init", tmp_path / "templates" / "init")
    shutil.copy(ROOT / "config.yaml", tmp_path / "config.yaml")
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, check=True, timeout=60)
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    mounted = [v.split(":")[0] for v in compose["services"]["scheduler"]["volumes"] if v.startswith("./")]
    assert mounted and all((tmp_path / path).is_file() for path in mounted), mounted
    env = (tmp_path / ".env").read_text(encoding="utf-8")
    assert "OPENAI_API_KEY" in env and "POSTGRES_PASSWORD=" in env
    assert (tmp_path / ".env").stat().st_mode & 0o077 == 0
    # the image is built from this config.yaml too, as its built-in default: it stays whole
    # (the starter copied over it left every command of the image at 'topic: Field required')
    config.Config.model_validate(config.parse_yaml((tmp_path / "config.yaml").read_text(encoding="utf-8")))


def test_the_readmes_docker_run_mounts_what_compose_mounts():
    """README's `docker run` without compose mounted config.yaml alone: the starter's
    readers.txt, which compose mounts, was not there, and a run with email on stopped
    with 'email.recipients_file: /data/readers.txt: No such file or directory'."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = " ".join(readme.split("docker run -d", 1)[1].split("`", 1)[0].split())
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    files = [v for v in compose["services"]["scheduler"]["volumes"] if v.startswith("./")]
    assert files and all(f'-v "$PWD/{v[2:]}"' in command for v in files), (files, command)
