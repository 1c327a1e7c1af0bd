"""Seed documents: the user's own curated picks, read tolerantly.

Two page-copy text formats, and a YAML format (seed_yaml.py; see seeds/README.md). Nothing
raises on bad content: a line that cannot be placed becomes a SeedWarning and is
skipped, so one odd line never costs the rest of the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import date
from functools import cache
from pathlib import Path

from pipeline.config import bundled
from pipeline.models import ARXIV_ID, SeedDocument, SeedEntry, SeedWarning, seed_key, split_arxiv_id
from pipeline.sources import Found, SourceSetup, Window
from pipeline.sources.http import Fetcher
from pipeline.text import clean_name, prose  # a seed file is outside text, as a feed is

SEED_SUFFIXES = (".txt", ".yaml", ".yml")
NOT_SEED_FILE = f"not a seed file ({', '.join(SEED_SUFFIXES)}); skipped"
YAML_KEYS = ("title", "summary_zh", "summary_en", "arxiv_id", "date", "topic", "featured")

LINE_BREAK = re.compile(r"\r\n|\r|\n")
# Han, kana, hangul, CJK and full-width punctuation: what a Chinese summary is made of.
_CJK = re.compile(
    r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
_HAN = "\u3400-\u4dbf\u4e00-\u9fff"
_NAV = re.compile(r"^\S.{0,30}?\s*第\s*\d+\s*页$")  # "强化学习 第4页": page chrome
# 2026-05-12, as a Chinese page also writes it: 2026/05/12, 2026.05.12, 2026年5月12日
DATE = r"(\d{4})(?:-|/|\.|年\s*)(\d{1,2})(?:-|/|\.|月\s*)(\d{1,2})日?"
_DATED = re.compile(rf"^(.+?)\s*[（(]\s*{DATE}\s*[）)]\s*[：:]\s*(.*)$")
_DATE_ONLY = re.compile(rf"^[（(]?\s*{DATE}\s*[）)]?\s*[：:]?$")
_DATE_FIRST = re.compile(rf"^[（(]?\s*{DATE}(?!\d)")  # no title starts with its date
_LABEL = re.compile(rf"^([{_HAN}]{{2,8}})\s*[：:]\s*(\S.*)$")  # "关键发现：…"
_HEADING = re.compile(rf"^([A-Za-z0-9][^{_HAN}：:]*?)\s*[{_HAN}]")  # "PRISM 发现…"
_SYNTHESIS = re.compile(r"^综合洞察\s*[：:]\s*(.*)$")
_TABLE_SEPARATOR = re.compile(r"^:?-{3,}:?$")
_COMMENT = re.compile(r"^#{1,6}(\s|$)")  # "# my picks": a comment (as in readers.txt); "## Agents": a heading
# a line pasted from Markdown: "- **Title**（…）：…" reads as "Title（…）：…"
_LIST_MARK = re.compile(r"^(?:[-*+•]|\d{1,3}[.)])\s+")
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
# [text](url "title"), read as its text; an arXiv link in it names the entry's paper
_MD_LINK = re.compile(r"(?<!!)\[([^\[\]]+)\]\(\s*<?([^\s<>()]+)>?"
                      r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)")
# an abs, pdf or html link or arXiv:ID, any version, alone on its line or as a link's address
_ARXIV_LINK = re.compile(r"(?i)^<?((?:https?://)?(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|html)/\S+?|arxiv:\s*\S+?)>?$")
_YAML_LINE = re.compile(rf"^(?:{'|'.join(YAML_KEYS)})\s*:(?:\s|$)")  # "title: …" (after its "- ")
_MISPLACED = (  # a text line that is no seed entry, and why
    (_YAML_LINE, "a YAML line in a text file (YAML entries go in a .yaml file); skipped"),
    (_DATE_ONLY, "a date with no title"),
    (_DATE_FIRST, "a date before the title (write `Title（YYYY-MM-DD）：summary`)"),
)
CJK_PROSE_RATIO = 0.3  # summaries mix in English terms; titles carry almost no CJK


class SeedFiles:
    """The user's seed paths, plus the built-in pages unless a file of that name is there."""

    name, label, online = "seeds", "seeds", False

    def __init__(self, paths: list[Path], builtin: Path | None):
        self.paths, self.builtin = paths, builtin

    def documents(self) -> list[SeedDocument]:
        documents = load_seeds(self.paths)
        if self.builtin is not None:
            have = {doc.source for doc in documents}
            documents = [doc for doc in load_seeds([self.builtin]) if doc.source not in have] + documents
        return repeats_warned(documents)

    def fetch(self, window: Window, fetcher: Fetcher) -> Found:
        """The documents as they are now, whatever the window: seeds are not dated by arXiv.
        Their warnings go to the run's, not to the collect report."""
        return Found(documents=self.documents(), report=None)


