"""`rl-digest init` writes a starter that `config check` accepts; `config check` finds the
settings that validate but would fail a run."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import yaml

from pipeline import starter
from pipeline.config_email import read_recipients
from tests.helpers import ROOT, cli_command, write_config


def env_file(path) -> dict:
    """NAME=value lines, as systemd's EnvironmentFile= and Compose's env_file read them."""
    pairs = [line.split("=", 1) for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    return {name.strip(): value.strip() for name, value in pairs}


def test_init_then_config_check_passes(tmp_path, cli):
    folder = tmp_path / "digest"
    made = cli("init", str(folder))
    assert sorted(p.name for p in folder.iterdir()) == [".env.example", "config.yaml", "readers.txt", "seeds"]
    assert "config check" in made.stdout and "doctor" in made.stdout
    # they stopped at run --dry-run: nothing said how to publish, or where running it weekly is told
    assert f"  7. rl-digest --config {folder}/config.yaml run " in made.stdout
    assert made.stdout.rstrip().endswith(
        "Then run it every week: see README's Deploying (cron, systemd, the scheduler, GitHub Actions)")
    secrets = env_file(folder / ".env.example")
    assert set(secrets) == {"OPENAI_API_KEY", "SMTP_USERNAME", "SMTP_PASSWORD", "RL_DIGEST_SECRET"}
    assert f"set -a; . {folder}/.env; set +a" in made.stdout  # the tool reads no .env itself
    checked = cli("--config", str(folder / "config.yaml"), "config", "check", env=secrets)
    assert checked.stdout.strip() == f"{folder / 'config.yaml'}: ok (1 warning above)"
    assert "sources.arxiv.contact is still an example address (you@example.org)" in checked.stderr
    filled_in(folder)
    checked = cli("--config", str(folder / "config.yaml"), "config", "check", env=secrets)
    assert checked.stdout.strip() == f"{folder / 'config.yaml'}: ok"
    listed = cli("--config", str(folder / "config.yaml"), "seeds", env=secrets)
    assert "no such file" not in listed.stdout + listed.stderr  # seeds.paths' folder is there
    assert "000_" in listed.stdout  # the shipped pages are read
    text = (folder / "config.yaml").read_text(encoding="utf-8")
    assert text.count("#") > 20 and len(text.splitlines()) < 60  # commented, and short
    # .env.example said only `rl-digest serve` needs RL_DIGEST_SECRET: with serve.base_url every run does
    assert "once serve.base_url is set, every run needs it" in (folder / ".env.example").read_text(encoding="utf-8")
    (folder / "config.yaml").write_text(f"{text}serve: {{base_url: https://digest.example.org/}}\n",
                                        encoding="utf-8")
    refused = cli("--config", str(folder / "config.yaml"), "config", "check", env=secrets, check=2)
    assert "serve.secret_env: RL_DIGEST_SECRET is not set (the secret that signs the reader links; " \
        "every run would stop" in refused.stderr


def test_the_starter_shows_the_built_in_defaults_but_the_addresses_to_edit(tmp_path, cli):
    """Its header says every other key keeps its default, and a reader takes the values shown
    for the defaults too: it gave digest.max_papers 40 where the default (README, CONTRACT) is 30."""
    cli("init", str(tmp_path))
    starter = yaml.safe_load((tmp_path / "config.yaml").read_text(encoding="utf-8"))
    default = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))

    def differ(mine: dict, theirs: dict, where: str = "") -> list[str]:
        return [name for key, value in mine.items() for name in (
            differ(value, theirs[key], f"{where}{key}.") if isinstance(value, dict)
            else [f"{where}{key}"] if value != theirs[key] else [])]

    assert differ(starter, default) == ["sources.arxiv.contact", "email.smtp_host"]  # yours to fill in


def filled_in(folder):
    """Step 3 of the next steps, as far as config check asks: the contact address."""
    path = folder / "config.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("you@example.org", "ada@lab.test"),
                    encoding="utf-8")


def test_the_filled_in_env_file_loaded_as_the_next_steps_say_is_enough(tmp_path, cli):
    cli("init", str(tmp_path))
    filled_in(tmp_path)
    filled = (tmp_path / ".env.example").read_text(encoding="utf-8")
    filled = filled.replace("OPENAI_API_KEY=\n", "OPENAI_API_KEY=sk-local\n")
    (tmp_path / ".env").write_text(filled.replace("RL_DIGEST_SECRET=\n", "RL_DIGEST_SECRET=s3cret\n"))
    command = " ".join(shlex.quote(part) for part in cli_command())
    config = shlex.quote(str(tmp_path / "config.yaml"))
    shell = subprocess.run(["bash", "-c", f"set -a; . {shlex.quote(str(tmp_path / '.env'))}; set +a; "
                            f"{command} --config {config} config check"], cwd="/",
                           env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=120)
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.strip() == f"{tmp_path / 'config.yaml'}: ok"


def test_a_value_with_a_space_quoted_as_the_env_file_says_is_loaded_whole(tmp_path, cli):
    """An app password 'abcd efgh ijkl mnop' written bare: `. .env` set SMTP_PASSWORD to
    nothing and ran 'efgh' as a command, and the cron line went on without the password."""
    cli("init", str(tmp_path))
    example = (tmp_path / ".env.example").read_text(encoding="utf-8")
    quoted = re.search(r"^#\s+(SMTP_PASSWORD='[^']* [^']*')$", example, re.M).group(1)
    (tmp_path / ".env").write_text(example.replace("SMTP_PASSWORD=\n", quoted + "\n"), encoding="utf-8")
    shell = subprocess.run(["sh", "-c", f"set -a; . {shlex.quote(str(tmp_path / '.env'))}; set +a; "
                            "printf %s \"$SMTP_PASSWORD\""], env={}, capture_output=True, text=True, timeout=10)
    assert (shell.stdout, shell.stderr) == (quoted.split("=", 1)[1].strip("'"), "")
    assert env_file(tmp_path / ".env")["SMTP_PASSWORD"].strip("'") == shell.stdout  # systemd, Compose


def test_the_starter_readers_show_a_name_and_languages_and_read_as_shown(tmp_path, cli):
    """It said 'one address a line' and showed two bare addresses: nothing told the reader of
    it that a name and lang=en are taken, as README's Readers shows."""
    cli("init", str(tmp_path))
    path = tmp_path / "readers.txt"
    path.write_text(re.sub(r"^# (\S+@|\w+ \w+ <)", r"\1", path.read_text(encoding="utf-8"), flags=re.M),
                    encoding="utf-8")
    readers = read_recipients(path)
    assert readers[1] == [] and len(readers[0]) == 2
    assert [(r.address, r.name, r.languages) for r in readers[0]] == [
        ("ada@example.org", None, None), ("alan@example.org", "Alan Turing", ["en"])]


