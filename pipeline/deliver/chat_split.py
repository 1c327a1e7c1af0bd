"""How a chat message is cut to its platform's limit: whole lines packed into pieces, a long
line cut at a space, never inside a Slack link, an HTML tag or an entity. Pure text, apart
from chat.py, which shapes the bodies and posts them: a limit is counted here in the units
the platform counts (`utf16` for Telegram and Slack, the bytes as sent for Feishu and DingTalk).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable


def utf16(text: str) -> int:
    """Length as Telegram counts it, and Slack at most (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


# A long line is cut at a run of spaces; a word longer than a piece between its atoms. A
# Slack link <url|text> and an entity (&amp;) are atoms, never cut.
_ATOM = re.compile(r"<[^<>]*>|&#?\w+;|\s+|[^<&\s]+|.", re.DOTALL)
_WORD = re.compile(r"\s+|(?:<[^<>]*>|&#?\w+;|[^<&\s]+|[<&])+")


def split_lines(text: str, limit: int, size: Callable[[str], int]) -> list[str]:
    """Whole lines packed into pieces of at most `limit`; a longer line is cut at a space
    where it can be, never inside a link or an entity (a word longer than a piece is cut)."""
    pieces: list[str] = []
    for line in text.split("\n"):
        for part in _cut(line, limit, size):
            if pieces and size(pieces[-1] + "\n" + part) <= limit:  # a newline is 2 in JSON
                pieces[-1] += "\n" + part
            else:
                pieces.append(part)
    return [piece for piece in pieces if piece.strip()]


def _cut(line: str, limit: int, size: Callable[[str], int]) -> list[str]:
    if size(line) <= limit:
        return [line]
    parts = [""]
    for word in _WORD.findall(line):
        units = _ATOM.findall(word) if size(word) > limit else [word]
        for unit in units:
            while size(unit) > limit:  # an atom longer than a piece: cut by characters
                cut = limit - size(parts[-1])
                while cut > 0 and size(unit[:cut]) > limit - size(parts[-1]):
                    cut -= 1
                parts[-1] += unit[:cut]
                parts.append("")
                unit = unit[cut:]
            if size(parts[-1]) + size(unit) > limit:
                parts.append(unit.lstrip())
            else:
                parts[-1] += unit
    return [part.strip() for part in parts if part.strip()]


_TAG = re.compile(r"<[^>]*>")


def split_html(text: str, limit: int) -> list[str]:
    """Telegram HTML in messages of at most `limit`: whole lines (each line of the template
    closes what it opens); a line longer than a message loses its markup and is cut
    as text, escaped again per piece, so no piece ends inside a tag or an entity."""
    lines: list[str] = []
    for line in text.split("\n"):
        if utf16(line) <= limit:
            lines.append(line)
            continue
        plain, piece = html.unescape(_TAG.sub("", line)), ""
        for char in plain:
            if utf16(piece) + utf16(html.escape(char, quote=False)) > limit:
                lines.append(piece)
                piece = ""
            piece += html.escape(char, quote=False)
        lines.append(piece)
    return split_lines("\n".join(lines), limit, utf16)