def seed_source(setup: SourceSetup) -> SeedFiles:
    """The registered factory: seeds.paths, and the bundled pages when seeds.builtin is on."""
    seeds = setup.config.seeds
    return SeedFiles(list(seeds.paths), bundled("seeds") if seeds.builtin else None)


@cache
def _builtin_names() -> frozenset[str]:
    return frozenset(path.name for path in bundled("seeds").iterdir() if path.suffix in SEED_SUFFIXES)


def origin(source: str | None) -> str | None:
    """The seed file a curated entry is shown to come from: the reader's own files name
    whose picks they are; the built-in pages' names (000_fba6f3c0aaa545ca.txt) say nothing."""
    return None if source in _builtin_names() else source


def repeats_warned(documents: list[SeedDocument]) -> list[SeedDocument]:
    """A title read again (folded as seed_key folds it: other case or punctuation too) is
    the same seed, and the one read last is kept (store_seeds.save_seeds): each later one gets a
    warning naming the first, so a replaced summary is not replaced without a word."""
    first: dict[str, SeedEntry] = {}
    warned = []
    for doc in documents:
        more = []
        for entry in doc.entries:
            earlier = first.setdefault(seed_key(entry.title), entry)
            if earlier is not entry:
                more.append(SeedWarning(entry.source, entry.line, f"same title as {earlier.source}:"
                                        f"{earlier.line} ('{earlier.title}'); this later one is used"))
        warned.append(replace(doc, warnings=doc.warnings + tuple(more)) if more else doc)
    return warned


def in_reading_order(entries: Iterable[SeedEntry]) -> list[SeedEntry]:
    """One entry per title, the one read last (the one store_seeds.save_seeds keeps), in the
    order read: the order store_seeds.all_seeds gives them in."""
    used = {seed_key(entry.title): (n, entry) for n, entry in enumerate(entries)}
    return [entry for _, entry in sorted(used.values(), key=lambda found: found[0])]


def same_paper(seeds: Iterable[SeedEntry]) -> list[SeedWarning]:
    """Entries of other titles that name the same arXiv paper (its arxiv_id, given or tied
    by title), in the order read, are one entry as the same title twice is: the one read
    last gives the paper its curated words (the reading list and digests take the last
    of each paper's), and each later one gets a warning naming the first."""
    first: dict[str, SeedEntry] = {}
    warned = []
    for entry in seeds:
        earlier = first.setdefault(entry.arxiv_id, entry) if entry.arxiv_id else entry
        if earlier is not entry:
            warned.append(SeedWarning(entry.source, entry.line,
                                      f"same arXiv paper ({entry.arxiv_id}) as {earlier.source}:"
                                      f"{earlier.line} ('{earlier.title}'); this later one is used"))
    return warned


def shown(seeds: Iterable[SeedEntry]) -> list[SeedEntry]:
    """The entries a digest and the reading list show: of entries naming one arXiv paper,
    only the one read last (same_paper warns of the others), in the order given."""
    seeds = list(seeds)
    last = {s.arxiv_id: s for s in seeds if s.arxiv_id}
    return [s for s in seeds if not s.arxiv_id or last[s.arxiv_id] is s]


def unread(doc: SeedDocument) -> bool:
    """A seed file or folder nothing was read from: missing, unreadable or unparseable as a
    whole (another kind of file skipped is no matter)."""
    return not doc.entries and bool(doc.warnings) and doc.warnings[0].message != NOT_SEED_FILE


def all_read(documents: list[SeedDocument]) -> bool:
    """Whether every seed file and folder was read. Only then does an entry in no file say
    that it was removed, and not that its file could not be read this time."""
    return not any(unread(doc) for doc in documents)


