"""Bilingual summaries from any OpenAI-compatible chat endpoint, cached, with fallback.

Each task is one chat completion per item with a pydantic model for its reply: paper
summaries, relevance verdicts, English for curated Chinese (seed summaries, and the seed
page's readings, table and synthesis), featured readings and the comparison + synthesis.
A reply is validated; an invalid or blank one is asked for once more with a stricter
note; then the item falls back (no result, counted, not cached, so the next run tries
again). A valid reply whose Chinese goes against the glossary is kept, flagged and
counted. Results are cached in the store under a key that changes with the item's
version, the model, the prompts, the glossary and the languages, so a re-run of the same
week makes no calls.

Retries of failed requests (429, 5xx, timeouts, honouring Retry-After) are the openai
client's own; on top of them each item has a wall-clock deadline (see pipeline/llm.py).
What each reply must hold and how a reply is read are in pipeline/replies.py, the glossary
in pipeline/glossary.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import jinja2
from pydantic import ValidationError

from pipeline import progress
from pipeline.config_sections import Enrich
from pipeline.errors import DigestError, LLMCallFailed
from pipeline.glossary import glossary_misses, load_glossary
from pipeline.models import Enrichment, Paper, SeedEntry, paper_key, seed_key
from pipeline.replies import (
    Comparison,
    FeaturedPick,
    FeaturedReading,
    Highlights,
    PaperSummary,
    RelevanceVerdict,
    Reply,
    SeedTranslation,
    Translation,
    parse_reply,
    wire_schema,
)
from pipeline.stopping import STOP
from pipeline.text import clean

if TYPE_CHECKING:
    from pipeline import llm

log = logging.getLogger(__name__)

CACHE_VERSION = 1  # bump when the meaning of a cached reply changes


# --- the client ------------------------------------------------------------------------------


def make_client(cfg: Enrich, *, max_retries: int | None = None) -> llm.Client | None:
    """A client for cfg.base_url; None for provider none. The key comes from the env."""
    if cfg.provider == "none":
        return None
    key = os.environ.get(cfg.api_key_env)
    if key is None:
        raise DigestError(
            f"enrich.api_key_env: the environment variable {cfg.api_key_env} is not set",
            f"set the {cfg.api_key_env} environment variable (an empty value will do for a "
            "local server such as Ollama), or set enrich.provider: none",
        )
    from pipeline import llm  # openai takes 0.6 s to import: only runs with an LLM pay it

    return llm.Client(cfg, key, max_retries=max_retries)


# --- the enricher ----------------------------------------------------------------------------


class Item(NamedTuple):
    """A featured paper or seed, as read_featured and compare take it."""

    key: str  # paper_key(...) or seed_key(...)
    title: str
    text: str  # the abstract, or the curated Chinese summary
    version: int | str = 1


@dataclass(frozen=True)
class Task:
    kind: str  # the store's kind, the schema's name and the prompt's `Task:` line
    template: str
    model: type[Reply]


SUMMARY = Task("paper_summary", "prompts/paper_summary.j2", PaperSummary)
SEED = Task("seed_translation", "prompts/seed_translation.j2", SeedTranslation)
TRANSLATION = Task("translation", "prompts/translation.j2", Translation)
FEATURED = Task("featured_reading", "prompts/featured_reading.j2", FeaturedReading)
COMPARISON = Task("comparison", "prompts/comparison.j2", Comparison)
PICK = Task("featured_pick", "prompts/featured_pick.j2", FeaturedPick)
HIGHLIGHTS = Task("highlights", "prompts/highlights.j2", Highlights)
JUDGE = Task("relevance_judgement", "prompts/relevance_judgement.j2", RelevanceVerdict)
SYSTEM = "prompts/system.j2"
RETRY = "prompts/retry.j2"


@dataclass(frozen=True)
class Job:
    task: Task
    item_key: str  # what the cache row is about
    out_key: str  # what the caller's dict is keyed by
    version: str
    context: dict[str, Any]
    check: Callable[[Reply], None] | None = None  # extra validation (raises ValueError)


@dataclass
class EnrichReport:
    calls: int = 0  # create() calls made (each may include the client's own retries)
    cached: int = 0  # results found in the cache
    done: int = 0  # new results (cached now)
    failures: int = 0  # items that fell back after failing; tried again next run
    pending: int = 0  # not attempted: over max_papers, token budget spent, halted or offline
    tokens_in: int = 0
    tokens_out: int = 0
    glossary_flags: int = 0  # terms a reply's Chinese rendered against the glossary
    glossary_examples: list[str] = field(default_factory=list)
    error: str | None = None  # why calls stopped early, if they did
    last_failure: str | None = None  # why the last item fell back, for status

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Cache(Protocol):
    """Where LLM results are kept between runs (the store is one)."""

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]: ...

    def put_many(self, results: Iterable[Enrichment]) -> None: ...


class Enricher:
    """Runs the tasks through one client, with the cache in front and fallback behind.

    client None (provider none, --offline, or no client made) means cached results only.
    """

    def __init__(self, cfg_enrich: Enrich, languages: Sequence[str], cache: Cache,
                 client: llm.Client | None, env: jinja2.Environment,
                 progress: bool | None = None):
        self.cfg = cfg_enrich
        self.languages = list(languages)
        self.cache = cache
        self.client = client if cfg_enrich.provider != "none" else None
        self.env = env
        self.progress = progress  # None: a bar only on a terminal
        self.report = EnrichReport()
        self._lock = threading.Lock()
        self._hashes: dict[str, str] = {}
        self.glossary = load_glossary(env, cfg_enrich.glossary)
        self._failed_in_a_row = 0  # the circuit breaker (enrich.failure_limit)
        self._asked: Counter[str] = Counter()  # calls let through `limit`, by label: one count a run
        self._waiting: Counter[str] = Counter()  # and those held back by it

    # --- the tasks ---
    def summarise(self, papers: Iterable[Paper]) -> dict[str, PaperSummary]:
        """Paper id -> summary; calls for at most max_papers a run (all batches together),
        in the order given (best first)."""
        jobs = [Job(SUMMARY, paper_key(p.id), p.id, str(p.version), {"paper": p}) for p in papers]
        return self._run(jobs, "summaries", limit=self.cfg.max_papers)  # type: ignore[return-value]

    def judge(self, papers: Iterable[Paper]) -> dict[str, RelevanceVerdict]:
        """Paper id -> the LLM's relevance verdict, for papers the term rule is unsure of."""
        jobs = [Job(JUDGE, paper_key(p.id), p.id, str(p.version), {"paper": p}) for p in papers]
        return self._run(jobs, "relevance judgements", limit=self.cfg.max_papers)  # type: ignore[return-value]

    def translate_seeds(self, entries: Iterable[SeedEntry]) -> dict[str, SeedTranslation]:
        """seed_key(title) -> English for the curated Chinese, which is never changed."""
        found = self._run(self._seed_jobs(entries), "seed translations", limit=self.cfg.max_papers)
        return found  # type: ignore[return-value]

    def untranslated(self, entries: Iterable[SeedEntry]) -> list[SeedEntry]:
        """The entries whose Chinese, as it reads now, has no English in the cache (shown
        while the LLM was off, or edited since): a cache look-up, no call."""
        jobs = self._seed_jobs(entries)
        keys = [self.cache_key(job.task, job.item_key, job.version) for job in jobs]
        stored = self.cache.get_many(keys)
        return [job.context["entry"] for job, key in zip(jobs, keys, strict=True) if key not in stored]

    def _seed_jobs(self, entries: Iterable[SeedEntry]) -> list[Job]:
        """A translation job for each entry with Chinese and no English of its own, by the
        Chinese it has now."""
        if "en" not in self.languages:
            return []
        jobs = []
        for entry in entries:
            if not entry.summary_zh or entry.summary_en:
                continue
            key = seed_key(entry.title)
            version = hashlib.sha256(entry.summary_zh.encode("utf-8")).hexdigest()[:16]
            jobs.append(Job(SEED, key, key, version, {"entry": entry}))
        return jobs

    def translate(self, texts: Sequence[str]) -> dict[str, str]:
        """Chinese -> English for curated texts (the seed page's readings, table, synthesis);
        one request for them all, cached, so each is translated once."""
        texts = list(texts)
        if "en" not in self.languages or not texts:
            return {}

        def one_each(reply: Reply) -> None:
            got = len(reply.texts_en)  # type: ignore[attr-defined]
            if got != len(texts):
                raise ValueError(f"texts_en has {got} items, not one for each of the {len(texts)} texts")

        version = hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()[:16]
        key = f"translation:{version}"
        job = Job(TRANSLATION, key, key, version, {"texts": texts}, check=one_each)
        reply = self._run([job], "translations").get(key)
        return dict(zip(texts, reply.texts_en, strict=True)) if reply else {}  # type: ignore[attr-defined]

    def read_featured(self, items: Iterable[Item | tuple[Any, ...]]) -> dict[str, FeaturedReading]:
        """Item key -> an in-depth reading (headline plus labelled parts)."""
        jobs = [Job(FEATURED, it.key, it.key, str(it.version), {"item": it})
                for it in map(_item, items)]
        return self._run(jobs, "featured readings")  # type: ignore[return-value]

    def compare(self, items: Iterable[Item | tuple[Any, ...]], question: str | None = None
                ) -> Comparison | None:
        """A comparison table (one cell per item per row) and the synthesis, along the
        `question` the papers share when it is known; None if < 2 items."""
        found = [_item(it) for it in items]
        if len(found) < 2:
            return None

        def one_cell_each(reply: Reply) -> None:
            for row in reply.rows:  # type: ignore[attr-defined]
                if len(row.cells) != len(found):
                    raise ValueError(f"row {row.label_en!r} has {len(row.cells)} cells, "
                                     f"not one for each of the {len(found)} papers")

        key = "compare:" + "+".join(it.key for it in found)
        version = "+".join(str(it.version) for it in found) + (f"?{question}" if question else "")
        job = Job(COMPARISON, key, key, version, {"papers": found, "question": question},
                  check=one_cell_each)
        return self._run([job], "comparison").get(key)  # type: ignore[return-value]

    def pick_featured(self, items: Sequence[Item], n: int) -> FeaturedPick | None:
        """From the week's top papers, the (up to) n that share one question, and the question."""
        found = [_item(it) for it in items]
        key = f"pick{n}:" + "+".join(it.key for it in found)
        version = "+".join(str(it.version) for it in found)
        job = Job(PICK, key, key, version, {"papers": found, "n": n})
        return self._run([job], "featured pick").get(key)  # type: ignore[return-value]

    def highlights(self, items: Sequence[Item]) -> Highlights | None:
        """3-5 one-line takeaways of the week, each naming one of `items` (best first)."""
        found = [_item(it) for it in items]
        if len(found) < 3:
            return None

        def names_a_paper(reply: Reply) -> None:
            """Each takeaway names a listed paper, and a different one: five lines on one
            paper would crowd out the week."""
            named: set[int] = set()
            for taken in reply.items:  # type: ignore[attr-defined]
                if not 1 <= taken.paper <= len(found):
                    raise ValueError(f"paper {taken.paper} is not one of the {len(found)} listed")
                if taken.paper in named:
                    raise ValueError(f"paper {taken.paper} has two takeaways; one each")
                named.add(taken.paper)

        key = "highlights:" + "+".join(it.key for it in found)
        version = "+".join(str(it.version) for it in found)
        job = Job(HIGHLIGHTS, key, key, version, {"papers": found}, check=names_a_paper)
        return self._run([job], "highlights").get(key)  # type: ignore[return-value]

    # --- cache ---
    def cache_key(self, task: Task, item_key: str, version: str) -> str:
        """sha256 of (item, version, model, prompt hash, language set, task kind)."""
        recipe = [item_key, str(version), self.cfg.model, self.prompt_hash(task),
                  sorted(self.languages), task.kind, CACHE_VERSION]
        digest = hashlib.sha256(json.dumps(recipe, ensure_ascii=False).encode("utf-8")).hexdigest()
        return f"{task.kind}:{digest}"

    def prompt_hash(self, task: Task) -> str:
        """sha256 of the templates' source (system, task, retry), the schema and the glossary."""
        if task.kind not in self._hashes:
            sha = hashlib.sha256()
            for name in (SYSTEM, task.template, RETRY):
                sha.update(name.encode() + b"\0" + self._source(name).encode("utf-8") + b"\0")
            sha.update(json.dumps(wire_schema(task.model), sort_keys=True).encode())
            sha.update(json.dumps({t: asdict(v) for t, v in self.glossary.items()}, sort_keys=True,
                                  ensure_ascii=False).encode())
            self._hashes[task.kind] = sha.hexdigest()
        return self._hashes[task.kind]

    def _source(self, name: str) -> str:
        assert self.env.loader is not None
        return self.env.loader.get_source(self.env, name)[0]

    # --- running jobs ---
    def say_waiting(self) -> None:
        """One line a task for what max_papers held back over all of the run's batches (the
        week's papers and the later ones), not a line a batch."""
        for label, count in self._waiting.items():
            log.info("%s: %d wait for the next run (max_papers %d)", label, count, self.cfg.max_papers)
        self._waiting.clear()

    def _run(self, jobs: list[Job], label: str, limit: int | None = None) -> dict[str, Reply]:
        """Cached results for all; calls for the rest (at most `limit` over the run's batches
        of this label), `concurrency` at once."""
        jobs = list({job.out_key: job for job in jobs}.values())  # each item once
        results: dict[str, Reply] = {}
        todo: list[tuple[Job, str]] = []
        keys = [self.cache_key(job.task, job.item_key, job.version) for job in jobs]
        stored = self.cache.get_many(keys)
        for job, key in zip(jobs, keys, strict=True):
            hit = self._cached(job, stored.get(key))
            if hit is not None:
                results[job.out_key] = hit
            elif self.client is None:
                self._count(pending=1)
            else:
                todo.append((job, key))
        left = None if limit is None else limit - self._asked[label]
        if left is not None and len(todo) > left:
            self._waiting[label] += len(todo) - left  # said once, by say_waiting
            self._count(pending=len(todo) - left)
            todo = todo[:left]
        self._asked[label] += len(todo)
        if todo and self._stopped():  # halted by an earlier batch: no "N to enrich", no bar
            self._count(pending=len(todo))
            todo = []
        if not todo:
            return results  # in the order given: all came from the cache
        prompts = [self._messages(job, None) for job, _ in todo]  # a broken template stops here
        workers = min(self.cfg.concurrency, len(todo))
        log.info("%s: %d to enrich", label, len(todo))
        with progress.bar(label, len(todo), show=self.progress) as advance, \
                ThreadPoolExecutor(max_workers=workers, thread_name_prefix="enrich") as pool:
            futures = {pool.submit(self._attempt, job, messages): (job, key)
                       for (job, key), messages in zip(todo, prompts, strict=True)}
            for future in as_completed(futures):
                job, key = futures[future]
                reply, tokens = future.result()
                if reply is not None:
                    # kept the moment it arrives: a killed run loses no paid-for reply
                    self.cache.put_many([Enrichment(key, job.item_key, job.task.kind,
                                                    reply.model_dump(mode="json"), tokens)])
                    results[job.out_key] = reply
                    self._count(done=1)
                advance()
        return {job.out_key: results[job.out_key] for job in jobs if job.out_key in results}

    def _cached(self, job: Job, data: dict[str, Any] | None) -> Reply | None:
        if data is None:
            return None
        try:
            reply = job.task.model.model_validate(data)
        except ValidationError:
            return None  # an older shape: enrich again
        self._count(cached=1)
        return reply

    def _attempt(self, job: Job,
                 messages: list[dict[str, str]]) -> tuple[Reply | None, tuple[int, int]]:
        """One item: a call, one stricter call if the reply was unusable, within the deadline."""
        deadline = time.monotonic() + self.cfg.deadline_seconds
        spent = [0, 0]
        problem: str | None = None
        for attempt in range(2):
            stop = self._stopped()
            if stop and problem is None:
                self._count(pending=1)
                return None, (0, 0)
            if stop or time.monotonic() >= deadline:
                self._fail(job, f"{problem}; then {stop or 'the deadline passed'}")
                return None, (spent[0], spent[1])
            if problem is not None:
                messages = self._messages(job, problem)
            try:
                content, used, note = self._call(messages, job.task, deadline)
            except LLMCallFailed as exc:
                why = exc.why
                if exc.halt:
                    self._halt(why)
                self._fail(job, why)
                if not exc.filtered:  # a content filter refusing this paper says nothing of the provider
                    self._call_failed(why)
                return None, (spent[0], spent[1])
            spent[0] += used[0]
            spent[1] += used[1]
            try:
                reply = parse_reply(content, job.task.model, fit=attempt == 1, shown=self.languages)
                if job.check:
                    job.check(reply)
                self._check_glossary(job, reply)
                self._call_failed(None)
                return reply, (spent[0], spent[1])
            except ValueError as exc:
                problem = str(exc) if note is None else note if content is None else f"{note}: {exc}"
                log.info("%s: unusable reply (%s)", job.item_key, problem)
        self._fail(job, f"unusable reply twice: {problem}")
        self._call_failed(f"unusable reply twice: {problem}")  # a model that cannot answer: stop paying
        return None, (spent[0], spent[1])

    def _call(self, messages: list[dict[str, str]], task: Task,
              deadline: float) -> tuple[str | None, tuple[int, int], str | None]:
        """One create() (the client retries inside it); the reply's content, token usage and
        what an unusable reply is to be told with: the model refused, or was cut off at its
        output limit."""
        kwargs: dict[str, Any] = {
            "model": self.cfg.model, "messages": messages,
            "response_format": self._response_format(task),
            "timeout": max(0.001, min(self.cfg.timeout_seconds, deadline - time.monotonic())),
        }
        if self.cfg.extra_body:
            kwargs["extra_body"] = dict(self.cfg.extra_body)
        self._count(calls=1)
        answer = self.client.complete(deadline, **kwargs)  # type: ignore[union-attr]
        # some local servers report no usage: estimate, so the budget still holds
        used = answer.usage or (sum(len(m["content"]) for m in messages) // 3, 0)
        self._count(tokens_in=used[0], tokens_out=used[1])
        if answer.refusal and not answer.content:  # asked again, then falls back, saying so
            return None, used, f"the model refused ({clean(answer.refusal)[:200]})"
        return answer.content, used, (
            "the reply was cut off at the model's output limit (finish_reason: length)"
            if answer.cut and answer.content is not None else None)

    def _messages(self, job: Job, problem: str | None) -> list[dict[str, str]]:
        """System + one user turn; the retry note joins it (some chat templates refuse two)."""
        schema = None
        if self.cfg.structured == "json_object":
            schema = json.dumps(wire_schema(job.task.model), ensure_ascii=False, indent=1)
        common = {"glossary": {term: t.zh for term, t in self.glossary.items()},
                  "languages": self.languages, "schema": schema, "task": job.task.kind}
        try:
            system = self.env.get_template(SYSTEM).render(**common)
            user = self.env.get_template(job.task.template).render(**common, **job.context)
            if problem is not None:
                user += "\n" + self.env.get_template(RETRY).render(**common, problem=problem)
        except jinja2.TemplateError as exc:
            where = getattr(exc, "name", None) or job.task.template
            line = getattr(exc, "lineno", None)
            raise DigestError(f"{where}{f':{line}' if line else ''}: {exc.message}",
                              "fix the prompt template (templates.dir overrides the built-in ones)",
                              ) from None
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _response_format(self, task: Task) -> dict[str, Any]:
        if self.cfg.structured == "json_object":
            return {"type": "json_object"}
        return {"type": "json_schema",
                "json_schema": {"name": task.kind, "schema": wire_schema(task.model),
                                "strict": True}}

    # --- bookkeeping (worker threads share these) ---
    def _count(self, **amounts: int) -> None:
        with self._lock:
            for name, amount in amounts.items():
                setattr(self.report, name, getattr(self.report, name) + amount)

    def _stopped(self) -> str | None:
        if STOP.is_set():
            return "a stop was asked for"
        with self._lock:
            if self.report.error:
                return self.report.error
            budget = self.cfg.max_tokens_per_run
            spent = self.report.tokens_in + self.report.tokens_out
        if budget is not None and spent >= budget:
            why = f"the token budget of {budget} (enrich.max_tokens_per_run) is spent"
            if self._halt(why):  # said once; calls already under way finish, so it can run over
                log.warning("enrich: %s (%d tokens); the rest waits for the next run", why, spent)
            return why
        return None

    def _check_glossary(self, job: Job, reply: Reply) -> None:
        """Flag and count a Chinese rendering the glossary avoids; the reply stays usable."""
        if "zh" not in self.languages:
            return
        misses = glossary_misses(reply, self.glossary)
        if misses:
            log.info("%s: against the glossary: %s", job.item_key, "; ".join(misses))
            with self._lock:
                self.report.glossary_flags += len(misses)
                self.report.glossary_examples.extend(misses[:3 - len(self.report.glossary_examples)])

    def _fail(self, job: Job, why: str) -> None:
        self._count(failures=1)
        with self._lock:
            self.report.last_failure = f"{job.item_key}: {why}"
        log.warning("%s: %s fell back: %s", job.item_key, job.task.kind, why)

    def _halt(self, why: str) -> bool:
        with self._lock:
            if self.report.error:
                return False
            self.report.error = why
            return True

    def _call_failed(self, why: str | None) -> None:
        """Count failed calls in a row (None: one succeeded); at the limit the run stops calling,
        with one warning instead of a retry chain for every paper left."""
        with self._lock:
            self._failed_in_a_row = 0 if why is None else self._failed_in_a_row + 1
            tripped = self._failed_in_a_row == self.cfg.failure_limit
        if tripped and self._halt(f"{self.cfg.failure_limit} calls failed in a row (last: {why}); "
                                  "the rest of this run goes without the LLM"):
            log.warning("enrich: the LLM at %s failed %d times in a row; skipping it for the rest "
                        "of this run", self.cfg.base_url, self.cfg.failure_limit)


def _item(value: Item | tuple[Any, ...]) -> Item:
    return value if isinstance(value, Item) else Item(*value)
