"""What many test files share: running the real CLI, configs over the local stand-ins, papers.

Test files import these from here, never from one another; conftest.py only holds fixtures.
"""

from __future__ import annotations

import atexit
import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from pipeline.models import Paper
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[1]


SHARED = ROOT.parent / "shared"


# `make test` installs the package (pip install ., not editable) and sets this, so the CLI
# tests run the installed `rl-digest` with its bundled templates; a developer's plain
# `pytest` runs the source tree instead, never a stale install.
INSTALLED = Path(sys.executable).with_name("rl-digest")


USE_INSTALLED = os.environ.get("RL_DIGEST_TEST_INSTALLED") == "1" and INSTALLED.exists()


def shared_file(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not here (../shared is optional)")
    return path


def write_config(folder: Path, overrides: dict | None = None, seeds: bool = True) -> Path:
    """A config in `folder` whose state and outputs stay there; offline-safe defaults."""
    data = {
        "sources": {"arxiv": {"delay_seconds": 0, "retries": 1, "timeout_seconds": 5,
                              "contact": "rl-digest-tests@lab.test"},  # not an example address
                    "rss": {"poll_minutes": 0}, "oai": {"enabled": False}},
        "enrich": {"provider": "none"},
        "seeds": {"paths": ["seeds"] if seeds else [], "builtin": False},
    }
    if seeds:
        shutil.copytree(ROOT / "seeds", folder / "seeds", dirs_exist_ok=True)
    return config_file(folder, data, overrides or {})


def config_file(folder: Path, data: dict, overrides: dict) -> Path:
    """folder/config.yaml: `data` under `overrides`; full text from the arXiv stand-in
    beside api_url, never arxiv.org. The tests' and the benchmarks' configs both use it."""
    merged = _merge(data, overrides)
    arxiv = merged["sources"]["arxiv"]
    fulltext = merged["sources"].get("fulltext") or {}
    if "api_url" in arxiv and "url" not in fulltext and "html_url" not in arxiv:
        merged["sources"]["fulltext"] = {**fulltext, "url": arxiv["api_url"].rsplit("/api/", 1)[0]
                                         + "/html/{id}v{version}"}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(merged, allow_unicode=True), encoding="utf-8")
    return path


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def cli_command() -> list[str]:
    """The installed console script when `make test` installed it, else the module."""
    return [str(INSTALLED)] if USE_INSTALLED else [sys.executable, "-m", "pipeline"]


def run_cli(*args: str, cwd: Path | str = "/", env: dict | None = None, timeout: float = 120,
            check: int | None = 0) -> subprocess.CompletedProcess:
    """Run the real `rl-digest` as a user would (from / by default, like cron).

    The command runs in a fork of a process that has imported the CLI already
    (tests/zygote.py), which saves about 1.5 s a call; RL_DIGEST_TEST_FRESH=1, or an
    environment that changes how Python starts, runs a fresh process instead.
    """
    full_env = cli_env(env)
    if _fresh(full_env):
        result = subprocess.run([*cli_command(), *args], cwd=cwd, env=full_env, capture_output=True,
                                text=True, timeout=timeout)
    else:
        result = _warm().run(list(args), str(cwd), full_env, timeout)
    return _checked(result, check)


def start_warm_cli(*args: str, env: dict | None = None, stderr: Path | None = None,
                   log: Path | None = None, stdout: Path | None = None) -> WarmProcess | subprocess.Popen:
    """The real CLI in the background, as processes.start_cli starts it (from /, its output
    dropped, or its stderr written to the file `stderr` and its stdout to the file `stdout`
    (/dev/full: a full disk), or stdout and stderr both to the file `log`), but in a fork of the warm CLI (about 1 s less: no imports) when run_cli
    would use it. For a command the test talks to (serve), waits for or stops with SIGTERM
    (schedule, a run); the kill -9 and terminal tests start a fresh process (start_cli),
    as a user's shell would."""
    full_env = cli_env(env)
    for path in (stderr, log):
        if path is not None:
            path.write_bytes(b"")
    if _fresh(full_env):
        with open(log or stderr or os.devnull, "w") as err, open(stdout or os.devnull, "w") as out:
            return subprocess.Popen([*cli_command(), *args], cwd="/", env=full_env,
                                    stdin=subprocess.DEVNULL, stdout=err if log else out,
                                    stderr=subprocess.STDOUT if log else err)
    return _warm().start(list(args), "/", full_env, str(log or stderr or os.devnull),
                         str(log or stdout or os.devnull))