def load_seeds(paths: list[Path]) -> list[SeedDocument]:
    """Read every seed file under the given files and directories, in name order."""
    documents = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            try:
                files = sorted(p for p in path.iterdir() if p.is_file() and not _ignored(p))
            except OSError as err:
                documents.append(_failed(path, f"cannot list directory: {err.strerror or err}"))
                continue
            documents.extend(parse_seed_file(p) if p.suffix.lower() in SEED_SUFFIXES else _failed(
                p, NOT_SEED_FILE) for p in files)
        elif path.exists():
            documents.append(parse_seed_file(path))
        else:
            documents.append(_failed(path, "no such file or directory"))
    return documents


def parse_seed_file(path: Path) -> SeedDocument:
    """Parse one seed file; YAML by suffix, otherwise one of the page-copy text formats."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        return _failed(path, f"cannot read file: {err.strerror or err}")
    text, problem = _decode(data)
    if problem:
        return SeedDocument(source=path.name, warnings=(SeedWarning(path.name, *problem),))
    if path.suffix.lower() in (".yaml", ".yml"):
        from pipeline.sources.seed_yaml import parse_yaml  # it reads this module's dates and summaries

        return parse_yaml(path.name, text)
    return _parse_text(path.name, text)


def _ignored(path: Path) -> bool:
    """What a seed folder may hold besides seeds, unremarked: its README, hidden files,
    editors' backups."""
    return path.name.upper().startswith("README") or path.name.startswith(".") or path.name.endswith("~")


def _unmark(line: str) -> tuple[str, str | None]:
    """A text line without the Markdown a paste brings (a list bullet, bold around a title, a
    link read as its text), and the arXiv paper a link in it names. A table row keeps its
    cells as written."""
    if line.startswith("|"):
        return line, None
    linked = [ident for m in _MD_LINK.finditer(line) if (ident := _arxiv_link(m.group(2)))]
    line = _MD_LINK.sub(lambda m: m.group(1), _LIST_MARK.sub("", line, count=1))
    return _BOLD.sub(lambda m: m.group(1) or m.group(2), line).strip(), linked[0] if linked else None


def _arxiv_link(text: str) -> str | None:
    """The id of the paper an arXiv link or `arXiv:ID` names, None for any other text."""
    match = _ARXIV_LINK.match(text)
    ident = split_arxiv_id(match.group(1))[0] if match else ""
    return ident if ARXIV_ID.fullmatch(ident) else None


def _failed(path: Path, message: str) -> SeedDocument:
    """A file we could not open at all: one warning about the whole file (line 0), naming
    it in full, since the name alone does not say where it was looked for."""
    return SeedDocument(source=path.name, warnings=(SeedWarning(f"seeds.paths: {path}", 0, message),))


def _decode(data: bytes) -> tuple[str, tuple[int, str] | None]:
    """UTF-8 (BOM allowed) or nothing: guessing other encodings would garble Chinese silently."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        return "", (data.count(b"\n", 0, err.start) + 1, "not UTF-8 text (save the file as UTF-8)")
    if "\x00" in text:
        return "", (text.count("\n", 0, text.index("\x00")) + 1, "binary content (NUL byte)")
    return text, None


# --- the two page-copy text formats -------------------------------------------------


def _cjk_ratio(line: str) -> float:
    """Share of CJK among the letters of a line: titles are Latin, summaries Chinese."""
    cjk = len(_CJK.findall(line))
    latin = sum(1 for ch in line if ch.isalpha() and not _CJK.match(ch))
    return cjk / (cjk + latin) if cjk + latin else 0.0


def _is_prose(line: str) -> bool:
    return _cjk_ratio(line) >= CJK_PROSE_RATIO


def _has_letters(line: str) -> bool:
    return any(ch.isalpha() for ch in line)


def _is_paper_link(line: str) -> bool:
    return line.startswith("📄") or line == "查看论文"


def _same_text(a: str, b: str) -> bool:
    """A 'summary' that only repeats the title (e.g. 'Title。') says nothing."""
    strip = " \t。.．!！"
    return clean_name(a).strip(strip).casefold() == clean_name(b).strip(strip).casefold()


def summary_of(text: str | None, title: str) -> tuple[str | None, bool]:
    """(summary, truncated): the page cut long summaries with '...'; keep the dots, flag it."""
    text = prose(text)  # prose keeps the zero-width joiner inside an emoji (👨‍💻)
    if not text or _same_text(text, title):
        return None, False
    return text, text.endswith(("...", "…"))


def _is_structural(line: str) -> bool:
    """Lines with a fixed shape of their own, never a summary even when written in Chinese."""
    return bool(
        line.startswith("|")
        or _DATED.match(line)
        or _DATE_ONLY.match(line)
        or _is_paper_link(line)
        or _SYNTHESIS.match(line)
    )


def _is_heading(line: str, following: str) -> bool:
    """'PRISM 发现…' followed by labelled paragraphs opens a featured paper."""
    return bool(
        _HEADING.match(line)
        and _is_prose(line)
        and (_LABEL.match(following) or _is_paper_link(following))
    )


def _is_summary(line: str, following: str) -> bool:
    return _is_prose(line) and not _is_structural(line) and not _is_heading(line, following)


def _title_and_summary(line: str) -> tuple[str, str] | None:
    """`Title：摘要` on one line, undated: split at the last colon after which the line reads
    as a summary and before which it holds no Chinese (`关键发现：…` is a featured paper's
    label); the title's own colons come before it (`QeRL: Beyond Efficiency：本文…`)."""
    found = None
    for colon in re.finditer(r"\s*[：:]\s*", line):
        head, rest = line[: colon.start()], line[colon.end() :]
        if _CJK.search(head):
            break
        if _has_letters(head) and _is_prose(rest):
            found = head, rest
    return found


