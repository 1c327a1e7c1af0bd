"""`rl-digest doctor` against the local stand-ins: all green, then each one down in turn."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from pipeline import calendar, doctor
from tests.helpers import CATS, _merge, cli_command, cli_env, connections_to, write_config
from tests.servers.arxiv_server import FEED_ERROR, ArxivServer
from tests.servers.chat_server import ChatServer
from tests.servers.openai_server import OpenAIServer, Reply
from tests.servers.smtp_server import TEST_PASSWORD, TEST_USER, SmtpServer, refused_port

KEY = "sk-doctor-test-key"
LINES = ["config", "database", "locks", "arxiv api", "arxiv rss", "arxiv oai", "calendar", "llm", "smtp", "git"]
QUERY_SECRET, GIT_TOKEN = "q-secret-2f9c", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PATH_TOKEN = "3f9a0c2b7d4e4a1b9c8d7e6f"  # a proxy's key as a path segment
CONTACT = "ada@lab.test"  # not an example.org address, which doctor warns about
SENDER = "RL Digest <digest@ada-lab.org>"  # nor is the sender
ENV = {"OPENAI_API_KEY": KEY, "SMTP_USERNAME": TEST_USER, "SMTP_PASSWORD": TEST_PASSWORD}


@pytest.fixture
def world(tmp_path):
    """Every service doctor checks, on 127.0.0.1 or on disk; yields the config overrides."""
    remote, checkout = tmp_path / "remote.git", tmp_path / "checkout"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    subprocess.run(["git", "clone", "--quiet", str(remote), str(checkout)], check=True,
                   capture_output=True)
    holidays = calendar_file(tmp_path, date.today().year, date.today().year + 1)
    with ExitStack() as stack:
        arxiv = stack.enter_context(ArxivServer())
        llm = stack.enter_context(OpenAIServer())
        smtp = stack.enter_context(SmtpServer(auth=True))
        yield {
            "sources": {"arxiv": {"api_url": arxiv.api_url, "categories": CATS, "retries": 0,
                                  "calendar_files": [str(holidays)], "contact": CONTACT},
                        "rss": {"urls": [arxiv.rss_url(CATS)]},
                        "oai": {"enabled": True, "url": arxiv.oai_url}},
            "enrich": {"provider": "openai", "base_url": llm.url, "timeout_seconds": 5},
            "email": {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": smtp.port,
                      "security": "none", "timeout_seconds": 5, "to": ["ada@example.org"], "from": SENDER},
            "outputs": {"base_url": "https://digest.example.org/",
                        "git": {"repo": str(checkout), "branch": "main", "push": True}},
        }, llm, arxiv


def calendar_file(tmp_path, *years: int) -> Path:
    """A calendar file that knows these years (New Year's Day the one holiday of each)."""
    path = tmp_path / "holidays.yaml"
    path.write_text(f"years: {list(years)}\nno_announcement:\n"
                    + "".join(f"  {y}-01-01: New Year's Day\n" for y in years))
    return path


def statuses(stdout: str) -> dict[str, str]:
    """{check name: OK/FAIL/SKIP} from doctor's lines (`name  STATUS  detail`)."""
    found = {}
    for line in stdout.splitlines():
        name, status = line[:10].strip(), line[11:15].strip()
        found[name] = status
    return found


def test_doctor_all_green_sends_nothing(tmp_path, cli, world):
    overrides, llm, arxiv = world
    config = write_config(tmp_path, overrides, seeds=False)
    result = cli("--config", str(config), "doctor", env=ENV)
    assert statuses(result.stdout) == dict.fromkeys(LINES, "OK"), result.stdout
    assert f"{arxiv.api_url}: answered (0 papers for a test query)" in result.stdout  # an empty stand-in
    assert len(result.stdout.splitlines()) == len(LINES)
    assert [r.task for r in llm.requests] == ["doctor"]  # one tiny structured call
    assert llm.requests[0].response_format["type"] == "json_schema"
    assert len(arxiv.requests) == 3  # one API request, one RSS request, one OAI-PMH Identify
    assert "answered Identify (arXiv)" in result.stdout
    assert f"logged in as {TEST_USER}" in result.stdout
    assert KEY not in result.stdout + result.stderr and TEST_PASSWORD not in result.stdout + result.stderr
    assert not (tmp_path / "out").exists()  # nothing published


def _down(name: str, overrides: dict, tmp_path) -> dict:
    dead = f"http://127.0.0.1:{refused_port()}"
    if name == "database":
        (tmp_path / "broken.sqlite3").write_bytes(b"this is not a database file\n" * 200)
        return {"storage": {"url": f"sqlite:///{tmp_path}/broken.sqlite3"}}
    if name == "locks":  # a service whose config folder it cannot write: a file stands in the way
        (tmp_path / "not-a-folder").write_text("", encoding="utf-8")
        return {"lock": {"dir": "not-a-folder/locks"}}
    if name == "arxiv api":
        return {"sources": {"arxiv": {"api_url": f"{dead}/api/query"}}}
    if name == "arxiv rss":  # a mirror's key in the path and query: masked, as in every URL shown
        return {"sources": {"rss": {"urls": [f"{dead}/{PATH_TOKEN}/rss/cs.LG?key={QUERY_SECRET}"]}}}
    if name == "arxiv oai":
        return {"sources": {"oai": {"url": f"{dead}/oai"}}}
    if name == "llm":
        return {"enrich": {"base_url": f"{dead}/v1/{GIT_TOKEN}/openai?api-key={QUERY_SECRET}"}}
    if name == "smtp":
        return {"email": {"smtp_port": refused_port()}}
    if name == "git":  # a token in the path (one a git host issues) and in the query
        subprocess.run(["git", "-C", str(tmp_path / "checkout"), "remote", "set-url", "origin",
                        f"{dead}/api/{GIT_TOKEN}/r.git?access_token={QUERY_SECRET}"], check=True)
        return {}
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["database", "locks", "arxiv api", "arxiv rss", "arxiv oai", "llm", "smtp",
                                  "git"])