def test_the_next_steps_name_rl_digest_by_its_path_when_path_does_not_find_it(tmp_path, monkeypatch):
    """README's Deploying runs /opt/rl-digest/.venv/bin/rl-digest init /etc/rl-digest (the venv's
    bin/ not on PATH); the steps it printed said `rl-digest --config ...`: command not found."""
    venv, other = tmp_path / "opt venv" / "bin", tmp_path / "usr" / "bin"
    for folder in (venv, other):
        folder.mkdir(parents=True)
        (folder / "rl-digest").write_text("#!/bin/sh\n", encoding="utf-8")
        (folder / "rl-digest").chmod(0o755)
    script = str(venv / "rl-digest")
    monkeypatch.setenv("PATH", str(other))  # another rl-digest, or none, is found first
    monkeypatch.setattr(sys, "argv", [script, "init", str(tmp_path / "etc")])
    steps = starter.write(tmp_path / "etc")[1]
    assert f"  4. {shlex.quote(script)} --config {tmp_path / 'etc' / 'config.yaml'} config check" in steps
    monkeypatch.setenv("PATH", f"{other.parent / 'none'}:{venv}")  # PATH finds this one
    assert starter.shell_command(script) == "rl-digest"
    assert starter.shell_command("rl-digest") == "rl-digest"  # started through PATH
    monkeypatch.chdir(venv)
    monkeypatch.setenv("PATH", str(other))
    assert starter.shell_command("./rl-digest") == shlex.quote(script)  # ./rl-digest init: not PATH's
    monkeypatch.setenv("PATH", f"{other.parent / 'none'}:{venv}")
    monkeypatch.setattr(sys, "executable", str(venv / "python"))  # python -m pipeline: its venv's
    assert starter.shell_command("/x/pipeline/__main__.py") == "rl-digest"  # script, found by PATH
    monkeypatch.setenv("PATH", str(other))
    assert starter.shell_command("/x/pipeline/__main__.py") == shlex.quote(script)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))  # no script beside it
    assert starter.shell_command("/x/pipeline/__main__.py") == f"{tmp_path / 'python3'} -m pipeline"


