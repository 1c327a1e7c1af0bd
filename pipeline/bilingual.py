"""Which of a text's Chinese and English the reader is shown, and in what order.

Apart from rendering because templates, the site's search index and the digest itself
ask the same question: the configured languages only, never another one, and a text
said once, not twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pipeline.models import Digest, Entry


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