def test_doctor_names_the_one_service_that_is_down_and_exits_1(tmp_path, cli, world, name):
    overrides, _, _ = world
    config = write_config(tmp_path, _merge(overrides, _down(name, overrides, tmp_path)), seeds=False)
    result = cli("--config", str(config), "doctor", env=ENV, check=1)
    wanted = {line: "FAIL" if line == name else "OK" for line in LINES}
    assert statuses(result.stdout) == wanted, result.stdout
    assert result.stderr.strip().endswith(f"rl-digest: doctor: {name} failed")
    assert "Traceback" not in result.stderr
    for secret in (QUERY_SECRET, GIT_TOKEN, PATH_TOKEN):
        assert secret not in result.stdout + result.stderr
    shown = {"arxiv rss": "/***/rss/cs.LG?key=***:", "llm": "/v1/***/openai?api-key=***",
             "git": "/api/***/r.git?access_token=***"}
    if name in shown:
        line = next(line for line in result.stdout.splitlines() if line.startswith(name))
        assert shown[name] in line, line
    if name == "database":  # the URL once, then what is wrong with it
        line = next(line for line in result.stdout.splitlines() if line.startswith("database"))
        assert line.count("broken.sqlite3") == 1, line


@pytest.mark.slow  # make test-slow: a long scenario beside faster ones on the same path
def test_doctor_run_by_a_user_who_cannot_write_the_lock_folder_fails_that_line_alone(tmp_path, world):
    """The arXiv checks took the pace file's lock there: 'unexpected error: PermissionError:
    ... arxiv-pace.lock', exit 1, and not one line of doctor's, the locks line included."""
    overrides, _, arxiv = world
    (tmp_path / "locks").mkdir(mode=0o555)
    config = write_config(tmp_path, _merge(overrides, {"lock": {"dir": "locks"}}), seeds=False)
    # root writes anywhere: run it without the capabilities that let it, as another user would be
    drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--"]
    command = [*cli_command(), "--config", str(config), "doctor"]
    result = subprocess.run([*drop, *command] if os.geteuid() == 0 else command, cwd="/", env=cli_env(ENV),
                            capture_output=True, text=True, timeout=120, check=False)
    assert statuses(result.stdout) == {line: "FAIL" if line == "locks" else "OK" for line in LINES}, \
        result.stdout + result.stderr
    assert result.returncode == 1 and result.stderr.strip().endswith("\nrl-digest: doctor: locks failed")
    assert "unexpected error" not in result.stderr
    assert len(arxiv.requests) == 3


