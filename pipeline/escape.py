"""Outside text made safe inside our markup: one line, Markdown, link targets, XML.

Apart from rendering because every output kind and the chat channels share it: an arXiv
title with TeX, `|`, `*`, `<` or a newline, or an LLM's reply, must not become markup,
break a table row or make a live link, wherever it is written.
"""

from __future__ import annotations

import re
import string

from markupsafe import Markup

from pipeline.text import clean_name

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


def xml_text(value: object) -> str:
    """Text XML 1.0 can hold, on one line; escaping is autoescape's job."""
    return one_line(value)
