"""One Jinja environment per output kind; Digest -> md / html / txt / subject / feed.

HTML (and the Atom feed) autoescape everything; Markdown and text go through
filters that keep outside text (arXiv titles with TeX, `|`, `*`, `<`, newlines;
LLM output) from becoming markup, breaking a table row or making a live link.
All wording lives in the templates (partials/labels.j2); this module only
chooses templates, shapes values and enforces the email size cap.
"""

from __future__ import annotations

import hashlib
import re
import string
import traceback
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from email import policy as email_policy
from email.message import EmailMessage
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import css_inline
import jinja2
from markupsafe import Markup

from pipeline import links
from pipeline.config import bundled
from pipeline.errors import ConfigError
from pipeline.export import named
from pipeline.extract import checked_url
from pipeline.models import Digest, Entry, Section
from pipeline.sources import seeds
from pipeline.text import clean_name, first_sentence

if TYPE_CHECKING:
    from pipeline.config import Config

# Gmail clips a message body over 102 KB ("[Message clipped]"); stay clear of it.
EMAIL_LIMIT = 100_000  # bytes of the inlined HTML as mail carries it (encoded, CRLF lines)
# How the email's parts are encoded (deliver/email.py builds with it): 7-bit safe, so a
# part goes quoted-printable or base64, whichever email's sniffing of its start prefers, in
# lines of at most 76 characters as RFC 2045 (6.7) asks of quoted-printable (Python's default,
# 78, is a header's line; its quoted-printable lines were 78 long).
MAIL_POLICY = email_policy.default.clone(cte_type="7bit", max_line_length=76)
CLIP_EN = 160  # characters kept of an English line when the email must shrink
CLIP_ALL = (600, 200, 60)  # then of each featured, comparison and synthesis text, in steps
WIDTH = 72  # columns of the plain-text email
FEED_DIGESTS = 20  # entries in feed.xml: a reader polls the whole file, each entry a whole digest

# --- Markdown --------------------------------------------------------------------

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def one_line(value: object) -> str:
    """Runs of whitespace (newlines too) to one space; control characters dropped. Markup
    (a label macro's, escaped already) stays Markup, so HTML does not escape it again
    ("Q&amp;amp;A" in the preheader made of a label and a title)."""
    text = " ".join(_CONTROL.sub(" ", str(value)).split())
    return Markup(text) if isinstance(value, Markup) else text


_PAPER_TAG = re.compile(r"(?:<|&lt;)\s*/?\s*paper\b.*?(?:>|&gt;)", re.IGNORECASE)


def data_line(value: object) -> str:
    """Outside text (an arXiv title or abstract) for a prompt's <paper> block: one_line, with
    no <paper> or </paper> in it, so the text cannot end its block and write instructions
    after it; nor one written `&lt;/paper&gt;` or with a zero-width character inside, which a
    model reads as the tag (the invisible characters go first, as from a title)."""
    return one_line(_PAPER_TAG.sub(" ", clean_name(str(value))))


_PUNCT = frozenset(string.punctuation)
_ALWAYS = frozenset("`*[]<>|~")  # inline markup, HTML, autolinks, table cells, strikethrough
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_NUMBERED = re.compile(r"^(\d{1,9})[.)]")
_SCHEME = re.compile(r"(https?|ftp|mailto|xmpp):(//)?", re.IGNORECASE)
_WWW = re.compile(r"(www)\.", re.IGNORECASE)
_CLOSING = re.compile(r"(\s)(?=#+\s*$)")  # before a run of # that ends the text
_MARKUP = re.compile(r"[\\`*\[\]<>|~_&@]")  # what the loop in md_escape may change


