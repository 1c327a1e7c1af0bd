"""The reading list for reference managers (Zotero and friends): BibTeX, RIS, CSL-JSON, JSONL.

Entries stream in the reading list's order and are written one at a time, so an export
of 100,000 papers needs no more memory than one of ten. Titles arrive as text (TeX
already turned into Unicode by compose); each format escapes what it must.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import fields, replace
from datetime import date
from functools import lru_cache
from typing import Any, TextIO

import orjson

from pipeline.models import Entry, collapse, safe_id
from pipeline.text import OTHERS

FORMATS = {"bibtex": "bib", "ris": "ris", "csljson": "json", "jsonl": "jsonl"}  # format -> file suffix
ARXIV_DOI = "10.48550/arXiv.{}"  # the DOI arXiv registers for every paper
SUFFIXES = {"jr", "jr.", "sr", "sr.", "ii", "iii", "iv"}  # the last word of a name, not its family
PARTICLES = {"de", "da", "del", "della", "di", "du", "van", "von", "le", "la", "dos", "das"}
GROUPS = {"team", "collaboration", "consortium"}  # the last word of a group's name: 'Qwen Team'


def select(found: Iterable[Entry], topic: str | None = None, since: date | None = None) -> Iterator[Entry]:
    """Entries of `topic` dated `since` or later (an undated entry has no date to pass)."""
    for entry in found:
        if topic is not None and entry.topic != topic:
            continue
        if since is not None and (not entry.date or entry.date < since.isoformat()):
            continue
        yield entry


def in_languages(entry: Entry, languages: Sequence[str]) -> Entry:
    """The entry with the texts of languages not configured left out (a reader of English
    gets no Chinese); the paper's own title and abstract stay."""
    hidden = [f"_{lang}" for lang in ("zh", "en") if lang not in languages]
    if not hidden:
        return entry
    blank: dict[str, Any] = {f.name: () if isinstance(getattr(entry, f.name), tuple) else None
                             for f in fields(entry) if f.name.endswith(tuple(hidden))}
    gone: dict[str, Any] = {f"{kind}{lang}": "" if kind == "label" else None
                            for kind in ("label", "text") for lang in hidden}
    blank["parts"] = tuple(replace(part, **gone) for part in entry.parts)
    return replace(entry, **blank)


def write(fmt: str, found: Iterable[Entry], out: TextIO) -> int:
    """Write the entries in `fmt` to `out`; return how many."""
    writer = Writer(fmt, out)
    for entry in found:
        writer.add(entry)
    return writer.close()


class Writer:
    """One format's file, an entry at a time (the web edition writes all four in one pass);
    the records go to the file BATCH at a time, in one write."""

    BATCH = 500

    def __init__(self, fmt: str, out: TextIO, ranges: bool = False):
        """`ranges`: keep where each month's records lie (`cut`); `out` is then a file."""
        self.record, self.out, self.count, self.ranges = RECORDS[fmt], out, 0, ranges
        self.head, self.sep, self.tail = ("[\n", ",\n", "\n]\n") if fmt == "csljson" else ("", "", "")
        self.since: int | None = None  # byte offset of the first record since the last cut
        self.recent = 0  # records since the last cut
        self.pending: list[str] = []  # records not yet written

    def add(self, entry: Entry) -> None:
        self.pending.append(self.record(entry))
        if len(self.pending) >= self.BATCH:
            self._write_pending()

    def _write_pending(self) -> None:
        if self.pending:
            records, self.pending = self.pending, []
            self.add_records(self.sep.join(records), len(records))

    def add_records(self, text: str | bytes, count: int) -> None:
        """`count` records, or their UTF-8 bytes as the last build wrote them (pipeline/months.py)."""
        self._write_pending()
        self.out.write(self.sep if self.count else self.head)
        if self.ranges and self.since is None:
            self.since = self._at()
        if isinstance(text, bytes):
            self.out.flush()
            self.out.buffer.write(text)
        else:
            self.out.write(text)
        self.count += count
        self.recent += count

    def cut(self) -> list[int] | None:
        """[start, end, count]: the byte range of the records since the last cut, the
        separator before the first left out (it depends on what came before)."""
        self._write_pending()
        found = None if self.since is None else [self.since, self._at(), self.recent]
        self.since, self.recent = None, 0
        return found

    def _at(self) -> int:
        self.out.flush()
        return self.out.buffer.tell()

    def close(self) -> int:
        self._write_pending()
        self.out.write(self.tail if self.count else self.head + self.tail.lstrip("\n"))
        return self.count


