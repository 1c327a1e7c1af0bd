"""Publish the reading list (and digests) to a git checkout with the `git` command line.

`publish` copies the files into the checkout at `outputs.git.repo` under
`outputs.git.path`, commits them with `outputs.git.message` when something
changed (nothing to commit is not an error) and pushes `outputs.git.branch`
when `push` is true. Only the published paths are staged and committed; other
changes in the checkout are left alone.

A push refused because the remote moved on is retried once on top of the remote's
commits (fetch, rebase). Any failure (a wrong branch, a push refused) is remembered in the
state table and tried again by the next `publish` (and `rl-digest send`), even if nothing
new changed; the branch being ahead of its remote-tracking ref (say, after a crash between
commit and push) also triggers a push. Failures come back in `GitReport.error`, one line
naming the repo and git's own words (a token in a URL masked); `GitReport.check()`
raises `DeliveryError` (exit 1) for them.

Commits carry the checkout's configured identity, or `rl-digest
<rl-digest@localhost>` when none is configured, so a fresh server works.
Git never prompts (GIT_TERMINAL_PROMPT=0, stdin closed) and every command has a
timeout, so an unattended run cannot hang on credentials.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from pipeline.config import url_credentials
from pipeline.config_sections import GitOutput
from pipeline.deliver.files import clear_killed_writes, write_atomic
from pipeline.errors import DeliveryError, DigestError
from pipeline.logs import masked_urls
from pipeline.models import State

IDENTITY = ("rl-digest", "rl-digest@localhost")
# File names as they are ("阅读清单/READING_LIST.md"), not quoted in octal: in the conflicts
# matched against outputs.git.path and in git's words a failure shows
GIT = ("git", "-c", "core.quotePath=false")
# What names a repository other than outputs.git.repo (`git rev-parse --local-env-vars`, less
# the config ones): a git hook that runs rl-digest sets GIT_DIR and GIT_INDEX_FILE to its own
ELSEWHERE = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
             "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
             "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX",
             "GIT_SHALLOW_FILE")
TIMEOUT_SECONDS = 120


@dataclass
class GitReport:
    repo: Path
    changed: list[str] = field(default_factory=list)  # published paths whose content changed
    commit: str | None = None  # the commit made by this call, if any
    pushed: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def check(self) -> None:
        if self.error:
            raise DeliveryError(self.error)


class _GitError(Exception):
    pass


def state_key(repo: Path) -> str:
    return f"git.push_pending:{repo.resolve()}"


def waiting(cfg: GitOutput, store: State) -> dict[str, Any] | None:
    """What still waits ({"error", "since"}: a failed publish, or a commit not pushed yet),
    for `status` and `send`; None when nothing does."""
    return store.get_state(state_key(Path(cfg.repo)))


def publish(cfg: GitOutput, files: dict[str, Path], store: State, prune: tuple[str, ...] = ()) -> GitReport:
    """Copy `files` ({name under cfg.path: source file}) in, commit if changed, push. Files
    under the `prune` folders that `files` no longer names (an older layout) are removed."""
    repo = Path(cfg.repo)
    report = GitReport(repo)
    key = state_key(repo)
    try:
        _usable(repo, cfg.branch)
        paths = _copy_in(repo, cfg.path, files, report) + _prune(repo, cfg.path, files, prune, report)
        if paths:
            _git(repo, "add", "--", *paths)
            staged = _git(repo, "diff", "--cached", "--quiet", "--", *paths, check=False)
            if staged.returncode not in (0, 1):
                raise _GitError(f"git {repo}: diff failed: {_why(staged)}")
            if staged.returncode == 1:
                if cfg.push:  # remembered first: a crash after the commit still pushes next time
                    _remember(store, key, None)
                _git(repo, "commit", "--quiet", "-m", cfg.message, "--", *paths,
                     env=_identity(repo))
                report.commit = _git(repo, "rev-parse", "HEAD").stdout.strip()
        if cfg.push and (report.commit or store.get_state(key) or _ahead(repo, cfg.branch)):
            _push(repo, cfg.branch, cfg.path)
            if report.commit:  # a rebase put it on top of theirs: the commit the remote has
                report.commit = _git(repo, "rev-parse", "HEAD").stdout.strip()
            report.pushed = True
        store.set_state(key, None)
    except _GitError as exc:
        report.error = str(exc)
    except DigestError as exc:
        report.error = f"git {repo}: {exc.message}"
    if report.error:  # whatever failed, `status` shows it and `send` tries again
        _remember(store, key, report.error)
    return report


def _remember(store: State, key: str, error: str | None) -> None:
    """What waits, since when it first waited."""
    since = (store.get_state(key) or {}).get("since") or _now()
    store.set_state(key, {"error": error, "since": since})


def _usable(repo: Path, branch: str, point: bool = True) -> None:
    """The checkout is there, a checkout, and on `branch` (an unborn one is pointed at it
    when `point`): what both `publish` and `doctor` check before anything else."""
    if not repo.is_dir():
        raise _GitError(f"git {repo}: no such folder (outputs.git.repo)")
    gitdir = Path(_git(repo, "rev-parse", "--absolute-git-dir", what="not a git checkout").stdout.strip())
    _no_leftovers(repo, gitdir)
    _on_branch(repo, branch, point)


LEFTOVERS = (("rebase-merge", "a rebase", "git rebase --abort"),
             ("rebase-apply", "a rebase", "git rebase --abort"),
             ("MERGE_HEAD", "a merge", "git merge --abort"))


def _no_leftovers(repo: Path, gitdir: Path) -> None:
    """What a git killed mid-way leaves (a kill -9 during our own rebase, say), said in one
    line before anything is tried: git's own words about it run to a paragraph."""
    lock = "remove .git/index.lock and " if (gitdir / "index.lock").exists() else ""
    for name, what, undo in LEFTOVERS:
        if (gitdir / name).exists():
            raise _GitError(f"git {repo}: {what} was left half-done in the checkout: if no git runs "
                            f"there, {lock}run `{undo}`")
    if lock:
        raise _GitError(f"git {repo}: .git/index.lock was left in the checkout: if no git runs "
                        "there, remove it")