def md_escape(value: object) -> str:
    """Inline Markdown-safe text: one line, no markup, no live link, table-safe.

    Only what could form markup is escaped, so TeX stays readable: `$` is left
    alone, a backslash is doubled only where it would escape the next
    character, and `_` inside a word (`$\\alpha_t$`) cannot open emphasis, so
    it stays as is. Links are defused the way GitHub's parser needs: `http\\:\\/\\/`,
    `www\\.`, and a word joiner (U+2060, invisible) after every `@`.
    """
    line = one_line(value)
    text = _MARKUP.sub(lambda m: _md_char(line, m.start()), line)  # most titles: no match
    if text[:1] in ("#", "+", "-", "="):  # a heading, list item or setext underline
        text = "\\" + text
    number = _NUMBERED.match(text)  # "1. " would start an ordered list
    if number:
        text = number.group(1) + "\\" + text[len(number.group(1)):]
    text = _SCHEME.sub(lambda m: m.group(1) + "\\:" + ("\\/\\/" if m.group(2) else ""), text)
    text = _CLOSING.sub(r"\1\\", text)  # in a heading, "C #" would lose its "#" as a closing sequence
    return _WWW.sub(r"\1\\.", text)


def _md_char(text: str, i: int) -> str:
    """The character at `i` (one `_MARKUP` finds) as md_escape writes it, by its neighbours."""
    ch = text[i]
    prev = text[i - 1] if i else ""
    nxt = text[i + 1] if i + 1 < len(text) else ""
    if ch == "\\":
        return "\\\\" if not nxt or nxt in _PUNCT else "\\"
    if ch in _ALWAYS:
        return "\\" + ch
    if ch == "_":
        return "_" if prev.isalnum() and nxt.isalnum() else "\\_"
    if ch == "&":
        return "\\&" if _ENTITY.match(text, i) else ch  # `&lt;` stays the four characters it is
    return "@\u2060"  # a word joiner: GFM makes no mailto link of a@b.org


def safe_url(value: object) -> str:
    """A link target we are willing to emit: http(s), mailto or a relative path; else '#'.
    Control characters go, as a browser drops them: "\\x01javascript:" is javascript: there."""
    url = "".join(re.sub(r"[\x00-\x1f\x7f]", "", str(value or "")).split())
    if not url:
        return "#"
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):", url)
    if scheme and scheme.group(1).lower() not in ("http", "https", "mailto"):
        return "#"
    return url


def md_url(value: object) -> str:
    """A URL safe inside (...) of a Markdown link."""
    url = safe_url(value)
    for raw, enc in ((" ", "%20"), ("(", "%28"), (")", "%29"), ("<", "%3C"), (">", "%3E"),
                     ("\\", "%5C"), ("`", "%60"), ('"', "%22")):
        url = url.replace(raw, enc)
    return url


# --- plain text: CJK-aware width and wrapping ---------------------------------------

_NO_LINE_START = frozenset("，。、；：！？）》」』】〉〕｝”’…·,.;:!?)]}%")
_NO_LINE_END = frozenset("（《「『【〈〔｛“‘([{")


def char_width(ch: str) -> int:
    if unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(value: object) -> int:
    """Columns a string takes in a terminal: CJK and emoji count 2."""
    return sum(char_width(ch) for ch in str(value))


_LINK = re.compile(r"(?i)https?://|mailto:")  # a word wrap keeps whole: the schemes safe_url lets out
_LINK_END = re.compile("[，。、；：！？）》」』】〉〕｝]")  # Chinese text goes on after a link here