def test_doctor_fails_a_feed_arxiv_answers_with_a_feed_error(tmp_path, cli, world):
    overrides, _, arxiv = world
    config = write_config(tmp_path, overrides, seeds=False)
    arxiv.script("/rss/", FEED_ERROR)
    result = cli("--config", str(config), "doctor", env=ENV, check=1)
    assert statuses(result.stdout)["arxiv rss"] == "FAIL", result.stdout
    assert f"{arxiv.rss_url(CATS)}: arXiv reports a feed error (check sources.rss.urls): Bad archive" in result.stdout


def test_doctor_with_the_key_unset_warns_of_config_and_fails_llm(tmp_path, cli, world):
    overrides, llm, _ = world
    config = write_config(tmp_path, overrides, seeds=False)
    result = cli("--config", str(config), "doctor", env={**ENV, "OPENAI_API_KEY": ""})
    assert statuses(result.stdout)["llm"] == "OK"  # set but empty: fine for a local server
    env = {k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}
    unset = cli("--config", str(config), "doctor", env=env, check=1)
    found = statuses(unset.stdout)
    assert (found["config"], found["llm"], found["smtp"]) == ("WARN", "FAIL", "OK")
    assert "OPENAI_API_KEY is not set" in unset.stdout


def test_doctor_fails_smtp_when_the_server_wants_a_login_and_the_username_is_unset(tmp_path, cli, world):
    """No login is tried without SMTP_USERNAME (a relay may need none): doctor said OK while
    the server refused every message with 530."""
    overrides, _, _ = world
    config = write_config(tmp_path, overrides, seeds=False)
    env = {k: v for k, v in ENV.items() if k != "SMTP_USERNAME"}
    result = cli("--config", str(config), "doctor", env=env, check=1)
    assert statuses(result.stdout)["smtp"] == "FAIL", result.stdout
    assert "530 5.7.0 Authentication required (MAIL FROM); no login, as SMTP_USERNAME " \
           "(email.username_env) is not set" in result.stdout


@pytest.mark.parametrize("sender, smtputf8, ending", [
    ("周报 <digest@bücher.example>", False, "connected (none), logged in as digest-bot"),
    ("周报 <张三@example.org>", True, "connected (none), logged in as digest-bot"),
    ("周报 <张三@example.org>", False, "email.from 张三@example.org: non-ASCII address, and the server does not "
                                  "offer SMTPUTF8"),
])
def test_doctor_offers_a_non_ascii_sender_as_a_send_does(tmp_path, cli, world, sender, smtputf8, ending):
    """doctor's MAIL FROM of a sender at bücher.example or 张三@… was a traceback's one line,
    'unexpected error: UnicodeEncodeError', and no check at all was shown."""
    overrides, _, _ = world
    with SmtpServer(auth=True, smtputf8=smtputf8) as smtp:
        config = write_config(tmp_path, _merge(overrides, {"email": {"from": sender, "smtp_port": smtp.port}}),
                              seeds=False)
        result = cli("--config", str(config), "doctor", env=ENV, check=None)
    assert "Error" not in result.stderr, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("smtp"))
    assert line.endswith(ending), line
    assert statuses(result.stdout)["smtp"] == ("OK" if ending.startswith("connected") else "FAIL")


def test_doctor_says_why_a_starttls_the_server_does_not_offer_fails(tmp_path, cli, world):
    overrides, _, _ = world
    config = write_config(tmp_path, _merge(overrides, {"email": {"security": "starttls"}}), seeds=False)
    result = cli("--config", str(config), "doctor", env=ENV, check=1)
    line = next(line for line in result.stdout.splitlines() if line.startswith("smtp"))
    assert line.endswith(": server does not support it: STARTTLS extension not supported by server."), line


def test_doctor_says_the_providers_words_for_an_error_in_a_200(tmp_path, cli, world):
    """OpenRouter and others answer some errors with HTTP 200 and no choices: doctor said
    'the reply was blank', not what the provider said."""
    overrides, llm, _ = world
    llm.script = lambda request: Reply(body=json.dumps(
        {"error": {"message": f"Incorrect API key provided:\n {KEY}", "code": 401}}).encode())  # on one line
    config = write_config(tmp_path, overrides, seeds=False)
    result = cli("--config", str(config), "doctor", env=ENV, check=1)
    line = next(line for line in result.stdout.splitlines() if line.startswith("llm"))
    assert "answered with an error: Incorrect API key provided: ***" in line, line
    assert KEY not in result.stdout + result.stderr


