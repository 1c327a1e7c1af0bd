"""What `rl-digest status` and `rl-digest eval` print: plain text a person reads at a glance."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline import (
    calendar,
    decide,
    extract,
    heartbeat,
    importance,
    learn,
    lock,
    rank,
    rank_eval,
    readers,
    schedule,
    store_outbox,
    store_seeds,
)
from pipeline.config import Config
from pipeline.deliver import git
from pipeline.deliver.channels import HELD
from pipeline.deliver.outbox import (
    EMAIL,
    MAX_ATTEMPTS,
    RESENT,
    SKIPPED,
    Delivery,
    StoreOutbox,
    due_by_now,
    held_for_channel,
)
from pipeline.errors import ConfigError
from pipeline.models import paper_key, requests_note, split_arxiv_id
from pipeline.publish import routes
from pipeline.sources import CALENDAR
from pipeline.store import ENDED_MID_RUN, Store
from pipeline.week import JUDGED

THUMBS = {True: "👍", False: "👎"}
DIGESTS_SHOWN = 3  # the newest digests' ids
WARNINGS_SHOWN = 5  # of each run's; a day of stale feeds warns once per category
ROWS_SHOWN = 4  # the newest outbox rows waiting, failed or skipped: a bouncing reader fails every week


def snapshot(config: Config, store: Store, now: datetime | None = None) -> dict[str, Any]:
    """Everything `status` shows, as data: `status --json` prints it for monitoring."""
    now = now or datetime.now(config.zone)
    counts = store.counts()
    mark = store.watermark()
    runs = [_run(run) for run in store.last_runs(5)]
    last = {kind: _run(run) if (run := store.last_run(kind)) else None
            for kind in ("collect", "publish", "preview")}
    if any(row and row["status"] == "running" for row in [*runs, *last.values()]) \
            and not lock.is_held(config, store):  # its process died: say so before the next run does
        runs = [_ended(row) for row in runs]
        last = {kind: row and _ended(row) for kind, row in last.items()}
    return {
        "database": config.storage.url,
        "counts": counts,
        "watermark": mark.isoformat() if mark else None,
        "next": {which: fire.isoformat() if fire else None
                 for which, fire in schedule.next_fires(config, now).items()},
        "last": last,
        "runs": runs,
        "digests": store.digest_ids()[::-1][:DIGESTS_SHOWN],  # the ids render, preview and send take
        "outbox": {"pending": counts["pending"], "failed": counts["failed"], "skipped": counts["skipped"],
                   "waiting": [{k: row[k] for k in ("digest_id", "recipient", "status", "attempts",
                                                    "last_error")}
                               for row in store_outbox.rows(
                                   store, statuses=("pending", "sending", "failed"))]},
        "scheduler": heartbeat.read(config, now),
        "git": git.waiting(config.outputs.git, store) if config.outputs.git else None,  # a push waiting
    }


def _warnings(report: dict[str, Any]) -> list[str]:
    """A run's warnings: a publish keeps its own list, a collect its sources'."""
    return report.get("warnings") or [
        w for src in report.get("sources", {}).values() for w in src.get("warnings", [])]


def _run(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "report": row["report"] or {}}


def _ended(row: dict[str, Any]) -> dict[str, Any]:
    """A `running` row no live process holds the lock for, as the next run will record it."""
    return {**row, "status": "interrupted", "error": ENDED_MID_RUN} if row["status"] == "running" else row


def overview(config: Config, store: Store) -> str:
    data = snapshot(config, store)
    counts = data["counts"]
    lines = [
        f"database: {data['database']}",
        f"papers {counts['papers']}, relevant {counts['relevant']}, seeds {counts['seeds']}, "
        f"digests {counts['digests']}" + (f" (newest {', '.join(data['digests'])})"
                                          if data["digests"] else ""),
        f"watermark: {data['watermark'] or 'none (the first collect reads lookback_days)'}",
    ]
    for which, fire in data["next"].items():
        lines.append(f"next {which}: {fire or 'never'} "
                     f"({getattr(config.schedule, which + '_cron')}, {config.schedule.timezone})")
    lines.append(heartbeat.line(data["scheduler"], config))
    for kind, last in data["last"].items():
        if last:
            lines.append(f"last {kind}: {last['status']} at {last['finished'] or last['started']}"
                         + (f" — {last['error']}" if last["error"] else ""))
    cut_off = schedule.unfinished(store)
    if cut_off is not None:
        lines.append(f"  cut off after it saved digest {cut_off.date()}: its reading list, site and feed "
                     f"may be behind; the scheduler finishes it at its next start, or run "
                     f"`rl-digest run --as-of {cut_off.isoformat()}`")
    lines.append("recent runs:")
    collected = {run["as_of"]: set(_warnings(run["report"]))
                 for run in data["runs"] if run["kind"] == "collect"}
    followed, advised = followed_advice(config), set()  # the calendar's advice: once, until followed
    for run in data["runs"]:
        report = run["report"]
        parts = _parts(run["kind"], report)
        lines.append(f"  #{run['id']} {run['kind']} as of {run['as_of']}: {run['status']}"
                     + (f" ({parts})" if parts else "") + (f" — {run['error']}" if run["error"] else ""))
        if run["status"] == "partial":  # published, but some delivery (git, a reader) failed
            lines += _newest([f"    delivery error: {error}" for error in report.get("delivery_errors", [])],
                             "delivery errors", "`rl-digest status --json` lists them all", indent="    ")
        lines += ["    " + line for line in coverage_lines(report.get("coverage"))]
        sources = report.get("sources", {}).values()
        lines += [f"    {note}" for src in sources for note in src.get("notes", [])]
        warnings = _warnings(report)
        if run["kind"] != "collect":  # a publish repeats its own collect's: shown there once
            warnings = [w for w in warnings if w not in collected.get(run["as_of"], ())]
        advice = set(report.get("sources", {}).get(CALENDAR, {}).get("warnings", []))
        warnings = [w for w in warnings if not w.endswith(followed) and (w not in advice or w not in advised)]
        advised |= advice
        lines += [f"    warning: {warning}" for warning in warnings[:WARNINGS_SHOWN]]
        if len(warnings) > WARNINGS_SHOWN:
            lines.append(f"    … and {len(warnings) - WARNINGS_SHOWN} more warnings "
                         "(rl-digest status --json lists them all)")
    lines += judging(config, store)
    if data["git"]:
        waits, repo = data["git"], config.outputs.git.repo  # type: ignore[union-attr]
        why = (waits["error"] or "").removeprefix(f"git {repo}: ")  # the line names the checkout once
        lines.append(f"git {repo}: " + (f"failing since {waits['since']} — {why}" if why
                                        else f"push waiting since {waits['since']}")
                     + " (the next run or `rl-digest send` tries again)")
    lines += _outbox_lines(config, store, data["scheduler"])
    return "\n".join(lines) + "\n"


def _parts(kind: str, report: dict[str, Any]) -> str:
    """What a run did: a publish's digest and its LLM's work, a collect's sources."""
    if kind in ("publish", "preview") and report:
        return (f"digest {report.get('digest') or 'none'}, relevant {report.get('relevant', 0)}, "
                f"summarised {report.get('summarised', 0)} ({report.get('cached', 0)} cached), "
                + (f"LLM calls {report['llm_calls']}"  # none before a release counted them
                   f"{requests_note(report['llm_calls'], report.get('llm_requests'))}, "
                   if "llm_calls" in report else "")
                + f"tokens {report.get('tokens_in', 0)} in / "
                f"{report.get('tokens_out', 0)} out, {report.get('llm_failures', 0)} failed, "
                f"glossary flags {report.get('glossary_flags', 0)}, "
                f"sent {report.get('sent', 0)}, pending {report.get('pending', 0)}")
    return ", ".join(f"{name}: {src.get('requests', 0)} requests, {src.get('seen', 0)} seen, "
                     f"{src.get('new', 0)} new, {src.get('revised', 0)} revised, "
                     f"{src.get('duplicates', 0)} duplicates, {src.get('seconds', 0):.1f} s"
                     for name, src in report.get("sources", {}).items() if name != CALENDAR)