FRESH = os.environ.get("RL_DIGEST_TEST_FRESH") == "1"


def _fresh(full_env: dict) -> bool:
    """Whether a command with this environment needs a fresh process: RL_DIGEST_TEST_FRESH=1,
    or a PYTHON* variable that changes how Python starts (PYTHONPATH, a plug-in's folder,
    the warm process puts on sys.path as Python would: tests/zygote.py)."""
    return FRESH or any(full_env.get(k) != v for k, v in _python_vars(cli_env()).items()) \
        or bool(_python_vars(full_env).keys() - _python_vars(cli_env()).keys())


def _python_vars(env: dict) -> dict:
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k != "PYTHONPATH"}


class _Warm:
    """The client side of tests/zygote.py: one warm CLI per test process."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="rl-digest-zygote-")
        self.socket = os.path.join(self.folder, "socket")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("zygote.py")), self.socket,
             *([str(INSTALLED)] if USE_INSTALLED else [])],
            cwd="/", env=cli_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if self.process.stdout.readline() != b"ready\n":
            raise RuntimeError("tests/zygote.py did not start: run with RL_DIGEST_TEST_FRESH=1 to see why")

    def _call(self, args: list[str], cwd: str, env: dict, out: str, err: str) -> socket.socket:
        """A command sent to the warm CLI: the connection its answers come on."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.socket)
        conn.sendall(json.dumps({"args": args, "cwd": cwd, "env": env, "umask": _umask(),
                                 "stdout": out, "stderr": err}).encode() + b"\n")
        return conn

    def start(self, args: list[str], cwd: str, env: dict, err: str, out: str = os.devnull) -> WarmProcess:
        """The command left running, its stderr to the file `err`, its stdout to `out` (the
        same file: both into one)."""
        return WarmProcess(self._call(args, cwd, env, out, err), ["rl-digest", *args])

    def run(self, args: list[str], cwd: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory() as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            out.touch()
            err.touch()
            with self._call(args, cwd, env, str(out), str(err)) as conn:
                conn.settimeout(timeout)
                replies = conn.makefile("rb")
                pid = int(replies.readline().split()[1])
                try:
                    line = replies.readline()
                    replies.read()  # the end: the process has exited
                except TimeoutError:
                    os.kill(pid, signal.SIGKILL)
                    raise subprocess.TimeoutExpired(["rl-digest", *args], timeout) from None
            status = int(line.split()[1]) if line.startswith(b"exit ") else -signal.SIGKILL
            return subprocess.CompletedProcess(["rl-digest", *args], status,
                                               out.read_text(errors="replace"),
                                               err.read_text(errors="replace"))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


class WarmProcess:
    """A command of the warm CLI left running, as much of a Popen as the tests use: pid,
    returncode, poll, wait, send_signal, terminate and kill. Its exit code is the one the
    command exited with; ended by a signal (it says no code), minus the last signal sent,
    as Popen says it (-9 when none was sent: the kernel's kill)."""

    def __init__(self, conn: socket.socket, args: list[str]) -> None:
        self.args, self.returncode = args, None
        self._conn, self._answers, self._signal = conn, b"", signal.SIGKILL
        while b"\n" not in self._answers:
            chunk = conn.recv(4096)
            if not chunk:
                raise RuntimeError("tests/zygote.py did not start the command")
            self._answers += chunk
        self.pid = int(self._answers.split(b"\n", 1)[0].split()[1])

    def poll(self) -> int | None:
        if self.returncode is None:
            self._conn.setblocking(False)
            try:
                self._read()
            except BlockingIOError:  # running
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                self._read()
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
        return self.returncode

    def _read(self) -> None:
        """The answers up to the end of the connection: the process has exited."""
        while chunk := self._conn.recv(4096):
            self._answers += chunk
        self._conn.close()
        code = re.search(rb"^exit (-?\d+)$", self._answers, re.M)
        self.returncode = int(code.group(1)) if code else -self._signal

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            self._signal = sig
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_WARM: list[_Warm] = []


def _warm() -> _Warm:
    if not _WARM:
        _WARM.append(_Warm())
        atexit.register(_WARM[0].close)
    return _WARM[0]


CLI_TMP: Path | None = None  # the session's folder for the CLI's temporary files (conftest.py)


def cli_env(env: dict | None = None) -> dict:
    """The environment the CLI runs with: the test's, minus RL_DIGEST_*, with TMPDIR in
    CLI_TMP, plus `env`."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RL_DIGEST")}
    if not USE_INSTALLED:
        full_env["PYTHONPATH"] = str(ROOT)
    if CLI_TMP is not None:
        full_env["TMPDIR"] = str(CLI_TMP)
    full_env.update(env or {})
    return full_env


# The peak is read in a small go-between: a child forked from a large pytest process would
# count the parent's pages in its own ru_maxrss (Linux keeps the high-water mark across exec).
MEASURE_PEAK = ("import resource, subprocess, sys\n"
            "code = subprocess.call(sys.argv[2:])\n"
            "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
            "sys.exit(code)\n")


def run_cli_measured(*args: str, timeout: float = 120,
                     check: int | None = 0) -> tuple[subprocess.CompletedProcess, int]:
    """run_cli, plus the peak resident memory of that one process in bytes (ru_maxrss)."""
    with tempfile.TemporaryDirectory() as folder:
        peak_file = os.path.join(folder, "peak")
        result = subprocess.run([sys.executable, "-c", MEASURE_PEAK, peak_file, *cli_command(), *args],
                                cwd="/", env=cli_env(), capture_output=True, text=True, timeout=timeout)
        with open(peak_file) as peak:
            kilobytes = int(peak.read())
    return _checked(result, check), kilobytes * 1024  # Linux counts kilobytes


def _checked(result: subprocess.CompletedProcess, check: int | None) -> subprocess.CompletedProcess:
    if check is not None and result.returncode != check:
        raise AssertionError(
            f"exit {result.returncode} (wanted {check})\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


def connections_to(port: int) -> int:
    """This process's TCP sockets whose other end is 127.0.0.1:port, in any state."""
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if target.startswith("socket:["):
            ours.add(target[len("socket:["):-1])
    rows = Path("/proc/self/net/tcp").read_text().splitlines()[1:]
    return sum(1 for row in rows if row.split()[9] in ours and int(row.split()[2].split(":")[1], 16) == port)


CATS = ["cs.LG", "cs.CL"]


def rl_paper(n: int, day: datetime, version: int = 1, cats=("cs.LG",), title=None) -> Paper:
    return Paper(
        id=f"2611.{n:05d}", version=version,
        title=title or f"GRPO variant {n} for reinforcement learning of large language models",
        abstract=("We train a large language model with reinforcement learning from verifiable "
                  f"rewards using GRPO; variant {n} improves reasoning accuracy."),
        authors=("Ada Lovelace", "Alan Turing"), categories=cats,
        submitted=day, updated=day + timedelta(days=version - 1),
    )


def config_for(tmp_path, server: ArxivServer, page_size=3, rss=True, **extra):
    return write_config(tmp_path, {
        "sources": {
            "arxiv": {"api_url": server.api_url, "categories": CATS, "page_size": page_size,
                      "lookback_days": 7, "overlap_hours": 0, "retries": 1},
            "rss": {"enabled": rss, "urls": [server.rss_url(CATS)]},
        },
        "seeds": {"paths": []},
        **extra,
    }, seeds=False)


DAY = datetime(2026, 10, 29, 12, tzinfo=UTC)


KEY = "sk-test-secret-value-123"


def full_config(tmp_path, arxiv: ArxivServer, llm: OpenAIServer | None = None,
                smtp_port: int | None = None, db_url: str | None = None, **extra):
    overrides = {
        "sources": {"arxiv": {"api_url": arxiv.api_url, "categories": CATS, "page_size": 50,
                              "overlap_hours": 0, "retries": 1},
                    "rss": {"urls": [arxiv.rss_url(CATS)]}},
        "seeds": {"paths": []},
    }
    if llm is not None:
        overrides["enrich"] = {"provider": "openai", "base_url": llm.url, "timeout_seconds": 5,
                               "deadline_seconds": 10, "concurrency": 2}
    if smtp_port is not None:
        overrides["email"] = {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": smtp_port,
                              "security": "none", "timeout_seconds": 5,
                              "to": ["ada@example.org", "alan@example.org"]}
    if db_url is not None:
        overrides["storage"] = {"url": db_url}
    overrides.update(extra)
    return write_config(tmp_path, overrides, seeds=False)



def plugin_env(tmp_path: Path, entry_points: str) -> dict:
    """An installed-looking plug-in package: a dist-info declaring `entry_points` (the text
    of an entry_points.txt), and tests/ on the path for the modules they name
    (tests/toy_channel.py, tests/toy_source.py)."""
    site = tmp_path / "plugins"
    info = site / "rl_digest_toy-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rl-digest-toy\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    paths = [str(site), str(ROOT / "tests")] + ([] if USE_INSTALLED else [str(ROOT)])
    return {"PYTHONPATH": os.pathsep.join(paths)}


# --- the web edition -----------------------------------------------------------------------

SITE_ELSEWHERE: tuple[str, ...] = ()  # pages of the site left to other tests (none now)


def site_pages(site: Path) -> dict[str, HTMLParser]:
    """Every HTML page of an out/site/ folder, parsed, by its path from the site's root."""
    return {path.relative_to(site).as_posix(): HTMLParser(path.read_text(encoding="utf-8"))
            for path in sorted(site.rglob("*.html"))}


def broken_links(site: Path, elsewhere: tuple[str, ...] = SITE_ELSEWHERE) -> list[str]:
    """Each relative href or src of each page that names no file, or an #anchor that is no
    id on its target page, as "page: link". Absolute links are not followed; links into
    `elsewhere` (from the site's root) are left to the tests of what builds them."""
    pages = site_pages(site)
    ids = {name: {node.attributes.get("id") for node in tree.css("[id]")} for name, tree in pages.items()}
    broken = []
    for name, tree in pages.items():
        for node in tree.css("[href], [src]"):
            link = node.attributes.get("href") or node.attributes.get("src") or ""
            if urlsplit(link).scheme or link.startswith("//"):
                continue
            path, _, anchor = link.partition("#")
            target = (site / name).parent / path if path else site / name
            try:
                rel = target.resolve().relative_to(site.resolve()).as_posix()
            except ValueError:
                broken.append(f"{name}: {link} (outside the site)")
                continue
            if rel.startswith(elsewhere):
                continue
            if not target.is_file():
                broken.append(f"{name}: {link}")
            elif anchor and anchor not in ids.get(rel, set()):
                broken.append(f"{name}: {link} (no id {anchor!r} there)")
    return broken


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The system's headless Chromium with a profile in `tmp_path`; skips the test without one."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium here (apt-get install -y chromium fonts-noto-cjk)")
    return subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}", *args],
        capture_output=True, timeout=120, check=False, text=True)


