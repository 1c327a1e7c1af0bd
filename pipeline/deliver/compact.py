"""The compact digest a chat channel posts: the highlights, featured papers with one line
each, the top papers of each topic and a link to the web edition, rendered from
templates/channels/, and the structured content a JSON webhook gets.

Apart from chat.py, which hands it over: what a post says, and how outside text (a paper's
title, an LLM's line) is kept from turning into Slack, Telegram, Feishu or DingTalk markup,
is one concern; the platforms' requests, answers and retries another.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from pipeline import escape, render, templating
from pipeline.models import Digest, Entry


def compact(settings: render.Settings, digest: Digest, template: str | None, as_html: bool,
            top: int) -> tuple[str, str, dict[str, Any]]:
    """(title, text, content): the subject line, the compact form rendered from
    templates/channels/`template`, and the structured content (the webhook's body)."""
    sections = tuple(replace(s, entries=tuple(sorted((*s.entries, *s.brief),  # one-line ones too
                                                     key=lambda e: -(e.score or 0.0))[:top]), brief=())
                     for s in digest.sections)
    sections = tuple(s for s in sections if s.entries)
    ctx = render.common(settings)
    digest_url = render.digest_url(settings, digest.id)
    title = render.digest_subject(settings, digest)
    content = {"title": title, "date": digest.id, "url": digest_url,
               "window": {"start": digest.window_start, "end": digest.window_end},
               "highlights": [{"zh": h.zh, "en": h.en, "paper": h.key, "title": h.title, "url": h.url}
                              for h in digest.highlights],
               "featured": [e.key for e in digest.featured],
               "papers": list({e.key: _paper(e) for e in (*digest.featured, *(  # every one, as the digest
                   e for s in digest.sections for e in (*s.entries, *s.brief)), *digest.curated)}.values())}
    if template is None:
        return title, "", content
    text = _env(settings.templates, settings.languages, as_html).get_template(f"channels/{template}").render(
        **ctx, d=digest, title=title, sections=sections, digest_url=digest_url)
    return title, text, content


@cache
def _env(user_dir: Path | None, languages: tuple[str, ...], as_html: bool) -> jinja2.Environment:
    """The chat messages' templates with their escapes as filters, built once per template
    folder and languages (templating.new_env)."""
    env = templating.new_env(user_dir, html=as_html, languages=languages)
    env.filters.update(slack=slack_escape, slack_url=slack_url, telegram=telegram_text, chat_md=chat_md)
    return env


def _paper(entry: Entry) -> dict[str, Any]:
    return {"id": entry.key, "title": entry.title, "title_zh": entry.title_zh, "url": entry.url,
            "topic": entry.topic, "date": entry.date, "authors": list(entry.authors),
            "summary_zh": entry.summary_zh, "summary_en": entry.summary_en,
            "why_zh": entry.why_zh, "why_en": entry.why_en, "curated": entry.curated}


# Slack documents escapes for `&`, `<` and `>` only (api.slack.com/reference/surfaces/
# formatting#escaping); `*`, `_`, `~` and a backquote have none, and mrkdwn makes bold,
# italic, strikethrough or code of them even with `verbatim`. A paper's title is a link's text,
# where nothing else works either; like jsx-slack's <Escape> (docs/about-escape-and-exact-mode.md,
# "Replacements in hyperlink"), each is sent as the look-alike character Slack does not parse;
# so are the fullwidth ＊, ＿ and ｀ of Chinese text, which Slack reads as markup too (ibid.).
_SLACK_MARKUP = str.maketrans({"*": "\u2217", "_": "\u02cd", "`": "\u02cb", "~": "\u223c",
                               "\uff0a": "\ufe61", "\uff3f": "\u2e0f", "\uff40": "\u02cb"})
# An emoji code (`:fire:`, `:+1:`) is made an emoji too, and a colon has no escape either
# (jsx-slack leaves a valid code as it is: it escapes authored text, not outside text). The
# colon that opens one ('Reward Hacking :fire:', the first two of 'Q:A:B') goes as the
# look-alike ∶ (ratio, U+2236, an operator as jsx-slack's ∗ and ∼ are); other colons stay.
_SLACK_EMOJI_OPEN = re.compile(r":(?=[\w+'-]+:)")
# A line that begins with `>` makes a block quote, even as `&gt;`, and so does `＞`; a long
# line cut at a space for the next block may begin with one. As jsx-slack's <Escape> does
# (ibid., "Leading quotes"), an invisible soft hyphen goes before each one after a space.
_SLACK_QUOTE = re.compile(r"(?<!\S)(?=[>\uff1e])")


def slack_escape(value: object) -> str:
    """Slack mrkdwn text: `&`, `<`, `>` as entities (its only escapes), no markup, emoji
    code or block quote, on one line."""
    text = _SLACK_EMOJI_OPEN.sub("\u2236", escape.one_line(value).translate(_SLACK_MARKUP))
    text = _SLACK_QUOTE.sub("\u00ad", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# What Telegram makes a live entity of in any text it is sent (the Bot API's MessageEntity:
# mention, hashtag, cashtag, bot_command, url, email): the character that starts one, when a
# word character follows. A word joiner after it (U+2060, invisible) is none of the characters
# such an entity may hold, so nothing is detected; `<a>` links are the template's own.
_TELEGRAM_ENTITY = re.compile(r"(?:[@#$.]|(?<![\w/<>])/)(?=\w)")  # "</b>" is no command
# in markup a macro made, escaped already, an HTML entity ("&#39;") is passed over whole
_TELEGRAM_ENTITY_IN_MARKUP = re.compile(rf"&#?\w+;|{_TELEGRAM_ENTITY.pattern}")


def telegram_text(value: object) -> str:
    """Outside text for a Telegram message: one line, no @mention, #tag, /command or link.
    Markup (a label macro's, its names escaped) stays markup, so it is not escaped twice."""
    markup = isinstance(value, Markup)
    found = _TELEGRAM_ENTITY_IN_MARKUP if markup else _TELEGRAM_ENTITY
    text = found.sub(lambda m: m.group() + ("" if m.group().endswith(";") else "\u2060"),
                     escape.one_line(value))
    return Markup(text) if markup else text


# Feishu's card Markdown shows a character that is its markup as a numeric HTML entity
# ("需要对特殊字符进行 HTML 转义…格式为 &#实体编号;", open.feishu.cn card rich-text docs); a
# backslash is not documented there, nor for DingTalk's robot Markdown, which decodes
# entities too. `&` is always one, so "&reg" is no ®; ":" too (":smile:" is an emoji).
_CHAT_MD = str.maketrans({ch: f"&#{ord(ch)};" for ch in "&<>*_~`[]\\#:|"})
_CHAT_MD_START = re.compile(r"^(?:[-+=>]|\d+(?=[.)]))")  # a list item, a quote, "1." at a line's start


def chat_md(value: object) -> str:
    """Outside text in a Feishu card's or a DingTalk robot's Markdown: one line, no markup."""
    text = escape.one_line(value).translate(_CHAT_MD)
    return _CHAT_MD_START.sub(lambda m: "".join(f"&#{ord(ch)};" for ch in m.group()), text)


def slack_url(value: object) -> str:
    """A URL inside `<url|text>`: checked, with `|` and `>` percent-encoded."""
    return escape.safe_url(value).replace("|", "%7C").replace(">", "%3E").replace("<", "%3C")
