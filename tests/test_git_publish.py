"""Publishing the reading list with git: a bare repo in tmp_path is the remote."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from pipeline.config_sections import GitOutput
from pipeline.deliver.git import _gist, publish, reachable, state_key
from pipeline.errors import DeliveryError
from pipeline.store import Store


def git(*args: str, cwd: Path | None = None) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return result.stdout.strip()


@pytest.fixture(autouse=True)
def fresh_server(tmp_path: Path, monkeypatch) -> None:
    """No global or system git config: no user.name/user.email, like a fresh server."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
                 "EMAIL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "remote.git"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(path))
    return path


@pytest.fixture
def checkout(tmp_path: Path, remote: Path) -> Path:
    path = tmp_path / "checkout"
    git("clone", "--quiet", str(remote), str(path))
    return path


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'state.sqlite3'}")


@pytest.fixture
def outputs(tmp_path: Path) -> dict[str, Path]:
    out = tmp_path / "out"
    (out / "digests").mkdir(parents=True)
    (out / "READING_LIST.md").write_text("# 强化学习阅读清单\n\n- GRPO\n", encoding="utf-8")
    (out / "digests" / "2025-01-06.md").write_text("# 周报 2025-01-06\n", encoding="utf-8")
    return {"READING_LIST.md": out / "READING_LIST.md",
            "digests/2025-01-06.md": out / "digests" / "2025-01-06.md"}


def config(checkout: Path, **over) -> GitOutput:
    values = {"repo": checkout, "branch": "main", "path": "rl", "message": "Update RL reading list"}
    return GitOutput(**{**values, **over})


def remote_log(remote: Path) -> list[str]:
    try:
        return git("--git-dir", str(remote), "log", "--format=%an <%ae>|%cn <%ce>|%s", "main").splitlines()
    except subprocess.CalledProcessError:
        return []  # no commits yet


def test_publish_commits_and_pushes(checkout: Path, remote: Path, outputs, store: Store) -> None:
    report = publish(config(checkout), outputs, store)
    assert report.ok, report.error
    assert report.commit and report.pushed
    assert sorted(report.changed) == ["rl/READING_LIST.md", "rl/digests/2025-01-06.md"]
    assert remote_log(remote) == [
        "rl-digest <rl-digest@localhost>|rl-digest <rl-digest@localhost>|Update RL reading list"]
    shown = git("--git-dir", str(remote), "show", "main:rl/READING_LIST.md")
    assert shown == outputs["READING_LIST.md"].read_text(encoding="utf-8").strip()
    assert git("rev-parse", "HEAD", cwd=checkout) == report.commit


def test_no_change_makes_no_commit(checkout: Path, remote: Path, outputs, store: Store) -> None:
    publish(config(checkout), outputs, store)
    again = publish(config(checkout), outputs, store)
    assert again.ok and again.commit is None and not again.pushed and again.changed == []
    assert len(remote_log(remote)) == 1

    outputs["READING_LIST.md"].write_text("# 强化学习阅读清单\n\n- GRPO\n- DAPO\n", encoding="utf-8")
    changed = publish(config(checkout), outputs, store)
    assert changed.ok and changed.commit and changed.pushed
    assert changed.changed == ["rl/READING_LIST.md"]
    assert len(remote_log(remote)) == 2


def test_other_changes_in_the_checkout_are_left_alone(checkout: Path, outputs, store: Store) -> None:
    (checkout / "notes.txt").write_text("someone's draft\n")
    report = publish(config(checkout), outputs, store)
    assert report.ok
    assert git("show", "--name-only", "--format=", "HEAD", cwd=checkout).splitlines() == [
        "rl/READING_LIST.md", "rl/digests/2025-01-06.md"]
    assert "?? notes.txt" in git("status", "--porcelain", cwd=checkout)


def test_configured_identity_is_used(checkout: Path, remote: Path, outputs, store: Store) -> None:
    git("config", "user.name", "Reading List Bot", cwd=checkout)
    git("config", "user.email", "bot@example.org", cwd=checkout)
    assert publish(config(checkout), outputs, store).ok
    assert remote_log(remote)[0].startswith("Reading List Bot <bot@example.org>|")


