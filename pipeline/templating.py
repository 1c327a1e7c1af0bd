"""The Jinja environments: where templates are found, the filters they see, their errors.

Apart from rendering because every stage that writes words (digests, the site, the
reading list, prompts, chat messages, the server's pages) builds its templates here: a
user's template folder first, then the built-in ones, compiled once and kept between
runs, with the same filters everywhere; and a template a user's folder breaks is named
as a config error, not a crash.
"""

from __future__ import annotations

import hashlib
import re
import traceback
from collections.abc import Callable, MutableMapping
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jinja2
from jinja2.loaders import split_template_path

from pipeline.bilingual import lines_beside, summary_lines, texts
from pipeline.config import bundled
from pipeline.errors import ConfigError
from pipeline.escape import data_line, md_escape, md_url, one_line, safe_url, xml_text
from pipeline.export import named
from pipeline.extract import checked_url
from pipeline.models import Entry
from pipeline.sources import seeds
from pipeline.text import first_sentence
from pipeline.text_wrap import underline, wrap

# --- filters --------------------------------------------------------------------------

def entry_links(entry: Entry) -> list[tuple[str, str]]:
    """(kind, url): the PDF of an arXiv entry (its title links the abstract page), then
    those read from its text, each through the same scheme and host check as every link."""
    found: list[tuple[str, str]] = []
    if entry.url and "arxiv.org/abs/" in entry.url:
        found.append(("pdf", entry.url.replace("/abs/", "/pdf/", 1)))
    for kind, url in entry.links:
        checked = checked_url(url)
        if checked and checked.lower().startswith(("http://", "https://")):
            found.append((kind, checked))
    return found


def clip(value: object, limit: int | None) -> str:
    """At most `limit` characters, cut at a word when there is one, with an ellipsis."""
    text = one_line(value)
    if limit is None or len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def byline(entry: Entry, count: int) -> tuple[tuple[str, ...], bool]:
    """The first `count` of an entry's authors, and whether to write "et al." after them:
    it has more, or its list was cut where it was collected (export.named: the name
    `others` that marks that is no one's to show)."""
    names, cut = named(entry)
    return names[:count], cut or len(names) > count


def short_title(value: object, limit: int = 40) -> str:
    """'PRISM: Distribution ...' -> 'PRISM' for table headers; otherwise clipped."""
    text = one_line(value)
    head = re.split(r"[:：]", text, maxsplit=1)[0].strip()
    if head and head != text and len(head) <= limit:
        return head
    return clip(text, limit)


