"""How often one run touches the database: calls of Store's public methods and SQL statements.

    .venv/bin/python benchmarks/store_calls.py [--papers 1000]

Two runs of `run_digest` against the local arXiv stand-in (as in end_to_end.py): the first
reads the whole lookback window and publishes a digest; the second, a day later, finds
nothing new. Every public method of Store is wrapped with a counter, and SQLAlchemy's
`before_cursor_execute` event counts the statements sent to SQLite.
"""

from __future__ import annotations

import argparse
import collections
import functools
import tempfile
from datetime import timedelta
from pathlib import Path

from _common import dev_rows, machine, table, write_config
from end_to_end import AS_OF, PAGE_SIZE, StandIn, window


def count_calls(store_class, calls: collections.Counter) -> list:
    """Count the calls made from outside Store (a method calling another counts once)."""
    undo, depth = [], [0]
    for name, value in vars(store_class).items():
        if name.startswith("_") or not callable(value) or isinstance(value, classmethod):
            continue

        def counted(*args, _name=name, _original=value, **kwargs):
            if not depth[0]:
                calls[_name] += 1
            depth[0] += 1
            try:
                return _original(*args, **kwargs)
            finally:
                depth[0] -= 1

        undo.append((name, value))
        setattr(store_class, name, functools.wraps(value)(counted))
    return undo


def run_twice(server: StandIn) -> list[tuple[str, collections.Counter, int]]:
    import sqlalchemy as sa

    from pipeline import config as cfg
    from pipeline.models import Options
    from pipeline.run import parse_as_of, run_digest
    from pipeline.store import Store

    found = []
    with tempfile.TemporaryDirectory(prefix="rl-digest-calls-") as tmp:
        path = write_config(Path(tmp), {"sources": {"arxiv": {
            "api_url": server.api_url, "page_size": PAGE_SIZE, "overlap_hours": 0}}})
        config = cfg.load(path)
        store = Store.open(config.storage.url)
        statements = [0]

        def one(*_args):
            statements[0] += 1

        sa.event.listen(store.engine, "before_cursor_execute", one)
        first = parse_as_of(AS_OF, config)
        for label, as_of in (("first run (a week, publishes)", first),
                             ("next day (nothing new)", first + timedelta(days=1))):
            calls: collections.Counter = collections.Counter()
            undo = count_calls(Store, calls)
            statements[0] = 0
            try:
                run_digest(config, store, Options(as_of=as_of, no_email=True))
            finally:
                for name, value in undo:
                    setattr(Store, name, value)
            found.append((label, calls, statements[0]))
        store.engine.dispose()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=1000)
    args = parser.parse_args()
    rows = dev_rows()
    start, end = window()
    print(machine())
    with StandIn(rows, args.papers, start, end) as server:
        results = run_twice(server)
    names = sorted({name for _, calls, _ in results for name in calls})
    print(f"\n## Store calls per run ({args.papers:,} papers served)\n")
    print(table(["method", *[label for label, _, _ in results]],
                [[name, *[calls[name] for _, calls, _ in results]] for name in names]
                + [["**all Store calls**", *[sum(calls.values()) for _, calls, _ in results]],
                   ["SQL statements", *[count for _, _, count in results]]]))


if __name__ == "__main__":
    main()
