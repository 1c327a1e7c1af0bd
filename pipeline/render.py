"""Digest -> md / html / txt / subject / feed, through the templates.

HTML (and the Atom feed) autoescape everything; Markdown and text go through
filters (pipeline/escape.py) that keep outside text from becoming markup.
All wording lives in the templates (partials/labels.j2); this module only
chooses templates, shapes values and enforces the email size cap.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from email import policy as email_policy
from email.message import EmailMessage
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import css_inline

from pipeline import bilingual, links
from pipeline.bilingual import texts
from pipeline.escape import one_line
from pipeline.models import Digest, Entry, Section
from pipeline.templating import html_env, text_env

if TYPE_CHECKING:
    from pipeline.config import Config

# Gmail clips a message body over 102 KB ("[Message clipped]"); stay clear of it.
EMAIL_LIMIT = 100_000  # bytes of the inlined HTML as mail carries it (encoded, CRLF lines)
# How the email's parts are encoded (deliver/email_message.py builds with it): 7-bit safe, so a
# part goes quoted-printable or base64, whichever email's sniffing of its start prefers, in
# lines of at most 76 characters as RFC 2045 (6.7) asks of quoted-printable (Python's default,
# 78, is a header's line; its quoted-printable lines were 78 long).
MAIL_POLICY = email_policy.default.clone(cte_type="7bit", max_line_length=76)
CLIP_EN = 160  # characters kept of an English line when the email must shrink
CLIP_ALL = (600, 200, 60)  # then of each featured, comparison and synthesis text, in steps
FEED_DIGESTS = 20  # entries in feed.xml: a reader polls the whole file, each entry a whole digest


def rfc3339(value: object, tz: str | None = None) -> str:
    """A date or datetime (object or ISO string) as an Atom timestamp with seconds and zone."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime.combine(value, time())
    else:
        moment = datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=ZoneInfo(tz) if tz else UTC)
    text = moment.isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def paper_count(digest: Digest) -> int:
    """This week's papers, as the subject and indexes count them: a featured seed (the seed
    page's own pair, in a week of seeds alone) is no paper of the week."""
    return (sum(len(s.entries) + len(s.brief) for s in digest.sections)
            + sum(1 for e in digest.featured if not e.curated))


@dataclass(frozen=True)
class Settings:
    """What rendering needs of the configuration, and nothing else."""

    topic: Any  # config_sections.Topic: the digest's name and intro in both languages
    languages: tuple[str, ...]
    topic_names: Mapping[str, tuple[str, str]]  # topic key -> its (zh, en) names
    base_url: str | None = None  # outputs.base_url: where out/ (the reading list) is published, "/"-ended
    unsubscribe_url: str | None = None
    templates: Path | None = None  # the user's template overrides
    timezone: str | None = None  # schedule.timezone, for the feed's own date
    email_limit: int = EMAIL_LIMIT  # bytes of the email's inlined HTML
    serve_url: str | None = None  # serve.base_url: where an email's reader links go
    site_url: str | None = None  # where out/site/ is served, ending in "/" (Config.site_url)

    @classmethod
    def of(cls, config: Config) -> Settings:
        return cls(
            topic=config.topic, languages=tuple(config.languages),
            topic_names={t.key: (t.name.zh, t.name.en) for t in config.topics},
            base_url=config.outputs.base_url.rstrip("/") + "/" if config.outputs.base_url else None,
            unsubscribe_url=config.email.unsubscribe_url, templates=config.templates.dir,
            timezone=config.schedule.timezone, serve_url=config.serve.base_url,
            site_url=config.site_url)


def common(settings: Settings) -> dict[str, Any]:
    """What every template knows about the configuration (the languages shown are their
    environment's: templating.new_env)."""
    return {"topic": settings.topic,
            "topic_names": {key: " · ".join(text for _, text in texts(settings.languages, *names))
                            for key, names in settings.topic_names.items()},
            "base_url": settings.base_url,
            "unsubscribe_url": settings.unsubscribe_url}