def _copy_in(repo: Path, subdir: str, files: dict[str, Path], report: GitReport) -> list[str]:
    root = repo.resolve()
    base = (root / subdir).resolve()
    if base != root and root not in base.parents:
        raise _GitError(f"git {repo}: outputs.git.path {subdir!r} leaves the checkout")
    paths, folders = [], set()
    for name, source in files.items():
        target = (base / name).resolve()
        if base not in target.parents or ".git" in target.relative_to(root).parts:
            raise _GitError(f"git {repo}: {name!r} leaves outputs.git.path {subdir!r}")
        if target.parent not in folders:  # a copy a killed run left half-written: never a file
            folders.add(target.parent)    # to publish, prune or stage
            clear_killed_writes(target.parent)
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise _GitError(f"git {repo}: cannot read {source}: {exc.strerror or exc}") from None
        relative = target.relative_to(root).as_posix()
        if not (target.is_file() and target.read_bytes() == data):
            write_atomic(target, data.decode("utf-8"))
            report.changed.append(relative)
        paths.append(relative)
    return paths


def _prune(repo: Path, subdir: str, files: dict[str, Path], folders: tuple[str, ...],
           report: GitReport) -> list[str]:
    """Remove files of the `folders` that are not published any more; their paths, to stage.
    Only files git tracks: one someone put there and never committed is no file of ours."""
    root = repo.resolve()
    gone = []
    for folder in folders:
        clear_killed_writes(root / subdir / folder)  # not a published file: not one to stage
        where = (root / subdir / folder).relative_to(root).as_posix()
        tracked = set(_git(repo, "ls-files", "-z", "--", where).stdout.split("\0"))
        for target in sorted((root / subdir / folder).glob("*")):
            name, relative = target.relative_to(root / subdir).as_posix(), target.relative_to(root).as_posix()
            if target.is_file() and name not in files and relative in tracked:
                try:
                    target.unlink()
                except OSError as exc:  # a read-only checkout where nothing else changed
                    raise _GitError(f"git {repo}: cannot remove {target}: {exc.strerror or exc}") from None
                report.changed.append(relative)
                gone.append(relative)
    return gone


def _on_branch(repo: Path, branch: str, point: bool) -> None:
    """The checkout must be on `branch`; an unborn (empty) checkout is pointed at it."""
    head = _git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if head.returncode != 0:
        raise _GitError(f"git {repo}: HEAD is detached; check out {branch} (outputs.git.branch)")
    current = head.stdout.strip()
    if current == branch:
        return
    if _git(repo, "rev-parse", "--verify", "--quiet", "HEAD", check=False).returncode != 0:
        if point:
            _git(repo, "symbolic-ref", "HEAD", f"refs/heads/{branch}")
        return
    raise _GitError(f"git {repo}: the checkout is on branch {current}, not {branch} "
                    "(outputs.git.branch)")


