"""Text that cannot break a run: hostile feed and LLM text through the real CLI."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from pipeline.sources.arxiv_rss import split_authors
from pipeline.text import at_sentence, clean, clean_name, for_terminal, xml_safe
from tests.helpers import CATS, DAY, config_for, full_config, rl_paper, untagged, write_config
from tests.processes import config_with
from tests.servers.arxiv_server import EMPTY, OK, RSS_TYPE, ArxivServer, raw
from tests.servers.openai_server import OpenAIServer, Reply, default_content, ok
from tests.servers.smtp_server import SmtpServer

AS_OF = "2026-11-02"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# what a hostile feed puts in a title: a lone surrogate (as XML and as a C1 string),
# an OSC "set the terminal title" in its 8-bit form ending in BEL, ESC, a right-to-left override,
# a zero-width space and tag characters (invisible ASCII: "Hi")
HOSTILE = "&#xD800; &#55296; \u009d0;pwned&#7;\x1b[31m \u202eevil\u202c zero\u200bwi\U000e0048\U000e0069dth"


def stored(tmp_path, paper_id: str) -> dict:
    conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
    conn.row_factory = sqlite3.Row
    return dict(conn.execute("SELECT * FROM papers WHERE id = ?", (paper_id,)).fetchone())


def hostile_feed(server: ArxivServer) -> bytes:
    """The stand-in's feed with the marker in a title and an author replaced by raw hostile XML."""
    _, _, body = server.answer(f"/rss/{'+'.join(CATS)}", {}, OK)
    return body.replace(b"MARK", HOSTILE.encode("utf-8"))


def test_surrogates_and_control_characters_from_rss_are_cleaned_not_fatal(tmp_path, cli):
    paper = replace(rl_paper(1, DAY), title="GRPO MARK for reinforcement learning of large language models",
                    authors=("Ada MARK Lovelace", "Alan Turing"))
    with ArxivServer([paper]) as server:
        config = config_for(tmp_path, server, rss=True)
        server.script("/rss/", raw(hostile_feed(server), RSS_TYPE))
        server.papers.clear()  # only the feed knows the paper: its text is what is stored
        collected = cli("--config", str(config), "collect", "--as-of", AS_OF)
        shown = cli("--config", str(config), "status", "--paper", paper.id)

    assert "new 1" in collected.stdout
    row = stored(tmp_path, paper.id)
    for text in (row["title"], row["authors"]):
        assert not CONTROL.search(text), repr(text)
        assert "\u202e" not in text and "\u200b" not in text
    assert row["title"].startswith("GRPO \ufffd \ufffd 0;pwned")  # replaced, not dropped silently
    assert "evil" in row["title"] and "zerowidth" in row["title"]
    assert not CONTROL.search(shown.stdout + shown.stderr)


def test_surrogates_from_the_llm_are_stored_and_a_rerun_reads_them(tmp_path, cli):
    def hostile(request):
        if request.task != "paper_summary":
            return None
        content = default_content(request)
        content["summary_zh"] = "本文\ud800提出了\x1b]0;pwned\x07方法。"
        content["title_zh"] = "标题\u202e反转"
        return ok(json.dumps(content))  # ASCII JSON: the surrogate travels as \\ud800

    with ArxivServer([rl_paper(1, DAY)]) as arxiv, OpenAIServer(hostile) as llm:
        config = full_config(tmp_path, arxiv, llm, digest={"featured": 0})
        first = cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": "k"})
        calls = len(llm.requests)
        cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": "k"})
        assert len(llm.requests) == calls  # cached, read back without a crash

    assert "0 failed" in first.stdout
    digest = (tmp_path / "out" / "digests" / f"{AS_OF}.md").read_text(encoding="utf-8")
    assert "本文\ufffd提出了\\]0;pwned方法。" in digest  # `]` escaped for Markdown
    assert not CONTROL.search(digest)
    conn = sqlite3.connect(tmp_path / "state" / "digest.sqlite3")
    (data,) = conn.execute("SELECT data FROM enrichments WHERE kind = 'paper_summary'").fetchone()
    assert json.loads(data)["title_zh"] == "标题反转"