def _atoms(text: str) -> list[tuple[str, bool]]:
    """(atom, space_before): English words stay whole, CJK may break between characters,
    but not inside a link (a path in Chinese: 'https://lists.example.org/退订?u=…'), which
    runs to the word's end or to Chinese punctuation ('https://…，数据见')."""
    atoms: list[tuple[str, bool]] = []
    for n, word in enumerate(text.split()):
        pieces: list[str] = []
        link = _LINK.search(word)
        start = link.start() if link else len(word)
        after = _LINK_END.search(word, start)
        end = after.start() if after else len(word)
        for i, ch in enumerate(word):
            wide = char_width(ch) == 2
            if pieces and (start < i < end or ch in _NO_LINE_START or pieces[-1][-1] in _NO_LINE_END):
                pieces[-1] += ch  # a link; kinsoku: no closing mark at a line start, no opening at an end
            elif pieces and not wide and char_width(pieces[-1][-1]) != 2:
                pieces[-1] += ch  # a run of narrow characters is one word
            else:
                pieces.append(ch)
        # "word ·": the dot stays with the word; "Featured: 2": a count stays with its label;
        # the rest of the word then follows it with no space ("A ：强化" stays "A ：强化")
        spaced = n > 0
        if atoms and (pieces[0][0] in _NO_LINE_START or (word.isdigit() and atoms[-1][0].endswith(":"))):
            atoms[-1] = (atoms[-1][0] + " " + pieces.pop(0), atoms[-1][1])
            spaced = False
        atoms += [(piece, spaced and i == 0) for i, piece in enumerate(pieces)]
    return atoms


def wrap(value: object, width: int = WIDTH, indent: str = "", first: str | None = None) -> str:
    """Wrap one paragraph at `width` display columns; `first` prefixes line one (default indent).

    Newlines in the value are collapsed. A word holding a link (an http(s) or mailto URL,
    "(https://…)." too, as an abstract's \\href reads) is never cut: longer than a line, it
    has a line of its own, as a mail client links only up to a break; any other over-long
    word is cut.
    """
    lead = indent if first is None else first
    lines: list[str] = []
    line, used = lead, display_width(lead)
    empty = True
    for atom, space in _atoms(one_line(value)):
        w = display_width(atom)
        gap = 1 if space and not empty else 0
        if used + gap + w <= width:
            line, used, empty = line + " " * gap + atom, used + gap + w, False
            continue
        if not empty:
            lines.append(line)
            line, used, empty = indent, display_width(indent), True
        if used + w <= width or _LINK.search(atom):
            line, used, empty = line + atom, used + w, False
            continue
        for ch in atom:  # an over-long non-URL word: cut it
            cw = char_width(ch)
            if used + cw > width and not empty:
                lines.append(line)
                line, used = indent, display_width(indent)
            line, used, empty = line + ch, used + cw, False
    if not empty or not lines:
        lines.append(line.rstrip() if empty else line)
    return "\n".join(lines)


def underline(value: object, char: str = "=", width: int = WIDTH) -> str:
    """A rule as wide as the (wrapped) text, at most `width`, for plain-text headings."""
    widest = max((display_width(line) for line in str(value).splitlines()), default=0)
    return char * min(width, max(3, widest))


# --- shared helpers -----------------------------------------------------------------

def texts(languages: Sequence[str], zh: str | None, en: str | None) -> list[tuple[str, str]]:
    """(lang, text) in the configured order, for the languages shown; never another one.
    Texts alike but for case and spacing (a method's name, 'GRPO' / 'GRPO', as a comparison
    cell or label) are shown once, as the first language's: they were shown twice."""
    have = {"zh": zh, "en": en}
    found: list[tuple[str, str]] = []
    for lang in languages:
        text = have.get(lang)
        if text and not any(_alike(text, other) for _, other in found):
            found.append((lang, text))
    return found


def _alike(one: object, other: object) -> bool:
    """Texts the same but for case and spacing ('−3%' and '3%' are not); a list (key points) is
    never alike."""
    return isinstance(one, str) and isinstance(other, str) and _folded(one) == _folded(other)


def _folded(text: str) -> str:
    """Text without its spacing, in one case: what two texts alike share."""
    return "".join(text.split()).casefold()


