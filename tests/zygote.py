"""A warm `rl-digest` for the test suite: imports the CLI once, then forks one process per call.

Starting Python and importing the CLI's libraries (SQLAlchemy, pydantic models, openai,
scikit-learn) takes about 2.5 s, most of a typical test command. Each call here is a fork of a process
that has done that already; the child sets the call's working folder, environment,
sys.path (as a fresh process has it: the script's folder, then the call's PYTHONPATH, a
plug-in's folder say) and standard streams, runs the console script's `main` exactly as
`rl-digest` would, and exits with its status. A call whose environment changes how Python
itself starts (any PYTHON* variable but PYTHONPATH) runs as a fresh process instead (see
tests/helpers.py: run_cli).

Protocol, one Unix-socket connection per call: the client sends one JSON line
{"args", "cwd", "env", "umask", "stdout", "stderr"} (the last two are file paths; the same
path twice: both streams into that one file); the child answers "pid N", then "exit N"
when the command ends, and closes the connection when the process has exited.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import pkgutil
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback


def serve(path: str, script: str | None = None) -> None:
    """Answer calls on the socket at `path`; `script`: the console script the CLI is run as
    (else `python -m pipeline`), which decides sys.path[0] as a fresh process has it."""
    import sklearn.feature_extraction.text  # noqa: F401  (loaded by a run when it needs them:
    import sklearn.linear_model  # noqa: F401  featured papers, importance, refitting; ~1 s)

    import pipeline
    from pipeline import learn
    from pipeline.cli import main
    from pipeline.deliver import channels
    from pipeline.sources import REGISTRY

    # the imports this process exists to do once: each command loads its stages as it runs
    modules = [found.name for found in pkgutil.walk_packages(pipeline.__path__, "pipeline.")]
    for name in [*modules, *REGISTRY.values(), *channels.REGISTRY.values()]:  # plug-ins as configured
        if name != "pipeline.__main__":  # (it would run the CLI)
            importlib.import_module(name.partition(":")[0])
    learn.shipped()  # the packaged model, read once per process
    try:  # PostgreSQL's driver, which a command loads when storage.url names a server (~0.3 s)
        import psycopg  # noqa: F401
        import sqlalchemy.dialects.postgresql.psycopg  # noqa: F401
    except ImportError:  # the [postgres] extra is not installed: those cases skip
        pass

    own = _path_entries(os.environ.get("PYTHONPATH"))
    if sys.path[1:1 + len(own)] != own:
        raise RuntimeError(f"PYTHONPATH's folders are not at sys.path[1:]: {sys.path}")
    gc.freeze()  # what is loaded now is never collected: a child's collections leave the
    # parent's pages shared instead of touching (and so copying) every one of them
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready and not sys.stdin.buffer.read1(1):
            return  # the test process ended: so does this one
        if listener in ready:
            conn, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                _child(conn, main, own, script)
            conn.close()


def _path_entries(value: str | None) -> list[str]:
    """PYTHONPATH's folders as Python puts them on sys.path: absolute (from the working
    folder), an empty one the working folder itself."""
    return [os.path.abspath(entry) for entry in value.split(os.pathsep)] if value else []


def _child(conn: socket.socket, main, own: list[str], script: str | None) -> None:
    """Run one command as a fresh `rl-digest` process would, then exit with its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # git and other subprocesses are waited for
    request = json.loads(conn.makefile("rb").readline())
    conn.sendall(f"pid {os.getpid()}\n".encode())
    os.umask(request["umask"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    tempfile.tempdir = None  # TMPDIR read anew: an import may have fixed this process's (scipy 1.9)
    # sys.path as a fresh process has it: the script's folder (python -m: the working
    # folder), not tests/ (this file's); the call's PYTHONPATH (plug-ins) in place of this
    # process's
    sys.path[0] = os.path.dirname(os.path.realpath(script)) if script else os.getcwd()
    sys.path[1:1 + len(own)] = _path_entries(os.environ.get("PYTHONPATH"))
    importlib.invalidate_caches()
    for fd, name, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, request["stdout"], os.O_WRONLY),
                            (2, request["stderr"], os.O_WRONLY)):
        if fd == 2 and name == request["stdout"] != os.devnull:
            os.dup2(1, 2)  # one file for both, one offset (as Popen's stderr=STDOUT)
            continue
        target = os.open(name, flags)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = ["rl-digest", *request["args"]]
    try:
        status = main()
    except SystemExit as exc:
        status = exc.code
    except BaseException:  # what the interpreter would print for an uncaught exception
        traceback.print_exc()
        status = 1
    if status is None:
        status = 0
    elif not isinstance(status, int):
        print(status, file=sys.stderr)
        status = 1
    conn.sendall(f"exit {status}\n".encode())
    _exit(status)  # the client waits for this connection to close: when the process has ended


def _exit(status: int) -> None:
    """End as the interpreter ends a fresh process, but for its last step: wait for the
    threads, run the atexit functions (logging's flush, tempfile's cleanup), free what the
    command left (gc.collect: SQLite's last close of a connection it dropped), flush the
    streams (exit 120 if that fails, as Python's). The last step, tearing down every
    module, writes to the refcount of each object this fork inherited and so copies every
    page: 0.1 s of CPU for `--version`, 0.6 s after a run, for each command."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = 120
    os._exit(status)


if __name__ == "__main__":
    serve(*sys.argv[1:])