def _remote(repo: Path, branch: str) -> str:
    found = _git(repo, "config", "--get", f"branch.{branch}.remote", check=False).stdout.strip()
    return found or "origin"


def _clean_remote(repo: Path, branch: str) -> str:
    """The remote to push to, refused when its URL holds a token or password: git prints the
    URL in some errors, and they reach stderr, the database and `status`."""
    remote = _remote(repo, branch)
    for push in ((), ("--push",)):  # a push URL of its own (pushurl, pushInsteadOf) too
        urls = _urls(repo, remote, *push)
        for url in urls:
            if what := url_credentials(url):
                name = _masked(remote)
                new = "URL" if len(urls) == 1 else "URL OLD-URL"  # one of several: git asks which
                raise _GitError(f"git {repo}: the {'push ' * bool(push)}URL of remote {name} "
                                f"({_masked(url)}) holds {what}; take it out (git remote set-url "
                                f"{' '.join([*push, name])} {new}) and use git's credential helper")
    return remote


def _urls(repo: Path, remote: str, *push: str) -> list[str]:
    """The remote's URLs, every one (its push URLs, rewritten as a push rewrites them, with
    "--push"), one a line: a path may hold a space. A remote with no URL configured is a URL
    itself."""
    said = _git(repo, "remote", "get-url", "--all", *push, remote, check=False).stdout
    return said.splitlines() or [remote]


def _ahead(repo: Path, branch: str) -> bool:
    """Local commits the remote has not seen (or never pushed at all)."""
    if _git(repo, "rev-parse", "--verify", "--quiet", "HEAD", check=False).returncode != 0:
        return False
    tracking = f"refs/remotes/{_remote(repo, branch)}/{branch}"
    if _git(repo, "rev-parse", "--verify", "--quiet", tracking, check=False).returncode != 0:
        return True
    count = _git(repo, "rev-list", "--count", f"{tracking}..HEAD", check=False).stdout.strip()
    return count not in ("", "0")


def _push(repo: Path, branch: str, subdir: str) -> None:
    """Push; refused because the remote moved on (someone committed there, say a README
    edited on the web), our commits go on top of theirs and are pushed again. Ours touch
    only the published paths (under `subdir`), so a conflict there means they edited those
    very files; any other failure (an untracked file in the way) is told in git's words."""
    remote, ref = _clean_remote(repo, branch), f"refs/heads/{branch}:refs/heads/{branch}"
    pushed = _git(repo, "push", "--set-upstream", remote, ref, check=False)
    if pushed.returncode == 0:
        return
    if not any(word in pushed.stderr for word in ("fetch first", "non-fast-forward")):
        raise _GitError(f"git {repo}: push failed: {_why(pushed)}")
    if _git(repo, "status", "--porcelain", "--untracked-files=no").stdout.strip():
        raise _GitError(f"git {repo}: push refused: the remote has new commits, and the checkout "
                        "has changes of someone's not committed, which a rebase could garble; "
                        "pull by hand (git pull --rebase)")
    _git(repo, "fetch", remote, branch, what=f"fetch from {remote} failed")
    rebased, conflicts = None, []
    try:
        rebased = _git(repo, "rebase", "FETCH_HEAD", env=_identity(repo), check=False)
        if rebased.returncode != 0:
            conflicts = _git(repo, "diff", "--name-only", "--diff-filter=U", check=False).stdout.splitlines()
    finally:  # a rebase that failed or timed out is taken back, never left half-done
        if rebased is None or rebased.returncode != 0:
            _git(repo, "rebase", "--abort", check=False)
    if rebased.returncode != 0:
        ours = [path for path in conflicts if _published(path, subdir)]
        if ours:
            raise _GitError(f"git {repo}: the remote has commits that change the published files too "
                            f"({', '.join(ours)}); merge them by hand in the checkout (git pull --rebase)")
        raise _GitError(f"git {repo}: rebase onto {remote}/{branch} failed: "
                        f"{_why(rebased)}")
    _git(repo, "push", "--set-upstream", remote, ref)