def _outbox_lines(config: Config, store: Store, scheduler: dict[str, Any] | None) -> list[str]:
    """The outbox: its counts, what waits and when it goes, the newest failed and skipped
    deliveries, and those sent again."""
    outbox = StoreOutbox(store)
    waiting, failed = outbox.pending(), outbox.rows(("failed",))
    lines = [f"outbox: {len(waiting)} pending, {len(failed)} failed"]
    lines += waiting_lines(waiting, routes(config), scheduler)
    lines += _newest([f"  {row.digest_id} {row.who}: failed after {row.attempts} "
                     f"{'try' if row.attempts == 1 else 'tries'} — {row.last_error or ''}" for row in failed],
                    "failed", "`rl-digest status --json` lists them all")
    lines += _newest([f"  {row.digest_id} {row.who}: skipped — {row.last_error}"
                     for row in outbox.rows((SKIPPED,))],
                    "skipped", "`rl-digest readers` names each reader's newest")
    for row in outbox.rows(("sent",), noted=RESENT):
        lines.append(f"  {row.digest_id} {row.who}: sent at {row.sent_at}, {row.last_error}; "
                     + ("the reader may have two copies with the same Message-ID" if row.channel == EMAIL
                        else "the chat may show it twice (the same Idempotency-Key)"))
    return lines


