"""Readers through the real CLI and `rl-digest serve` on 127.0.0.1: each reader's email in their
languages; a POST to the List-Unsubscribe URL of a received email stops the next week's email
to that reader only, and a week queued before they unsubscribed is skipped, not sent; a forged
token is refused and changes nothing; a 👎 click asks first (a GET records nothing: mail
scanners open links), its POST is recorded as that reader's verdict and `status --paper`
shows it; the web edition's 👍/👎 are one reader's, `web`."""

from __future__ import annotations

import base64
import html
import json
import re
import sqlite3
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
import sqlalchemy as sa
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from pipeline import store_readers
from pipeline.links import Links
from pipeline.models import paper_key
from pipeline.store import Store
from pipeline.store_schema import runs
from tests.helpers import rl_paper, site_pages, start_warm_cli, voiced, write_config
from tests.processes import config_with, stderr_lines, wait_for
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer
from tests.servers.smtp_server import Received, SmtpServer, free_port
from tests.test_delivery_cli import AS_OF, DAY, NEXT

CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
SECRET = {"RL_DIGEST_SECRET": "a-long-test-secret-for-signing-links"}


def body(message: EmailMessage, subtype: str) -> str:
    return message.get_body((subtype,)).get_content()


def test_each_reader_gets_the_digest_and_subject_in_their_languages(tmp_path, cli):
    readers = [{"address": "en@example.org", "name": "En Reader", "languages": ["en"]},
               {"address": "zh@example.org", "languages": ["zh"]}, "both@example.org"]
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp, OpenAIServer() as llm:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=readers, enrich={
            "provider": "openai", "base_url": llm.url, "timeout_seconds": 5})
        cli("--config", str(config), "run", "--as-of", AS_OF, env={"OPENAI_API_KEY": "sk-test"})
        listed = cli("--config", str(config), "readers")
        (en,), (zh,), (both,) = (smtp.to(a) for a in ("en@example.org", "zh@example.org",
                                                      "both@example.org"))
    assert str(en.message["To"]) == "En Reader <en@example.org>"
    for part in (str(en.message["Subject"]), body(en.message, "plain"), body(en.message, "html")):
        assert not CJK.search(part), CJK.search(part)
    paper = rl_paper(1, DAY)
    for part in (body(zh.message, "plain"), body(zh.message, "html")):
        assert CJK.search(part)
        prose = " ".join(re.sub(r"(?s)<style.*?</style>|<[^>]+>|https?://\S+|&\w+;", " ", part).split())  # markup, links
        prose = re.sub(r"（[^）]*）", " ", prose)  # a term's English name glossed in brackets
        prose = re.sub(r"覆盖: .*?(?=强化学习)", " ", prose)  # the coverage counts: English only so far
        for name in (paper.title, *paper.authors, *paper.categories, paper.id, "rl-digest", "arXiv",
                     "PDF", "READING_LIST.md", "LLM"):
            prose = prose.replace(name, " ")
        words = re.findall(r"[A-Za-z]{2,}(?:[ ,.:'-]+[A-Za-z]{2,}){2,}", prose)
        assert words == [], words  # no three English words in a row
    assert CJK.search(str(zh.message["Subject"])) and not re.search(r"Weekly|papers",
                                                                   str(zh.message["Subject"]))
    assert CJK.search(str(both.message["Subject"])) and "Weekly" in str(both.message["Subject"])
    assert re.search(r"En Reader <en@example.org>\s+lang=en\s+active\s+last delivery: 20", listed.stdout)
    assert re.search(r"zh@example.org\s+lang=zh\s+active", listed.stdout)


def head(url: str) -> int:
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10) as answer:
        return answer.status