def test_doctor_skips_what_is_switched_off(tmp_path, cli):
    config = write_config(tmp_path, {"sources": {"arxiv": {"enabled": False, "contact": CONTACT},
                                                 "rss": {"enabled": False}}}, seeds=False)
    result = cli("--config", str(config), "doctor")
    found = statuses(result.stdout)
    assert found == {"config": "OK", "database": "OK", "locks": "OK", "arxiv api": "SKIP", "arxiv rss": "SKIP",
                     "arxiv oai": "SKIP", "calendar": "SKIP", "llm": "SKIP", "smtp": "SKIP", "git": "SKIP"}
    # each skip names its switch: the starter's SMTP settings, all filled in with email off,
    # read 'smtp  SKIP  not configured'
    assert "\nsmtp       SKIP  email.enabled is false\n" in result.stdout
    assert result.stdout.endswith("\ngit        SKIP  outputs.git is not set\n")


def test_doctor_checks_each_chat_channel_without_posting(tmp_path, cli):
    kinds = ("slack", "feishu", "dingtalk", "telegram", "webhook")
    with ExitStack() as stack:
        servers = {kind: stack.enter_context(ChatServer(kind)) for kind in kinds}
        entries = [{"type": "telegram", "token_env": "TG_TOKEN", "chat_id": "-100123",
                    "api_url": servers["telegram"].url} if kind == "telegram" else
                   {"type": kind, "url_env": f"{kind.upper()}_URL",
                    **({"secret_env": "FEISHU_SECRET"} if kind == "feishu" else {})} for kind in kinds]
        config = write_config(tmp_path, {"sources": {"arxiv": {"enabled": False}, "rss": {"enabled": False}},
                                         "channels": entries}, seeds=False)
        env = {f"{kind.upper()}_URL": servers[kind].url for kind in kinds if kind != "telegram"}
        env.update(TG_TOKEN=servers["telegram"].token, FEISHU_SECRET="s3cret")
        good = cli("--config", str(config), "doctor", env=env)
        missing = cli("--config", str(config), "doctor", check=1,
                      env={k: v for k, v in env.items() if k not in ("SLACK_URL", "FEISHU_SECRET")})
        wrong = cli("--config", str(config), "doctor", env={**env, "TG_TOKEN": "999:forged"}, check=1)
        servers["webhook"].__exit__(None, None, None)  # the webhook's host goes down
        down = cli("--config", str(config), "doctor", env=env, check=1)
    assert {k: v for k, v in statuses(good.stdout).items() if k in kinds} == dict.fromkeys(kinds, "OK")
    assert "bot @rl_digest_bot" in good.stdout and "reachable" in good.stdout
    assert all(server.posts == [] and server.requests == [] for server in servers.values())  # no POST
    assert servers["telegram"].reads.count(f"/bot{servers['telegram'].token}/getMe") == 3
    assert not any(server.reads for kind, server in servers.items() if kind != "telegram")
    found = statuses(missing.stdout)
    assert (found["slack"], found["feishu"], found["telegram"]) == ("FAIL", "FAIL", "OK")
    assert "SLACK_URL is not set" in missing.stdout and "FEISHU_SECRET is not set" in missing.stdout
    assert statuses(wrong.stdout)["telegram"] == "FAIL" and "HTTP 401 Unauthorized" in wrong.stdout
    assert statuses(down.stdout)["webhook"] == "FAIL" and statuses(down.stdout)["slack"] == "OK"
    for result in (good, missing, wrong, down):  # the URLs and the token hold secrets
        shown = result.stdout + result.stderr
        assert servers["telegram"].token not in shown and "/hook/abc" not in shown