def _newest(lines: list[str], what: str, where: str, indent: str = "  ") -> list[str]:
    """The newest ROWS_SHOWN of `lines` (oldest first, as the outbox lists them), after one
    that counts the earlier ones and says `where` they are."""
    earlier = len(lines) - ROWS_SHOWN
    head = [f"{indent}{earlier} earlier {what}, not shown ({where})"] if earlier > 0 else []
    return head + lines[-ROWS_SHOWN:]


def followed_advice(config: Config) -> tuple[str, ...]:
    """How a collect's advice to add a calendar file ends, for each year the calendar knows
    now: followed since, so `status` leaves it out (none while a calendar file cannot be
    read: doctor's calendar row says why)."""
    try:
        years = calendar.load_calendar(config.sources.arxiv.calendar_files).years
    except ConfigError:
        return ()
    return tuple(calendar.how_to_add(year) for year in sorted(years))


def coverage_lines(summary: dict[str, Any] | None) -> list[str]:
    """A collect's coverage (coverage.Summary as stored) in plain words, one line each."""
    if not summary:
        return []
    span = f" ({summary['first']} → {summary['last']})" if summary["expected"] else ""
    groups = "; ".join(f"{g['name']}: {g['read']}/{g['expected']} read, {_ids(g)}, "
                       f"{g['kept']} matched the query" for g in summary["groups"])
    unsure = summary.get("unsure") or []  # a summary stored before `unsure`: none
    lines = [f"coverage: {summary['read']} of {summary['expected']} {'expected ' if unsure else ''}"
             f"arXiv announcements read{span}" + (f"; {groups}" if groups else "")]
    lines += [f"no announcement expected: {why}" for why in summary["no_announcement"]]
    if unsure:  # each an announcement or a holiday, as the digest's coverage line says
        days = "these evenings" if len(unsure) == summary["expected"] > 1 else ", ".join(unsure)
        years = ", ".join(map(str, summary["unsure_years"]))
        lines.append(f"no feed showed {days} and arXiv's holidays for {years} are not in the calendar: "
                     f"{'it' if len(unsure) == 1 else 'any of them'} may have been a holiday, with "
                     "nothing announced")
    for gap in summary["gaps"]:
        fix = f"recovered through {gap['recovered']}" if gap["recovered"] else "NOT recovered yet"
        lines.append(f"gap: {gap['group']} on {gap['day']}: {gap['cause']}, {fix}")
    return lines


def _ids(group: dict[str, Any]) -> str:
    """An archive's ids, as the digest's coverage line gives them: the API search reads only the
    papers that match the query, so an evening it read has none counted."""
    counted = group.get("counted", group["read"])  # a summary stored before `counted`: all were
    ids = f"ids {group['new']} new · {group['cross']} cross · {group['replace']} replaced"
    if counted == group["read"]:
        return ids
    if not counted:
        return "ids not counted (the API search reads only the papers that match the query)"
    return (f"{ids} in {counted} of {group['read']} (the API search, which read the rest, reads only "
            "the papers that match the query)")


def waiting_lines(rows: list[Delivery], readers_of: dict[str, set[str]] | None,
                  beat: dict[str, Any] | None) -> list[str]:
    """Rows still to deliver, the newest ROWS_SHOWN (a quota can hold back a group of hundreds):
    the tries that count toward giving up (a server never reached counts none), when the next
    is due (by the scheduler when its heartbeat `beat` is alive; run and send try at once), and
    why; or that a row is held for a channel the config does not have now (`readers_of`:
    outbox.routes'). A reply that holds the sender back, not the readers, is said once above
    them with what to check (a group of hundreds had it on each row)."""
    lines, now, scheduled = [], datetime.now(UTC), bool(beat and beat["alive"])
    held: dict[str, int] = {}  # a reply that holds the sender back: said once, not on each row
    for row in (due_by_now(row, now) for row in rows):
        if held_for_channel(row, readers_of):
            lines.append(f"  {row.digest_id} {row.who}: held for channel {row.channel}, which the config "
                         "does not have now; it goes when the channel is back, or `rl-digest send --drop "
                         f"{row.channel}` drops it for good")
            continue
        state = "hand-over interrupted" if row.interrupted else "pending"
        counted = f" after {row.attempts} of {MAX_ATTEMPTS} tries" if row.attempts else ""
        due = row.next_attempt.isoformat(timespec="seconds") if row.next_attempt else None
        when = (f"the scheduler tries at {due or 'its next look'}" if scheduled
                else f"next try due {'at ' + due if due else 'now'} (no scheduler runs here)")
        why = row.last_error
        if why and HELD in why:
            held[why] = held.get(why, 0) + 1
            why = "held with the sender, as said above"
        lines.append(f"  {row.digest_id} {row.who}: {state}{counted}; {when}, "
                     f"run or send at once" + (f" — {why}" if why else ""))
    said = [f"  {n} {'delivery waits' if n == 1 else 'deliveries wait'} for the sender: {why}"
            for why, n in held.items()]
    return said + _newest(lines, "pending", "`rl-digest status --json` lists them all")