def summary_lines(entry: Entry, languages: Sequence[str]) -> list[tuple[str, str]]:
    """What an entry says, as (lang, text) in the shown languages' order; nothing else.

    A missing Chinese summary gets no mark per entry (the header counts them once), and
    English-only readers never see Chinese: a seed without English shows its title alone.
    Chinese-only readers of a paper whose Chinese is pending get its English line, the
    abstract's own sentence without an LLM, as they get its title and its abstract: they got
    the title alone, in every full entry of a digest made without an LLM.
    """
    found = texts(languages, entry.summary_zh, entry.summary_en)
    if found or entry.summary_zh or not entry.summary_en or "en" in languages:
        return found
    return [("en", entry.summary_en)]


def lines_beside(entry: Entry, languages: Sequence[str], abstract: str | None) -> list[tuple[str, str]]:
    """summary_lines less a line the abstract shown with it already says: without an LLM a
    featured paper's English line is its abstract's own sentence, and was read twice, in
    italics and again in the abstract below it. A clipped abstract may not say it: kept."""
    said = _folded(abstract or "")
    return [(lang, text) for lang, text in summary_lines(entry, languages)
            if not said or _folded(text) not in said]


def shown(digest: Digest, languages: Sequence[str]) -> Digest:
    """The digest as these languages show it: a comparison row with no word in them goes
    (none left: the table lists what is known), and so does a synthesis written in another
    language, heading and all (an English reader got an empty table and an empty Synthesis
    when the seed page's Chinese-only pair was featured)."""
    rows = tuple(r for r in digest.comparison if texts(languages, r.label_zh, r.label_en)
                 or any(texts(languages, *cell) for cell in r.cells))
    synthesis = dict(texts(languages, digest.synthesis_zh, digest.synthesis_en))
    return replace(digest, comparison=rows, synthesis_zh=synthesis.get("zh"),
                   synthesis_en=synthesis.get("en"))


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


def xml_text(value: object) -> str:
    """Text XML 1.0 can hold, on one line; escaping is autoescape's job."""
    return one_line(value)


def rfc3339(value: object, tz: str | None = None) -> str:
    """A date or datetime (object or ISO string) as an Atom timestamp with seconds and zone."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime.combine(value, time())
    else:
        moment = datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=ZoneInfo(tz) if tz else UTC)
    text = moment.isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def paper_count(digest: Digest) -> int:
    """This week's papers, as the subject and indexes count them: a featured seed (the seed
    page's own pair, in a week of seeds alone) is no paper of the week."""
    return (sum(len(s.entries) + len(s.brief) for s in digest.sections)
            + sum(1 for e in digest.featured if not e.curated))


# --- environments -------------------------------------------------------------------

def loader(user_dir: Path | None) -> jinja2.BaseLoader:
    """A user's template folder first, then the built-in templates (pelican's ChoiceLoader)."""
    loaders: list[jinja2.BaseLoader] = []
    if user_dir is not None:
        loaders.append(jinja2.FileSystemLoader(str(user_dir)))
    loaders.append(jinja2.FileSystemLoader(str(bundled("templates"))))
    return jinja2.ChoiceLoader(loaders)


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