def test_doctor_leaves_no_connection_open_to_the_llm_or_a_chat_channel(tmp_path, monkeypatch):
    """doctor checks the LLM and the chat channels through the clients a publish uses, whose
    connections the provider and the platform keep alive: it closes them as a run closes its
    own (they were dropped open, for the cycle collector to find, here kept off)."""
    import gc

    from pipeline import cli as cli_mod
    from tests.servers import openai_server

    monkeypatch.setattr(openai_server._Handler, "protocol_version", "HTTP/1.1")  # keep-alive
    monkeypatch.setattr(ChatServer, "protocol_version", "HTTP/1.1")
    with OpenAIServer() as llm, ChatServer("telegram") as telegram:
        config = write_config(tmp_path, {
            "sources": {"arxiv": {"enabled": False}, "rss": {"enabled": False}},
            "enrich": {"provider": "openai", "base_url": llm.url, "timeout_seconds": 5},
            "channels": [{"type": "telegram", "token_env": "TG_TOKEN", "chat_id": "-100123",
                          "api_url": telegram.url}]}, seeds=False)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("TG_TOKEN", telegram.token)
        gc.disable()
        try:
            cli_mod.main.main(["--config", str(config), "doctor"], standalone_mode=False)
            assert [r.task for r in llm.requests] == ["doctor"] and telegram.reads  # both were asked
            assert connections_to(int(llm.url.split(":")[-1].split("/")[0])) == 0
            assert connections_to(int(telegram.url.split(":")[-1])) == 0
        finally:
            gc.enable()


def test_doctor_fails_a_webhook_url_that_is_no_web_address_naming_its_variable(tmp_path, cli):
    """Copied without its scheme, the line read 'slack (slack): :80: Name or service not
    known'; with a port that is no number doctor stopped: 'unexpected error: ValueError'."""
    config = write_config(tmp_path, {"sources": {"arxiv": {"enabled": False}, "rss": {"enabled": False}},
                                     "channels": [{"type": "slack", "url_env": "SLACK_URL"}]}, seeds=False)
    for url in ("hooks.slack.com/services/T0/B0/XX", "https://hooks.slack.com:abc/services/T0/B0/XX"):
        result = cli("--config", str(config), "doctor", env={"SLACK_URL": url}, check=1)
        assert statuses(result.stdout)["slack"] == "FAIL", result.stdout + result.stderr
        assert ("(slack): the URL in SLACK_URL is not a web address (http:// or https://, then "
                "the host)") in result.stdout
        assert "services/T0" not in result.stdout + result.stderr


def test_doctor_warns_of_a_year_whose_holidays_are_unknown_and_fails_on_a_bad_calendar(tmp_path, cli):
    old = calendar_file(tmp_path, 1999)
    with ArxivServer() as arxiv:
        only_oai = {"arxiv": {"enabled": False, "calendar_files": [str(old)]}, "rss": {"enabled": False},
                    "oai": {"enabled": True, "url": arxiv.oai_url}}  # reads the calendar too
        config = write_config(tmp_path, {"sources": only_oai}, seeds=False)
        known = cli("--config", str(config), "doctor")  # a warning does not fail doctor
        assert statuses(known.stdout)["calendar"] in ("OK", "WARN")  # the bundled years and 1999
        assert "1999" in next(line for line in known.stdout.splitlines() if line.startswith("calendar"))
        old.write_text("no_announcement: [not, dates]\n")
        broken = cli("--config", str(config), "doctor", check=1)
    line = next(line for line in broken.stdout.splitlines() if line.startswith("calendar"))
    assert statuses(broken.stdout)["calendar"] == "FAIL" and str(old) in line, line
    assert broken.stderr.strip().endswith("rl-digest: doctor: calendar failed")


@pytest.mark.parametrize(("now", "status", "says"), [
    ("2026-06-01", "ok", "holidays known for 2026; next announcement Mon 2026-06-01 20:00 EDT"),
    ("2026-11-30", "ok", "holidays known for 2026; next announcement Mon 2026-11-30 20:00 EST"),
    ("2026-12-01", "warn", "arXiv's holidays for 2027 are not known yet (known: 2026): each collect warns "
                           "from the one that reads 2027's first evening (Sun 2027-01-03);"),
    ("2027-01-04", "warn", "arXiv's holidays for 2027 are not known (known: 2026): each collect warns"),
])
def test_the_calendar_line_looks_a_month_ahead(now, status, says):
    cal = replace(calendar.load_calendar(), no_announcement={}, years=frozenset({2026}))
    found = doctor.calendar_check(cal, datetime.fromisoformat(now).replace(hour=12, tzinfo=UTC))
    assert (found.status, says in found.detail) == (status, True), found.detail