def paper(config: Config, store: Store, paper_id: str) -> str:
    """One paper: the stored decision, the rule's reasons and the model's strongest terms."""
    found = store.papers([paper_id])
    if not found:
        raise ConfigError(f"{paper_id}: no such paper in the database")
    p = found[0]
    row = store.scores()[paper_id]
    verdict = {None: "none", True: "relevant", False: "irrelevant"}[row.verdict]
    if row.verdict is not None and row.verdict != row.relevant:  # the score's decision is kept apart
        verdict += " (it decides, not the score)"
    reasons = "; ".join(row.reasons) or "-"
    rule = rank.score(p.title, p.abstract, rank.compile_rules(config.relevance))
    lines = [f"{p.id}v{p.version}  {extract.readable(p.title) or p.title}",
             f"  categories: {', '.join(p.categories)}  sources: {', '.join(p.sources)}",
             f"  score: {row.score if row.score is not None else 'not scored'}  "
             f"relevant: {row.relevant}  your verdict: {verdict}",
             f"  topic: {row.topic}" + (f" (also {', '.join(row.topics)})" if row.topics else ""),
             f"  reasons: {reasons}",
             f"  rule: {rule.value:+.2f} (threshold {config.relevance.threshold})"]
    said = {who: v for who, v in readers.verdicts(store, paper_key(paper_id)).items() if who != "you"}
    if said:
        ups = sum(said.values())
        tally = f"{ups} {THUMBS[True]} {len(said) - ups} {THUMBS[False]}"
        if config.relevance.model:  # what the refit learns of this paper (learn.verdicts)
            label = row.verdict if row.verdict is not None else learn.readers_say(said.values())
            taught = "a tie, the model learns nothing from them" if label is None else \
                f"the model learns {'relevant' if label else 'irrelevant'}"
            tally += f": {'your verdict wins, ' if row.verdict is not None else ''}{taught}"
        lines.append(f"  readers: {' '.join(f'{a} {THUMBS[v]}' for a, v in sorted(said.items()))} ({tally})")
    seeds = store_seeds.all_seeds(store)
    taste = importance.taste(seeds, store.papers(s.arxiv_id for s in seeds if s.arxiv_id),
                             *learn.judged(store), config.relevance.follow_authors)
    weighed = importance.weigh([p], {p.id: row.score or 0.0}, taste, config.digest.importance)[p.id]
    lines.append(f"  importance: {round(weighed.total, 2) + 0.0:.2f} = " + " ".join(  # never "-0.00"
        f"{name} {round(value, 2) + 0.0:+.2f}" for name, value in weighed.parts()))  # nor "-0.00"
    model = learn.current(config.relevance, store, refit_now=False)
    if model is not None:
        strongest = model.text.strongest(p.title, p.abstract)
        terms = ", ".join(f"{gram} {weight:+.2f}" for gram, weight in strongest)
        lines += [f"  model {model.version}: text {model.text.probability(p.title, p.abstract):.2f}, "
                  f"rule {model.rule_probability(rule.value):.2f}, mixed "
                  f"{model.probability(p.title, p.abstract, rule.value):.2f} (threshold {model.threshold})",
                  f"  model's strongest terms: {terms or '-'}"]
    return "\n".join(lines) + "\n"