# --- the fields every format shares ---------------------------------------------------------

def cite_key(entry: Entry) -> str:
    """arxiv:2611.00001 -> arxiv-2611.00001: the site's anchor rule, safe in every format."""
    return safe_id(entry.key)


def arxiv_id(entry: Entry) -> str | None:
    return entry.key.removeprefix("arxiv:") if entry.key.startswith("arxiv:") else None


_ASIDE = re.compile(r"(.*\S)\s+(\([^()]*\))")  # 'Wei Zhang (张伟)'


@lru_cache(maxsize=256)
def name_parts(name: str) -> tuple[str, str]:
    """(family, given): 'Jane Q. Doe' -> ('Doe', 'Jane Q.'); one word is a family name.
    BibTeX's von rule keeps a particle with the family name, so reference managers file
    'Mihaela van der Schaar' under van der Schaar, not Schaar; a suffix stays with it too
    ('Martin Luther King Jr.' -> ('King Jr.', 'Martin Luther')). Cached: the four formats
    of an entry ask for the same names. A name written 'Family, Given' (or 'Family, Jr.,
    Given') is read that way, 'John Smith, Jr.' as 'John Smith Jr.'; one with ' and ' in it
    ('Smith and Sons') is one name. A name in brackets after it stays with the family name:
    'Wei Zhang (张伟)' -> ('Zhang (张伟)', 'Wei'), filed under Zhang; so do signs after it
    (an emoji: 'Jane Doe 🚀' -> ('Doe 🚀', 'Jane'), filed under Doe, not under 🚀), and so do
    numbers ('Anonymous Author 2' -> ('Author 2', 'Anonymous')). A group ('Kimi Team',
    'ATLAS Collaboration') is one name, as 'Smith and Sons' is, not 'Team, Kimi'."""
    if " and " in name or (name.split() or [""])[-1].lower() in GROUPS:
        return name, ""
    *before, sign = name.split() or [""]
    if before and not any(char.isalpha() for char in sign):  # a number too: 'Author 112'
        family, given = name_parts(" ".join(before))
        return f"{family} {sign}", given
    if aside := _ASIDE.fullmatch(name):
        family, given = name_parts(aside[1])
        return f"{family} {aside[2]}", given
    if "," in name:
        parts = [part.strip() for part in name.split(",")]
        if len(parts) == 2 and parts[1].lower() in SUFFIXES:  # 'John Smith, Jr.': no given name
            name = " ".join(parts)
        elif len(parts) == 2:
            return parts[0], parts[1]
        else:
            return (f"{parts[0]} {parts[1]}", parts[2]) if len(parts) == 3 else (name, "")
    words = name.split()
    last = len(words) - 1
    if last >= 2 and words[last].lower() in SUFFIXES:
        last -= 1
    start = next((i for i in range(1, last) if words[i][:1].islower()), max(last, 0))
    if start > 1 and words[start - 1].lower() in PARTICLES and words[start][:1].islower():
        start -= 1  # 'Fernando De la Torre': a capital particle before a lower-case one
    return " ".join(words[start:]), " ".join(words[:start])


def cited(name: str, text: Callable[[str], str] = str) -> str:
    """'Jane Q. Doe' -> 'Doe, Jane Q.', as BibTeX and RIS list authors (one line already);
    `text` writes each part (BibTeX's: an emoji it leaves out leaves no space before the comma)."""
    return ", ".join(part for part in map(text, name_parts(name)) if part)


def named(entry: Entry) -> tuple[tuple[str, ...], bool]:
    """The entry's author names, and whether the paper lists more: a list cut where it was
    collected ends in OTHERS (pipeline/text.py). BibTeX writes that as `and others`, CSL-JSON
    as the name {"literal": "others"} (citeproc's et al.), RIS (which has none) in a note."""
    if entry.authors[-1:] == (OTHERS,):
        return entry.authors[:-1], True
    return entry.authors, False


# RIS has no name for the authors left out: an AU line 'et al.' would be imported as a person.
RIS_MORE = "Authors: the first {} listed here; the paper names more."