def _digest_context(settings: Settings, digest: Digest, reading_count: int, relative: str,
                    personal: bool = False) -> dict[str, Any]:
    """`personal`: an email, whose unsubscribe and 👍/👎 links get each reader's token
    (pipeline/links.py) when `serve.base_url` is set, and whose unsubscribe_url gets their
    address for {recipient}; a public copy, whose reader is unknown, shows no such URL."""
    ctx = common(settings)
    serve = settings.serve_url if personal else None
    ctx["feedback"] = partial(links.placeholder, serve) if serve else None
    if serve:
        ctx["unsubscribe_url"] = links.placeholder(serve, "unsubscribe")
    elif links.RECIPIENT in (url := ctx["unsubscribe_url"] or ""):  # an email's gets each reader's
        # address where only we wrote it (an LLM's 'https://evil.example/?u={recipient}' got it too);
        # a public copy has no reader to unsubscribe: reply, it says
        ctx["unsubscribe_url"] = url.replace(links.RECIPIENT, links.ADDRESS) if personal else None
    base = ctx["base_url"]
    digest = bilingual.shown(digest, settings.languages)
    sections, featured = listed(settings, digest)
    # a topic whose papers are all featured is no line of its own: "Featured: X" then "1 paper"
    counts = sorted(((s.name_zh, s.name_en, len(s.entries) + len(s.brief) + len(featured.get(s.topic, ())))
                     for s in sections if s.entries or s.brief), key=lambda t: -t[2])
    # The whole digest, for an email that had to leave papers out: its web page when the
    # site is served somewhere (outputs.site_url), else its Markdown copy beside this one.
    # A relative link works between the files in outputs.dir, not in a mail client: an
    # email links the web reading list, or nothing.
    web = digest_url(settings, digest.id) if settings.site_url else None
    reading: str | None
    whole: str | None
    if base:
        reading, whole = f"{base}READING_LIST.md", web or f"{base}digests/{digest.id}.md"
    elif personal:
        reading, whole = f"{settings.site_url}papers/index.html" if web else None, web
    else:
        reading, whole = relative, web or f"{digest.id}.md"
    # Without the LLM's takeaways the highlights list what the digest holds, 3 to 5 lines:
    # the featured papers, the busiest topics, then curated entries until there are 3.
    top = counts[:max(0, min(3, 5 - len(digest.featured)))]
    ctx.update(d=digest, sections=sections, featured_in=featured,
               paper_count=paper_count(digest), top_topics=top,
               top_curated=digest.curated[:max(0, 3 - len(digest.featured) - len(top))],
               more=len(digest.left_out), reading_list_count=reading_count, reading_list_url=reading,
               digest_url=digest_url(settings, digest.id), whole_url=whole)
    return ctx


def digest_url(settings: Settings, digest_id: str) -> str | None:
    """Where a reader opens a digest: its web page when the site is served somewhere, else
    its HTML copy under outputs.base_url; None when neither is published."""
    if settings.site_url:
        return f"{settings.site_url}digests/{digest_id}.html"
    return f"{settings.base_url}digests/{digest_id}.html" if settings.base_url else None


# --- digests ------------------------------------------------------------------------

def digest_markdown(settings: Settings, digest: Digest, reading_count: int) -> str:
    return text_env(settings.templates, settings.languages).get_template("digest.md.j2").render(
        **_digest_context(settings, digest, reading_count, "../READING_LIST.md"))


def digest_text(settings: Settings, digest: Digest, reading_count: int, personal: bool = False) -> str:
    """The text/plain part: same content, wrapped at 72 columns, links as full URLs."""
    return text_env(settings.templates, settings.languages).get_template("email.txt.j2").render(
        **_digest_context(settings, digest, reading_count, "../READING_LIST.md", personal))


def digest_subject(settings: Settings, digest: Digest) -> str:
    text = text_env(settings.templates, settings.languages).get_template("subject.txt.j2").render(
        d=digest, paper_count=paper_count(digest), **common(settings))
    return one_line(text)


def featured_by_topic(digest: Digest) -> dict[str, list[Entry]]:
    """This week's featured papers by topic: each topic's list names its own, pointing up
    to Featured, so that its count is all of its papers, as the trends and header count."""
    found: dict[str, list[Entry]] = {}
    for entry in digest.featured:
        if not entry.curated:
            found.setdefault(entry.topic, []).append(entry)
    return found


def listed(settings: Settings, digest: Digest) -> tuple[tuple[Section, ...], dict[str, list[Entry]]]:
    """The week's sections as every edition lists them, and the featured papers by topic."""
    featured = featured_by_topic(digest)
    return with_featured(settings, digest.sections, featured), featured


def with_featured(settings: Settings, sections: Sequence[Section],
                  featured: Mapping[str, Sequence[Entry]]) -> tuple[Section, ...]:
    """`sections` and a heading for each topic whose papers are all featured, in the
    taxonomy's order."""
    have = {s.topic for s in sections}
    extra = [Section(topic, *settings.topic_names.get(topic, (topic, topic)), ())
             for topic in featured if topic not in have]
    if not extra:
        return tuple(sections)
    order = {topic: n for n, topic in enumerate(settings.topic_names)}
    return tuple(sorted([*sections, *extra], key=lambda s: order.get(s.topic, len(order))))


def _ranked(entries: Sequence[Entry]) -> list[Entry]:
    """The order entries give way in when the email is too big: seeds last, then by score."""
    return sorted(entries, key=lambda e: (not e.curated, -(e.score or 0.0), e.key))