LONG_URL = "https://huggingface.co/datasets/example-lab/grpo-reasoning-traces-with-verifiable-rewards"


def test_tex_links_the_llm_echoes_from_an_abstract_read_as_links_and_do_not_stop_the_run(tmp_path, cli):
    """pylatexenc raises on \\href, which real abstracts use (2603.17055): a summary that
    repeats it, and a title with a bare \\sqrt, still publish, reading as a reader would;
    the text email keeps a link longer than a line whole, in its brackets (a mail client
    links only the part before a break)."""
    def echoing(request):
        if request.task != "paper_summary":
            return None
        content = default_content(request)
        content["summary_en"] = ("Code is \\href{https://github.com/a/gcpo}{here}, as in~\\cite{x}. "
                                 f"Data: \\href{{{LONG_URL}}}{{the hub}}.")
        return ok(content)

    paper = replace(rl_paper(1, DAY), title="GRPO at a \\sqrt rate for reinforcement learning of LLMs")
    with ArxivServer([paper]) as arxiv, OpenAIServer(echoing) as llm:
        config = full_config(tmp_path, arxiv, llm, digest={"featured": 0})
        cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": "k"})
    text = (tmp_path / "out" / "digests" / f"{AS_OF}.txt").read_text(encoding="utf-8")  # the text email
    assert "Code is here (https://github.com/a/gcpo), as in." in text
    assert f"({LONG_URL})." in text.split()
    assert "* GRPO at a \\sqrt rate for reinforcement learning of LLMs" in text  # as sent


def test_a_1_mb_llm_field_is_refused_then_cut_at_a_sentence_and_the_email_stays_small(tmp_path, cli):
    huge = "This sentence is one of very many. " * 30_000  # ~1 MB

    def verbose(request):
        if request.task != "paper_summary":
            return None
        content = default_content(request)
        content["summary_en"] = huge
        return ok(content)

    papers = [rl_paper(n, DAY) for n in range(1, 8)]
    with ArxivServer(papers) as arxiv, OpenAIServer(verbose) as llm:
        config = full_config(tmp_path, arxiv, llm, digest={"featured": 0})
        result = cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": "k"})
        summaries = [r for r in llm.requests if r.task == "paper_summary"]

    assert len(summaries) == 14  # each paper asked twice: refused once, then cut
    retries = [r for r in summaries if "should have at most 1500 characters" in r.user]
    assert len(retries) == 7  # the retry says why
    assert "0 failed" in result.stdout
    html = (tmp_path / "out" / "digests" / f"{AS_OF}.html").read_bytes()
    assert len(html) < 100_000
    for paper in papers:  # no paper is pushed out
        assert paper.title.encode() in html
    assert "This sentence is one of very many." in html.decode()


def test_llm_json_nested_thousands_deep_fails_that_paper_not_the_run(tmp_path, cli):
    """json.loads and the reply's walks raise RecursionError, no ValueError: one such reply,
    as content or as the whole body, ended the run with 'unexpected error' and no digest."""
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"

    def nested(request):
        if request.task != "paper_summary" or "variant 1 " in request.user:
            return None
        return Reply(content=deep) if "variant 2 " in request.user else Reply(body=deep.encode())

    with ArxivServer([rl_paper(n, DAY) for n in (1, 2, 3)]) as arxiv, OpenAIServer(nested) as llm:
        config = full_config(tmp_path, arxiv, llm, digest={"featured": 0})
        result = cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": "k"})
    assert "summarised 1 (0 cached)" in result.stdout and "2 failed" in result.stdout
    assert "the reply was nested too deeply" in result.stderr
    assert "was not JSON" in result.stderr
    assert (tmp_path / "out" / "digests" / f"{AS_OF}.md").exists()


