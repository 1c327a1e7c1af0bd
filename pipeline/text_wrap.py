"""The plain-text email's columns: CJK-aware width and wrapping.

Apart from rendering because it counts terminal columns, not characters: Chinese and
emoji take two, a closing mark may not start a line, and a link is never cut.
"""

from __future__ import annotations

import re
import unicodedata

from pipeline.escape import one_line

WIDTH = 72  # columns of the plain-text email

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