def test_the_next_steps_paste_into_a_shell_for_a_folder_with_a_space(tmp_path, cli):
    """They printed `cp /srv/周报 digest/.env.example /srv/周报 digest/.env`: pasted, cp read
    four paths and failed, and `--config /srv/周报 digest/config.yaml` named a folder."""
    folder = tmp_path / "周报 digest"
    steps = cli("init", str(folder)).stdout
    filled_in(folder)
    copy = re.search(r"1\. (cp .*?) and fill in", steps).group(1)
    load = re.search(r"(set -a; .*; set \+a)", steps).group(1)
    check = re.search(r"4\. rl-digest (--config .*)", steps).group(1)
    command = " ".join(shlex.quote(part) for part in cli_command())
    shell = subprocess.run(["bash", "-c", f"{copy} && {load} && {command} {check}"], cwd="/",
                           env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=120)
    assert shell.returncode == 0, shell.stderr
    assert (folder / ".env").is_file()
    assert shell.stdout.strip() == f"{folder / 'config.yaml'}: ok"


def test_the_starter_without_its_key_names_the_variable(tmp_path, cli):
    """A warning, not an error: a run without the key still goes out, its summaries fall back."""
    cli("init", str(tmp_path))
    result = cli("--config", str(tmp_path / "config.yaml"), "config", "check")
    assert result.stderr.startswith("warning: ")
    assert "enrich.api_key_env: the environment variable OPENAI_API_KEY is not set" in result.stderr
    assert result.stdout.strip().endswith(": ok (2 warnings above)")  # and the example contact


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path, cli):
    (tmp_path / "readers.txt").write_text("mine@example.org\n", encoding="utf-8")
    result = cli("init", str(tmp_path), check=2)
    assert f"{tmp_path / 'readers.txt'}: already exists" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["readers.txt"]
    assert (tmp_path / "readers.txt").read_text(encoding="utf-8") == "mine@example.org\n"


def test_init_that_cannot_write_a_file_takes_back_the_others(tmp_path, cli):
    """A full or read-only disk: init wrote config.yaml and readers.txt, stopped at the
    next file, and every `init` after refused the config.yaml it had written itself; a
    folder it could not make was 'unexpected error: OSError'. A file where seeds/ goes fails
    as they do, anywhere."""
    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "seeds").write_text("", encoding="utf-8")
    failed = cli("init", str(folder), check=1)
    assert failed.stderr == f"rl-digest: {folder / 'seeds'}: cannot create the folder: File exists\n"
    assert [p.name for p in folder.iterdir()] == ["seeds"]
    (folder / "seeds").unlink()
    cli("init", str(folder))  # not refused: nothing of the first one's is left


def test_init_from_root_into_the_current_folder(tmp_path, cli):
    cli("init", cwd=tmp_path)
    assert (tmp_path / "config.yaml").exists()