def test_llm_replies_in_shapes_the_api_does_not_have_are_read_or_fail_that_paper(tmp_path, cli):
    """The openai client checks no reply's shape: content as a list of parts (as some
    servers send it), usage counts as strings, a message that is a string each ended the
    run with 'unexpected error' (TypeError, AttributeError) and no digest."""
    def body(request, content, usage, message=None) -> Reply:
        message = message or {"role": "assistant", "content": content}
        return Reply(body=json.dumps({
            "id": "x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": usage}).encode())

    def shapes(request):
        text = json.dumps(default_content(request), ensure_ascii=False)
        if request.task != "paper_summary" or "variant 1 " in request.user:
            return None
        if "variant 2 " in request.user:  # parts, a reasoning part first
            return body(request, [{"type": "thinking", "thinking": "{}"}, {"type": "text", "text": text}],
                        {"prompt_tokens": 10, "completion_tokens": 5})
        if "variant 3 " in request.user:
            return body(request, text, {"prompt_tokens": "ten", "completion_tokens": -5})
        return body(request, None, {}, message="hello")

    with ArxivServer([rl_paper(n, DAY) for n in (1, 2, 3, 4)]) as arxiv, OpenAIServer(shapes) as llm:
        config = full_config(tmp_path, arxiv, llm, digest={"featured": 0})
        result = cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": "k"})
    assert "summarised 3 (0 cached)" in result.stdout and "1 failed" in result.stdout
    assert "arxiv:2611.00004: paper_summary fell back: unusable reply twice: the reply was blank" in result.stderr
    digest = (tmp_path / "out" / "digests" / f"{AS_OF}.md").read_text(encoding="utf-8")
    assert "English summary of GRPO variant 2 for" in digest and "English summary of GRPO variant 3 for" in digest


def test_a_100_kb_title_and_10000_authors_are_bounded_at_the_source_and_say_so(tmp_path, cli):
    giant = replace(rl_paper(1, DAY), title="GRPO for reinforcement learning of large language models "
                    + "and more " * 11_000, authors=tuple(f"Author {n}" for n in range(10_000)))
    with ArxivServer([giant]) as server:
        config = config_for(tmp_path, server, rss=False)
        cli("--config", str(config), "collect", "--as-of", AS_OF)

    row = stored(tmp_path, giant.id)
    assert len(row["title"]) <= 400 and row["title"].endswith("…")
    kept = json.loads(row["authors"])
    assert len(kept) == 1001 and kept[-2:] == ["Author 999", "others"]  # the exports say more exist
    # a feed's author line past its 200,000 characters (affiliations): cut before the regexes, and said so
    names = split_authors(", ".join(f"Author {n} (Lab {'x' * 300})" for n in range(800)))
    assert 600 < len(names) < 800 and names[-1] == "others" and names[-2].startswith("Author")


def test_cleaning_keeps_ordinary_text_as_it_is():
    ordinary = "RLHF 与 DPO：a $1/3<s<1$ bound — naïve “quotes” 😀\nnext line\ttab"
    assert clean(ordinary) == ordinary
    assert clean_name("Zoë  O'Brien-Łukasz") == "Zoë O'Brien-Łukasz"
    assert xml_safe(b"<t>&#x4E2D; &#9; &amp; &#x1F600;</t>") == b"<t>&#x4E2D; &#9; &amp; &#x1F600;</t>"
    assert at_sentence("One. Two. Three.", 11) == "One. Two."


