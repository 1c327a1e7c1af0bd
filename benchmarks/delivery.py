"""Delivery throughput: one digest to N readers through the outbox and the email channel,
to a local SMTP server (aiosmtpd in a child process); a second pass finds nothing to send.

    .venv/bin/python benchmarks/delivery.py [--readers 200] [--html-kb 60]
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from _common import machine, maxrss_mib, table


def _serve(pipe) -> None:
    """The SMTP stand-in in a child process, so its event loop does not share our GIL."""
    from tests.servers.smtp_server import SmtpServer

    with SmtpServer() as server:
        pipe.send(server.port)
        while pipe.recv() != "stop":
            pipe.send(len(server.messages))


def main() -> None:
    from pipeline.config_email import Email, Reader
    from pipeline.deliver.email import EmailChannel
    from pipeline.deliver.outbox import StoreOutbox
    from pipeline.deliver.outbox_batch import deliver
    from pipeline.store import Store

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, default=200)
    parser.add_argument("--html-kb", type=int, default=60, help="size of the HTML part")
    args = parser.parse_args()
    html = "<p>" + "强化学习 RL for LLMs, GRPO and DAPO. " * (args.html_kb * 1024 // 48) + "</p>"
    text = "本周论文 This week's papers\n" * (args.html_kb * 1024 // 80)
    readers = [f"reader{n}@example.org" for n in range(args.readers)]
    pipe, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(child,), daemon=True)
    server.start()
    port = pipe.recv()
    cfg = Email(enabled=True, smtp_host="127.0.0.1", smtp_port=port, security="none",
                from_="RL Digest <digest@example.org>", timeout_seconds=30)
    now = datetime(2026, 11, 30, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{Path(tmp) / 'state.sqlite3'}")
        store.save_digest("2026-11-30", (now - timedelta(days=7), now), {}, [], readers)
        rows = []
        for name in ("first pass", "second pass"):
            channel = EmailChannel(cfg, [Reader(address=a) for a in readers],
                                   lambda digest, languages: ("RL digest", text, html), ["en"])
            began = time.perf_counter()
            report = deliver(StoreOutbox(store), {"email": channel},
                             lambda did: SimpleNamespace(id=did), now)  # type: ignore[arg-type,return-value]
            seconds = time.perf_counter() - began
            pipe.send("count")
            rows.append([name, report.sent, report.pending + report.failed, f"{seconds:.2f}",
                         f"{report.sent / seconds:.0f}" if report.sent else "-", pipe.recv()])
    pipe.send("stop")
    server.join(10)
    print(machine())
    print(f"\n## One digest to {args.readers} readers, HTML part {args.html_kb} KB, one SMTP "
          "connection\n")
    print(table(["pass", "sent", "not sent", "seconds", "messages/s", "server holds"], rows))
    print(f"\npeak RSS {maxrss_mib():.0f} MiB. Per message the outbox writes two rows "
          "(the claim with its Message-ID, then sent).")


if __name__ == "__main__":
    main()
