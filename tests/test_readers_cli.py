"""Readers through the real CLI and `rl-digest serve` on 127.0.0.1: each reader's email in their
languages; a POST to the List-Unsubscribe URL of a received email stops the next week's email
to that reader only; a forged token is refused and changes nothing; a 👎 click is recorded as
that reader's verdict and `status --paper` shows it."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from datetime import UTC, datetime
from email.message import EmailMessage

from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer
from tests.servers.smtp_server import SmtpServer, free_port
from tests.test_collect import rl_paper
from tests.test_delivery_cli import AS_OF, DAY, NEXT, config_with, start_cli, wait_for

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
    people = ["ada@example.org", "Alan Turing <alan@example.org>"]
    with ArxivServer([rl_paper(1, DAY)]) as arxiv, SmtpServer() as smtp:
        config = config_with(tmp_path, arxiv, smtp.port, recipients=people,
                             serve={"base_url": base + "/"})
        cli("--config", str(config), "run", "--as-of", AS_OF, env=SECRET)
        (ada,), (alan,) = smtp.to("ada@example.org"), smtp.to("alan@example.org")
        server = start_cli("--config", str(config), "serve", "--host", "127.0.0.1", "--port",
                           str(port), env=SECRET)
        try:
            wait_for(lambda: _up(base), what="serve to listen", proc=server)
            header = str(ada.message["List-Unsubscribe"])
            link = re.search(r"<(http://[^>]+/u/[^>]+)>", header).group(1)
            assert "mailto:" in header and "ada" not in link
            forged = link[:-3] + ("AAA" if not link.endswith("AAA") else "BBB")
            refused = get(forged, b"List-Unsubscribe=One-Click")
            confirm = get(re.search(r"<(http://[^>]+/u/[^>]+)>",
                                    str(alan.message["List-Unsubscribe"])).group(1))
            after_forgery = cli("--config", str(config), "readers").stdout
            done = get(link, b"List-Unsubscribe=One-Click")
            feedback = re.search(r'href="(http://[^"]+/f/[^"]+)"[^>]*>👎', body(alan.message, "html"))
            thanks = get(feedback.group(1))
            forged_vote = get(feedback.group(1)[:-2] + "xx")
        finally:
            server.terminate()
            server.wait(timeout=10)
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
    assert re.search(r"ada@example.org\s+lang=\S+\s+active", after_forgery)
    assert re.search(r"Alan Turing <alan@example.org>\s+lang=\S+\s+active", after_forgery)
    assert done[0] == 200 and "/r/" in done[1]  # unsubscribed, with a way back
    assert weeks == {"ada@example.org": 1, "alan@example.org": 2}
    assert re.search(r"ada@example.org\s+lang=\S+\s+unsubscribed", listed)
    assert re.search(r"alan@example.org>\s+lang=\S+\s+active", listed)
    assert re.search(r"ada@example.org\s+lang=-\s+removed\s+last delivery: 20", removed)
    assert re.search(r"ada@example.org\s+lang=\S+\s+unsubscribed", back)
    assert thanks[0] == 200 and "👎" in thanks[1]
    assert "readers: alan@example.org 👎" in shown
    assert ada.message["List-Unsubscribe-Post"] is None  # one-click is announced for https only


def _up(base: str) -> bool:
    try:
        return get(base + "/u/x")[0] == 403
    except OSError:
        return False