def _code(entry: Entry) -> str | None:
    return dict(entry.links).get("code")


def _abstract(entry: Entry) -> str:
    return flat(entry.abstract or entry.summary_en or "")


# Whitespace runs to one space, cached: the four formats of one entry share the work (room
# for the abstract to stay cached past the authors of a long author list).
flat = lru_cache(maxsize=256)(collapse)


# --- BibTeX --------------------------------------------------------------------------------

_TEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "%": r"\%", "&": r"\&", "$": r"\$",
        "#": r"\#", "_": r"\_", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}"}
# BibTeX counts every brace, escaped or not: braces that do not pair up become commands.
_UNPAIRED = {"{": r"\textbraceleft{}", "}": r"\textbraceright{}"}
_TEX_CHARS = re.compile("[" + re.escape("".join(_TEX)) + "]")
_BRACES = re.compile("[{}]")


def _paired(text: str) -> bool:
    depth = 0
    for brace in _BRACES.findall(text):
        depth += 1 if brace == "{" else -1
        if depth < 0:
            return False
    return depth == 0


def bibtex_text(value: str) -> str:
    """Text as a BibTeX field value that LaTeX prints (and parsers read back) as it was."""
    return _tex(flat(value))


def _tex(text: str) -> str:
    """bibtex_text of text already on one line."""
    if _TEX_CHARS.search(text):  # most names and titles: nothing to escape
        table = _TEX if _paired(text) else {**_TEX, **_UNPAIRED}
        text = _TEX_CHARS.sub(lambda m: table[m.group(0)], text)
    if text.isascii():
        return text
    text = _NON_ASCII.sub(lambda m: _latex(m.group(0)), unicodedata.normalize("NFC", text))
    return collapse(text) if "  " in text or text[:1] == " " or text[-1:] == " " else text  # an emoji out


# Letters and signs beyond ASCII as BibTeX's special characters ({\L}ukasz, M{\"u}ller,
# {$\alpha$}), pylatexenc's table: pdfLaTeX stops at a character its inputenc
# lacks (α, ≥, ₀, Nguyễn), and bibtex cuts UTF-8 bytes apart in alpha's labels (Ørsted ->
# an invalid byte). A letter with no LaTeX form (Han, Nguyễn's ễ) stays as written, for a
# document set up for its script; a pictograph (an emoji) or a mark with none is left out.
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
# pylatexenc's forms for these need a package (\mathscr, \mathbb, amsmath's \nobreakdash):
# 𝒳, ℝ, 𝔼 and 𝛼 as the letters they are styled from (X, R, E, α), a non-breaking hyphen as -.
_PLAIN = {code: unicodedata.normalize("NFKC", chr(code))
          for code in [*range(0x1D400, 0x1D800), *range(0x2102, 0x2134)]
          if unicodedata.category(chr(code))[0] in "LN" and chr(code) not in "ℓℏ℘"
          and len(unicodedata.normalize("NFKC", chr(code))) == 1} | {0x2011: "-"}


# pylatexenc's math signs, \ensuremath{\alpha}, as $\alpha$: LaTeX prints both alike, but
# Zotero's BibTeX import reads only the second (the first became '\ensuremath\alpha-GRPO').
_MATH = re.compile(r"\\ensuremath\{((?:[^{}]|\{[^{}]*\})*)\}")


@lru_cache(maxsize=4096)  # the same names and signs recur from paper to paper
def _latex(run: str) -> str:
    return _MATH.sub(lambda sign: f"${sign[1]}$", _latex_encoder().unicode_to_latex(run.translate(_PLAIN)))


@lru_cache(maxsize=1)
def _latex_encoder() -> Any:  # imported on first use, as extract's reader is
    from pylatexenc.latexencode import RULE_DICT, UnicodeToLatexConversionRule, UnicodeToLatexEncoder

    dashes = UnicodeToLatexConversionRule(RULE_DICT, _DASHES)
    return UnicodeToLatexEncoder(non_ascii_only=True, replacement_latex_protection="braces-all",
                                 conversion_rules=[dashes, "defaults"],
                                 unknown_char_policy=_unknown, unknown_char_warning=False)