@pytest.mark.slow
def test_every_llm_text_and_config_key_at_its_bound_keeps_the_email_under_100_kb_as_sent(tmp_path, cli):
    """digest.featured 10, a large max_papers and max_curated, every LLM field at its bound, both
    languages, a busy week: the HTML part as the SMTP server received it (quoted-printable,
    CRLF) stays under 100 KB. Before, the reading list's entries were never trimmed and ten
    featured readings with their comparison stayed over it even clipped (177 KB with no paper
    listed, 597 KB with 40 seed entries). What went is counted as what it is: this week's
    papers after the topics, the reading list's entries under their heading (the line after
    the topics said '+135 papers', 95 papers and the 40 entries)."""
    zh = "这是一句很长的中文解读，用来把每个字段都写到它的上限。" * 60  # past each field's bound
    en = "A long English reading written up to the bound of its field. " * 70

    def long_answers(request):
        content = default_content(request)
        if request.task == "paper_summary":
            content.update(summary_zh=zh[:1500], summary_en=en[:1500], why_zh=zh[:1500], why_en=en[:1500],
                           key_points_zh=[zh[:400]] * 4, key_points_en=[en[:400]] * 4)
        elif request.task == "featured_reading":
            content["headline_zh"], content["headline_en"] = zh[:400], en[:400]
            content["parts"] = [{"label_zh": "部分", "label_en": "Part", "text_zh": zh[:1500],
                                 "text_en": en[:1500]} for _ in range(4)]
        elif request.task == "comparison":
            cells = [{"zh": zh[:400], "en": en[:400]} for _ in content["rows"][0]["cells"]]
            content["rows"] = [{"label_zh": "维度", "label_en": "Dimension", "cells": cells} for _ in range(6)]
            content["synthesis_zh"], content["synthesis_en"] = zh[:1500], en[:1500]
        elif request.task == "highlights":
            content["items"] = [{**item, "zh": zh[:400], "en": en[:400]} for item in content["items"]]
        elif request.task == "seed_translation":
            content["summary_en"] = en[:4000]
        else:
            return None
        return ok(content)

    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "picks.yaml").write_text(json.dumps({"entries": [
        {"title": f"Seed paper {k} on reinforcement learning for language models", "summary_zh": zh[:1000],
         "date": "2024-01-10"} for k in range(40)]}, ensure_ascii=False), "utf-8")
    papers = [rl_paper(n, DAY) for n in range(1, 201)]
    with ArxivServer(papers) as arxiv, OpenAIServer(long_answers) as llm, SmtpServer() as smtp:
        config = full_config(tmp_path, arxiv, llm, smtp_port=smtp.port, seeds={"paths": ["seeds"]},
                             digest={"featured": 10, "max_papers": 200, "max_curated": 40},
                             outputs={"base_url": "https://example.org/out/",
                                      "site_url": "https://example.org/site/"})
        result = cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": "k"})
        received = smtp.messages[0]

    assert "0 failed" in result.stdout
    html = (tmp_path / "out" / "digests" / f"{AS_OF}.html").read_text("utf-8")
    markdown = (tmp_path / "out" / "digests" / f"{AS_OF}.md").read_bytes()
    assert len(markdown) > 200_000 and zh[:1500] in html  # the copies are whole
    assert html.count("Seed paper") >= 40
    raw = received.data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")  # as it went on the wire
    part = re.search(rb"Content-Type: text/html.*?\r\n\r\n(.*?)\r\n--", raw, re.S)
    assert part and len(part.group(1)) <= 100_000, len(part.group(1)) if part else raw[:2000]
    mailed = untagged(received.message.get_body(("html",)).get_content())  # labels' words whole
    head = mailed.split('class="head"', 1)[1].split("</td>", 1)[0]
    assert "本邮件为节选" in head and f'href="https://example.org/site/digests/{AS_OF}.html"' in head
    assert "本周看点" in mailed and mailed.count(zh[:400]) >= 3  # the highlights stay whole
    assert "退订" in mailed and "由 rl-digest 生成" in mailed  # and the footer
    readings = mailed.split('id="featured"', 1)[1].split("本周论文", 1)[0]
    featured = re.findall(r"GRPO variant \d+ for reinforcement", readings)
    assert len(set(featured)) == 10  # every featured paper is named, shortened, not dropped
    assert "这是一句很长的中文解读" in readings and zh[:1500] not in readings  # shortened, not dropped
    papers, _, rest = mailed.split("本周论文 · This week's papers", 1)[1].partition("收录 · From the reading list")
    under_topics = sum(int(n) for n in re.findall(r"\+(\d+) 篇本主题论文见完整版", papers))
    shown = len(set(re.findall(r"GRPO variant (\d+) for", papers)))
    assert under_topics == 200 - shown > 0
    assert f"… +{under_topics} 篇论文见完整版 more papers in the whole digest" in papers
    seeds = len(set(re.findall(r"Seed paper (\d+) on", rest)))
    assert seeds < 40 and f"… +{40 - seeds} 篇收录论文见完整版 more from the reading list in the whole digest" in rest
    # the text part stays whole: a text-only reader's one copy, which no client clips
    text = "".join(received.message.get_body(("plain",)).get_content().split())
    assert zh[:1500] in text and all(f"GRPOvariant{n}for" in text for n in range(1, 201))


