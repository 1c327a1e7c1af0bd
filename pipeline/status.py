"""What `rl-digest status` and `rl-digest eval` print: plain text a person reads at a glance."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from pipeline import rank, schedule
from pipeline.config import Config, mask_url
from pipeline.deliver.outbox import RESENT, Delivery, StoreOutbox
from pipeline.errors import DigestError
from pipeline.store import Store


def overview(config: Config, store: Store) -> str:
    counts = store.counts()
    mark = store.watermark()
    lines = [
        f"database: {mask_url(config.storage.url)}",
        f"papers {counts['papers']}, relevant {counts['relevant']}, seeds {counts['seeds']}, "
        f"digests {counts['digests']}",
        f"watermark: {mark.isoformat() if mark else 'none (the first collect reads lookback_days)'}",
    ]
    now = datetime.now(config.zone)
    for which, fire in schedule.next_fires(config, now).items():
        lines.append(f"next {which}: {fire.isoformat() if fire else 'never'} "
                     f"({getattr(config.schedule, which + '_cron')}, {config.schedule.timezone})")
    for kind in ("collect", "publish"):
        last = store.last_run(kind)
        if last:
            lines.append(f"last {kind}: {last['status']} at {last['finished'] or last['started']}"
                         + (f" — {last['error']}" if last["error"] else ""))
    lines.append("recent runs:")
    for run in store.last_runs(5):
        report = run["report"] or {}
        parts = ", ".join(f"{name}: {src.get('requests', 0)} requests, {src.get('seen', 0)} seen, "
                          f"{src.get('new', 0)} new, {src.get('revised', 0)} revised, "
                          f"{src.get('duplicates', 0)} duplicates, {src.get('seconds', 0):.1f} s"
                          for name, src in report.get("sources", {}).items())
        if run["kind"] == "publish" and report:
            parts = (f"digest {report.get('digest') or 'none'}, relevant {report.get('relevant', 0)}, "
                     f"summarised {report.get('summarised', 0)} ({report.get('cached', 0)} cached), "
                     f"LLM calls {report.get('llm_calls', 0)}, tokens {report.get('tokens_in', 0)} in / "
                     f"{report.get('tokens_out', 0)} out, {report.get('llm_failures', 0)} failed, "
                     f"glossary flags {report.get('glossary_flags', 0)}, "
                     f"sent {report.get('sent', 0)}, pending {report.get('pending', 0)}")
        lines.append(f"  #{run['id']} {run['kind']} as of {run['as_of']}: {run['status']}"
                     + (f" ({parts})" if parts else "") + (f" — {run['error']}" if run["error"] else ""))
        lines += ["    " + line for line in coverage_lines(report.get("coverage"))]
        sources = report.get("sources", {}).values()
        lines += [f"    {note}" for src in sources for note in src.get("notes", [])]
        warnings = report.get("warnings") or [
            w for src in report.get("sources", {}).values() for w in src.get("warnings", [])]
        for warning in warnings:
            lines.append(f"    warning: {warning}")
    outbox = StoreOutbox(store)
    waiting, failed = outbox.pending(), outbox.rows(("failed",))
    lines.append(f"outbox: {len(waiting)} pending, {len(failed)} failed")
    lines += waiting_lines(waiting)
    for row in failed:
        lines.append(f"  {row.digest_id} {row.who}: failed after {row.attempts} attempts — "
                     f"{row.last_error or ''}")
    for row in outbox.rows(("sent",)):
        if row.last_error and row.last_error.startswith(RESENT):
            lines.append(f"  {row.digest_id} {row.who}: sent at {row.sent_at}, {row.last_error}; "
                         "the reader may have two copies with the same Message-ID")
    return "\n".join(lines) + "\n"


def coverage_lines(summary: dict | None) -> list[str]:
    """A collect's coverage (coverage.Summary as stored) in plain words, one line each."""
    if not summary:
        return []
    span = f" ({summary['first']} → {summary['last']})" if summary["expected"] else ""
    groups = "; ".join(
        f"{g['name']}: {g['read']}/{g['expected']} read, ids {g['new']} new · {g['cross']} cross · "
        f"{g['replace']} replaced, {g['kept']} matched the query" for g in summary["groups"])
    lines = [f"coverage: {summary['read']} of {summary['expected']} arXiv announcements read"
             f"{span}" + (f"; {groups}" if groups else "")]
    lines += [f"no announcement expected: {why}" for why in summary["no_announcement"]]
    for gap in summary["gaps"]:
        fix = f"recovered through {gap['recovered']}" if gap["recovered"] else "NOT recovered yet"
        lines.append(f"gap: {gap['group']} on {gap['day']}: {gap['cause']}, {fix}")
    return lines