def _keep(digest: Digest, keep: int, brief: int,
          lines: int | None = None) -> tuple[tuple[Section, ...], dict[str, int]]:
    """Sections holding only the `keep` best full entries, the `lines` best of the others
    (all of them when None) as one-line entries, and the `brief` best one-line entries
    (their order unchanged, a topic's shortened entries before its one-line ones); and how
    many went, per topic. Every section stays, so a reader sees each topic and its whole
    count even when its papers all went."""
    full = _ranked([e for s in digest.sections for e in s.entries])
    kept = {e.key for e in full[:keep]}
    short = {e.key for e in full[keep:][:lines]}
    kept |= {e.key for e in _ranked([e for s in digest.sections for e in s.brief])[:brief]}
    sections = tuple(replace(s, entries=tuple(e for e in s.entries if e.key in kept),
                             brief=(*(e for e in s.entries if e.key in short),
                                    *(e for e in s.brief if e.key in kept)))
                     for s in digest.sections)
    left = {s.topic: len(s.entries) + len(s.brief) - len(t.entries) - len(t.brief)
            for s, t in zip(digest.sections, sections, strict=True)}
    return sections, left


def _inline(html: str) -> str:
    """CSS from the <style> block into style attributes; @media rules stay for phones."""
    inliner = css_inline.CSSInliner(keep_style_tags=False, keep_at_rules=True, keep_link_tags=False,
                                    load_remote_stylesheets=False)
    return inliner.inline(html)


def digest_html(settings: Settings, digest: Digest, reading_count: int, limit: int | None = None,
                personal: bool = False, whole: bool = False) -> str:
    """The email HTML, CSS inlined, under `limit` bytes; `whole`, never trimmed (the file
    copy in out/digests/, which an email's "view online" may link).

    Too big, what gives way, in turn (`trim`): the one-line entries (the lowest-ranked
    first), long English lines (clipped), the reading list's entries (the oldest first),
    the full entries (the lowest-ranked first), each becoming a one-line linked entry under
    its topic, the updates (the last first), those one-line entries of this week's papers
    (the lowest-ranked first); then the featured readings, comparison and synthesis are
    shortened, down to each featured paper's headline. The step that makes the email fit
    keeps the most of what it gives that fits, and room it leaves goes back to what gave
    way before it, the last first. What goes is counted where it was ("+N more", linking
    the whole digest): the papers under their topic and all of them after the topics, the
    reading list's entries under their heading, the updates under theirs. The header, the
    highlights and the footer always stay, and a shortened email says so at the top, linking
    the whole digest. A language is never dropped: every entry kept speaks in each of them.
    An email with no link to a whole copy (no outputs.site_url or base_url) is never
    trimmed: what it left out would be out of every reader's reach.
    """
    limit = settings.email_limit if limit is None else limit
    template = html_env(settings.templates, settings.languages).get_template("email.html.j2")
    base = _digest_context(settings, digest, reading_count, "../READING_LIST.md", personal)
    base["subject"] = digest_subject(settings, digest)
    total = sum(len(s.entries) for s in digest.sections)
    briefs = sum(len(s.brief) for s in digest.sections)
    seeds = len(base["d"].curated)
    news = base["d"].updates

    def render(clip_en: int | None = None, keep: int = total, clip_all: int | None = None,
               brief: int = briefs, curated: int = seeds, updates: int = len(news),
               shallow: bool = False, lines: int | None = None) -> str:
        sections, left = _keep(digest, keep, brief, lines)
        cut = sum(left.values())  # this week's papers; the reading list's entries are counted apart
        sections = with_featured(settings, sections, base["featured_in"])
        left = {s.topic: left.get(s.topic, 0) for s in sections}
        d = base["d"]
        d = replace(d, curated=d.curated[:curated])
        trimmed = cut > 0 or curated < seeds
        shortened = bool(trimmed or clip_en or clip_all or shallow or updates < len(news)
                         or keep < total or brief < briefs)
        page = template.render(**{**base, "d": d, "sections": sections, "left": left,
                                  "updates": news[:updates], "updates_left": len(news) - updates,
                                  "papers_left": cut, "curated_left": seeds - curated,
                                  "trimmed": trimmed, "shortened": shortened,
                                  "clip_en": clip_en, "clip_all": clip_all, "shallow": shallow})
        return _inline(page)

    def fits(page: str) -> bool:  # as each reader gets it: longer links (their tokens), encoded
        return as_sent(links.sized(page)) <= limit

    page = render()
    if base["whole_url"] is None or whole or fits(page):
        return page
    # (what gives way, its value once given, how many there were to give: a count searched
    # back when the step makes the email fit; None, a step that is all or nothing)
    trim: list[tuple[str, Any, int | None]] = [
        ("brief", 0, briefs), ("clip_en", CLIP_EN, None), ("curated", 0, seeds), ("keep", 0, total),
        ("updates", 0, len(news)), ("lines", 0, total), *(("clip_all", n, None) for n in CLIP_ALL),
        ("shallow", True, None)]
    trim = [t for t in trim if t[2] != 0]  # nothing of it to give
    return _trimmed_to_fit(page, render, fits, trim)


