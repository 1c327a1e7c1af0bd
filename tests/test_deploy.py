"""The deploy recipes in deploy/: systemd units as an operator needs them, and the GitHub
Actions workflow's git steps run for real against a local remote."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml

from tests.helpers import ROOT, run_cli, write_config

DEPLOY = ROOT / "deploy"


def unit(name: str) -> dict[str, list[str]]:
    """key -> values of a systemd unit file (keys may repeat)."""
    found: dict[str, list[str]] = {}
    for line in (DEPLOY / "systemd" / name).read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def test_systemd_units_run_as_their_own_user_with_state_in_var_lib():
    for name in ("rl-digest.service", "rl-digest-scheduler.service", "rl-digest-send.service"):
        found = unit(name)
        assert found["User"] == ["rl-digest"], name
        assert found["StateDirectory"] == ["rl-digest"], name
        assert "--config /etc/rl-digest/config.yaml" in found["ExecStart"][0]
    assert unit("rl-digest-scheduler.service")["RestartPreventExitStatus"] == ["2"]
    assert unit("rl-digest.service")["SuccessExitStatus"] == ["75 143"]  # locked; stopped between steps
    assert unit("rl-digest.service")["TimeoutStopSec"] == ["5min"]
    assert unit("rl-digest.timer")["Persistent"] == ["true"]
    send = unit("rl-digest-send.service")  # the outbox every hour, silent when nothing waits
    assert send["ExecStart"][0].endswith(" -q send") and send["SuccessExitStatus"] == ["75 143"]
    assert send["TimeoutStopSec"] == ["5min"]  # a hand-over under way is let finish, not killed
    assert unit("rl-digest-send.timer")["OnCalendar"] == ["*-*-* *:20:00"]


def test_the_units_read_the_secrets_file_rl_digest_init_tells_you_to_make(tmp_path):
    made = run_cli("init", str(tmp_path / "etc"))
    assert f"cp {tmp_path / 'etc'}/.env.example {tmp_path / 'etc'}/.env" in made.stdout
    for name in ("rl-digest.service", "rl-digest-scheduler.service", "rl-digest-send.service"):
        assert unit(name)["EnvironmentFile"] == ["/etc/rl-digest/.env"], name


def steps() -> dict[str, str]:
    workflow = yaml.safe_load((DEPLOY / "github" / "digest.yml").read_text(encoding="utf-8"))
    return {step.get("name", ""): step.get("run", "") for step in workflow["jobs"]["digest"]["steps"]}


def test_the_workflow_never_commits_the_database_to_main_and_publishes_the_feed():
    scripts = steps()
    publish = scripts["Commit the digests, the reading list, feed.xml and the web edition"]
    assert "out/feed.xml" in publish and "out/site" in publish
    assert "state" not in publish and "sqlite" not in publish


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _repository(tmp_path: Path) -> tuple[Path, Path]:
    """A bare remote with one commit on main, and a clone of it: what Actions checks out."""
    remote, work = tmp_path / "remote.git", tmp_path / "work"
    _git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(remote))
    _git(tmp_path, "clone", "--quiet", str(remote), str(work))
    _git(work, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "--quiet",
         "--allow-empty", "-m", "start")
    _git(work, "push", "--quiet", "origin", "HEAD:main")
    return remote, work


def _step(script: str, cwd: Path, tmp_path: Path) -> None:
    env = {**os.environ, "RUNNER_TEMP": str(tmp_path), "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, check=True,
                   capture_output=True, text=True)


def test_the_database_round_trips_through_one_replaced_commit_on_its_branch(tmp_path):
    remote, work = _repository(tmp_path)
    scripts = steps()
    restore = scripts["Restore the database from the rl-digest-state branch"]
    save = scripts["Save the database as the one commit of rl-digest-state"]
    _step(restore, work, tmp_path)  # no branch yet: a fresh start, not a failure
    for week in (b"week one", b"week two"):
        (work / "state").mkdir(exist_ok=True)
        (work / "state" / "digest.sqlite3").write_bytes(week)
        _step(save, work, tmp_path)
    assert _git(remote, "rev-list", "--count", "rl-digest-state").strip() == "1"
    assert _git(remote, "rev-list", "--count", "main").strip() == "1"  # main untouched
    assert _git(work, "status", "--porcelain").strip() == "?? state/"  # the index untouched
    (work / "state" / "digest.sqlite3").unlink()
    _step(restore, work, tmp_path)
    assert (work / "state" / "digest.sqlite3").read_bytes() == b"week two"


def test_what_the_workflow_commits_holds_every_file_the_reading_list_links(tmp_path):
    """GitHub shows READING_LIST.md from main: its links to the topic and month files must
    land there too."""
    remote, work = _repository(tmp_path)
    run_cli("--config", str(write_config(work)), "run", "--offline", "--as-of", "2026-11-02")
    _step(steps()["Commit the digests, the reading list, feed.xml and the web edition"], work, tmp_path)
    seen = tmp_path / "seen"
    _git(tmp_path, "clone", "--quiet", str(remote), str(seen))
    index = (seen / "out" / "READING_LIST.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((?!https?:)([^)#]+)", index)
    assert any(link.startswith("reading-list/") for link in links)
    assert [link for link in links if not (seen / "out" / link).is_file()] == []