def local_time(value: object, tz: str | None = None) -> str:
    """'2026-05-11T08:00+08:00' -> '2026-05-11 08:00' in `tz` (the zone is shown beside it)."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return one_line(value)
    if tz and moment.tzinfo is not None:
        try:
            moment = moment.astimezone(ZoneInfo(tz))
        except (KeyError, ValueError):
            pass
    return moment.strftime("%Y-%m-%d %H:%M")


def slug(value: object) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(value).lower()).strip("-") or "topic"


# --- environments -------------------------------------------------------------------

class _UserFirst(jinja2.ChoiceLoader):
    """A user's template folder first, then the built-in templates (pelican's ChoiceLoader).
    An environment is kept for the process (the scheduler's runs share it), and Jinja
    reloads a template whose file changed; a built-in one is also stale once the user's
    folder holds a file of its name, so a copy added between two runs is the next one's."""

    def __init__(self, user_dir: Path | None):
        self.user_dir = user_dir
        mine = [jinja2.FileSystemLoader(str(user_dir))] if user_dir is not None else []
        super().__init__([*mine, jinja2.FileSystemLoader(str(bundled("templates")))])

    def get_source(self, environment: jinja2.Environment,
                   template: str) -> tuple[str, str | None, Callable[[], bool] | None]:
        if self.user_dir is None:
            return super().get_source(environment, template)
        try:
            return self.loaders[0].get_source(environment, template)
        except jinja2.TemplateNotFound:
            pass
        source, filename, uptodate = self.loaders[-1].get_source(environment, template)
        copy = Path(self.user_dir, *split_template_path(template))
        return source, filename, lambda: not copy.is_file() and (uptodate is None or uptodate())

    def load(self, environment: jinja2.Environment, name: str,
             globals: MutableMapping[str, Any] | None = None) -> jinja2.Template:
        """Through get_source (ChoiceLoader's goes to each loader's own)."""
        return jinja2.BaseLoader.load(self, environment, name, globals)


def template_failure(exc: jinja2.TemplateError, user_dir: Path | None) -> ConfigError | None:
    """A template error that templates.dir is the cause of, as a config error naming the
    file: one of its templates that does not compile or render, or a built-in template
    that fails on a copy the folder holds from an older release. None: a bug of ours."""
    return _in_user_file(exc, user_dir) or _older_copy(exc, user_dir)


def _in_user_file(exc: jinja2.TemplateError, user_dir: Path | None) -> ConfigError | None:
    """A template of the user's folder that does not compile or render, as a config error
    naming its file and line (for a render error, its innermost frame there); None when no
    template of that folder is in it (a built-in template's error is a bug)."""
    if user_dir is None:
        return None
    if isinstance(exc, jinja2.TemplateSyntaxError):
        found = [(exc.filename, exc.lineno)]
    else:  # Jinja puts each template's own file and line in the traceback's frames
        found = [(frame.f_code.co_filename, line) for frame, line in traceback.walk_tb(exc.__traceback__)]
    mine = [(name, line) for name, line in found if name and Path(name).is_relative_to(user_dir)]
    if not mine:
        return None
    name, line = mine[-1]
    return ConfigError(f"templates.dir: {name}:{line}: {exc.message}",
                       "fix it, or take it out of the folder to use the built-in one")


def user_template_problems(user_dir: Path) -> list[str]:
    """Each template of the user's folder that is not valid Jinja, one line each, for config
    check: a run would stop on it, after collecting. (Its filters are not checked: which
    there are depends on what renders it; a run names an unknown one as it meets it.)"""
    env = text_env(user_dir)
    problems = []
    for path in sorted(user_dir.rglob("*.j2")):
        name = path.relative_to(user_dir).as_posix()
        try:
            env.parse(path.read_text(encoding="utf-8"), name, str(path))
        except jinja2.TemplateSyntaxError as exc:
            problems.append(str(_in_user_file(exc, user_dir)))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"templates.dir: {path}: cannot read: {getattr(exc, 'strerror', None) or exc}")
    return problems


def _older_copy(exc: jinja2.TemplateError, user_dir: Path | None) -> ConfigError | None:
    """A template that failed while a templates.dir replaces built-in ones, as one line naming
    them: a copy made from an older release lacks what this release's templates take from it
    (a macro of partials/labels.j2, a variable). None when it replaces none (a bug of ours)."""
    if user_dir is None or not user_dir.is_dir():
        return None
    shipped = bundled("templates")
    mine = sorted(str(path.relative_to(user_dir)) for path in user_dir.rglob("*")
                  if path.is_file() and (shipped / path.relative_to(user_dir)).is_file())
    if not mine:
        return None
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename.endswith(".j2")]
    where = ""
    if frames:
        path = Path(frames[-1].filename)
        name = next((str(path.relative_to(root)) for root in (user_dir, shipped)
                     if path.is_relative_to(root)), path.name)
        where = f"{name}:{frames[-1].lineno}: "
    what = " ".join(str(exc.message or exc).split())
    one = len(mine) == 1
    named = ", ".join(mine[:3]) + (f" and {len(mine) - 3} more" if len(mine) > 3 else "")
    them = "it" if one else "them"
    return ConfigError(f"templates.dir {user_dir}: {where}{what}",
                       f"your {named} replace{'s' if one else ''} the built-in file{'' if one else 's'} "
                       f"of that name, and a copy from an older release lacks what this one needs: "
                       f"update {them} from {shipped}, or move {them} aside")