def test_rejected_push_is_remembered_and_retried(tmp_path: Path, checkout: Path, remote: Path,
                                                 outputs, store: Store) -> None:
    marker = tmp_path / "rejected-once"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f"""#!/bin/sh
if [ ! -e "{marker}" ]; then
    touch "{marker}"
    echo "push refused once for the test" >&2
    exit 1
fi
exit 0
""")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    failed = publish(config(checkout), outputs, store)
    assert not failed.ok and failed.commit and not failed.pushed
    assert str(checkout) in failed.error and "pre-receive hook declined" in failed.error
    assert "push refused once for the test" in failed.error
    assert "\n" not in failed.error
    assert store.get_state(state_key(checkout.resolve()))["error"] == failed.error
    assert remote_log(remote) == []
    with pytest.raises(Exception, match="pre-receive hook declined") as raised:
        failed.check()
    assert getattr(raised.value, "exit_code", None) == 1

    retried = publish(config(checkout), outputs, store)  # nothing new changed
    assert retried.ok, retried.error
    assert retried.commit is None and retried.pushed
    assert store.get_state(state_key(checkout.resolve())) is None
    assert len(remote_log(remote)) == 1
    assert git("--git-dir", str(remote), "rev-parse", "main") == failed.commit

    quiet = publish(config(checkout), outputs, store)
    assert quiet.ok and not quiet.pushed  # nothing left to push


def test_commits_made_without_push_are_pushed_later(checkout: Path, remote: Path, outputs,
                                                    store: Store) -> None:
    held = publish(config(checkout, push=False), outputs, store)
    assert held.ok and held.commit and not held.pushed
    assert remote_log(remote) == []
    later = publish(config(checkout), outputs, store)
    assert later.ok and later.pushed and later.commit is None
    assert len(remote_log(remote)) == 1


def test_not_a_checkout_is_one_line_naming_it(tmp_path: Path, outputs, store: Store) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    report = publish(config(folder), outputs, store)
    assert not report.ok and str(folder) in report.error and "not a git checkout" in report.error
    assert "\n" not in report.error
    missing = publish(config(tmp_path / "missing"), outputs, store)
    assert "no such folder" in missing.error


def test_no_git_on_path_names_the_path(checkout: Path, outputs, store: Store, monkeypatch) -> None:
    """cron's PATH (/usr/bin:/bin) lacks /usr/local/bin or /opt/homebrew/bin, where git may be:
    'the git command is not installed' sent the operator looking for an install they had."""
    monkeypatch.setenv("PATH", "/usr/local/nothing:/nowhere")
    report = publish(config(checkout), outputs, store)
    assert report.error == (f"git {checkout}: no git command on PATH (/usr/local/nothing:/nowhere); "
                            "install git, or add its folder to PATH (in a crontab, a PATH= line)")


def test_a_git_hooks_repository_is_not_the_one_published_to(tmp_path: Path, checkout: Path, remote: Path,
                                                            outputs, store: Store, monkeypatch) -> None:
    """Run from a git hook (a post-receive that republishes), GIT_DIR and GIT_INDEX_FILE name
    the hook's repository: the reading list was committed there, and the push failed."""
    other = tmp_path / "hooked"
    git("init", "--quiet", "--initial-branch=main", str(other))
    git("-c", "user.name=a", "-c", "user.email=a@example.org", "commit", "--quiet", "--allow-empty",
        "-m", "theirs", cwd=other)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    report = publish(config(checkout), outputs, store)
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_INDEX_FILE")
    assert report.ok and report.pushed, report.error
    assert git("log", "--format=%s", cwd=other) == "theirs"
    assert len(remote_log(remote)) == 1


def test_wrong_branch_is_refused(checkout: Path, outputs, store: Store) -> None:
    assert publish(config(checkout), outputs, store).ok
    git("checkout", "--quiet", "-b", "other", cwd=checkout)
    report = publish(config(checkout), outputs, store)
    assert not report.ok and "on branch other, not main" in report.error


def test_paths_cannot_leave_the_checkout(checkout: Path, outputs, store: Store) -> None:
    for name in ("../escape.md", "../../escape.md", "../.git/hooks/post-commit"):
        report = publish(config(checkout), {name: outputs["READING_LIST.md"]}, store)
        assert not report.ok and "leaves outputs.git.path 'rl'" in report.error
    root = publish(config(checkout, path=""), {".git/config": outputs["READING_LIST.md"]}, store)
    assert not root.ok
    assert not (checkout / "escape.md").exists() and not (checkout.parent / "escape.md").exists()