def test_config_check_warns_of_a_seed_path_templates_or_git_folder_that_is_not_there(tmp_path, cli):
    """A git checkout that is not there said nothing in config check: every run made its
    digest, then failed to publish it, exit 1, until someone ran doctor. One beside the config
    folder, as the starter's comment has it (../reading-list), was named '…/etc/../reading-list'."""
    config = write_config(tmp_path, {"seeds": {"paths": ["nosuchdir"]}, "templates": {"dir": "notpl"},
                                     "outputs": {"git": {"repo": "../nosuchrepo"}}}, seeds=False)
    result = cli("--config", str(config), "config", "check")
    assert result.stderr.splitlines() == [
        f"warning: {config}: seeds.paths: {tmp_path / 'nosuchdir'}: no such file or folder (its seeds are not read)",
        f"warning: {config}: templates.dir: {tmp_path / 'notpl'}: no such folder (the built-in templates are used)",
        f"warning: {config}: outputs.git.repo: {tmp_path.parent / 'nosuchrepo'}: no such folder (each run would make "
        "its digest, then fail to publish it and exit 1: clone the repository there first)"]


def test_config_check_flags_email_without_readers_or_base_url(tmp_path, cli):
    config = write_config(tmp_path, {"email": {"enabled": True, "to": []}}, seeds=False)
    result = cli("--config", str(config), "config", "check")  # a run goes on: warnings
    lines = result.stderr.splitlines()
    assert len(lines) == 3 and all(line.startswith("warning: ") for line in lines)
    assert any("email.to: email is enabled but has no recipients" in line for line in lines)
    assert any("outputs.base_url: not set, nor outputs.site_url, so the email links no reading list"
               in line for line in lines)
    assert any("email.from is still an example address (RL Digest <digest@example.org>)" in line
               for line in lines)  # the built-in and the starter's sender, as doctor says too
    mine = {"enabled": True, "to": ["ada@example.org"], "from": "RL Digest <digest@ada-lab.org>"}
    fixed = write_config(tmp_path, {"email": mine,
                                    "outputs": {"base_url": "https://digest.example.org/"}}, seeds=False)
    assert cli("--config", str(fixed), "config", "check").stdout.strip().endswith(": ok")
    on_the_web = write_config(tmp_path, {"email": mine,
                                         "outputs": {"site_url": "https://digest.example.org/site/"}},
                              seeds=False)
    assert cli("--config", str(on_the_web), "config", "check").stdout.strip().endswith(": ok")


def test_config_check_flags_a_missing_database_driver(tmp_path, cli):
    config = write_config(tmp_path, {"storage": {"url": "postgresql+pg8000://rl@db.example.org/x"}},
                          seeds=False)
    result = cli("--config", str(config), "config", "check", check=2)
    assert "storage.url: postgresql+pg8000:// needs a driver that is not installed" in result.stderr
    assert "pip install 'rl-digest[postgres]'" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_every_yaml_example_of_the_readme_passes_config_check(tmp_path, cli):
    """Users paste README's examples as they are: each one, a config of its own, passes
    `config check` with the variables it names set and the files it names there (warnings
    are fine); the plug-in examples name a package of the reader's, and fail on that alone."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    examples = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    assert len(examples) >= 9
    names = {name: "0123456789abcdef0123456789abcdef"
             for name in re.findall(r"_env: ([A-Z][A-Z0-9_]*)", readme)}
    for n, example in enumerate(examples):
        folder = tmp_path / f"example{n}"
        (folder / "var").mkdir(parents=True)
        (folder / "readers.txt").write_text("Ada <ada@example.org>\n", encoding="utf-8")
        (folder / "config.yaml").write_text(example.replace("/var/lib/rl-digest", str(folder / "var")),
                                            encoding="utf-8")
        result = cli("--config", str(folder / "config.yaml"), "config", "check", env=names, check=None)
        if "my_package" in example:
            assert result.returncode == 2 and "No module named 'my_package'" in result.stderr, example
        else:
            assert result.returncode == 0, (example, result.stderr)
            assert result.stdout.strip().startswith(f"{folder / 'config.yaml'}: ok"), example