class _CompiledTemplates(jinja2.FileSystemBytecodeCache):
    """Templates compiled once and kept between runs (Jinja's per-user 0700 folder in the temp
    dir; a changed template is compiled again): a run renders from some forty templates, and
    compiling them took longer than rendering. A cache that cannot be written is skipped."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


@cache
def _bytecode_cache(options: str) -> jinja2.BytecodeCache | None:
    """One cache per set of compile options: Jinja keys compiled code by template only, and
    the same template compiles differently with autoescape on (HTML) and off (Markdown)."""
    tag = hashlib.sha256(options.encode()).hexdigest()[:16]
    try:
        return _CompiledTemplates(pattern=f"rl-digest-{tag}-%s.cache")
    except (OSError, RuntimeError):  # no safe folder of our own: compile each time
        return None


def _shared(env: jinja2.Environment) -> jinja2.Environment:
    env.bytecode_cache = _bytecode_cache(repr((
        jinja2.__version__, env.autoescape, env.trim_blocks, env.lstrip_blocks,
        env.keep_trailing_newline, env.newline_sequence, env.undefined.__name__, env.optimized,
        sorted(env.extensions))))
    env.filters.update(one_line=one_line, clip=clip, short_title=short_title, local=local_time, byline=byline,
                       slug=slug, safe_url=safe_url, seed_origin=seeds.origin, data_line=data_line,
                       first_sentence=lambda value, limit: first_sentence(one_line(value), limit))
    env.globals.update(texts=texts, summary_lines=summary_lines, lines_beside=lines_beside,
                       entry_links=entry_links)
    # The same helpers as filters, for the templates of the reading list's 100,000 entries:
    # Jinja sends a call through Context.call, a filter straight to the function (a fifth
    # of a topic page's rendering time).
    env.filters.update(in_languages=lambda pair, languages: texts(languages, *pair), entry_links=entry_links,
                       topic_name=_topic_name)
    return env


@jinja2.pass_context
def _topic_name(context: Any, key: str) -> str:
    """A topic's name in the shown languages (its key if the taxonomy no longer names it)."""
    return context["topic_names"].get(key, key)


def new_env(user_dir: Path | None = None, html: bool = False,
            languages: tuple[str, ...] = ()) -> jinja2.Environment:
    """A new environment, for a purpose that adds its own filters and globals to it once,
    before it renders (site.env, the chat channels'); the others share text_env and html_env.
    `html`: HTML and Atom, with autoescape on for every template (select_autoescape misses
    *.j2); else Markdown, plain text and prompts, no autoescape and explicit filters.
    `languages`: those shown, in order, a global (the digests' templates'; none for prompts),
    so the macro files they import read it without `with context`: such an import makes
    a module per render whose macros refer back to its context, a reference cycle that kept
    each rendered page (and its digest) until the cyclic collector's next full pass. A page's
    own macro that reads its context or calls anything is such a cycle too: the pages keep
    theirs in macro files, or to their arguments and filters (the chat posts')."""
    env = jinja2.Environment(
        loader=_UserFirst(user_dir), undefined=jinja2.StrictUndefined, autoescape=html,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=not html,
    )
    if html:
        env.filters.update(url=safe_url, xml=xml_text)
    else:
        env.filters.update(md=md_escape, md_url=md_url, wrap=wrap, underline=underline)
    if languages:
        env.globals["languages"] = list(languages)
    return _shared(env)


@cache
def text_env(user_dir: Path | None = None, languages: tuple[str, ...] = ()) -> jinja2.Environment:
    """Markdown, plain text and prompts, built once per template folder and languages (a run
    renders from some sixteen places, and each loaded its templates again): never changed
    once made."""
    return new_env(user_dir, languages=languages)


@cache
def html_env(user_dir: Path | None = None, languages: tuple[str, ...] = ()) -> jinja2.Environment:
    """HTML and Atom, built once per template folder and languages as text_env is."""
    return new_env(user_dir, html=True, languages=languages)