def test_fresh_server_really_has_no_identity(checkout: Path) -> None:
    """Guard for the fixture: without our identity env a plain commit would fail."""
    (checkout / "x").write_text("x")
    git("add", "x", cwd=checkout)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_AUTHOR")}
    result = subprocess.run(["git", "-c", "user.useConfigOnly=true", "commit", "-m", "x"],
                            check=False, cwd=checkout, capture_output=True, text=True, env=env)
    assert result.returncode != 0


def test_files_an_older_layout_had_are_removed_from_the_folders_pruned(checkout: Path, remote: Path,
                                                                      outputs, store: Store) -> None:
    """A file someone put there and never committed is no file of ours: it was deleted, for
    good, and the run failed on it ('add failed: fatal: pathspec ... did not match')."""
    out = outputs["READING_LIST.md"].parent
    for name in ("agentic.md", "agentic-2025.md", "agentic-2026.md"):
        (out / "reading-list").mkdir(exist_ok=True)
        (out / "reading-list" / name).write_text(f"# {name}\n", encoding="utf-8")
    whole = {**outputs, "reading-list/agentic.md": out / "reading-list" / "agentic.md"}
    publish(config(checkout), whole, store, prune=("reading-list",))
    (checkout / "rl" / "reading-list" / "notes.md").write_text("my notes\n", encoding="utf-8")
    split = {**outputs, **{f"reading-list/agentic-{y}.md": out / "reading-list" / f"agentic-{y}.md"
                           for y in (2025, 2026)}}
    report = publish(config(checkout), split, store, prune=("reading-list",))
    assert report.ok and report.commit
    assert sorted(report.changed) == ["rl/reading-list/agentic-2025.md", "rl/reading-list/agentic-2026.md",
                                      "rl/reading-list/agentic.md"]
    tree = git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main").splitlines()
    assert sorted(t for t in tree if "reading-list" in t) == [
        "rl/reading-list/agentic-2025.md", "rl/reading-list/agentic-2026.md"]
    assert (checkout / "rl" / "reading-list" / "notes.md").read_text(encoding="utf-8") == "my notes\n"


def test_a_file_of_an_older_layout_that_cannot_be_removed_is_one_line_naming_it(
        checkout: Path, remote: Path, outputs, store: Store, monkeypatch) -> None:
    """A read-only checkout where only a prune was due ended the run with 'unexpected
    error: PermissionError'. (The failure is the operating system's: as root no mode bit
    stops an unlink, so it is made here.)"""
    out = outputs["READING_LIST.md"].parent
    (out / "reading-list").mkdir()
    (out / "reading-list" / "agentic.md").write_text("# agentic\n", encoding="utf-8")
    assert publish(config(checkout), {**outputs, "reading-list/agentic.md": out / "reading-list" / "agentic.md"},
                   store, prune=("reading-list",)).ok
    unlink = Path.unlink

    def refused(path: Path, missing_ok: bool = False) -> None:
        if path.name == "agentic.md":
            raise PermissionError(13, "Permission denied")
        unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refused)
    report = publish(config(checkout), outputs, store, prune=("reading-list",))
    target = checkout.resolve() / "rl" / "reading-list" / "agentic.md"
    assert not report.ok and report.error == f"git {checkout}: cannot remove {target}: Permission denied"


def test_a_copy_a_killed_run_left_half_written_in_the_checkout_is_cleared_not_staged(
        checkout: Path, remote: Path, outputs, store: Store) -> None:
    """A run killed (kill -9, a second SIGTERM) while it copied the reading list into the
    checkout left '.agentic.md.PID.XXXX.tmp' there: the next publish took it for a file of
    an older layout, removed it and asked git to stage it, and failed ('pathspec ... did
    not match any files', exit 1)."""
    out = outputs["READING_LIST.md"].parent
    (out / "reading-list").mkdir()
    (out / "reading-list" / "agentic.md").write_text("# agentic\n", encoding="utf-8")
    files = {**outputs, "reading-list/agentic.md": out / "reading-list" / "agentic.md"}
    assert publish(config(checkout), files, store, prune=("reading-list",)).ok
    dead = int(subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True).stdout)
    drafts = [checkout / "rl" / "reading-list" / f".agentic.md.{dead}.k1ll3d.tmp",
              checkout / "rl" / "digests" / f".2025-01-06.md.{dead}.k1ll3d.tmp"]
    for draft in drafts:
        draft.write_text("# agen", encoding="utf-8")
    (out / "digests" / "2025-01-06.md").write_text("# 周报 2025-01-06\n\n- GRPO\n", encoding="utf-8")
    report = publish(config(checkout), files, store, prune=("reading-list",))
    assert report.ok, report.error
    assert report.changed == ["rl/digests/2025-01-06.md"] and report.pushed
    assert not any(draft.exists() for draft in drafts)
    assert git("status", "--porcelain", "--untracked-files=all", cwd=checkout) == ""
    assert ".tmp" not in git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main")