def get(url: str, data: bytes | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8")


def test_one_click_unsubscribe_stops_that_reader_only_and_feedback_is_that_readers_verdict(
        tmp_path, cli):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    people = ["ada@example.org", {"address": "alan@example.org", "name": "Alan Turing", "languages": ["en"]}]
    # an abstract's link that names the placeholder a reader's token once replaced
    evil = "https://evil.example/rl-digest-reader-link.up.arxiv%3A2611.00001"
    paper = replace(rl_paper(1, DAY), abstract=rl_paper(1, DAY).abstract + f" Project page: {evil}")
    with ArxivServer([paper]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=people,
                             serve={"base_url": base + "/"})
        cli("--config", str(config), "run", "--as-of", AS_OF, env=SECRET)
        (ada,), (alan,) = smtp.to("ada@example.org"), smtp.to("alan@example.org")
        with serving(config, port, SECRET):
            # on the wire, as a mail client reads it: the URL whole, never RFC 2047-encoded
            header = re.search(r"^List-Unsubscribe: (.*?)\r\n(?! )", ada.data.decode("ascii"), re.M | re.S)
            link = re.fullmatch(r"<(http://[^>]+/u/[^>]+)>,\r\n <mailto:[^>]+>", header.group(1)).group(1)
            assert "ada" not in link and link in str(ada.message["List-Unsubscribe"])
            forged = link[:-3] + ("AAA" if not link.endswith("AAA") else "BBB")
            refused = get(forged, b"List-Unsubscribe=One-Click")
            alans = re.search(r"<(http://[^>]+/u/[^>]+)>", str(alan.message["List-Unsubscribe"])).group(1)
            confirm = get(alans)
            checked = head(alans)  # a link checker's HEAD, as a GET: asks, changes nothing
            after_forgery = cli("--config", str(config), "readers").stdout
            done = get(link, b"List-Unsubscribe=One-Click")
            feedback = re.search(r'href="(http://[^"]+/f/[^"]+)"[^>]*>👎', body(alan.message, "html"))
            asked = get(feedback.group(1))
            head(feedback.group(1))
            after_get = cli("--config", str(config), "status", "--paper", "2611.00001").stdout
            thanks = get(feedback.group(1), b"")
            forged_vote = get(feedback.group(1)[:-2] + "xx", b"")
            page = (tmp_path / "out" / "site" / "digests" / page_name(tmp_path)).read_text("utf-8")
            web_vote = re.search(r'href="(http://[^"]+/f/[^"]+)"[^>]*>👍', page).group(1)
            served = get(base + "/digests/" + page_name(tmp_path))
            web_thanks = get(web_vote, b"")
            missing = get(base + "/digests/1999-01-01.html")
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        cli("--config", str(config), "run", "--as-of", NEXT, env=SECRET)
        listed = cli("--config", str(config), "readers").stdout
        shown = cli("--config", str(config), "status", "--paper", "2611.00001").stdout
        weeks = {a: len(smtp.to(a)) for a in ("ada@example.org", "alan@example.org")}
        config_with(tmp_path, arxiv, smtp.port, recipients=people[1:], serve={"base_url": base})
        removed = cli("--config", str(config), "readers").stdout
        config_with(tmp_path, arxiv, smtp.port, recipients=people, serve={"base_url": base})
        back = cli("--config", str(config), "readers").stdout  # the file edited: still unsubscribed
    assert refused[0] == 403 and forged_vote[0] == 403
    assert confirm[0] == 200 and "<form method=\"post\"" in confirm[1]  # GET only asks
    assert checked == 200
    # the form posts back to the path it came from, whatever Host the request named
    # relative, so the button posts back to this page's path behind a proxy's prefix too
    action = re.search(r'<form method="post" action="([^"]+)"', confirm[1]).group(1)
    assert urljoin("https://example.org/rl-serve" + urlsplit(alans).path, action) == (
        "https://example.org/rl-serve" + urlsplit(alans).path)
    assert re.search(r"ada@example.org\s+lang=\S+\s+active", after_forgery)
    assert re.search(r"Alan Turing <alan@example.org>\s+lang=\S+\s+active", after_forgery)
    assert done[0] == 200 and "/r/" in done[1]  # unsubscribed, with a way back
    assert weeks == {"ada@example.org": 1, "alan@example.org": 2}
    assert re.search(r"ada@example.org\s+lang=\S+\s+unsubscribed", listed)
    assert re.search(r"alan@example.org>\s+lang=\S+\s+active", listed)
    assert re.search(r"ada@example.org\s+lang=-\s+removed\s+last delivery: 20", removed)
    assert re.search(r"ada@example.org\s+lang=\S+\s+unsubscribed", back)
    assert asked[0] == 200 and f'<form method="post" action="{urlsplit(feedback.group(1)).path.rsplit("/", 1)[1]}"' in asked[1]
    assert "readers:" not in after_get  # a GET or HEAD (a mail scanner's prefetch) records nothing
    token = urlsplit(feedback.group(1)).path.rsplit("/", 1)[1]
    assert thanks[0] == 200 and "👎" in thanks[1]  # and one button, to take it back
    assert re.findall(r"<form[^>]*>", thanks[1]) == [f'<form method="post" action="{token}?undo=1">']
    title = rl_paper(1, DAY).title
    assert title in asked[1] and title in thanks[1] and 'href="../"' in thanks[1]  # what, and a way on
    # Alan reads English: his pages are in English and say whose address it is.
    assert 'lang="en"' in confirm[1] and not CJK.search(confirm[1]) and "alan@example.org" in confirm[1]
    assert missing[0] == 404 and 'href="../"' in missing[1]  # /digests/x.html: the site's root
    assert "readers: alan@example.org 👎 web 👍" in shown  # the web edition's visitors: one reader
    assert web_thanks[0] == 200 and "👍" in web_thanks[1]
    for shown in (web_thanks[1], missing[1]):  # a screen reader: one heading, each language voiced as itself
        tree = HTMLParser(shown)
        assert len(tree.css("h1")) == 1 and tree.css_first("html").attributes["lang"] == "zh-CN"
        assert tree.css_first("main h1") and tree.css_first('meta[name="color-scheme"]').attributes[
            "content"] == "light dark"  # a landmark to jump to; dark for a reader who asked for it
        assert "@media (prefers-color-scheme:dark){body{background:#18181b;color:#f4f4f5}a{color:#93c5fd}}" in shown
        for words, lang in voiced([tree.body]):
            assert lang == ("zh-CN" if CJK.search(words) else "en"), words
    assert served[0] == 200 and web_vote in served[1]  # serve hands out the site with its votes
    topics = (tmp_path / "out" / "site" / "papers" / "topic").glob("*.html")
    assert any(web_vote in page.read_text("utf-8") for page in topics)  # the paper's own page too
    assert "ada" not in web_vote and "alan" not in web_vote
    voted = {name: {a.text(): a.attributes.get("aria-label") for a in tree.css("a.vote")}
             for name, tree in site_pages(tmp_path / "out" / "site").items()}
    voted = {name: names for name, names in voted.items() if names}  # a screen reader: not "thumbs up" alone
    assert {name.rsplit("/", 1)[0] for name in voted} == {"index.html", "digests", "papers/topic"}, list(voted)
    assert all(names == {"👍": "有用 Useful", "👎": "没用 Not useful"} for names in voted.values()), voted
    in_mail = set(re.findall(r'aria-label="([^"]+)"[^>]*>(👍|👎)</a>', body(alan.message, "html")))
    assert in_mail == {("Useful", "👍"), ("Not useful", "👎")}  # in the email too, in Alan's English
    assert ada.message["List-Unsubscribe-Post"] is None  # one-click is announced for https only
    # ...reached the reader as written: no token of theirs for evil.example to read and post
    for part in (body(alan.message, "html"), body(alan.message, "plain")):
        assert set(re.findall(r"https://evil\.example/[^\s\"<>]*", part)) == {evil}, part


def page_name(tmp_path) -> str:
    return next((tmp_path / "out" / "site" / "digests").glob("*.html")).name


@contextmanager
def serving(config: Path, port: int, env: dict) -> Iterator[None]:
    """`rl-digest serve` on 127.0.0.1:`port` for the block, once it answers."""
    server = start_warm_cli("--config", str(config), "serve", "--host", "127.0.0.1", "--port", str(port), env=env)
    try:
        wait_for(lambda: _up(f"http://127.0.0.1:{port}"), timeout=60, what="serve to listen", proc=server)
        yield
    finally:
        server.terminate()
        server.wait(timeout=10)


def _up(base: str) -> bool:
    try:
        return get(base + "/u/x")[0] == 403
    except OSError:
        return False


def test_a_week_queued_before_the_reader_unsubscribed_is_skipped_not_sent(tmp_path, cli):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        with SmtpServer() as smtp:
            config = config_with(tmp_path, arxiv, smtp.port, serve={"base_url": base + "/"})
            cli("--config", str(config), "run", "--as-of", AS_OF, env=SECRET)
            (ada,) = smtp.to("ada@example.org")
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        down = cli("--config", str(config), "run", "--as-of", NEXT, env=SECRET, check=None)
        link = re.search(r"<(http://[^>]+/u/[^>]+)>", str(ada.message["List-Unsubscribe"])).group(1)
        with serving(config, port, SECRET):
            done = get(link, b"List-Unsubscribe=One-Click")
        with SmtpServer(port=smtp.port) as back:
            sent = cli("--config", str(config), "send", env=SECRET)
            again = cli("--config", str(config), "send", env=SECRET)
            received = {a: len(back.to(a)) for a in ("ada@example.org", "alan@example.org")}
        listed = cli("--config", str(config), "readers").stdout
        status = cli("--config", str(config), "status").stdout
        outbox = json.loads(cli("--config", str(config), "status", "--json").stdout)["outbox"]
    assert down.returncode == 1 and done[0] == 200
    assert sent.returncode == 0 and again.returncode == 0
    assert received == {"ada@example.org": 0, "alan@example.org": 1}
    assert re.search(r"ada@example.org\s+lang=\S+\s+unsubscribed\s+last delivery: 20\S+\s+"
                     r"digest 2026-11-09 skipped: unsubscribed before it was sent", listed)
    assert "outbox: 0 pending, 0 failed" in status
    assert (outbox["pending"], outbox["failed"], outbox["skipped"]) == (0, 0, 1)
    assert "2026-11-09 ada@example.org: skipped — the reader unsubscribed before it was sent" in status


def test_a_reader_removed_while_their_digest_waits_is_skipped_and_one_can_be_unsubscribed_by_hand(
        tmp_path, cli):
    """A reader taken off the list gets nothing more, not even a digest queued while the
    mail server was down (in the default languages, as the list no longer says theirs); a
    reader who asked by mail is unsubscribed and subscribed again by hand."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        with SmtpServer() as smtp:
            port = smtp.port
        config = config_with(tmp_path, arxiv, port)  # ada and alan, the server down
        down = cli("--config", str(config), "run", "--as-of", AS_OF, check=None)
        config = config_with(tmp_path, arxiv, port, recipients=["alan@example.org", "bob@example.org"])
        with SmtpServer(port=port) as back:
            sent = cli("--config", str(config), "send")
            received = {a: len(back.to(a)) for a in ("ada@example.org", "alan@example.org")}
        listed = cli("--config", str(config), "readers").stdout
        stopped = cli("--config", str(config), "readers", "--unsubscribe", "Bob <BOB@example.org>")
        unknown = cli("--config", str(config), "readers", "--unsubscribe", "eve@example.org", check=2)
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        with SmtpServer(port=port) as week:
            cli("--config", str(config), "run", "--as-of", NEXT)
            weekly = {a: len(week.to(a)) for a in ("alan@example.org", "bob@example.org")}
            # sending them the week by hand says why not, rather than "sent 0" and a skipped row
            refused = cli("--config", str(config), "send", "--digest", NEXT, "--reader", "bob@example.org",
                          check=2)
        started = cli("--config", str(config), "readers", "--subscribe", "bob@example.org")
    assert down.returncode == 1 and sent.returncode == 0
    assert received == {"ada@example.org": 0, "alan@example.org": 1}
    assert re.search(r"ada@example.org\s+lang=-\s+removed\s+last delivery: never\s+"
                     r"digest 2026-11-02 skipped: was removed from the list before it was sent", listed)
    assert stopped.stdout.startswith("BOB@example.org: unsubscribed\n")
    assert re.search(r"bob@example.org\s+lang=\S+\s+unsubscribed", stopped.stdout, re.I)
    assert unknown.stderr.startswith("rl-digest: --unsubscribe: eve@example.org is not one of the readers")
    assert weekly == {"alan@example.org": 1, "bob@example.org": 0}
    assert stderr_lines(refused) == ["rl-digest: --reader: bob@example.org unsubscribed (`rl-digest readers "
                                     "--subscribe bob@example.org` first, if they asked to be mailed again)"]
    assert re.search(r"bob@example.org\s+lang=\S+\s+active\s+last delivery: never\n", started.stdout, re.I)


def test_a_typo_in_a_readers_line_does_not_count_as_removing_that_reader(tmp_path, cli):
    """Their line skipped, the reader's digest queued during an outage is still theirs: it
    goes out (in the digest's languages), not marked as for a reader removed, and the line is
    named by every send."""
    (tmp_path / "readers.txt").write_text("ada@example.org\nalan@example.org\n", encoding="utf-8")
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        with SmtpServer() as smtp:
            port = smtp.port
        config = config_with(tmp_path, arxiv, port, recipients=[])
        config.write_text(config.read_text(encoding="utf-8").replace(
            "to: []", "to: []\n  recipients_file: readers.txt"), encoding="utf-8")
        cli("--config", str(config), "run", "--as-of", AS_OF, check=1)  # the server down
        (tmp_path / "readers.txt").write_text("ada@example.org lang=en,\nalan@example.org\n", encoding="utf-8")
        with SmtpServer(port=port) as back:
            sent = cli("--config", str(config), "send")
            again = cli("--config", str(config), "send")
            received = {a: len(back.to(a)) for a in ("ada@example.org", "alan@example.org")}
    assert received == {"ada@example.org": 1, "alan@example.org": 1} and "sent 2" in sent.stdout
    for result in (sent, again):
        assert "readers.txt:1: lang= takes zh, en or zh,en" in result.stderr


def test_a_quiet_run_names_a_readers_line_it_skipped_in_its_one_line(tmp_path, cli):
    """README's cron line runs `-q run`, which prints its one line and no warning: a reader
    whose line had a typo missed that week's digest (fixed later, the week is not sent to
    them) while cron's mail read '… sent to 1' alone."""
    (tmp_path / "readers.txt").write_text("ada@example.org lang=en,\nalan@example.org\n", encoding="utf-8")
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=[])
        config.write_text(config.read_text(encoding="utf-8").replace(
            "to: []", "to: []\n  recipients_file: readers.txt"), encoding="utf-8")
        ran = cli("-q", "--config", str(config), "run", "--as-of", AS_OF)
    assert ran.stderr == "" and len(ran.stdout.splitlines()) == 1
    assert ran.stdout.rstrip("\n").endswith(
        f"; not mailed: {tmp_path / 'readers.txt'}:1: lang= takes zh, en or zh,en, not 'en,'; line skipped")


