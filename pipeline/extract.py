"""What an entry can say without an LLM, read from arXiv's own fields. Pure functions.

Links (code, project page, Hugging Face) and the venue come from the abstract, the
comment and the journal-ref; TeX in titles becomes readable text; the English
fallback line is the abstract's contribution sentence, not its background opener.
Nothing here invents: every value is a piece of the given text or None.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

# --- TeX ---------------------------------------------------------------------------------

_MATH = re.compile(r"\$(?!\s)([^$]{1,200}?)(?<!\s)\$")  # "5$ or 6$" is not math
# \"o \'{e} \"\i; a command with its arguments; either inside one pair of braces ({\"O},
# {\ae}, {\v{S}}); an escaped & % _ #. A lone backslash or an unfinished accent stays.
# (not after a backslash: `a\\b` is a line break and a b, not the accent \b)
_ACCENT = r"""(?<!\\)\\[`'^"~=.](?:\{\\?[A-Za-z]?\}|\\?[A-Za-z])"""
_WORD = r"(?<!\\)\\[A-Za-z]+\*?"
_COMMAND = re.compile(rf"\{{(?:{_ACCENT}|{_WORD}(?:\{{[^{{}}$]*\}})?)\}}"
                      rf"|{_ACCENT}|{_WORD}(?:\{{[^{{}}$]*\}})*|\\[&%_#]")
_SUP = str.maketrans("0123456789+-=()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿ")
_SUB = str.maketrans("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎")
_SCRIPT = re.compile(r"([\^_])([0-9]{1,3}(?![0-9])|[+\-n*](?![A-Za-z0-9]))")  # π^* -> π*
# TeX's dashes as titles use them: "X --- Y" and "X -- A Survey" (ten dev titles); never
# the ends of an HTML comment, which stays text.
_DASHES = re.compile(r"(?<![-!])---(?![->])|(?<=\s)--(?=\s)")


@lru_cache(maxsize=1)
def _latex() -> Any:  # imported on first use: collecting never pays for it
    from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

    logging.getLogger("pylatexenc").setLevel(logging.ERROR)  # "\\frac failed its substitution": kept as sent
    # pylatexenc drops these with their text ("We release \\texttt{ToolRL}" read "We release ")
    context = get_default_latex_context_db()
    kept = ("texttt", "textsf", "textup", "textmd", "mbox")
    symbols = ({name: "%(1)s" for name in kept} | {"textless": "<", "textgreater": ">"}  # dropped too
               | {"eg": "e.g.", "ie": "i.e."})  # the style files' "(\eg, a)" read "(, a)"
    macros = [MacroTextSpec(name, simplify_repl=text) for name, text in symbols.items()]
    context.add_context_category("rl-digest", prepend=True, macros=macros)
    return LatexNodes2Text(latex_context=context, math_mode="text", keep_comments=False,
                           strict_latex_spaces=False)


# Links and citations, which pylatexenc turns into "<url>" and "<cit.>" (and its \href
# raises): \url{u} is u, \href{u}{text} is "text (u)", a citation goes with its space.
_LINK = re.compile(r"\\(?:url|href)\{([^{}\s]+)\}(?:\{([^{}]*)\})?")
_CITE = re.compile(r"\s*~?\\cite[a-z]*\*?(?:\[[^\]]*\])*\{[^{}]*\}")
# A line break (\\, \\*, \\[2pt], \newline), which a title or an abstract copied from a TeX
# source carries: one space, as a reader reads it (it stayed as two backslashes).
_BREAK = re.compile(r"[ \t]*(?:\\\\\*?(?:\[[^\]]{0,20}\])?|\\newline(?![A-Za-z]))[ \t]*")


def _link(match: re.Match[str]) -> str:
    url, text = match.group(1), (match.group(2) or "").strip()
    return url if not text or text == url else f"{text} ({url})"


@lru_cache(maxsize=4096)
def _tex_piece(source: str) -> str:  # the same $\pi$ and \textsc{} recur from paper to paper
    try:
        text = _latex().latex_to_text(source)
    except Exception:  # noqa: BLE001 -- pylatexenc's own slips (\sqrt, \footnote): keep it as sent
        return source
    return _SCRIPT.sub(lambda m: m.group(2).translate(_SUP if m.group(1) == "^" else _SUB), text)


def readable(text: str | None) -> str | None:
    """`GRPO-$\\lambda$` -> `GRPO-λ`, `AM$^3$Safety` -> `AM³Safety`, `\\textsc{X}` -> `X`,
    `R\\"opke` -> `Röpke`, `X -- A Survey` -> `X – A Survey`.

    Only `$...$` spans and backslash commands are converted, so `%`, `&` and a lone
    `$` in plain prose stay what they are. Escaping for a format happens later. Text that
    reads as nothing (`\\\\`, `$\\,$`) is "", so each caller's `readable(x) or x` keeps x:
    a blank title was a link with nothing to click.
    """
    if not text or ("$" not in text and "\\" not in text and "--" not in text):
        return text
    if "--" in text:
        text = _DASHES.sub(lambda m: "—" if m.group(0) == "---" else "–", text)
    if "\\" in text:
        text = _BREAK.sub(" ", _CITE.sub("", _LINK.sub(_link, text)))
    text = _MATH.sub(lambda m: _tex_piece(m.group(1)), text)
    math = [span.span() for span in _TEX_MATH.finditer(text)]
    return _COMMAND.sub(lambda m: _command(m, math), text).strip()


# An author's own macro, bare or with empty braces: "we propose \method{}, a framework" (its
# definition is in the paper, not the abstract). Dropped, the name went with it ("we propose ,
# a framework"); it stays as written, as arXiv's page shows it. A font switch ({\em X}) goes,
# and so does what pylatexenc does not know in \(…\) or \[…\] math (\bigl, \displaystyle).
_BARE = re.compile(r"\\([A-Za-z]+)\*?(?:\{\})?")
_TEX_MATH = re.compile(r"\\\(.*?\\\)|\\\[.*?\\\]", re.S)
_SWITCHES = {"em", "bf", "it", "sc", "rm", "tt", "sf", "sl", "up", "normalfont", "bfseries", "itshape",
             "scshape", "ttfamily", "sffamily", "rmfamily", "upshape", "mdseries", "small", "footnotesize",
             "large", "Large", "huge", "tiny", "centering", "noindent", "relax", "xspace"}


def _command(match: re.Match[str], math: list[tuple[int, int]]) -> str:
    bare = _BARE.fullmatch(match.group(0))
    if (bare and bare.group(1) not in _SWITCHES and not any(a < match.start() < b for a, b in math)
            and _latex().latex_context.get_macro_spec(bare.group(1)) is None):
        return "\\" + bare.group(1)
    return _tex_piece(match.group(0))


# --- links -------------------------------------------------------------------------------

# A URL with a scheme, or a bare host we know; trailing punctuation is cut afterwards.
_URL = re.compile(
    r"(?:https?://|(?<![\w./@-])(?=(?:www\.)?(?:github\.com|gitlab\.com|huggingface\.co)/))"
    r"[^\s<>\"'`{}|\\^\[\]]+", re.IGNORECASE)
_URL_HINTS = ("http", "github.com", "gitlab.com", "huggingface.co")  # what _URL can start with
_TRAIL = ".,;:!?)]}'\"*"
_HOST = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_PROJECT_HINT = re.compile(r"(?i)(project|home)\s*page|website|demo|\bsite\b")
_PAGE_HOSTS = (".github.io", ".gitlab.io", ".pages.dev", ".netlify.app", ".vercel.app")

# Hugging Face's own pages, no model: a paper's page (the paper itself), a blog post, the
# docs; each is a project page when the text says so ('Project page: …'), else no link.
_HF_PAGES = ("papers", "blog", "posts", "docs", "learn")

# What each kind of link is, in the order an entry shows them.
KINDS = ("code", "project", "model", "dataset", "space")


def checked_url(raw: str) -> str | None:
    """http(s) with a real host name and no user part; anything else is not a link."""
    url = raw if re.match(r"(?i)https?://", raw) else "https://" + raw
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if parts.scheme.lower() not in ("http", "https") or parts.username or parts.password:
        return None
    if not _HOST.match(host):
        return None
    return url


def _kind(url: str, before: str) -> str | None:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().removeprefix("www.")
    path = [p for p in parts.path.split("/") if p]
    if host in ("github.com", "gitlab.com"):
        return "code" if len(path) >= 2 else None
    if host == "huggingface.co" and path and path[0] not in _HF_PAGES:
        return {"datasets": "dataset", "spaces": "space", "collections": "model"}.get(path[0], "model")
    if host.endswith(_PAGE_HOSTS) or _PROJECT_HINT.search(before[-40:]):
        return "project"
    return None


def links(*texts: str | None) -> tuple[tuple[str, str], ...]:
    """(kind, url) found in the texts: the first of each kind, in KINDS order."""
    found: dict[str, str] = {}
    for text in texts:
        low = (text or "").lower()
        if not any(hint in low for hint in _URL_HINTS):  # most abstracts hold none: skip the scan
            continue
        for match in _URL.finditer(text or ""):
            raw = match.group(0)
            while raw and raw[-1] in _TRAIL:
                raw = raw[:-1]
            url = checked_url(raw)
            if url is None:
                continue
            kind = _kind(url, text[:match.start()])  # type: ignore[index]
            if kind and kind not in found:
                found[kind] = url
    return tuple((kind, found[kind]) for kind in KINDS if kind in found)


# --- venue -------------------------------------------------------------------------------

# "Accepted for publication in X", "Published as a conference paper at X" (ICLR's own words):
# the venue is X, not "publication in X"
_ACCEPTED = re.compile(
    r"(?i)\b(?:accepted|to\s+appear|published|presented)(?:\s+for\s+(?:publication|presentation))?"
    r"(?:\s+as\s+(?:an?\s+)?(?:(?P<kind>oral|spotlight|poster)(?:\s+(?:paper|presentation))?"
    r"|(?:conference|workshop|journal|main|full|long|short)\s+paper))?"
    r"\s+(?:at|to|by|in|for)\s+(?:the\s+)?(?P<venue>[^.;\n]+)")
_VENUES = (r"NeurIPS|ICML|ICLR|ACL|EMNLP|NAACL|EACL|AACL|COLING|AAAI|IJCAI|CVPR|ICCV|ECCV|KDD|WWW|"
           r"SIGIR|COLM|CoRL|AISTATS|UAI|TMLR|JMLR|TACL|ICRA|IROS|WSDM|CIKM|MICCAI|ICASSP|Interspeech")
_NAMED = re.compile(
    rf"(?:(?P<findings>Findings\s+of\s+(?:the\s+)?)?\b(?P<name>{_VENUES})[-' ]?(?P<year>(?:19|20)?\d{{2}})\b"
    r"(?:\s*\(?(?P<kind>(?i:oral|spotlight|poster|findings|workshop))\)?)?)")
_ACRONYM_YEAR = re.compile(r"\(([A-Z][A-Za-z@-]{1,15}[-' ]?(?:19|20)?\d{2})\)")
_NOT_YET = re.compile(r"(?i)\b(submitted|submission|under\s+review|in\s+review|preprint\s+for)\b")
_CUT = re.compile(r"(?i)\s*(?:,|\bwith\b|\bwhich\b|\band\s+will\b|\(|\bmanuscript\b|\bcode\b|\bhttps?://)")


def _clean(venue: str) -> str:
    venue = " ".join(venue.split()).strip(" ,:;-")
    words = venue.split()
    return " ".join(words[:10]) + (" …" if len(words) > 10 else "")


# said at the start: "an earlier version was withdrawn from NeurIPS" or "Theorem 2 of v2 is
# withdrawn" in the middle of a comment is no withdrawal of this paper
_WITHDRAWN = re.compile(r"(?i)^\W*(?:(?:this|the) (?:paper|submission|article|manuscript|preprint|work)"
                        r" (?:has been|is|was) withdrawn\b|withdrawn\b)")


def withdrawn(comment: str | None, abstract: str | None) -> bool:
    """Whether this version withdraws the paper, as arXiv's withdrawals say it: a comment
    ("This paper has been withdrawn by the authors", "Withdrawn: the results are wrong"), or
    a short abstract that opens with it."""
    return bool(_WITHDRAWN.search(comment or "")
                or _WITHDRAWN.search(abstract or "") and len(abstract or "") < 600)


def venue(comment: str | None, journal_ref: str | None) -> str | None:
    """Where the paper appears, as stated: the journal-ref, else the comment's
    "Accepted at <venue>" or "<venue> <year> (oral|spotlight|findings)"; None if neither."""
    if journal_ref and journal_ref.strip():
        return _clean(journal_ref)
    text = " ".join((comment or "").split())
    if not text:
        return None
    accepted = _ACCEPTED.search(text)
    if accepted:
        tail = accepted.group("venue")
        acronym = _ACRONYM_YEAR.search(tail)
        name = acronym.group(1) if acronym else _CUT.split(tail, maxsplit=1)[0]
        kind = accepted.group("kind")
        return _clean(f"{name} ({kind})" if kind else name) or None
    for match in _NAMED.finditer(text):
        if not (match.group("kind") or match.group("findings")):
            continue
        if _NOT_YET.search(text[max(0, match.start() - 40):match.start()]):
            continue
        return _clean(match.group(0))
    return None


# --- the contribution sentence -------------------------------------------------------------

# A sentence ends at . ! ? (or a quote closing after it: 'opaque "black boxes." To bridge')
# before a capital, a bracket, a quote, TeX ("$", "\\cmd", "{") or "1)"; or with no space at
# all ("deployments.To address"), after a word of two letters.
_SENTENCES = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'”’]))\s+(?=[A-Z(\"'\[$\\{]|\d\)\s)"
                        r"|(?<=[a-z]{2}[.!?])(?=[A-Z][a-z])")
_NO_END = re.compile(r"(?i)(?:\b(?:e\.g|i\.e|vs|cf|abbr|approx|fig|eq|et al)\.)$")  # "(abbr. CGC)"
# "this paper", "this technical report", "this short paper": one word may come between
_THIS = r"this\s+(?:[\w-]+\s+)?(?:paper|work|study|article|report|survey)"
_CLAIMS = (
    re.compile(rf"(?i)\b(?:we|{_THIS})\s+(?:\w+\s+){{0,2}}?"
               r"(?:propose|introduce|present|develop|design)s?\b"),
    # "We formalize X as Y and introduce Z": the claim past a first verb
    re.compile(r"(?i)\bwe\s+[^.;:]{0,120}?\band\s+(?:then\s+)?(?:propose|introduce|present|develop|design)\b"),
    re.compile(rf"(?i)\b(?:we|{_THIS})\s+(?:\w+\s+){{0,2}}?"
               r"(?:show|find|demonstrate|study|investigate|analy[sz]e|examine|reveal|identify|conduct|"
               r"compare|audit|measure|address|focus|argue|revisit|formulate|reformulate|construct|build|"
               r"detail)s?\b"),
    re.compile(rf"(?i)\b(?:in\s+)?{_THIS}\b|\bhere,?\s+we\b"),
    re.compile(r"(?i)\b(?:we|our)\b"),
)
_NOT_A_CLAIM = re.compile(r"(?i)^(?:warning|disclaimer|content warning)\b")  # "Warning: this paper contains…"
# "We propose two techniques to realize this.": the content is in the next sentence
_ANNOUNCES = re.compile(r"(?i)\b(?:two|three|four|five|several|\d)\s+(?:\w+\s+)?"
                        r"(?:contributions|techniques|components|innovations|ideas|parts|stages)\b[^.]*\.$")
SHORT_CLAIM = 25  # characters: "We find it does not." needs the sentence after it


def sentences(text: str) -> list[str]:
    """An abstract's sentences; a piece that ends in an abbreviation ("e.g.", "abbr.") is
    joined to the next."""
    found: list[str] = []
    for piece in _SENTENCES.split(" ".join((text or "").split())):
        if found and _NO_END.search(found[-1]):
            found[-1] += " " + piece
        elif piece:
            found.append(piece)
    return found


# The name a title gives its method ("SuCo: Sufficiency-guided ...", "MirrorPPR: ..."): one word
# before the colon, with a capital past its first letter, as names are and "Position:" is not.
_TITLE_NAME = re.compile(r"^\s*([A-Za-z][\w.+-]*[A-Z][\w.+-]*)\s*:")


def contribution(abstract: str, title: str = "") -> str:
    """The sentence that says what the paper does ("we propose", "we introduce", "we show",
    "this paper"), with the next one when it only announces it; the first sentence when none
    does. A proposal naming the title's method comes first: "we introduce MSC" before "Building
    on MSC, we propose SuCo" read as the paper's claim in "SuCo: ...". Never rewritten."""
    found = sentences(abstract)
    name = _TITLE_NAME.match(title or "")
    if name:
        named = re.compile(rf"(?<![\w-]){re.escape(name.group(1))}(?![\w-])")
        for claim in _CLAIMS[:2]:
            for i, sentence in enumerate(found):
                if named.search(sentence) and claim.search(sentence):
                    return _with_next(found, i)
    for claim in _CLAIMS:
        for i, sentence in enumerate(found):
            if claim.search(sentence) and not _NOT_A_CLAIM.match(sentence):
                return _with_next(found, i)
    return found[0] if found else ""


def _with_next(found: list[str], i: int) -> str:
    """Sentence i, and the next when i only announces it or says too little."""
    sentence = found[i]
    short = len(sentence) < SHORT_CLAIM or (len(sentence) < 3 * SHORT_CLAIM and _ANNOUNCES.search(sentence))
    return f"{sentence} {found[i + 1]}" if short and i + 1 < len(found) else sentence