def waiting_lines(rows: list[Delivery]) -> list[str]:
    """Rows still to deliver: when the scheduler tries next (run and send try at once), and why."""
    lines = []
    for row in rows:
        state = "hand-over interrupted" if row.interrupted else "pending"
        when = (f"the scheduler tries at {row.next_attempt.isoformat(timespec='seconds')}"
                if row.next_attempt else "the scheduler tries at its next look")
        lines.append(f"  {row.digest_id} {row.who}: {state} after {row.attempts} attempts; {when}, "
                     f"run or send at once" + (f" — {row.last_error}" if row.last_error else ""))
    return lines


def paper(store: Store, paper_id: str) -> str:
    found = store.papers([paper_id])
    if not found:
        raise DigestError(f"{paper_id}: no such paper in the database")
    p = found[0]
    row = next(r for r in store.score_rows() if r["id"] == paper_id)
    verdict = {None: "none", True: "relevant", False: "irrelevant"}[row["verdict"]]
    reasons = "; ".join(row["reasons"] or []) or "-"
    return (f"{p.id}v{p.version}  {p.title}\n"
            f"  categories: {', '.join(p.categories)}  sources: {', '.join(p.sources)}\n"
            f"  score: {row['score'] if row['score'] is not None else 'not scored'}  "
            f"relevant: {row['relevant']}  your verdict: {verdict}\n"
            f"  topic: {row['topic']} {row['topics'] or []}\n"
            f"  reasons: {reasons}\n")


def read_labels(path: Path) -> list[dict]:
    """JSONL rows with id, title, abstract, label; a bad line names file:line."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                rows.append({"id": row["id"], "title": row["title"], "abstract": row.get("abstract", ""),
                             "label": int(row["label"]), "categories": row.get("categories", []),
                             "borderline": bool(row.get("borderline"))})
            except (ValueError, KeyError, TypeError) as exc:
                raise DigestError(f"{path}:{number}: not a labelled paper ({exc})") from None
    if not rows:
        raise DigestError(f"{path}: no labelled papers")
    return rows


def evaluation(config: Config, rows: list[dict]) -> str:
    """The relevance filter against labels: the figures, then its worst mistakes with reasons."""
    rules = rank.compile_rules(config.relevance)
    result = rank.evaluate(rows, rules)
    coverage = rank.query_coverage(rows, config.sources.arxiv.categories, config.sources.arxiv.terms)
    lines = [
        f"papers {result.n}: precision {result.precision:.3f}, recall {result.recall:.3f}, "
        f"F1 {result.f1:.3f}",
        f"confusion: tp {result.tp}, fp {result.fp}, tn {result.tn}, fn {result.fn} "
        f"({result.borderline_errors} of the errors are marked borderline)",
        f"speed: {result.seconds_per_1000 * 1000:.1f} ms per 1,000 papers "
        f"({result.papers_per_second:,.0f} papers/s)",
        f"query coverage: the arXiv query would miss {coverage.missed} of {coverage.positives} "
        f"positives ({len(coverage.missed_by_category)} outside the categories, "
        f"{len(coverage.missed_by_terms)} without a query term)",
    ]
    for name, misses in (("false positives", result.false_positives),
                         ("false negatives", result.false_negatives)):
        lines.append(f"worst {name}:")
        for miss in misses:
            flag = " [borderline]" if miss.borderline else ""
            lines.append(f"  {miss.id} {miss.score:+.2f}{flag} {miss.title[:90]}")
            lines.append(f"      {'; '.join(miss.reasons) or 'no evidence'}")
    return "\n".join(lines) + "\n"