def in_frame(tmp_path: Path, site_dir: Path, page: str, width: int, script: str) -> dict:
    """Load `page` of a copy of the site in a `width` px frame of a host page, run `script`
    (it sees f, d, w, step and seen, and calls done(result)) on each load of the frame and
    return what it reported."""
    return in_frames(tmp_path, [(site_dir, page, width, script)])[0]


def in_frames(tmp_path: Path, cases: list[tuple[Path, str, int, str]]) -> list[dict]:
    """in_frame of each (site_dir, page, width, script), all in one Chromium (a launch is
    about 0.5 s): a frame each, laid over one another at the host page's top left, each
    script with its own f, d, w, step and seen; each site copied once, to <n>/site/, the
    host page in the first. The frames share Chromium's profile: a script that makes a page
    remember something (the language switch's choice) needs a Chromium of its own. No
    result at all skips (no Chromium that lays out pages); a frame whose script never
    called done fails."""
    copies: dict[Path, str] = {}
    frames = []
    for n, (site_dir, page, width, script) in enumerate(cases):
        if site_dir not in copies:
            copies[site_dir] = f"../../{len(copies)}/site/"
            shutil.copytree(site_dir, tmp_path / str(len(copies) - 1) / "site", dirs_exist_ok=True)
        src = f"{copies[site_dir]}{page}".removeprefix("../../0/site/")
        frames.append(f"""frame({n}, {json.dumps(src)}, {width}, (function () {{ var step = 0, seen = [];
  return function (f, d, w, done) {{ {script} }}; }})());""")
    host = tmp_path / "0" / "site" / "host.html"  # in the first site: a script's f.src = 'page' is that site's
    # the frames are made here, their load listener added before they load
    host.write_text(f"""<!doctype html><html><body><script>
var results = {json.dumps([None] * len(cases))};
function report() {{ document.body.setAttribute('data-result', JSON.stringify(results)); }}
function shown(node) {{ return !!node && node.getClientRects().length > 0 &&
  getComputedStyle(node).visibility !== 'hidden'; }}
function frame(n, src, width, run) {{
  var f = document.createElement('iframe');
  f.width = width;
  f.height = 900;
  f.style.position = 'absolute';
  f.style.left = f.style.top = '0';
  f.addEventListener('load', function () {{
    run(f, f.contentDocument, f.contentWindow, function (result) {{ results[n] = result; report(); }});
  }});
  f.src = src;
  document.body.appendChild(f);
}}
report();
{chr(10).join(frames)}
</script></body></html>""", encoding="utf-8")
    out = chromium(tmp_path, "--allow-file-access-from-files", "--window-size=1400,1000",
                   "--virtual-time-budget=8000", "--dump-dom", host.as_uri())
    found = HTMLParser(out.stdout).css_first("body[data-result]")
    if found is None:
        pytest.skip(f"chromium laid out no page: {out.stderr[-300:]}")
    results = json.loads(found.attributes["data-result"] or "[]")
    missing = [cases[n][1] for n, result in enumerate(results) if result is None]
    assert not missing, f"no result from the frames of {missing}: their scripts never called done"
    return results


