"""Outside text made safe where it enters: feeds, the API, LLM replies, and the terminal.

A feed or a model can send anything: lone surrogates (which cannot be stored as UTF-8),
control characters (an ESC sequence retitles a terminal), bidi overrides and zero-width
characters (which make a title read differently from what it is), and sizes no reader
wants. Sources and the enricher pass every string through here once, so everything
downstream (the store, templates, the email) can trust its text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

TITLE_MAX = 400  # characters; the longest real arXiv titles are about 250
NAME_MAX = 200
AUTHORS_MAX = 1000  # names kept per paper: DeepSeek-R1 lists about 200, a physics collaboration 3,000
AUTHORS_CHARS = 30_000  # their characters in all: 1,000 names of 30 (arXiv's average is 12)
OTHERS = "others"  # the last name of a list cut at AUTHORS_MAX: BibTeX's and CSL's word for the rest
PROSE_MAX = 6000  # abstracts (arXiv allows 1,920), comments, journal references

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but tab and newline, DEL, C1 controls; bidi embeddings, overrides, isolates;
# the invisible tag characters (U+E0000-E007F), which spell hidden ASCII a reader never sees
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]")
# also, in titles and names: zero-width characters, bidi marks, the byte-order mark
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
                        "\u200b-\u200f\u2060-\u2064\ufeff\u180e\u061c\U000e0000-\U000e007f]")
_XML_CHARREF = re.compile(rb"&#(?:[xX]([0-9a-fA-F]{1,8})|([0-9]{1,10}));")
_XML_BAD_BYTES = bytes(b for b in range(32) if b not in (9, 10, 13))
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*")
# a list's last "name" that says more exist: "et al.", "et al", "and others", or one
# written onto the last name ("Jane Doe et al."), as a submitter may type the list
_MORE = re.compile(r"(?:^|,?\s+)(?:et(?:\.\s*|\s+)al\.?|and\s+others)$|^others$", re.IGNORECASE)


def clean(text: str | None) -> str:
    """Lone surrogates become U+FFFD; control characters and bidi overrides go."""
    if not text:
        return ""
    return _CONTROL.sub("", _SURROGATE.sub("\ufffd", text))


def clean_name(text: str | None) -> str:
    """clean(), also without zero-width characters and bidi marks; one line."""
    if not text:
        return ""
    return " ".join(_INVISIBLE.sub("", _SURROGATE.sub("\ufffd", text)).split())


def title(text: str | None) -> str:
    return clip(clean_name(text), TITLE_MAX)


def names(values: Iterable[str | None], more: bool = False) -> tuple[str, ...]:
    """Author names, cleaned, each bounded, at most AUTHORS_MAX of them and AUTHORS_CHARS
    characters in all; a longer list (or one the caller cut short: `more`, or one whose last
    name is "et al." or "and others": no one's name) ends in OTHERS, so the exports say that
    more exist."""
    kept: list[str] = []
    size = 0
    for name in filter(None, (clip(clean_name(value), NAME_MAX) for value in values)):
        size += len(name)
        if len(kept) == AUTHORS_MAX or size > AUTHORS_CHARS:
            more = True
            break
        kept.append(name)
    if kept and _MORE.search(kept[-1]):
        more, last = True, _MORE.sub("", kept.pop())
        kept += [last] if last else []
    return (*kept, OTHERS) if more and kept and kept[-1] != OTHERS else tuple(kept)


def prose(text: str | None, limit: int = PROSE_MAX) -> str:
    """One paragraph of outside prose: cleaned, whitespace collapsed, bounded at a sentence."""
    return at_sentence(" ".join(clean(text).split()), limit)


def comment(text: str | None) -> str | None:
    """A paper's comment (pages, venue, code link) as prose, None when there is none."""
    return prose(text, 1000) or None


def journal_ref(text: str | None) -> str | None:
    """A paper's journal reference as prose, None when there is none."""
    return prose(text, 500) or None


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a space when one is near, with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit * 0.6 else cut).rstrip() + "…"


def at_sentence(text: str, limit: int) -> str:
    """At most `limit` characters, ending at the last whole sentence that fits, if any."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [match.start() for match in _SENTENCE_END.finditer(head) if match.start() > 0]
    if ends and ends[-1] > limit * 0.3:
        return head[: ends[-1]].rstrip()
    return clip(text, limit)


def first_sentence(text: str, limit: int) -> str:
    """The opening sentence, clipped when longer than `limit`: a reminder that reads as one."""
    end = next((m.start() for m in _SENTENCE_END.finditer(text) if m.start() > 0), len(text))
    return clip(text[:end].rstrip(), limit)


def for_terminal(text: str) -> str:
    """What may reach a terminal: no escape sequences, no bells, no NULs, no bidi overrides."""
    return clean(text)


def xml_safe(body: bytes) -> bytes:
    """XML bytes without what XML 1.0 forbids: raw control bytes and references to
    surrogates, controls or non-characters (feedparser crashes on `&#xD800;`, expat
    refuses a page over one). They become nothing and U+FFFD respectively."""
    if b"&#" in body:
        body = _XML_CHARREF.sub(_charref, body)
    return body.translate(None, _XML_BAD_BYTES)


def _charref(match: re.Match[bytes]) -> bytes:
    hex_digits, decimal = match.groups()
    code = int(hex_digits, 16) if hex_digits else int(decimal)
    allowed = code in (9, 10, 13) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or (
        0x10000 <= code <= 0x10FFFF)
    return match.group(0) if allowed else b"&#xFFFD;"