def text_env(user_dir: Path | None = None) -> jinja2.Environment:
    """Markdown, plain text and prompts: no autoescape, explicit filters."""
    env = jinja2.Environment(
        loader=loader(user_dir), undefined=jinja2.StrictUndefined, autoescape=False,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
    env.filters.update(md=md_escape, md_url=md_url, wrap=wrap, underline=underline)
    return _shared(env)


def html_env(user_dir: Path | None = None) -> jinja2.Environment:
    """HTML and Atom with autoescape on for every template (select_autoescape misses *.j2)."""
    env = jinja2.Environment(
        loader=loader(user_dir), undefined=jinja2.StrictUndefined, autoescape=True,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters.update(url=safe_url, xml=xml_text)
    return _shared(env)


@dataclass(frozen=True)
class Settings:
    """What rendering needs of the configuration, and nothing else."""

    topic: Any  # config.Topic: the digest's name and intro in both languages
    languages: tuple[str, ...]
    topic_names: Mapping[str, tuple[str, str]]  # topic key -> its (zh, en) names
    base_url: str | None = None  # outputs.base_url: where out/ (the reading list) is published, "/"-ended
    unsubscribe_url: str | None = None
    templates: Path | None = None  # the user's template overrides
    timezone: str | None = None  # schedule.timezone, for the feed's own date
    email_limit: int = EMAIL_LIMIT  # bytes of the email's inlined HTML
    serve_url: str | None = None  # serve.base_url: where an email's reader links go
    site_url: str | None = None  # where out/site/ is served, ending in "/" (Config.site_url)

    @classmethod
    def of(cls, config: Config) -> Settings:
        return cls(
            topic=config.topic, languages=tuple(config.languages),
            topic_names={t.key: (t.name.zh, t.name.en) for t in config.topics},
            base_url=config.outputs.base_url.rstrip("/") + "/" if config.outputs.base_url else None,
            unsubscribe_url=config.email.unsubscribe_url, templates=config.templates.dir,
            timezone=config.schedule.timezone, serve_url=config.serve.base_url,
            site_url=config.site_url)


def common(settings: Settings) -> dict:
    """What every template knows about the configuration."""
    return {"topic": settings.topic, "languages": list(settings.languages),
            "topic_names": {key: " · ".join(text for _, text in texts(settings.languages, *names))
                            for key, names in settings.topic_names.items()},
            "base_url": settings.base_url,
            "unsubscribe_url": settings.unsubscribe_url}


def _digest_context(settings: Settings, digest: Digest, reading_count: int, relative: str,
                    personal: bool = False) -> dict:
    """`personal`: an email, whose unsubscribe and 👍/👎 links get each reader's token
    (pipeline/links.py) when `serve.base_url` is set, and whose unsubscribe_url gets their
    address for {recipient}; a public copy, whose reader is unknown, shows no such URL."""
    ctx = common(settings)
    serve = settings.serve_url if personal else None
    ctx["feedback"] = partial(links.placeholder, serve) if serve else None
    if serve:
        ctx["unsubscribe_url"] = links.placeholder(serve, "unsubscribe")
    elif links.RECIPIENT in (url := ctx["unsubscribe_url"] or ""):  # an email's gets each reader's
        # address where only we wrote it (an LLM's 'https://evil.example/?u={recipient}' got it too);
        # a public copy has no reader to unsubscribe: reply, it says
        ctx["unsubscribe_url"] = url.replace(links.RECIPIENT, links.ADDRESS) if personal else None
    base = ctx["base_url"]
    digest = shown(digest, settings.languages)
    sections, featured = listed(settings, digest)
    counts = sorted(((s.name_zh, s.name_en, len(s.entries) + len(s.brief) + len(featured.get(s.topic, ())))
                     for s in sections), key=lambda t: -t[2])
    # The whole digest, for an email that had to leave papers out: its web page when the
    # site is served somewhere (outputs.site_url), else its Markdown copy beside this one.
    # A relative link works between the files in outputs.dir, not in a mail client: an
    # email links the web reading list, or nothing.
    web = digest_url(settings, digest.id) if settings.site_url else None
    reading: str | None
    whole: str | None
    if base:
        reading, whole = f"{base}READING_LIST.md", web or f"{base}digests/{digest.id}.md"
    elif personal:
        reading, whole = f"{settings.site_url}papers/index.html" if web else None, web
    else:
        reading, whole = relative, web or f"{digest.id}.md"
    # Without the LLM's takeaways the highlights list what the digest holds, 3 to 5 lines:
    # the featured papers, the busiest topics, then curated entries until there are 3.
    top = counts[:max(0, min(3, 5 - len(digest.featured)))]
    ctx.update(d=digest, sections=sections, featured_in=featured,
               paper_count=paper_count(digest), top_topics=top,
               top_curated=digest.curated[:max(0, 3 - len(digest.featured) - len(top))],
               more=len(digest.left_out), reading_list_count=reading_count, reading_list_url=reading,
               digest_url=digest_url(settings, digest.id), whole_url=whole)
    return ctx


def digest_url(settings: Settings, digest_id: str) -> str | None:
    """Where a reader opens a digest: its web page when the site is served somewhere, else
    its HTML copy under outputs.base_url; None when neither is published."""
    if settings.site_url:
        return f"{settings.site_url}digests/{digest_id}.html"
    return f"{settings.base_url}digests/{digest_id}.html" if settings.base_url else None


# --- digests ------------------------------------------------------------------------

def digest_markdown(settings: Settings, digest: Digest, reading_count: int) -> str:
    return text_env(settings.templates).get_template("digest.md.j2").render(
        **_digest_context(settings, digest, reading_count, "../READING_LIST.md"))


def digest_text(settings: Settings, digest: Digest, reading_count: int, personal: bool = False) -> str:
    """The text/plain part: same content, wrapped at 72 columns, links as full URLs."""
    return text_env(settings.templates).get_template("email.txt.j2").render(
        **_digest_context(settings, digest, reading_count, "../READING_LIST.md", personal))


def digest_subject(settings: Settings, digest: Digest) -> str:
    text = text_env(settings.templates).get_template("subject.txt.j2").render(
        d=digest, paper_count=paper_count(digest), **common(settings))
    return one_line(text)


def featured_by_topic(digest: Digest) -> dict[str, list[Entry]]:
    """This week's featured papers by topic: each topic's list names its own, pointing up
    to Featured, so that its count is all of its papers, as the trends and header count."""
    found: dict[str, list[Entry]] = {}
    for entry in digest.featured:
        if not entry.curated:
            found.setdefault(entry.topic, []).append(entry)
    return found


def listed(settings: Settings, digest: Digest) -> tuple[tuple[Section, ...], dict[str, list[Entry]]]:
    """The week's sections as every edition lists them, and the featured papers by topic."""
    featured = featured_by_topic(digest)
    return with_featured(settings, digest.sections, featured), featured


def with_featured(settings: Settings, sections: Sequence[Section],
                  featured: Mapping[str, Sequence[Entry]]) -> tuple[Section, ...]:
    """`sections` and a heading for each topic whose papers are all featured, in the
    taxonomy's order."""
    have = {s.topic for s in sections}
    extra = [Section(topic, *settings.topic_names.get(topic, (topic, topic)), ())
             for topic in featured if topic not in have]
    if not extra:
        return tuple(sections)
    order = {topic: n for n, topic in enumerate(settings.topic_names)}
    return tuple(sorted([*sections, *extra], key=lambda s: order.get(s.topic, len(order))))


def _ranked(entries: Sequence[Entry]) -> list[Entry]:
    """The order entries give way in when the email is too big: seeds last, then by score."""
    return sorted(entries, key=lambda e: (not e.curated, -(e.score or 0.0), e.key))


def _keep(digest: Digest, keep: int, brief: int,
          lines: int | None = None) -> tuple[tuple[Section, ...], dict[str, int]]:
    """Sections holding only the `keep` best full entries, the `lines` best of the others
    (all of them when None) as one-line entries, and the `brief` best one-line entries
    (their order unchanged, a topic's shortened entries before its one-line ones); and how
    many went, per topic. Every section stays, so a reader sees each topic and its whole
    count even when its papers all went."""
    full = _ranked([e for s in digest.sections for e in s.entries])
    kept = {e.key for e in full[:keep]}
    short = {e.key for e in full[keep:][:lines]}
    kept |= {e.key for e in _ranked([e for s in digest.sections for e in s.brief])[:brief]}
    sections = tuple(replace(s, entries=tuple(e for e in s.entries if e.key in kept),
                             brief=(*(e for e in s.entries if e.key in short),
                                    *(e for e in s.brief if e.key in kept)))
                     for s in digest.sections)
    left = {s.topic: len(s.entries) + len(s.brief) - len(t.entries) - len(t.brief)
            for s, t in zip(digest.sections, sections, strict=True)}
    return sections, left


def _inline(html: str) -> str:
    """CSS from the <style> block into style attributes; @media rules stay for phones."""
    inliner = css_inline.CSSInliner(keep_style_tags=False, keep_at_rules=True, keep_link_tags=False,
                                    load_remote_stylesheets=False)
    return inliner.inline(html)


def digest_html(settings: Settings, digest: Digest, reading_count: int, limit: int | None = None,
                personal: bool = False, whole: bool = False) -> str:
    """The email HTML, CSS inlined, under `limit` bytes; `whole`, never trimmed (the file
    copy in out/digests/, which an email's "view online" may link).

    Too big, what gives way, in turn (`trim`): the one-line entries (the lowest-ranked
    first), long English lines (clipped), the reading list's entries (the oldest first),
    the full entries (the lowest-ranked first), each becoming a one-line linked entry under
    its topic, the updates (the last first), those one-line entries of this week's papers
    (the lowest-ranked first); then the featured readings, comparison and synthesis are
    shortened, down to each featured paper's headline. The step that makes the email fit
    keeps the most of what it gives that fits, and room it leaves goes back to what gave
    way before it, the last first. What goes is counted where it was ("+N more", linking
    the whole digest): the papers under their topic and all of them after the topics, the
    reading list's entries under their heading, the updates under theirs. The header, the
    highlights and the footer always stay, and a shortened email says so at the top, linking
    the whole digest. A language is never dropped: every entry kept speaks in each of them.
    An email with no link to a whole copy (no outputs.site_url or base_url) is never
    trimmed: what it left out would be out of every reader's reach.
    """
    limit = settings.email_limit if limit is None else limit
    template = html_env(settings.templates).get_template("email.html.j2")
    base = _digest_context(settings, digest, reading_count, "../READING_LIST.md", personal)
    base["subject"] = digest_subject(settings, digest)
    total = sum(len(s.entries) for s in digest.sections)
    briefs = sum(len(s.brief) for s in digest.sections)
    seeds = len(base["d"].curated)
    news = base["d"].updates

    def render(clip_en: int | None = None, keep: int = total, clip_all: int | None = None,
               brief: int = briefs, curated: int = seeds, updates: int = len(news),
               shallow: bool = False, lines: int | None = None) -> str:
        sections, left = _keep(digest, keep, brief, lines)
        cut = sum(left.values())  # this week's papers; the reading list's entries are counted apart
        sections = with_featured(settings, sections, base["featured_in"])
        left = {s.topic: left.get(s.topic, 0) for s in sections}
        d = base["d"]
        d = replace(d, curated=d.curated[:curated])
        trimmed = cut > 0 or curated < seeds
        shortened = bool(trimmed or clip_en or clip_all or shallow or updates < len(news)
                         or keep < total or brief < briefs)
        page = template.render(**{**base, "d": d, "sections": sections, "left": left,
                                  "updates": news[:updates], "updates_left": len(news) - updates,
                                  "papers_left": cut, "curated_left": seeds - curated,
                                  "trimmed": trimmed, "shortened": shortened,
                                  "clip_en": clip_en, "clip_all": clip_all, "shallow": shallow})
        return _inline(page)

    def fits(page: str) -> bool:  # as each reader gets it: longer links (their tokens), encoded
        return as_sent(links.sized(page)) <= limit

    def most(fitting: Callable[[int], str], low: int, high: int) -> tuple[int, str] | None:
        """The most in low..high that fits, and its page (binary search), else None."""
        best = None
        while low <= high:
            mid = (low + high) // 2
            page = fitting(mid)
            if fits(page):
                low, best = mid + 1, (mid, page)
            else:
                high = mid - 1
        return best

    page = render()
    if base["whole_url"] is None or whole or fits(page):
        return page
    # (what gives way, its value once given, how many there were to give: a count searched
    # back when the step makes the email fit; None, a step that is all or nothing)
    trim: list[tuple[str, Any, int | None]] = [
        ("brief", 0, briefs), ("clip_en", CLIP_EN, None), ("curated", 0, seeds), ("keep", 0, total),
        ("updates", 0, len(news)), ("lines", 0, total), *(("clip_all", n, None) for n in CLIP_ALL),
        ("shallow", True, None)]
    trim = [t for t in trim if t[2] != 0]  # nothing of it to give
    state: dict[str, Any] = {}

    def given(knob: str, n: int) -> str:  # the page with `n` of what `knob` gives back
        return render(**{**state, knob: n})

    for step, (knob, least, _) in enumerate(trim):
        state[knob] = least
        page = render(**state)
        if not fits(page):
            continue
        for back, _, there in [trim[step], *reversed(trim[:step])]:
            if there is not None and state[back] < there:
                found = most(partial(given, back), state[back] + 1, there)
                if found:
                    state[back], page = found
        return page
    return page  # the smallest page there is; the web and Markdown copies are whole


def as_sent(html: str) -> int:
    """The bytes an HTML part takes in the message: Chinese text sent quoted-printable
    takes three times its UTF-8 (the tour's 99 KB pages went out as 118 KB)."""
    part = EmailMessage(policy=MAIL_POLICY)
    part.set_content(html, subtype="html", charset="utf-8")
    body = str(part.get_payload())
    return len(body) + body.count("\n")  # each line ends in CRLF on the wire


def digest_as(settings: Settings, digest: Digest, fmt: str, reading_count: int) -> str:
    """A stored digest in one format: md, html or txt."""
    if fmt == "md":
        return digest_markdown(settings, digest, reading_count)
    if fmt == "html":
        return digest_html(settings, digest, reading_count, whole=True)
    if fmt == "txt":
        return digest_text(settings, digest, reading_count)
    raise ValueError(f"unknown format {fmt!r}: md, html or txt")


# --- the feed --------------------------------------------------

def feed_id(settings: Settings, name: str) -> str:
    """A feed's (or a feed entry's) id where no base URL is set: a stable URN per install."""
    return f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'rl-digest:{settings.topic.name.en}:{name}')}"