def loaded_pages(tmp_path: Path, urls: list[str]) -> dict[str, str]:
    """The DOM of each file:// URL once its load event has fired (its scripts ran), as
    --dump-dom prints it, all from one Chromium: a frame each on a host page, read when the
    host's own load event fires, which waits for every frame's (a listener on a frame could
    be added after its load: no result, a skipped test)."""
    host = tmp_path / "pages-host.html"
    frames = "".join(f'<iframe src="{html.escape(url)}"></iframe>' for url in urls)
    host.write_text(f"""<!doctype html><html><body>{frames}<script>
window.addEventListener('load', function () {{  // after every frame's own load event
  var pages = Array.prototype.map.call(document.querySelectorAll('iframe'),
    function (f) {{ return f.contentDocument.documentElement.outerHTML; }});
  document.body.setAttribute('data-result', JSON.stringify(pages)); }});
</script></body></html>""", encoding="utf-8")
    out = chromium(tmp_path, "--allow-file-access-from-files", "--virtual-time-budget=8000", "--dump-dom",
                   host.as_uri())
    found = HTMLParser(out.stdout).css_first("body[data-result]")
    if found is None:
        pytest.skip(f"chromium loaded no pages: {out.stderr[-300:]}")
    return dict(zip(urls, json.loads(found.attributes["data-result"] or "[]"), strict=True))