def judging(config: Config, store: Store) -> list[str]:
    """How often the LLM judge was asked and agreed with the scorer; how the scorer does on
    the reader's verdicts; which model scores."""
    threshold, _ = learn.band(config.relevance)
    rows = store.scores().values()
    judged = [r for r in rows if r.score is not None and any(x.startswith(JUDGED) for x in r.reasons)]
    agreed = sum((r.score >= threshold) == bool(r.relevant) for r in judged)  # type: ignore[operator]
    marked = [r for r in rows if r.verdict is not None and r.relevant is not None]
    matched = sum(bool(r.relevant) == r.verdict for r in marked)
    current = learn.current(config.relevance, store, refit_now=False)
    model = ("off (the rule alone)" if current is None else
             f"{current.version} (refit on the papers you and your readers judged: {current.verdicts})"
             if current.verdicts else f"{current.version} (shipped)")
    return [f"relevance model: {model}",
            f"LLM judge: {len(judged)} judged, {agreed} agreed with the scorer",
            f"your verdicts: {len(marked)}, the scorer agrees with {matched}"]


_LABELS = {"0": 0, "1": 1, "false": 0, "true": 1}  # a label as JSON's 0/1 or true/false, or quoted


def read_labels(path: Path) -> list[dict[str, Any]]:
    """JSONL rows with id, title, abstract, label; a bad line names file:line."""
    rows = []
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"--labels: {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--labels: {path}: not UTF-8 text (byte {exc.start})") from None
    for number, line in enumerate(text.split("\n"), 1):  # not splitlines: JSON may hold a raw U+2028
        if not line.strip():
            continue
        try:
            rows.append(_labelled(line))
        except KeyError as exc:
            raise ConfigError(f"{path}:{number}: not a labelled paper (no {exc})") from None
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{path}:{number}: not a labelled paper ({exc})") from None
    if not rows:
        raise ConfigError(f"{path}: no labelled papers")
    return rows


def _labelled(line: str) -> dict[str, Any]:
    """One JSONL line as a labelled paper; KeyError, ValueError or TypeError say why it is none."""
    row = json.loads(line)
    if not isinstance(row, dict):
        raise ValueError("not a JSON object")
    label = row["label"]
    if not isinstance(label, bool | int | str) or str(label).casefold() not in _LABELS:
        raise ValueError(f"label {json.dumps(label)} is not 0, 1, true or false")
    for key in ("title", "abstract"):
        if not isinstance(row.get(key) or "", str):
            raise ValueError(f"{key} is not text")
    return {"id": row["id"], "title": row["title"] or "", "abstract": row.get("abstract") or "",
            "label": _LABELS[str(label).casefold()], "categories": row.get("categories", []),
            "authors": row.get("authors", []),
            "borderline": bool(row.get("borderline"))}


def evaluation(config: Config, store: Store, rows: list[dict[str, Any]]) -> str:
    """The relevance filter (the current model, else the rule) against labels: the figures,
    the rule and the text model alone beside it, then its worst mistakes with reasons. The
    model is the refit the next run would make, not kept: eval takes no run lock, so it
    never waits for a run nor writes under one."""
    rules = rank.compile_rules(config.relevance)
    model = learn.current(config.relevance, store, keep=False)
    profile = decide.Profile.compile(config.relevance)

    def final(rows: Sequence[Mapping[str, Any]], rules: list[rank.Score]) -> list[rank.Score]:
        return decide.decide_all([(r["title"], r["abstract"], r.get("authors") or ()) for r in rows],
                                rules, model, profile)

    result = rank_eval.evaluate(rows, rules, then=final)
    lines = [f"model: {model.version if model else 'off (the rule alone)'}"]
    if model is not None:
        rule = rank_eval.evaluate(rows, rules)
        text = [p >= 0.5 for p in model.text.probabilities([r["title"] for r in rows],
                                                           [r["abstract"] for r in rows])]
        tp = sum(t and r["label"] for t, r in zip(text, rows, strict=True))
        lines.append(f"rule alone: precision {rule.precision:.3f}, recall {rule.recall:.3f}; text model "
                     f"alone: precision {tp / max(1, sum(text)):.3f}, "
                     f"recall {tp / max(1, sum(r['label'] for r in rows)):.3f}")
        taught = {p.id for p, _, _ in learn.verdicts(store)} if model.verdicts else set()  # a refit's own
        labelled = {split_arxiv_id(str(r["id"]))[0] for r in rows}
        seen = ({r["id"] for r in learn.training_rows()} | taught) & labelled
        if seen:
            lines.append(f"note: {len(seen)} of these papers are in the model's training data; "
                         f"figures on them flatter it")
    coverage = rank_eval.query_coverage(rows, config.sources.arxiv.categories, config.sources.arxiv.terms)
    lines += [
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