def parse_date(year: str, month: str, day: str) -> date | None:
    try:
        return date(int(year), int(month), int(day))
    except ValueError:
        return None


@dataclass
class _Page:
    """State while reading a text file top to bottom; entries are emitted as they close."""

    source: str
    is_page: bool  # dated items / featured blocks / a table: the 004 layout, which has an intro
    entries: list[SeedEntry] = field(default_factory=list)
    warnings: list[SeedWarning] = field(default_factory=list)
    intro: list[str] = field(default_factory=list)
    comparison: list[tuple[str, ...]] = field(default_factory=list)
    table: int = 0  # the line the comparison table starts on
    synthesis: str | None = None
    pending: tuple[int, str] | None = None  # a title waiting for its summary line
    linked: dict[int, str] = field(default_factory=dict)  # line of a title -> the arXiv id a link gave it
    featured: tuple[int, str, str] | None = None  # (line, name, heading) of an open block
    parts: list[tuple[str, str]] = field(default_factory=list)

    def warn(self, line: int, message: str) -> None:
        self.warnings.append(SeedWarning(self.source, line, message))

    def close_title(self, summary: str | None = None) -> None:
        if self.pending:
            line, title = self.pending
            text, truncated = summary_of(summary, title)
            self.entries.append(
                SeedEntry(
                    title=title, source=self.source, line=line, summary_zh=text, truncated=truncated,
                    arxiv_id=self.linked.get(line),
                )
            )
            self.pending = None

    def close_featured(self) -> None:
        if self.featured:
            line, name, heading = self.featured
            self.entries.append(
                SeedEntry(
                    title=name,
                    source=self.source,
                    line=line,
                    summary_zh=heading,
                    arxiv_id=self.linked.get(line),
                    featured=True,
                    headline_zh=heading,
                    parts_zh=tuple(self.parts),
                )
            )
            self.featured, self.parts = None, []

    def feed(self, number: int, line: str, following: str) -> None:
        """Place one non-blank line; `following` is the next non-blank line (for lookahead)."""
        if (ident := _arxiv_link(line)) is not None:
            self.link(number, ident)
            return
        label = _LABEL.match(line)
        if self.featured and (label or _is_paper_link(line)):
            if label:
                self.parts.append((label.group(1), prose(label.group(2))))
            else:  # "📄 [查看论文](https://arxiv.org/abs/…)": the featured paper's own link
                if number in self.linked:
                    self.linked.setdefault(self.featured[0], self.linked[number])
                self.close_featured()
            return
        self.close_featured()
        if self.pending and _is_summary(line, following):
            self.close_title(line)
        elif self.pending and _same_text(line, self.pending[1]):
            self.close_title(None)
        else:
            self.close_title(None)
            self.place(number, line, following)

    def link(self, number: int, ident: str) -> None:
        """An arXiv link on a line of its own names the paper of the title above it: the one
        still open, else the entry read last (after its summary line)."""
        opened = self.pending or self.featured
        if opened:
            self.linked[opened[0]] = ident
        elif self.entries and not self.entries[-1].arxiv_id:
            self.entries[-1] = replace(self.entries[-1], arxiv_id=ident)
        else:
            self.warn(number, "an arXiv link with no title before it; skipped")

    def place(self, number: int, line: str, following: str) -> None:
        """A line that is neither a summary for a pending title nor part of a featured block."""
        dated = _DATED.match(line)
        misplaced = next((why for pattern, why in _MISPLACED if pattern.match(line)), None)
        if line.startswith("|"):
            self.add_table_row(number, line)
        elif misplaced:
            self.warn(number, misplaced)
        elif dated:
            self.add_dated(number, dated)
        elif undated := _title_and_summary(line):
            self.add_entry(number, *undated)
        else:
            self.place_prose(number, line, following)

    def place_prose(self, number: int, line: str, following: str) -> None:
        """A line that is no entry of its own: a title waiting for its summary, a featured
        paper's heading, the page's synthesis or introduction, or page chrome."""
        if _is_paper_link(line):
            pass  # a link line outside a featured block: page chrome
        elif match := _SYNTHESIS.match(line):
            self.synthesis = prose(match.group(1)) or None
        elif line.endswith((":", "：")) and following.startswith("|"):
            pass  # framing text introducing the comparison table
        elif not _has_letters(line):
            self.warn(number, "neither a title nor a summary")
        elif not _is_prose(line):
            self.pending = (number, clean_name(line))
        elif _is_heading(line, following):
            heading = _HEADING.match(line)
            name = clean_name(heading.group(1) if heading else line)
            self.featured = (number, name, prose(line))
        elif self.is_page and not self.entries and not self.comparison:
            self.intro.append(prose(line))
        else:
            self.warn(number, "a summary with no title before it")

    def add_dated(self, number: int, match: re.Match[str]) -> None:
        when = parse_date(*match.group(2, 3, 4))
        if when is None:
            self.warn(number, f"invalid date {'-'.join(match.group(2, 3, 4))!r}; kept without it")
        self.add_entry(number, match.group(1), match.group(5), when)

    def add_entry(self, number: int, title: str, summary: str, when: date | None = None) -> None:
        """An entry given on one line: its title, its summary, its date if it has one."""
        title = clean_name(title)
        text, truncated = summary_of(summary, title)
        self.entries.append(
            SeedEntry(
                title=title,
                source=self.source,
                line=number,
                summary_zh=text,
                date=when,
                truncated=truncated,
                arxiv_id=self.linked.get(number),
            )
        )

    def add_table_row(self, number: int, line: str) -> None:
        self.table = self.table or number
        cells = [prose(cell) for cell in line.strip().strip("|").split("|")]
        if not all(_TABLE_SEPARATOR.match(cell.replace(" ", "")) for cell in cells):
            self.comparison.append(tuple(cells))