def chinese_left(text: str) -> list[str]:
    """Runs of Chinese in a page's visible text (with some context), but the switch's own
    中文 and 中英 Both buttons: what a reader who chose English still sees in Chinese."""
    runs = re.findall(r"[^\n]{0,20}[\u3000-\u9fff\uff00-\uffef]+[^\n]{0,20}", text)
    return [run for run in runs if run.strip() not in ("中文", "中英 Both")]


def ids_in(text: str) -> list[str]:
    """The arXiv ids a digest or reading list links, leaving out the highlights and the
    lines that point a featured paper up to its reading (they link papers listed elsewhere)."""
    text = re.sub(r"## 本周看点 · Highlights\n.*?(?=\n## )", "", text, flags=re.S)
    text = re.sub(r"^.*↑ 见上文精选解读.*$", "", text, flags=re.M)
    return re.findall(r"https://arxiv\.org/abs/(\d{4}\.\d{5})", text)


def untagged(html: str) -> str:
    """The email with its labels' language tags taken off (本周论文 · <span lang="en">This
    week's papers</span>), to find a label's words whole."""
    return re.sub(r'<span lang="(?:en|zh-CN)">([^<]*)</span>', r"\1", html)


def voiced(nodes) -> list[tuple[str, str]]:
    """(words, the lang they are read in) for each text with words under `nodes` (selectolax
    nodes): the lang of the nearest element that has one, to check each language is voiced
    as itself."""
    found = []
    for node in nodes:
        for text in node.traverse(include_text=True):
            words = text.text_content or ""
            if text.tag != "-text" or not re.search(r"[A-Za-z]{3,}|[\u4e00-\u9fff]", words):
                continue
            up = text.parent
            while "lang" not in up.attributes:
                up = up.parent
            found.append((words, up.attributes["lang"]))
    return found