def test_a_seed_file_is_outside_text_cleaned_as_a_feed_is(tmp_path, cli):
    """A pasted or downloaded seed page can carry what a feed can: an escape sequence in
    a YAML string or raw in a text line, a right-to-left override. None of it reaches the
    terminal, the digest's files or an export."""
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "010_mine.yaml").write_text(
        '- title: "Evil \\u202Egnp.exe\\u202C RLHF \\e]0;pwned\\a \\e[31mred for LLM"\n'
        '  summary_zh: "种子 \\u202E反转\\u202C 摘要 \\e[2J 强化学习"\n'
        '  date: 2026-10-28\n', encoding="utf-8")
    (tmp_path / "seeds" / "011_page.txt").write_text(
        "Raw \x1b[2J\u202eline\u202c RLHF for LLM（2026-10-27）：原始 \x07 行 强化学习\n", encoding="utf-8")
    config = write_config(tmp_path, {"seeds": {"paths": ["seeds"]}}, seeds=False)
    listed = cli("--config", str(config), "seeds")
    cli("--config", str(config), "run", "--offline", "--as-of", AS_OF)
    exported = cli("--config", str(config), "export", "--format", "bibtex")

    assert "Evil gnp.exe RLHF ]0;pwned [31mred for LLM" in listed.stdout  # the ESC gone, its text kept
    assert "Raw [2Jline RLHF for LLM" in listed.stdout
    files = [p.read_text(encoding="utf-8") for p in (tmp_path / "out").rglob("*") if p.suffix in (".md", ".html", ".txt")]
    assert files and any("gnp.exe" in text for text in files)
    for text in (listed.stdout, listed.stderr, exported.stdout, *files):
        assert not CONTROL.search(text.replace("\r", "")), repr(CONTROL.search(text.replace("\r", "")))
        assert "\u202e" not in text and "\u202c" not in text


def test_what_reaches_a_terminal_has_no_escape_bell_or_bidi_override():
    """A database written before a source cleaned its text still prints safely."""
    assert for_terminal("a\x1b[31m\u202eb\u202c\x07 c\td\n") == "a[31mb c\td\n"
    assert clean("an abstract\U000e0049\U000e0067\U000e006e with hidden tags") == "an abstract with hidden tags"


def test_a_readers_name_reaches_the_to_header_without_a_bidi_override(tmp_path, cli):
    """A right-to-left override in a name would show the name, and the address beside it,
    reversed in the reader's mail client."""
    (tmp_path / "readers.txt").write_text("Carl\u202eRLO <carl@example.org>\n", encoding="utf-8")
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=[],
                             email={"recipients_file": str(tmp_path / "readers.txt")})
        cli("--config", str(config), "run", "--as-of", AS_OF)
        (received,) = smtp.to("carl@example.org")
    assert str(received.message["To"]) == "CarlRLO <carl@example.org>"


def test_a_key_the_llm_makes_up_is_named_on_one_short_line_in_the_log_and_status(tmp_path, cli):
    """A reply's unknown key is named in the error: a newline in it split the log line (a
    forged-looking line of its own), and the warning status shows; so did one named as
    English (`…_en`) holding Chinese, which the language check names before validation."""
    forged = "2026-11-02T00:00:00+0000 ERROR pipeline: forged"

    def inventive(request):
        if request.task != "paper_summary":
            return None
        content = default_content(request)
        if "could not be used" in request.user:  # asked again: the language check's turn
            content["x\n" + forged + " " + "long " * 200 + "_en"] = "本文提出了一种新的强化学习方法，很好。"
        else:
            content["x\n" + forged + " " + "long " * 200] = 1
        return ok(json.dumps(content))

    with ArxivServer([rl_paper(1, DAY)]) as arxiv, OpenAIServer(inventive) as llm:
        config = full_config(tmp_path, arxiv, llm, digest={"featured": 0})
        ran = cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": "k"})
        shown = cli("--config", str(config), "status")

    for text in (ran.stderr, shown.stdout):
        named = [line for line in text.splitlines() if "forged" in line]
        assert named and all("Extra inputs are not permitted" in line or "not in English" in line
                             for line in named), text
        assert "not in English" in named[-1]
        assert not any(line.startswith(forged) for line in text.splitlines())
        assert all(len(line) < 1000 for line in named)


