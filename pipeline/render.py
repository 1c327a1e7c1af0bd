"""One Jinja environment per output kind; Digest -> md / html / txt.

HTML autoescapes everything; Markdown and text go through filters that keep
outside text (arXiv titles with TeX, `|`, `*`, `<`, newlines; LLM output) from
becoming markup, breaking a table row or making a live link.
"""

from __future__ import annotations

import re
from pathlib import Path

import jinja2

from pipeline.config import bundled

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")
_LINKY = re.compile(r"(https?|ftp)://", re.IGNORECASE)


def md_escape(value: object) -> str:
    """Inline Markdown-safe text: one line, no markup, no live link, table-safe."""
    text = " ".join(str(value).split())
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = _LINKY.sub(lambda m: m.group(1) + ":&#47;&#47;", text)
    return text.replace("&", "&amp;").replace("&amp;#47;", "&#47;")


def md_url(value: object) -> str:
    """A URL safe inside (...) of a Markdown link."""
    return str(value).replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def one_line(value: object) -> str:
    return " ".join(str(value).split())


def loader(user_dir: Path | None) -> jinja2.BaseLoader:
    """A user's template folder first, then the built-in templates (pelican's ChoiceLoader)."""
    loaders: list[jinja2.BaseLoader] = []
    if user_dir is not None:
        loaders.append(jinja2.FileSystemLoader(str(user_dir)))
    loaders.append(jinja2.FileSystemLoader(str(bundled("templates"))))
    return jinja2.ChoiceLoader(loaders)


def text_env(user_dir: Path | None = None) -> jinja2.Environment:
    """Markdown, plain text and prompts: no autoescape, explicit filters."""
    env = jinja2.Environment(
        loader=loader(user_dir), undefined=jinja2.StrictUndefined, autoescape=False,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
    env.filters.update(md=md_escape, md_url=md_url, one_line=one_line)
    return env


def html_env(user_dir: Path | None = None) -> jinja2.Environment:
    """HTML with autoescape on for every template (select_autoescape misses *.html.j2)."""
    env = jinja2.Environment(
        loader=loader(user_dir), undefined=jinja2.StrictUndefined, autoescape=True,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters.update(one_line=one_line)
    return env


def common(config) -> dict:
    """What every template knows about the configuration."""
    return dict(topic=config.topic, languages=config.languages,
                topic_names={t.key: f"{t.name.zh} · {t.name.en}" for t in config.topics},
                base_url=config.outputs.base_url, unsubscribe_url=config.email.unsubscribe_url)


def digest_markdown(config, digest, reading_count: int) -> str:
    return text_env(config.templates.dir).get_template("digest.md.j2").render(
        d=digest, reading_list_count=reading_count, reading_list_url="../READING_LIST.md",
        **common(config))


def reading_list_markdown(config, sections, total: int, updated: str) -> str:
    return text_env(config.templates.dir).get_template("reading_list.md.j2").render(
        sections=[{"topic": s.topic, "name_zh": s.name_zh, "name_en": s.name_en,
                   "count": len(s.entries), "entries": s.entries} for s in sections],
        total=total, updated=updated, **common(config))


def digest_as(config, digest, fmt: str, reading_count: int) -> str:
    """A stored digest in one format: md, html or txt."""
    if fmt == "md":
        return digest_markdown(config, digest, reading_count)
    raise NotImplementedError(fmt)