def test_doctor_and_config_check_warn_while_the_arxiv_contact_is_the_example_address(tmp_path, cli):
    config = write_config(tmp_path, {"sources": {"arxiv": {"enabled": False, "contact": "rl-digest@example.org"},
                                                 "rss": {"enabled": False}}}, seeds=False)  # the built-in one
    result = cli("--config", str(config), "doctor")  # a warning: still exit 0
    line = next(line for line in result.stdout.splitlines() if line.startswith("config"))
    assert statuses(result.stdout)["config"] == "WARN"
    assert "sources.arxiv.contact is still an example address (rl-digest@example.org)" in line
    checked = cli("--config", str(config), "config", "check")  # config check says it too
    assert "sources.arxiv.contact is still an example address" in checked.stderr, checked.stderr
    keyless = write_config(tmp_path, {"sources": {"arxiv": {"enabled": False, "contact": "rl-digest@example.org"},
                                                  "rss": {"enabled": False}},
                                      "enrich": {"provider": "openai", "api_key_env": "RL_DIGEST_NO_SUCH_KEY"},
                                      "email": {"enabled": True, "to": ["ada@example.org"], "smtp_port": 9,
                                                "security": "none"}},
                          seeds=False)
    both = cli("--config", str(keyless), "doctor", check=None).stdout
    line = next(line for line in both.splitlines() if line.startswith("config"))
    assert "RL_DIGEST_NO_SUCH_KEY" in line and "still an example address" in line  # one hid the other
    assert "email.from is still an example address (RL Digest <digest@example.org>)" in line


def test_doctor_finds_a_telegram_chat_the_bot_is_not_in(tmp_path, cli):
    """A wrong chat_id passes getMe, then every post is refused for good; getChat reads
    the chat, posting nothing."""
    with ChatServer("telegram") as telegram:
        def doctor(chat_id: str, check: int) -> str:
            entry = {"type": "telegram", "token_env": "TG_TOKEN", "chat_id": chat_id, "api_url": telegram.url}
            config = write_config(tmp_path, {"sources": {"arxiv": {"enabled": False}, "rss": {"enabled": False}},
                                             "channels": [entry]}, seeds=False)
            return cli("--config", str(config), "doctor", env={"TG_TOKEN": telegram.token}, check=check).stdout
        good, wrong = doctor("-100123", 0), doctor("-100999", 1)
    assert statuses(good)["telegram"] == "OK" and "chat RL group" in good
    assert statuses(wrong)["telegram"] == "FAIL" and "getChat -100999: HTTP 400 Bad Request: chat not found" in wrong
    assert telegram.posts == [] and telegram.requests == []


def test_a_damaged_sqlite_file_fails_the_database_line(tmp_path, cli):
    """Opening reads the first page only: doctor said `connected, schema version 6 is
    current` for a file whose other pages `status` and `run` found malformed."""
    config = write_config(tmp_path)
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-30")
    with open(tmp_path / "state" / "digest.sqlite3", "r+b") as db:
        db.seek(4096)
        db.write(b"\xff" * 8192)
    status = cli("--config", str(config), "status", check=1)
    assert "not a usable database" in status.stderr
    report = cli("--config", str(config), "doctor", check=1).stdout
    line = next(ln for ln in report.splitlines() if ln.startswith("database"))
    assert line.split()[1] == "FAIL" and "damaged (" in line, line
    assert line.endswith("restore it from a backup, or move it aside to start afresh"), line