def test_a_paper_only_the_oai_catch_up_reads_is_cleaned_and_bounded_as_a_feeds_is(tmp_path, cli):
    """OAI-PMH may carry what XML allows and a terminal or a reader must not get: C1
    controls (8-bit CSI and OSC), bidi overrides, zero-width characters, a 1,000-character
    title. The API and the feed cleaned them; the catch-up stored them as they came."""
    day = datetime(2026, 11, 24, 12, tzinfo=UTC)
    hostile = replace(rl_paper(1, day), title="GRPO \u009d0;pwned \u009b31m \u202eevil\u202c zero\u200bwidth "
                      "for reinforcement learning of LLMs " + "long " * 200,
                      abstract="We train an LLM with RL \u009b2J \u202eusing GRPO.", authors=("Ada \u202eLovelace",),
                      comment="9 pages \u009b2J")
    with ArxivServer([hostile]) as server:
        config = write_config(tmp_path, {"sources": {
            "arxiv": {"api_url": server.api_url, "categories": ["cs.LG"], "lookback_days": 1},
            "rss": {"urls": [server.rss_url(["cs.LG"])]},
            "oai": {"enabled": True, "url": server.oai_url}}, "seeds": {"paths": []}}, seeds=False)
        server.script("/rss/", EMPTY)  # a stale feed: the day is left to the catch-up
        server.script("/api/", *[EMPTY] * 20)  # and the search does not find it
        cli("--config", str(config), "collect", "--as-of", "2026-11-25T20:00:00+00:00")
        oai = [r for r in server.requests if r.path == "/oai"]

    assert oai
    row = stored(tmp_path, hostile.id)
    assert "oai" in row["sources"]
    for value in (row["title"], row["abstract"], row["authors"], row["comment"]):
        assert not CONTROL.search(value) and "\u202e" not in value, repr(value)
    assert "\u200b" not in row["title"] and len(row["title"]) <= 400
    assert row["title"].startswith("GRPO 0;pwned 31m evil zerowidth for reinforcement")


def test_a_raw_control_character_in_one_oai_record_does_not_fail_the_catch_up(tmp_path, cli):
    """A form feed pasted from a PDF is not XML: the API and the feed drop it, the catch-up
    refused the whole page over it (exit 3 and the watermark stuck, run after run)."""
    day = datetime(2026, 11, 24, 12, tzinfo=UTC)
    pasted = replace(rl_paper(1, day), abstract="We train an LLM with RL using GRPO.\x0c From a PDF.")
    with ArxivServer([pasted, rl_paper(2, day)]) as server:
        config = write_config(tmp_path, {"sources": {
            "arxiv": {"api_url": server.api_url, "categories": ["cs.LG"], "lookback_days": 1},
            "rss": {"urls": [server.rss_url(["cs.LG"])]},
            "oai": {"enabled": True, "url": server.oai_url}}, "seeds": {"paths": []}}, seeds=False)
        server.script("/rss/", EMPTY)  # a stale feed: the day is left to the catch-up
        collected = cli("--config", str(config), "collect", "--as-of", "2026-11-25T20:00:00+00:00")

    assert "new 2" in collected.stdout and "recovered through OAI-PMH" in collected.stdout
    assert stored(tmp_path, pasted.id)["abstract"] == "We train an LLM with RL using GRPO. From a PDF."