def _parse_text(source: str, text: str) -> SeedDocument:
    # a BOM inside the file too: two files saved with one, pasted or `cat` into one
    read = [(n, *_unmark(raw.replace("\ufeff", "").strip()))
            for n, raw in enumerate(LINE_BREAK.split(text), 1)]
    lines = [(n, line) for n, line, _ in read if line and not _NAV.match(line) and not _COMMENT.match(line)]
    is_page = any(
        _DATED.match(line) or _is_paper_link(line) or line.startswith("|") for _, line in lines
    )
    page = _Page(source=source, is_page=is_page, linked={n: ident for n, _, ident in read if ident})
    for i, (number, line) in enumerate(lines):
        following = lines[i + 1][1] if i + 1 < len(lines) else ""
        page.feed(number, line, following)
    page.close_featured()
    page.close_title(None)
    if page.comparison and not any(entry.featured for entry in page.entries):  # a list of papers as a table
        page.warn(page.table, "a table with no featured paper to compare: its rows are not read as papers "
                  "(write one a line, `Title（YYYY-MM-DD）：summary`, or use a .yaml file)")
    return SeedDocument(
        source=source,
        intro_zh="\n".join(page.intro) or None,
        comparison=tuple(page.comparison),
        synthesis_zh=page.synthesis,
        entries=tuple(page.entries),
        warnings=tuple(page.warnings),
    )
