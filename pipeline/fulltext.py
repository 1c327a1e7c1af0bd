"""Deep reading from the paper, not the abstract: arXiv's HTML full text of a featured
paper (`sources.fulltext.url`, `{id}` and `{version}` filled in), its main text only, within a budget.

The extraction parses the page (selectolax) and keeps the article's sections: the
introduction, method and results first, then the rest, never navigation, references,
acknowledgements or appendices. The text goes to the LLM only; the digest publishes the
reading, never the paper's words. It is cached per version, and a paper without HTML
(or a page with no article in it) falls back to its abstract.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from pipeline.errors import SourceError
from pipeline.models import Enrichment

if TYPE_CHECKING:
    from pipeline.sources.http import Fetcher
    from pipeline.store import Store

log = logging.getLogger(__name__)

FIRST = ("introduction", "method", "approach", "result", "experiment", "evaluation", "finding")
# a heading naming one of these, from a word's start: "Direct Preference Optimization" and
# "Reference-free Rewards" are the method, not the reference list
NEVER = re.compile(r"\b(?:references\b|bibliograph|acknowledg|appendi|related work|ethic|impact statement)")
DROP = ("nav", "header", "footer", "script", "style", "noscript", "form", "button", "math annotation",
        ".ltx_bibliography", ".ltx_page_navbar", ".ltx_page_footer", ".ltx_appendix", ".ltx_authors",
        ".ltx_role_footnote", "#header", ".package-alerts")
CHARS_PER_TOKEN = 4
KIND = "fulltext"


def main_text(html: str, budget_tokens: int) -> str | None:
    """The paper's sections as plain text, the most useful first, cut at the budget."""
    from selectolax.lexbor import LexborHTMLParser  # loaded when a featured paper is read

    tree = LexborHTMLParser(html)
    for selector in DROP:
        for node in tree.css(selector):
            node.decompose()
    article = tree.css_first("article") or tree.css_first("main")
    if article is None:
        return None
    sections = article.css("section.ltx_section") or article.css("section")
    if not sections:
        return _clip(_plain(article.text(separator=" ")), budget_tokens) or None
    parts = []
    for order, section in enumerate(sections):
        heading = section.css_first("h1, h2, h3, h4")
        title = _plain(heading.text(separator=" ")) if heading else ""
        if NEVER.search(title.casefold()):
            continue
        first = any(word in title.casefold() for word in FIRST)
        parts.append((not first, order, _plain(section.text(separator=" "))))
    text = "\n\n".join(body for _, _, body in sorted(parts) if body)
    return _clip(text, budget_tokens) or None


def read(fetcher: Fetcher, store: Store, url_template: str, paper_id: str, version: int,
         budget_tokens: int) -> str | None:
    """The featured paper's main text (cached per version); None: no HTML, use the abstract."""
    key = f"{KIND}:{paper_id}v{version}:{budget_tokens}"
    cached = store.get_many([key]).get(key)
    if cached is not None:
        return cached.get("text")
    url = url_template.replace("{id}", paper_id).replace("{version}", str(version))
    try:
        page = fetcher.get(url)
    except SourceError as exc:
        log.debug("no full text for %s: %s; the reading uses the abstract", paper_id, exc)
        if "HTTP 404" in str(exc):  # no HTML for this version: do not ask again
            store.put_many([Enrichment(key, f"arxiv:{paper_id}", KIND, {"text": None})])
        return None
    text = main_text(page.text, budget_tokens)
    store.put_many([Enrichment(key, f"arxiv:{paper_id}", KIND, {"text": text})])
    return text


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _clip(text: str, budget_tokens: int) -> str:
    limit = budget_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[:cut if cut > 0 else limit]