def colleague_commits(tmp_path: Path, remote: Path, name: str, text: str) -> None:
    """Someone else pushes to the remote (a README edited on the web, say)."""
    other = tmp_path / f"colleague-{name.replace('/', '-')}"
    if not other.exists():
        git("clone", "--quiet", str(remote), str(other))
    git("pull", "--quiet", cwd=other)
    (other / name).parent.mkdir(parents=True, exist_ok=True)
    (other / name).write_text(text, encoding="utf-8")
    git("add", name, cwd=other)
    git("-c", "user.name=Col", "-c", "user.email=col@example.org", "commit", "--quiet", "-m", f"edit {name}",
        cwd=other)
    git("push", "--quiet", cwd=other)


def test_a_remote_that_moved_on_gets_our_commit_on_top_and_a_conflict_is_named(
        tmp_path: Path, checkout: Path, remote: Path, outputs, store: Store) -> None:
    """A push refused because someone else pushed first used to fail every later week
    until a person pulled by hand. A folder named in Chinese came back from git quoted in
    octal, so its conflict was no published file's: 'could not apply 1a2b3c4...'."""
    path = "阅读清单"
    assert publish(config(checkout, path=path), outputs, store).ok
    colleague_commits(tmp_path, remote, "README.md", "Our reading group\n")
    outputs["READING_LIST.md"].write_text("# 强化学习阅读清单\n\n- GRPO\n- DAPO\n", encoding="utf-8")
    week = publish(config(checkout, path=path), outputs, store)
    assert week.ok and week.pushed, week.error
    assert week.commit == git("--git-dir", str(remote), "rev-parse", "main")  # the commit pushed, rebased
    assert [line.split("|")[2] for line in remote_log(remote)] == [
        "Update RL reading list", "edit README.md", "Update RL reading list"]
    assert git("--git-dir", str(remote), "show", f"main:{path}/READING_LIST.md").endswith("- DAPO")

    colleague_commits(tmp_path, remote, f"{path}/READING_LIST.md", "edited on the web\n")
    outputs["READING_LIST.md"].write_text("# 强化学习阅读清单\n\n- GRPO\n- DAPO\n- GSPO\n", encoding="utf-8")
    clash = publish(config(checkout, path=path), outputs, store)
    assert not clash.ok and ("the remote has commits that change the published files too "
                             f"({path}/READING_LIST.md)") in clash.error
    assert "git pull --rebase" in clash.error
    assert git("status", "--porcelain", cwd=checkout) == ""  # the rebase was taken back: nothing half-done
    assert (checkout / path / "READING_LIST.md").read_text(encoding="utf-8").endswith("- GSPO\n")
    assert store.get_state(state_key(checkout))["error"] == clash.error  # waits, remembered


def test_a_remote_that_moved_on_is_not_rebased_over_someones_uncommitted_work(
        tmp_path: Path, checkout: Path, remote: Path, outputs, store: Store) -> None:
    """A rebase with a stash of someone's edit could leave conflict markers in it."""
    assert publish(config(checkout), outputs, store).ok
    colleague_commits(tmp_path, remote, "README.md", "Edited on the web\n")
    (checkout / "README.md").write_text("My local draft\n", encoding="utf-8")
    git("add", "README.md", cwd=checkout)  # staged, not committed: someone's work in progress
    outputs["READING_LIST.md"].write_text("# 强化学习阅读清单\n\n- GRPO\n- DAPO\n", encoding="utf-8")
    week = publish(config(checkout), outputs, store)
    assert not week.ok and "has changes of someone's not committed" in week.error
    assert (checkout / "README.md").read_text(encoding="utf-8") == "My local draft\n"
    assert git("status", "--porcelain", cwd=checkout) == "A  README.md"  # as they left it
    assert git("stash", "list", cwd=checkout) == ""
    assert store.get_state(state_key(checkout))["error"] == week.error  # the push waits