# Dashes as TeX's own ligatures, -- and ---: pandoc's BibTeX reader drops pylatexenc's
# {\textendash} ('ROLL Flash – Accelerating' was cited as 'ROLL Flash Accelerating').
_DASHES = {ord("–"): "--", ord("—"): "---"}


def _unknown(char: str) -> str:
    return "" if unicodedata.category(char) in ("So", "Sk", "Cf", "Mn", "Co") else char


def _bibtex_name(name: str) -> str:
    """'Doe, Jane Q.'; a name with no given name and a space or comma in it ('Qwen Team',
    'Smith and Sons', 'Author 112') in braces, or BibTeX splits it into given and family."""
    family, given = name_parts(name)
    return cited(name, _tex) if given or not re.search(r"[\s,]", family) else "{" + _tex(family) + "}"


def bibtex(entry: Entry) -> str:
    ident = arxiv_id(entry)
    authors, more = named(entry)
    fields = [("title", "{" + bibtex_text(entry.title) + "}"),  # double braces keep its case
              ("author", " and ".join([*map(_bibtex_name, authors), *[OTHERS] * more]))]
    if entry.date:
        fields += [("year", entry.date[:4]), ("date", entry.date)]
    if ident:
        fields += [("eprint", ident), ("archiveprefix", "arXiv"), ("doi", ARXIV_DOI.format(ident))]
        if entry.categories:
            fields.append(("primaryclass", bibtex_text(entry.categories[0])))  # feed text too
    fields += [("url", entry.url or ""), ("abstract", _tex(_abstract(entry))),
               ("keywords", bibtex_text(entry.topic)), ("note", bibtex_text(entry.venue or ""))]
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields if value)
    return f"@misc{{{cite_key(entry)},\n{body}\n}}\n\n"


# --- RIS -----------------------------------------------------------------------------------

def ris(entry: Entry) -> str:
    ident = arxiv_id(entry)
    lines = [("TY", "GEN"), ("ID", cite_key(entry)), ("TI", flat(entry.title))]
    authors, more = named(entry)
    lines += [("AU", cited(a)) for a in authors]
    if entry.date:
        lines += [("PY", entry.date[:4]), ("DA", entry.date.replace("-", "/"))]
    lines += [("UR", entry.url or ""), ("AB", _abstract(entry)), ("KW", flat(entry.topic)),
              ("DO", ARXIV_DOI.format(ident) if ident else ""), ("PB", "arXiv" if ident else ""),
              ("N1", f"arXiv:{ident}" if ident else ""), ("N1", flat(entry.venue or "")),
              ("N1", RIS_MORE.format(len(authors)) if more else ""),
              ("L1", entry.url.replace("/abs/", "/pdf/", 1) if ident and entry.url else ""),
              ("L2", _code(entry) or "")]
    return "".join(f"{tag}  - {value}\n" for tag, value in lines if value) + "ER  - \n\n"  # all on one line


# --- CSL-JSON and JSONL ----------------------------------------------------------------------

def csl(entry: Entry) -> dict[str, Any]:
    """The CSL-JSON item Zotero reads: a preprint ("article") with its arXiv number and DOI."""
    ident = arxiv_id(entry)
    authors, more = named(entry)
    item: dict[str, Any] = {"id": cite_key(entry), "type": "article", "title": entry.title,
                  "author": [*({"family": f, "given": g} if g else {"family": f}
                               for f, g in map(name_parts, authors)), *[{"literal": OTHERS}] * more]}
    if entry.date:
        item["issued"] = {"date-parts": [[int(part) for part in entry.date.split("-")]]}
    if entry.url:
        item["URL"] = entry.url
    if ident:
        item.update(DOI=ARXIV_DOI.format(ident), number=ident, publisher="arXiv")
    if _abstract(entry):
        item["abstract"] = _abstract(entry)
    if entry.venue:
        item["note"] = entry.venue
    item["keyword"] = entry.topic
    return item


def csljson(entry: Entry) -> str:
    return orjson.dumps(csl(entry)).decode()  # orjson: JSON in a quarter of json's time


def jsonl(entry: Entry) -> str:
    """The entry record itself, one JSON object a line (its Part records as objects)."""
    return orjson.dumps(vars(entry)).decode() + "\n"


RECORDS = {"bibtex": bibtex, "ris": ris, "csljson": csljson, "jsonl": jsonl}