def votes(message: Received) -> dict[tuple[str, str], str]:
    """(up | down, paper key) -> the feedback link, from a received email's HTML."""
    found = {}
    for url in re.findall(r'href="(http://[^"]+/f/[^"]+)"', body(message.message, "html")):
        payload = url.rsplit("/", 1)[1].split(".")[0]
        action, _, paper = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode().split("\n")
        found[(action, paper)] = url
    return found


@pytest.mark.slow
def test_readers_feedback_teaches_the_next_runs_model_by_majority(tmp_path, cli):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    people = ["ada@example.org", "alan@example.org", "bob@example.org"]
    key = "arxiv:2611.00002"

    def model() -> str:
        with sqlite3.connect(tmp_path / "state" / "digest.sqlite3") as db:
            row = db.execute("SELECT report FROM runs WHERE kind = 'publish' ORDER BY id DESC").fetchone()
        return json.loads(row[0])["relevance_model"]

    def click(*said: tuple[Received, str]) -> None:
        with serving(config, port, SECRET):
            for message, action in said:
                assert get(votes(message)[(action, key)], b"")[0] == 200

    with ArxivServer([rl_paper(1, DAY), rl_paper(2, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=people,
                             serve={"base_url": base + "/"})
        cli("--config", str(config), "run", "--as-of", AS_OF, env=SECRET)
        shipped = model()
        (ada,), (alan,), (bob,) = (smtp.to(a) for a in people)
        click((ada, "up"), (alan, "down"))  # a tie teaches nothing
        arxiv.add(rl_paper(3, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        cli("--config", str(config), "run", "--as-of", NEXT, env=SECRET)
        after_tie = model()
        click((bob, "down"))  # two against one: not relevant, say the readers
        arxiv.add(rl_paper(4, datetime(2026, 11, 12, 12, tzinfo=UTC)))
        cli("--config", str(config), "run", "--as-of", "2026-11-16", env=SECRET)
        taught = model()
        shown = cli("--config", str(config), "status", "--paper", "2611.00002").stdout
        status = cli("--config", str(config), "status").stdout
    assert after_tie == shipped and taught != shipped
    assert f"relevance model: {taught} (refit on the papers you and your readers judged: 1)" in status
    assert "readers: ada@example.org 👍 alan@example.org 👎 bob@example.org 👎" in shown
    assert "your verdict: none" in shown  # a reader teaches; only `mark` overrides the score


def test_a_digest_held_for_email_turned_off_for_good_is_dropped_and_readers_show_it(tmp_path, cli):
    """Email turned off while a digest waited for a mail server that was down: every send said
    it waits for channel email's return, for ever. `send --drop email` drops it on the record
    (refused while email is on: it goes when the server is back)."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        with SmtpServer() as smtp:
            port = smtp.port
        config = config_with(tmp_path, arxiv, port)  # ada and alan, the server down
        cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
        refused = cli("--config", str(config), "send", "--drop", "email", check=2)
        config = config_with(tmp_path, arxiv, port, email={"enabled": False})
        dropped = cli("--config", str(config), "send", "--drop", "email")
        listed = cli("--config", str(config), "readers").stdout
    assert stderr_lines(refused)[0].startswith("rl-digest: --drop: channel email is in the config")
    assert dropped.stdout.startswith(f"dropped 2 deliveries held for channel email (digest {AS_OF}): ")
    assert "sent 0, pending 0, failed 0" in dropped.stdout
    for who in ("ada", "alan"):
        assert re.search(rf"{who}@example.org\s+lang=\S+\s+active\s+last delivery: never\s+digest {AS_OF} "
                         r"skipped: dropped by `rl-digest send --drop email`: the channel was taken out "
                         r"of the config\n", listed), listed


def test_links_mailed_before_the_secret_changed_still_work_and_a_refused_one_says_reply_unsubscribe(
        tmp_path, cli):
    """With serve's secret changed, every link in the emails mailed before got 403 'This link is
    not valid' and nothing else: a reader could not unsubscribe, nor learn how. The old secret,
    named in serve.previous_secret_envs, still checks them; new emails are signed with the new
    one alone; and a link refused says what the footer says: reply "unsubscribe"."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    old, new = "the-old-secret-of-the-first-week", "the-new-secret-after-the-rotation"
    rotated = {"RL_DIGEST_SECRET": new, "OLD_DIGEST_SECRET": old}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, serve={"base_url": base + "/"})
        cli("--config", str(config), "run", "--as-of", AS_OF, env={"RL_DIGEST_SECRET": old})
        config_with(tmp_path, arxiv, smtp.port, serve={"base_url": base + "/",
                                                       "previous_secret_envs": ["OLD_DIGEST_SECRET"]})
        arxiv.add(rl_paper(2, datetime(2026, 11, 5, 12, tzinfo=UTC)))
        cli("--config", str(config), "run", "--as-of", NEXT, env=rotated)
        (ada, _), (alan, alan_later) = smtp.to("ada@example.org"), smtp.to("alan@example.org")
        with serving(config, port, rotated):
            link = re.search(r"<(http://[^>]+/u/[^>]+)>", str(ada.message["List-Unsubscribe"])).group(1)
            asked = get(link)
            done = get(link, b"List-Unsubscribe=One-Click")
            vote = re.search(r'href="(http://[^"]+/f/[^"]+)"[^>]*>👎', body(alan.message, "html")).group(1)
            thanks = get(vote, b"")
            refused = get(link[:-3] + ("AAA" if not link.endswith("AAA") else "BBB"))
            vote_refused = get(vote[:-2] + "xx", b"")
        listed = cli("--config", str(config), "readers").stdout
        shown = cli("--config", str(config), "status", "--paper", "2611.00001").stdout
    assert asked[0] == 200 and "ada@example.org" in asked[1]
    assert done[0] == 200 and "/r/" in done[1]
    assert re.search(r"ada@example.org\s+lang=\S+\s+unsubscribed", listed)
    assert thanks[0] == 200 and "readers: alan@example.org 👎" in shown
    later = re.search(r"<http://[^>]+/u/([^>]+)>", str(alan_later.message["List-Unsubscribe"])).group(1)
    assert Links(base, new).check(later) and not Links(base, old).check(later)  # the new secret alone
    assert refused[0] == 403 and 'href="mailto:digest@example.org?subject=unsubscribe"' in refused[1]
    text = html.unescape(re.sub(r"<[^>]+>", "", refused[1]))
    assert 'To unsubscribe from this digest, reply "unsubscribe" to any of its emails.' in text
    assert "要退订这份周报，请对任意一期邮件回复 “unsubscribe”。" in text
    assert vote_refused[0] == 403 and "unsubscribe" not in vote_refused[1]  # a vote: nothing to unsubscribe


def test_a_reader_taken_off_the_list_keeps_their_verdicts_but_their_old_links_record_no_more(tmp_path, cli):
    """Taken off the list (they left the group), a reader's 👍/👎 given while a reader still
    count; the links of the emails they were mailed no longer teach this install's model."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    people = ["ada@example.org", "bob@example.org"]
    with ArxivServer([rl_paper(1, DAY), rl_paper(2, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=people, serve={"base_url": base + "/"})
        cli("--config", str(config), "run", "--as-of", AS_OF, env=SECRET)
        (ada,), (bob,) = smtp.to("ada@example.org"), smtp.to("bob@example.org")
        with serving(config, port, SECRET):
            assert get(votes(bob)[("down", "arxiv:2611.00001")], b"")[0] == 200
        config_with(tmp_path, arxiv, smtp.port, recipients=people[:1], serve={"base_url": base + "/"})
        with serving(config, port, SECRET):
            asked = get(votes(bob)[("up", "arxiv:2611.00002")])
            after = get(votes(bob)[("up", "arxiv:2611.00002")], b"")
            changed = get(votes(bob)[("up", "arxiv:2611.00001")], b"")
            still = get(votes(ada)[("up", "arxiv:2611.00002")], b"")
            unsubscribed = get(re.search(r"<(http://[^>]+/u/[^>]+)>", str(bob.message["List-Unsubscribe"])).group(1),
                               b"List-Unsubscribe=One-Click")
    first = cli("--config", str(config), "status", "--paper", "2611.00001").stdout
    second = cli("--config", str(config), "status", "--paper", "2611.00002").stdout
    assert asked[0] == after[0] == changed[0] == 403 and "<form" not in after[1]
    assert still[0] == 200 and unsubscribed[0] == 200  # a removed reader can still unsubscribe
    assert "readers: bob@example.org 👎 (0 👍 1 👎: the model learns irrelevant)" in first
    assert "readers: ada@example.org 👍 (1 👍 0 👎" in second


def test_a_reader_takes_their_vote_back_from_the_thank_you_page_and_the_model_forgets_it(tmp_path, cli):
    """A 👍/👎 clicked by mistake could be flipped but not withdrawn: the thank-you page offers
    to take it back (a POST of the same link, so the emails already mailed can), in the
    reader's languages; the verdict is gone as after `mark --undo`, and a GET takes nothing back."""
    from pipeline import learn

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    people = ["ada@example.org", {"address": "alan@example.org", "languages": ["en"]}]
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=people, serve={"base_url": base + "/"})
        cli("--config", str(config), "run", "--as-of", AS_OF, env=SECRET)
        (ada,), (alan,) = smtp.to("ada@example.org"), smtp.to("alan@example.org")
        ada_up, alan_down = votes(ada)[("up", "arxiv:2611.00001")], votes(alan)[("down", "arxiv:2611.00001")]
        with serving(config, port, SECRET):
            thanks = get(ada_up, b"")
            take_back = urljoin(ada_up, re.findall(r'<form method="post" action="([^"]+)"', thanks[1])[-1])
            scanned = get(take_back)  # a mail scanner's GET of it: nothing taken back
            voted = cli("--config", str(config), "status", "--paper", "2611.00001").stdout
            taken = get(take_back, b"")
            alans = get(alan_down, b"")
            alans_taken = get(urljoin(alan_down, re.findall(r'action="([^"]+)"', alans[1])[-1]), b"")
            get(alan_down, b"")  # he votes again: a vote taken back can be given again
            forged = get(take_back[:-9] + "xx?undo=1", b"")
    shown = cli("--config", str(config), "status", "--paper", "2611.00001").stdout
    assert "撤回" in thanks[1] and "Take it back" in thanks[1] and take_back.startswith(ada_up)
    assert scanned[0] == 200 and "readers: ada@example.org 👍" in voted
    assert taken[0] == 200 and "已撤回你对这篇论文的反馈" in taken[1] and "Your vote on this paper is taken back" in taken[1]
    assert rl_paper(1, DAY).title in taken[1] and "ada@example.org" in taken[1]
    assert alans_taken[0] == 200 and "taken back" in alans_taken[1] and not CJK.search(alans_taken[1])
    assert forged[0] == 403
    assert "readers: alan@example.org 👎 (0 👍 1 👎" in shown and "ada@example.org" not in shown
    store = Store.open(f"sqlite:///{tmp_path}/state/digest.sqlite3")
    assert [(p.id, label) for p, label, _ in learn.verdicts(store)] == [("2611.00001", False)]


@pytest.mark.slow_on_postgresql
def test_forget_erases_a_reader_taken_off_the_list_and_keeps_the_digests_history(tmp_path, cli, db_url):
    """`readers --forget ADDR` (GDPR erasure): refused, exit 2 in one line, while the config
    still lists them; once they are off the list, their status row, their address on the
    outbox rows and in the run reports go, a digest waiting for them is dropped, and their 👍
    stays, tied to no one. Nothing the operator reads, nor a copy of the store, names them;
    the history of what each digest was sent to keeps its rows and counts."""
    bob, carol = "bob@example.org", "carol@example.org"
    readers = ["ada@example.org", "Bob Builder <bob@example.org>", carol]
    refusals = {bob: f"550 5.1.1 <{bob}>: no such user", carol: f"451 4.2.0 <{carol}>: mailbox busy"}
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer(reject=refusals) as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=readers, storage={"url": db_url})
        cli("--config", str(config), "run", "--as-of", AS_OF, check=1)
    store = Store.open(db_url)
    store_readers.record_verdict(store, paper_key(rl_paper(1, DAY).id), bob, True)
    store_readers.record_verdict(store, paper_key(rl_paper(1, DAY).id), "ada@example.org", False)
    with store.tx() as conn:  # a report as releases before 'a reader' wrote it
        conn.execute(runs.update().where(runs.c.kind == "publish").values(
            report={"delivery_errors": [f"Bob Builder <{bob}> (digest {AS_OF}): 550 5.1.1 <BOB@example.org>"]}))
    store.close()
    listed = cli("--config", str(config), "readers", "--forget", bob, check=2)
    config = config_with(tmp_path, arxiv, smtp.port, recipients=readers[:1], storage={"url": db_url})
    forgot = cli("--config", str(config), "readers", "--forget", "BOB@example.org", "--forget", carol)
    again = cli("--config", str(config), "readers", "--forget", bob)
    seen = {what: cli("--config", str(config), *what.split()).stdout
            for what in ("readers", "status", "status --json", f"status --paper {rl_paper(1, DAY).id}")}
    cli("--config", str(config), "store", "copy", f"sqlite:///{tmp_path}/backup.sqlite3")
    engine = sa.create_engine(f"sqlite:///{tmp_path}/backup.sqlite3")
    with engine.connect() as conn:
        tables = {name: [str(row) for row in conn.execute(sa.text(f"SELECT * FROM {name}"))]
                  for name in sa.inspect(conn).get_table_names()}
    engine.dispose()
    assert stderr_lines(listed) == [f"rl-digest: --forget: {bob} is still one of the readers (take them out "
                                    "of email.to or email.recipients_file first: the next run would mail "
                                    "them again)"]
    assert forgot.stdout.splitlines()[:2] == [
        "BOB@example.org: forgotten (1 status row, 1 delivery kept as 'a reader forgotten', "
        "1 👍/👎 kept, tied to no one, 1 run report cleared of them)",
        f"{carol}: forgotten (1 status row, 1 delivery waiting dropped)"]
    assert again.stdout.splitlines()[0] == f"{bob}: nothing was kept about them"
    for what, text in [*seen.items(), *tables.items()]:
        for trace in ("bob@", "carol@", "Bob Builder"):
            assert trace not in str(text).lower() if "@" in trace else trace not in str(text), (what, trace)
    status = json.loads(seen["status --json"])
    assert status["counts"]["failed"] == 1 and status["counts"]["pending"] == 0
    assert status["last"]["publish"]["report"] == {"delivery_errors": [
        f"a reader forgotten (digest {AS_OF}): 550 5.1.1 <a reader forgotten>"]}
    assert [(r["recipient"], r["last_error"]) for r in status["outbox"]["waiting"]] == [
        ("a reader forgotten #2", "550 5.1.1 <a reader forgotten>: no such user (RCPT TO)")]
    assert len(tables["deliveries"]) == 2  # ada's sent, bob's refused; carol's waiting one dropped
    assert "readers: a reader forgotten #1 👍 ada@example.org 👎 (1 👍 1 👎" in seen[
        f"status --paper {rl_paper(1, DAY).id}"]
    assert seen["readers"].splitlines()[0].startswith("ada@example.org  lang=zh,en  active")
    assert len(seen["readers"].splitlines()) == 1


def test_a_chat_channels_reader_is_not_unsubscribed_or_forgotten_as_an_email_reader(tmp_path, cli):
    """`readers` lists a channel's reader beside the email ones (slack:SLACK_URL); --unsubscribe
    of it said "not an email address: … (An email address must have an @-sign.) (an email
    address)", not that a channel's posts stop when its entry leaves `channels`."""
    config = write_config(tmp_path, {"channels": [{"type": "slack", "url_env": "SLACK_URL"}]}, seeds=False)
    assert "slack:SLACK_URL  lang=zh,en  active" in cli("--config", str(config), "readers").stdout
    for option in ("--unsubscribe", "--subscribe", "--forget"):
        refused = cli("--config", str(config), "readers", option, "slack:SLACK_URL", check=2)
        assert stderr_lines(refused) == [
            f"rl-digest: {option}: slack:SLACK_URL is a chat channel's reader, and {option} is for email "
            "readers (a channel's posts stop when its entry leaves `channels`)"]
        refused = cli("--config", str(config), "readers", option, "bob", check=2)  # a name, no address
        assert stderr_lines(refused) == [  # the validator's own words; no '(an email address)' after them
            f"rl-digest: {option}: not an email address: 'bob' (An email address must have an @-sign.)"]
