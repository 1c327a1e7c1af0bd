"""The glossary: the Chinese the digest uses for each term, and a reply's Chinese checked
against it.

Apart from the Enricher because it is read and checked without a client: from
templates/glossary.yaml (a user's templates folder may replace it) and the config's
enrich.glossary, and against any reply. The Enricher puts it in its prompts and its cache
key, and counts what the check flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2
import yaml

from pipeline.config import parse_yaml
from pipeline.errors import DigestError
from pipeline.replies import Reply

GLOSSARY = "glossary.yaml"


@dataclass(frozen=True)
class Term:
    """A glossary entry: the Chinese the digest uses, and renderings the check flags."""

    zh: str
    avoid: tuple[str, ...] = ()


def load_glossary(env: jinja2.Environment, extra: dict[str, str]) -> dict[str, Term]:
    """templates/glossary.yaml (a user's templates folder may replace it), then the
    config's enrich.glossary, which adds or overrides terms."""
    assert env.loader is not None
    try:
        data = parse_yaml(env.loader.get_source(env, GLOSSARY)[0]) or {}
        terms = {str(term): Term(str(spec["zh"]), tuple(map(str, spec.get("avoid") or ())))
                 for term, spec in (data.get("terms") or {}).items()}
    except (jinja2.TemplateNotFound, yaml.YAMLError, AttributeError, KeyError, TypeError) as exc:
        raise DigestError(f"{GLOSSARY}: not a glossary ({type(exc).__name__}: {exc})",
                          "each term needs zh: and may have avoid: [...]") from None
    terms.update({term: Term(zh, terms[term].avoid if term in terms else ())
                  for term, zh in extra.items()})
    return terms


def glossary_misses(reply: Reply, terms: dict[str, Term]) -> list[str]:
    """`term: used (glossary: zh)` for each term the reply's Chinese renders another way."""
    chinese: list[str] = []

    def walk(node: Any, zh: bool) -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                walk(value, name == "zh" or name.endswith("_zh"))
        elif isinstance(node, list):
            for value in node:
                walk(value, zh)
        elif zh and isinstance(node, str):
            chinese.append(node)

    walk(reply.model_dump(mode="json"), False)
    text = "\n".join(chinese)
    misses = []
    for term, spec in terms.items():
        used = next((variant for variant in spec.avoid if variant in text), None)
        if used:
            misses.append(f"{term}: {used} (glossary: {spec.zh})")
    return misses