def _trimmed_to_fit(page: str, render: Callable[..., str], fits: Callable[[str], bool],
                    trim: Sequence[tuple[str, Any, int | None]]) -> str:
    """The email (`page`, whole) with what `trim` lists given way in turn until it fits; then
    the step that made it fit, and the ones before it, the last first, each given back the
    most that still fits (digest_html says what gives way and why)."""
    state: dict[str, Any] = {}

    def given(knob: str, n: int) -> str:  # the page with `n` of what `knob` gives back
        return render(**{**state, knob: n})

    for step, (knob, least, _) in enumerate(trim):
        state[knob] = least
        page = render(**state)
        if not fits(page):
            continue
        for back, _, there in [trim[step], *reversed(trim[:step])]:
            if there is not None and state[back] < there:
                found = _most(partial(given, back), fits, state[back] + 1, there)
                if found:
                    state[back], page = found
        return page
    return page  # the smallest page there is; the web and Markdown copies are whole


def _most(fitting: Callable[[int], str], fits: Callable[[str], bool], low: int,
          high: int) -> tuple[int, str] | None:
    """The most in low..high that fits, and its page (binary search), else None."""
    best = None
    while low <= high:
        mid = (low + high) // 2
        page = fitting(mid)
        if fits(page):
            low, best = mid + 1, (mid, page)
        else:
            high = mid - 1
    return best


def as_sent(html: str) -> int:
    """The bytes an HTML part takes in the message: Chinese text sent quoted-printable
    takes three times its UTF-8 (the tour's 99 KB pages went out as 118 KB)."""
    part = EmailMessage(policy=MAIL_POLICY)
    part.set_content(html, subtype="html", charset="utf-8")
    body = str(part.get_payload())
    return len(body) + body.count("\n")  # each line ends in CRLF on the wire


def digest_as(settings: Settings, digest: Digest, fmt: str, reading_count: int) -> str:
    """A stored digest in one format: md, html or txt."""
    if fmt == "md":
        return digest_markdown(settings, digest, reading_count)
    if fmt == "html":
        return digest_html(settings, digest, reading_count, whole=True)
    if fmt == "txt":
        return digest_text(settings, digest, reading_count)
    raise ValueError(f"unknown format {fmt!r}: md, html or txt")


# --- the feed --------------------------------------------------

def feed_id(settings: Settings, name: str) -> str:
    """A feed's (or a feed entry's) id where no base URL is set: a stable URN per install."""
    return f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'rl-digest:{settings.topic.name.en}:{name}')}"


def by_id(digests: Mapping[str, Digest] | Iterable[Digest]) -> Mapping[str, Digest]:
    """Digests by id: a mapping as it is (publish.StoredDigests reads each as asked), a
    list made one."""
    return digests if isinstance(digests, Mapping) else {d.id: d for d in digests}


def feed_xml(settings: Settings, digests: Mapping[str, Digest] | Iterable[Digest], updated: str,
             site: bool = False) -> str:
    """An Atom feed of the newest FEED_DIGESTS digests, newest first, one entry per digest,
    each read as it is rendered: out/feed.xml links the digests' email copies, the site's
    feed (`site`) their web pages."""
    ctx = common(settings)
    base = settings.site_url if site else ctx["base_url"]
    tz = settings.timezone
    digests = by_id(digests)

    def entry(digest: Digest) -> dict[str, Any]:
        link = f"{base}digests/{digest.id}.html" if base else f"digests/{digest.id}.html"
        sections, featured = listed(settings, digest)  # as the digest lists them, featured papers too
        return {"d": digest, "sections": sections, "featured_in": featured,
                "id": link if base else feed_id(settings, digest.id), "link": link,
                "updated": rfc3339(digest.window_end, digest.timezone), "paper_count": paper_count(digest)}

    entries = (entry(digests[did]) for did in sorted(digests, reverse=True)[:FEED_DIGESTS])
    home = ("" if base else "index.html") if site else "READING_LIST.md"  # relative, as the entries' links
    return html_env(settings.templates, settings.languages).get_template("feed.xml.j2").render(
        entries=entries, updated=rfc3339(updated, tz),
        feed_id=f"{base}feed.xml" if base else feed_id(settings, "site-feed" if site else "feed"),
        self_url=f"{base}feed.xml" if base else None, home_url=f"{base or ''}{home}", **ctx)