def test_a_providers_multi_line_error_is_one_line_in_the_log_status_and_doctor(tmp_path, cli):
    """vLLM answers a request it cannot take with a pydantic error over several lines: each
    line of it was a log line of its own, and doctor's one line per check became four."""
    said = json.dumps({"error": {"message": "1 validation error for ChatCompletionRequest\nresponse_format\n"
                                            "  Input should be a valid dictionary", "code": 400}}).encode()
    refused = Reply(status=400, body=said, headers=(("Content-Type", "application/json"),))
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, OpenAIServer(lambda request: refused) as llm:
        config = full_config(tmp_path, arxiv, llm, digest={"featured": 0})
        ran = cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": "k"})
        shown = cli("--config", str(config), "status")
        checked = cli("--config", str(config), "doctor", env={"OPENAI_API_KEY": "k"}, check=None)

    whole = "1 validation error for ChatCompletionRequest response_format Input should be a valid dictionary"
    for text in (ran.stderr, shown.stdout, checked.stdout):
        assert whole in text, text
        assert not any(line.startswith(("response_format", "  Input")) for line in text.splitlines())


def test_a_proxys_error_page_before_the_provider_names_its_status_once_in_doctor(tmp_path, cli):
    """A proxy in front of the provider answers 502 with its HTML page: the SDK's message is
    only "Error code: 502", and doctor read "HTTP 502 from URL: Error code: 502"."""
    page = Reply(status=502, body=b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
                 headers=(("Content-Type", "text/html"),))
    with ArxivServer([]) as arxiv, OpenAIServer(lambda request: page) as llm:
        config = full_config(tmp_path, arxiv, llm)
        checked = cli("--config", str(config), "doctor", env={"OPENAI_API_KEY": "k"}, check=None)

    (line,) = [line for line in checked.stdout.splitlines() if line.startswith("llm")]
    assert f"FAIL  HTTP 502 from {llm.url} (model " in line, line
    assert "Error code" not in line and "<" not in line


def test_a_category_with_braces_from_a_feed_leaves_the_bibtex_entry_whole(tmp_path, cli):
    """The primary category is feed text as the title is: `{`, `}` or `%` in it ended the
    field early and commented out the rest of its line, so the entry did not parse."""
    import bibtexparser

    paper = replace(rl_paper(1, DAY), categories=("cs.LG}{%", "cs.CL"))
    with ArxivServer([paper]) as server:
        config = config_for(tmp_path, server, rss=True)
        cli("--config", str(config), "collect", "--as-of", AS_OF)
    exported = cli("--config", str(config), "export", "--format", "bibtex")

    (entry,) = bibtexparser.loads(exported.stdout).entries
    assert entry["primaryclass"] == "cs.LG\\textbraceright{}\\textbraceleft{}\\%"
    assert entry["url"] == "https://arxiv.org/abs/2611.00001"


def test_a_paper_whose_title_is_empty_once_cleaned_is_called_by_its_id(tmp_path, cli):
    """A feed title of nothing but invisible characters (or none at all) left a paper
    titled '': an empty link `**[](…)**` in the digest, a blank line in the reading list and
    `title = {{}}` in BibTeX."""
    import bibtexparser

    paper = replace(rl_paper(1, DAY), title="MARK")
    with ArxivServer([paper]) as server:
        config = config_for(tmp_path, server, rss=True)
        _, _, body = server.answer(f"/rss/{'+'.join(CATS)}", {}, OK)
        server.script("/rss/", raw(body.replace(b"MARK", "\u200b\u202e\U000e0041 ".encode()), RSS_TYPE))
        server.papers.clear()  # only the feed knows the paper
        cli("--config", str(config), "run", "--as-of", AS_OF)
    exported = cli("--config", str(config), "export", "--format", "bibtex")
    digest = (tmp_path / "out" / "digests" / f"{AS_OF}.md").read_text(encoding="utf-8")
    assert f"[arXiv:{paper.id}](https://arxiv.org/abs/{paper.id})" in digest and "[](" not in digest
    assert f"[arXiv:{paper.id}](" in (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")
    (entry,) = bibtexparser.loads(exported.stdout).entries
    assert entry["title"] == f"{{arXiv:{paper.id}}}"