def test_a_rebase_failing_for_another_reason_is_told_in_gits_words_with_the_file(
        tmp_path: Path, checkout: Path, remote: Path, outputs, store: Store) -> None:
    """Not every failed rebase is a clash over the published files: here someone's untracked
    draft is in the way of a file the remote added."""
    assert publish(config(checkout), outputs, store).ok
    colleague_commits(tmp_path, remote, "notes.txt", "their notes\n")
    (checkout / "notes.txt").write_text("my draft\n", encoding="utf-8")
    outputs["READING_LIST.md"].write_text("# 强化学习阅读清单\n\n- GRPO\n- DAPO\n", encoding="utf-8")
    week = publish(config(checkout), outputs, store)
    assert not week.ok and "published files" not in week.error
    assert week.error.startswith(f"git {checkout}: rebase onto origin/main failed: error: ")
    assert "untracked working tree files would be overwritten" in week.error and "notes.txt" in week.error
    assert (checkout / "notes.txt").read_text(encoding="utf-8") == "my draft\n"


def test_a_fatal_message_over_several_lines_is_kept_whole_on_one() -> None:
    said = ("fatal: It seems that there is already a rebase-merge directory, and\n"
            "I wonder if you are in the middle of another rebase.  If that is the\n"
            "case, please try\n\tgit rebase (--continue | --abort | --skip)\n"
            "hint: an unrelated line\n")
    assert _gist(said) == ("fatal: It seems that there is already a rebase-merge directory, and "
                           "I wonder if you are in the middle of another rebase.  If that is the "
                           "case, please try git rebase (--continue | --abort | --skip)")


def test_every_url_a_push_uses_is_checked_whole(tmp_path: Path, outputs, store: Store) -> None:
    """A remote in a folder whose name has a space: doctor asked '/srv/my' and 'remote.git',
    failing a remote every push reached. A second push URL (a mirror) holding a token was
    not looked at: pushed to, and never refused."""
    remote = tmp_path / "my remote.git"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(remote))
    checkout = tmp_path / "spaced"
    git("clone", "--quiet", str(remote), str(checkout))
    assert reachable(config(checkout)) == f"{checkout} pushes to origin, which answers"
    assert publish(config(checkout), outputs, store).pushed
    git("remote", "set-url", "--add", "--push", "origin", str(remote), cwd=checkout)
    git("remote", "set-url", "--add", "--push", "origin", "http://x:ghp_TOKEN@127.0.0.1:9/r.git", cwd=checkout)
    refused = (f"git {checkout}: the push URL of remote origin (http://***@127.0.0.1:9/r.git) holds a "
               "password; take it out (git remote set-url --push origin URL OLD-URL) and use git's credential "
               "helper")
    with pytest.raises(DeliveryError) as doctor:
        reachable(config(checkout))
    assert doctor.value.message == refused
    outputs["READING_LIST.md"].write_text("# 强化学习阅读清单\n\n- GRPO\n- DAPO\n", encoding="utf-8")
    assert publish(config(checkout), outputs, store).error == refused


def test_credentials_in_a_url_git_prints_are_masked() -> None:
    said = "fatal: unable to access 'http://x:ghp_TOKEN@127.0.0.1:9/r.git/': Failed to connect\n"
    assert _gist(said) == "fatal: unable to access 'http://***@127.0.0.1:9/r.git/': Failed to connect"
    # a password with a raw @ (git takes the last one as the host's): none of it is shown
    said = "fatal: unable to access 'https://ann:p@ss@w0rd@git.example.org/r.git/': Failed\n"
    assert _gist(said) == "fatal: unable to access 'https://***@git.example.org/r.git/': Failed"
    # a token in the path (one a git host issues, a UUID, a long run of letters and digits)
    # or in the query: git prints those too; a repository's own name stays
    for url, shown in [
        ("https://host/api/glpat-x1Y2z3/r.git?access_token=SECRET", "https://host/api/***/r.git?access_token=***"),
        ("https://host/0f8fad5b-d9cb-469f-a165-70867728950e/r.git", "https://host/***/r.git"),
        ("https://host/u/8f14e45fceea167a5a36dedd4bea2543/r.git", "https://host/u/***/r.git"),
        ("https://oauth2:TOK@host/lab/rl-digest-reading-list.git", "https://***@host/lab/rl-digest-reading-list.git"),
    ]:
        assert _gist(f"fatal: unable to access '{url}': Failed\n") == f"fatal: unable to access '{shown}': Failed"