def _published(path: str, subdir: str) -> bool:
    """`path` (from the checkout's root) is under outputs.git.path."""
    folder = PurePosixPath(subdir)
    return str(folder) == "." or PurePosixPath(path).is_relative_to(folder)


def _identity(repo: Path) -> dict[str, str]:
    """Author and committer from config or environment, else rl-digest's own."""
    env: dict[str, str] = {}
    for setting, value, names in (
        ("user.name", IDENTITY[0], ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")),
        ("user.email", IDENTITY[1], ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL")),
    ):
        if _git(repo, "config", "--get", setting, check=False).stdout.strip():
            continue
        for name in names:
            if not os.environ.get(name):
                env[name] = value
    return env


def _git(repo: Path, *args: str, env: dict[str, str] | None = None, check: bool = True,
         what: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**{k: v for k, v in os.environ.items() if k not in ELSEWHERE}, "GIT_TERMINAL_PROMPT": "0",
                "LC_ALL": "C", **(env or {})}
    try:
        result = subprocess.run([*GIT, "-C", str(repo), *args], check=False, capture_output=True,
                                text=True, env=full_env, stdin=subprocess.DEVNULL,
                                timeout=TIMEOUT_SECONDS)
    except FileNotFoundError:
        raise _GitError(f"git {repo}: no git command on PATH ({os.environ.get('PATH', '')}); install git, "
                        "or add its folder to PATH (in a crontab, a PATH= line)") from None
    except subprocess.TimeoutExpired:
        raise _GitError(f"git {repo}: git {args[0]} timed out after {TIMEOUT_SECONDS} s") from None
    if check and result.returncode != 0:
        raise _GitError(f"git {repo}: {what or args[0] + ' failed'}: {_why(result)}")
    return result


def _why(result: subprocess.CompletedProcess[str]) -> str:
    """Why a git command failed: its words, or the signal that ended it (Ctrl-C, or a service
    stopped, reaches git too: it shares our process group) rather than "no message"."""
    if result.returncode < 0:
        try:
            name = signal.Signals(-result.returncode).name
        except ValueError:
            name = f"signal {-result.returncode}"
        return f"git {result.args[len(GIT) + 2]} was ended by {name}"
    return _gist(result.stderr or result.stdout)


PREFIXES = ("!", "fatal:", "error:", "warning:", "hint:", "remote:", "To ")


def _gist(text: str) -> str:
    """Git's most telling line: a rejected ref, else fatal/error (whole, as its sentence
    and the file names it lists often go on over the next lines), plus a hook's own words."""
    lines = [line.strip() for line in _masked(text).splitlines() if line.strip()]
    if not lines:
        return "no message"
    pick = next((ln for ln in lines if ln.startswith("!")), None) \
        or _message(lines, ("fatal:", "error:")) or lines[-1]
    remote = next((ln for ln in lines if ln.startswith("remote:") and ln != "remote:"), None)
    return f"{pick}; {remote}" if remote and remote != pick else pick


def _masked(text: str) -> str:
    """The URLs in git's words (or a remote's) as logs.mask_url shows them, a token-like path
    segment too: no config key names a remote, so hide() does not know what its URLs hold."""
    return masked_urls(text, paths=True)


def _message(lines: list[str], starts: tuple[str, ...]) -> str | None:
    """The first line beginning with one of `starts`, joined with the lines that go on it."""
    for n, line in enumerate(lines):
        if line.startswith(starts):
            rest = itertools.takewhile(lambda ln: not ln.startswith(PREFIXES), lines[n + 1:])
            return " ".join([line, *rest])
    return None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def reachable(cfg: GitOutput) -> str:
    """For `doctor`: the checkout is there, on its branch and, when it pushes, its remote
    answers at each URL a push uses. Changes nothing."""
    repo = Path(cfg.repo)
    try:
        _usable(repo, cfg.branch, point=False)
        if not cfg.push:
            return f"{repo} is a git checkout (push: false)"
        remote = _clean_remote(repo, cfg.branch)
        fetch = _urls(repo, remote)
        for url in _urls(repo, remote, "--push"):  # what a push uses, not only the fetch URL
            named = f"remote {remote}" if url in fetch else \
                f"the push URL of remote {remote} ({_masked(url)})"
            _git(repo, "ls-remote", "--heads", url, what=f"{named} does not answer")
        return f"{repo} pushes to {remote}, which answers"
    except _GitError as exc:
        raise DeliveryError(str(exc)) from None