def by_id(digests: Mapping[str, Digest] | Iterable[Digest]) -> Mapping[str, Digest]:
    """Digests by id: a mapping as it is (publish.StoredDigests reads each as asked), a
    list made one."""
    return digests if isinstance(digests, Mapping) else {d.id: d for d in digests}


def feed_xml(settings: Settings, digests: Mapping[str, Digest] | Iterable[Digest], updated: str,
             site: bool = False) -> str:
    """An Atom feed of the newest FEED_DIGESTS digests, newest first, one entry per digest,
    each read as it is rendered: out/feed.xml links the digests' email copies, the site's
    feed (`site`) their web pages."""
    ctx = common(settings)
    base = settings.site_url if site else ctx["base_url"]
    tz = settings.timezone
    digests = by_id(digests)

    def entry(digest: Digest) -> dict:
        link = f"{base}digests/{digest.id}.html" if base else f"digests/{digest.id}.html"
        sections, featured = listed(settings, digest)  # as the digest lists them, featured papers too
        return {"d": digest, "sections": sections, "featured_in": featured,
                "id": link if base else feed_id(settings, digest.id), "link": link,
                "updated": rfc3339(digest.window_end, digest.timezone), "paper_count": paper_count(digest)}

    entries = (entry(digests[did]) for did in sorted(digests, reverse=True)[:FEED_DIGESTS])
    home = ("" if base else "index.html") if site else "READING_LIST.md"  # relative, as the entries' links
    return html_env(settings.templates).get_template("feed.xml.j2").render(
        entries=entries, updated=rfc3339(updated, tz),
        feed_id=f"{base}feed.xml" if base else feed_id(settings, "site-feed" if site else "feed"),
        self_url=f"{base}feed.xml" if base else None, home_url=f"{base or ''}{home}", **ctx)