def test_config_check_warns_of_a_reader_named_again_with_other_languages_or_name(tmp_path, cli):
    """Ada in email.to, and again in readers.txt with lang=en: the first mention wins, so her
    lang=en was never used, and an edit of her languages in the file did nothing, without a
    word. A later mention that says nothing else is no warning."""
    (tmp_path / "readers.txt").write_text(
        "ada@example.org lang=en\nAlan <alan@example.org>\nALAN@example.org\nAlan Turing <alan@example.org>\n",
        encoding="utf-8")
    config = write_config(tmp_path, {
        "sources": {"arxiv": {"enabled": False, "contact": CONTACT}, "rss": {"enabled": False}},
        "email": {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": 2525, "security": "none", "from": SENDER,
                  "to": ["Ada L <Ada@Example.org>"], "recipients_file": "readers.txt"},
        "outputs": {"base_url": "https://digest.example.org/"}}, seeds=False)
    checked = cli("--config", str(config), "config", "check")  # warnings: exit 0
    warned = [w.removeprefix(f"warning: {config}: ") for w in checked.stderr.splitlines()]
    where = f"email.recipients_file ({tmp_path / 'readers.txt'})"
    assert warned == [
        f"{where}: ada@example.org is named again (email.to has them first, and the first mention "
        "wins): what it says is not used (languages en)",
        f"{where}: alan@example.org is named again ({where} has them first, and the first mention "
        "wins): what it says is not used (name 'Alan Turing')"], warned


def test_doctor_warns_of_a_reader_at_a_dotless_domain_that_is_not_this_machines(tmp_path, cli):
    """Through this machine's mail server root@localhost is taken, and alice@gmailcom with it
    (it was taken without a word): doctor and config check name the address and where it is;
    root@localhost and root@<this host> are still taken without a warning."""
    host = socket.gethostname()
    (tmp_path / "readers.txt").write_text(f"bob@yahoocom lang=en\nroot@{host}\n", encoding="utf-8")
    config = write_config(tmp_path, {
        "sources": {"arxiv": {"enabled": False, "contact": CONTACT}, "rss": {"enabled": False}},
        "email": {"enabled": True, "smtp_host": "127.0.0.1", "smtp_port": refused_port(), "security": "none",
                  "from": SENDER,
                  "to": ["alice@gmailcom", "root@localhost"], "recipients_file": "readers.txt"},
        "outputs": {"base_url": "https://digest.example.org/"}}, seeds=False)
    checked = cli("--config", str(config), "config", "check")  # warnings: exit 0
    report = cli("--config", str(config), "doctor", check=1).stdout  # smtp: nobody listens
    line = next(line for line in report.splitlines() if line.startswith("config"))
    warned = [w.removeprefix(f"warning: {config}: ") for w in checked.stderr.splitlines()]
    assert [w.split(": a domain")[0] for w in warned] == [
        "email.to: alice@gmailcom", f"email.recipients_file ({tmp_path / 'readers.txt'}): bob@yahoocom"]
    assert "without a period that is not this machine's name" in warned[0] and "a typo?" in warned[0]
    assert statuses(report)["config"] == "WARN" and all(w in line for w in warned), line
    assert "root@" not in checked.stderr + line


def test_doctor_warns_of_a_previous_link_secret_named_but_unset_and_never_shows_one(tmp_path, cli, world):
    """serve.previous_secret_envs keeps the links of emails mailed before a rotation working:
    a variable named there but not set leaves those links refused, which doctor says, as it
    does for every other variable; a secret set is never shown."""
    overrides, _, _ = world
    serve = {"serve": {"base_url": "https://digest.example.org/serve/",
                       "previous_secret_envs": ["OLD_DIGEST_SECRET"]}}
    config = write_config(tmp_path, _merge(overrides, serve), seeds=False)
    env = {**ENV, "RL_DIGEST_SECRET": "the-current-secret-signing-new-links"}
    unset = cli("--config", str(config), "doctor", env=env)
    old = "the-previous-secret-of-older-links"
    both = cli("--config", str(config), "doctor", env={**env, "OLD_DIGEST_SECRET": old})
    shown = cli("--config", str(config), "config", "show", env={**env, "OLD_DIGEST_SECRET": old})
    assert statuses(unset.stdout)["config"] == "WARN", unset.stdout
    assert ("serve.previous_secret_envs[0]: the environment variable OLD_DIGEST_SECRET is not set (the "
            "reader links signed with it, in emails mailed before the secret changed, are refused)"
            in unset.stdout)
    assert statuses(both.stdout) == dict.fromkeys(LINES, "OK"), both.stdout
    assert "previous_secret_envs:\n  - OLD_DIGEST_SECRET (set)\n" in shown.stdout
    for said in (unset, both, shown):
        assert old not in said.stdout + said.stderr
