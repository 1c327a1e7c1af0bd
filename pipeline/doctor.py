"""`rl-digest doctor` and the deeper half of `config check`: what will fail, found before a run.

Each check is a function from the config to one or more `Check` lines; `CHECKS` lists
them in the order they print, and `CHANNELS` maps a delivery channel to its own check,
so a new channel adds one entry; a `channels` entry (chat) answers through its own
`check()` method. Every check sends at most one polite request and
publishes nothing.
"""

from __future__ import annotations

import os
import smtplib
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from email.utils import parseaddr
from typing import NamedTuple

import sqlalchemy as sa
from pydantic import Field

from pipeline import calendar, collect, enrich, lock, plugins, replies, sources, store_connect, templating
from pipeline.config import Config, sqlite_file
from pipeline.config_email import Reader, read_recipients
from pipeline.config_sections import channel_entry
from pipeline.deliver import channels, chat, email, email_message, files, git
from pipeline.errors import ConfigError, DigestError, LLMCallFailed
from pipeline.sources import arxiv_api, arxiv_oai, arxiv_rss
from pipeline.store import Store
from pipeline.store_schema import LATEST


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail | skip (a warning does not fail doctor)
    detail: str

    def line(self) -> str:
        return f"{self.name:<10} {self.status.upper():<4}  {self.detail}"


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def warn(name: str, detail: str) -> Check:
    return Check(name, "warn", detail)


def fail(name: str, detail: str) -> Check:
    return Check(name, "fail", detail)


def skip(name: str, detail: str) -> Check:
    return Check(name, "skip", detail)


# --- config check ---------------------------------------------------------------------------

SECRET_MIN = 16  # characters of serve's signing secret; `openssl rand -hex 32` gives 64


class Problems(NamedTuple):
    """What `config check` finds: errors stop a run (exit 2); warnings let it go on, worse."""

    errors: list[str]
    warnings: list[str]


EXAMPLE_DOMAINS = ("example.org", "example.com", "example.net")  # RFC 2606: never anyone's


def example_address(address: str) -> bool:
    """An address at a domain RFC 2606 keeps for examples: the starter's, never the user's."""
    return parseaddr(address)[1].rpartition("@")[2].lower() in EXAMPLE_DOMAINS


def config_problems(config: Config) -> Problems:
    """Settings that validate but will stop or weaken a run, one line each, naming the key."""
    errors, warnings = [], []
    cfg = config.enrich
    if cfg.provider == "openai" and cfg.api_key_env not in os.environ:
        warnings.append(f"enrich.api_key_env: the environment variable {cfg.api_key_env} is not set "
                        "(summaries would fall back; set it, empty for a local server, "
                        "or set enrich.provider: none)")
    contact = config.sources.arxiv.contact
    if example_address(contact):
        warnings.append(f"sources.arxiv.contact is still an example address ({contact}); arXiv asks "
                        "for a way to reach you in the User-Agent: put your own")
    warnings += config.recipient_problems()
    warnings += dotless_readers(config)
    warnings += repeated_readers(config)
    warnings += [f"seeds.paths: {path}: no such file or folder (its seeds are not read)"
                 for path in config.seeds.paths if not path.exists()]
    if config.templates.dir and not config.templates.dir.is_dir():
        warnings.append(f"templates.dir: {config.templates.dir}: no such folder (the built-in "
                        "templates are used)")
    elif config.templates.dir:
        errors += templating.user_template_problems(config.templates.dir)
    warnings += email_problems(config)
    warnings += channel_problems(config)
    if config.outputs.git and not config.outputs.git.repo.is_dir():
        warnings.append(f"outputs.git.repo: {config.outputs.git.repo}: no such folder (each run would "
                        "make its digest, then fail to publish it and exit 1: clone the repository "
                        "there first)")
    errors += secret_problems(config)
    warnings += [f"serve.previous_secret_envs[{n}]: the environment variable {name} is not set (the reader "
                 "links signed with it, in emails mailed before the secret changed, are refused)"
                 for n, name in enumerate(config.serve.previous_secret_envs) if not config.secret(name)]
    errors += plugin_problems(config)
    errors += state_problems(config)
    return Problems(errors, warnings)


def email_problems(config: Config) -> list[str]:
    """What weakens the email, when it is on: no reader, a sender's domain the server may
    refuse, no one-click unsubscribe, no link to the whole digest."""
    if not config.email.enabled:
        return []
    warnings = []
    if not config.readers():
        warnings.append("email.to: email is enabled but has no recipients "
                        "(add email.to or email.recipients_file)")
    if example_address(config.email.from_):
        warnings.append(f"email.from is still an example address ({config.email.from_}); mail "
                        "servers refuse or file as spam mail from a domain that is no one's: "
                        "put an address of your own domain")
    sender = parseaddr(config.email.from_)[1].rpartition("@")[2]
    if "." not in sender and not config.email.local:
        warnings.append(f"email.from: @{sender} has no period, which suits a mail server on this "
                        f"host (smtp_host: localhost) that delivers or rewrites it; "
                        f"{config.email.smtp_host} may refuse it")
    unsubscribe = ("serve.base_url", config.serve.base_url) if config.serve.base_url else (
        "email.unsubscribe_url", config.email.unsubscribe_url)
    if (unsubscribe[1] or "").lower().startswith("http://"):
        warnings.append(f"{unsubscribe[0]}: an http:// address, so the emails carry no one-click "
                        "unsubscribe (RFC 8058 is for https alone; Gmail and Yahoo ask bulk senders "
                        "for it): serve it over HTTPS and write its https:// address")
    if not config.outputs.base_url and not config.site_url:
        warnings.append("outputs.base_url: not set, nor outputs.site_url, so the email links no "
                        "reading list or whole digest and cannot be trimmed to 100 KB (set one "
                        "to where out/ or out/site/ is published)")
    return warnings


def secret_problems(config: Config) -> list[str]:
    """serve's signing secret, when serve has a base_url: unset, every run would stop; short,
    its reader links could be forged."""
    if not config.serve.base_url:
        return []
    secret = config.secret(config.serve.secret_env)
    if not secret:
        return [f"serve.secret_env: {config.serve.secret_env} is not set (the secret that "
                "signs the reader links; every run would stop: export it, e.g. "
                "$(openssl rand -hex 32))"]
    if len(secret) < SECRET_MIN:
        return [f"serve.secret_env: the secret in {config.serve.secret_env} is shorter than "
                f"{SECRET_MIN} characters, easy to guess (links could be forged): use "
                "$(openssl rand -hex 32)"]
    return []


def state_problems(config: Config) -> list[str]:
    """Where a run keeps what it makes: an outputs.dir it cannot write, a storage.url it
    cannot use, a database password it cannot read."""
    password = config.password_env_problem()
    found = [files.unwritable(config.outputs.dir, "outputs.dir"), database_problem(config.storage.url),
             f"{password[0]} ({password[1]})" if password else None]
    return [problem for problem in found if problem]


def plugin_problems(config: Config) -> list[str]:
    """A source or channel `type` that names no plug-in, or one whose module cannot be
    imported (a run would stop on it, after reading arXiv)."""
    wanted = [(entry.type, f"sources.plugins[{n}].type", sources.REGISTRY, sources.GROUP, "source")
              for n, entry in enumerate(config.sources.plugins)]
    wanted += [(entry.type, f"{channel_entry(n, entry)}.type", channels.REGISTRY, channels.GROUP, "channel")
               for n, entry in enumerate(config.channels)]
    found = []
    for args in wanted:
        try:
            plugins.load(*args)
        except ConfigError as exc:
            found.append(str(exc))
    return found


def dotless_readers(config: Config) -> list[str]:
    """Readers at a domain without a period that is not this machine's name: the mail server
    of this machine takes them (root@localhost is its operator), and alice@gmailcom with them."""
    if not config.email.local:
        return []  # such a reader is refused already, saying why
    host = socket.gethostname().lower()
    mine = {"localhost", host, host.partition(".")[0]}
    found = [("email.to", reader) for reader in config.email.to]
    if config.email.recipients_file:
        found += [(f"email.recipients_file ({config.email.recipients_file})", reader)
                  for reader in read_recipients(config.email.recipients_file, True)[0]]
    return [f"{where}: {reader.address}: a domain without a period that is not this machine's name "
            f"({', '.join(sorted(mine))}): a typo? ({config.email.smtp_host} takes it, and may bounce it)"
            for where, reader in found
            if "." not in (domain := reader.address.rpartition("@")[2].lower()) and domain not in mine]


def repeated_readers(config: Config) -> list[str]:
    """A reader named again with other languages or another name: the first mention wins
    (Config.readers), so what the later one says is not used, and an edit of it does nothing."""
    found = [("email.to", reader) for reader in config.email.to]
    if config.email.recipients_file:
        found += [(f"email.recipients_file ({config.email.recipients_file})", reader)
                  for reader in read_recipients(config.email.recipients_file, True)[0]]
    first: dict[str, tuple[str, Reader]] = {}
    lines = []
    for where, reader in found:
        there, was = first.setdefault(reader.address.lower(), (where, reader))
        unused = []
        if reader.languages and reader.languages != was.languages:
            unused.append(f"languages {','.join(reader.languages)}")
        if reader.name and reader.name != was.name:
            unused.append(f"name {reader.name!r}")
        if was is not reader and unused:
            lines.append(f"{where}: {reader.address} is named again ({there} has them first, and the first "
                         f"mention wins): what it says is not used ({', '.join(unused)})")
    return lines


def channel_problems(config: Config) -> list[str]:
    """The environment variables the chat channels name (url_env, token_env, secret_env)
    that are not set (an entry a run would refuse stops every command at start). A
    plug-in's own options are its own: an `*_env` of theirs may be no variable."""
    return [f"{channel_entry(n, entry)}.{key}: the environment variable {value} is not set "
            "(the channel's posts would wait in the outbox)"
            for n, entry in enumerate(config.channels) if entry.type in chat.PLATFORMS
            for key, value in entry.model_dump().items()
            if key in _CHAT_ENV and isinstance(value, str) and not os.environ.get(value)]


_CHAT_ENV = [key for key in chat.ChatOptions.model_fields if key.endswith("_env")]


def database_problem(url: str) -> str | None:
    """Why storage.url cannot be used (a scheme not supported, a driver not installed), or None.
    No connection is made, and no SQLite file is created."""
    try:
        if store_connect.backend(url) != "sqlite":
            store_connect.connect(url).dispose()
    except ConfigError as exc:
        return str(exc)
    return None


# --- doctor ---------------------------------------------------------------------------------


def run(config: Config) -> list[Check]:
    """Every check, in order; a check that raises becomes its own failed line."""
    found: list[Check] = []
    for check in CHECKS:
        try:
            found += check(config)
        except DigestError as exc:
            found.append(fail(check.__name__.removeprefix("check_"), str(exc)))
    return found


def check_config(config: Config) -> Iterable[Check]:
    errors, warnings = config_problems(config)
    where = str(config.path or "built-in defaults")
    if errors:
        yield fail("config", f"{where}: " + "; ".join(errors + warnings))
    elif warnings:
        yield warn("config", f"{where}: " + "; ".join(warnings))
    else:
        yield ok("config", where)


def check_database(config: Config) -> Iterable[Check]:
    if database_problem(config.storage.url):
        yield skip("database", "not usable (see the config line)")
        return
    url = config.storage.url
    try:
        db = Store.open(config.database_url(), config.storage.busy_timeout_seconds)
        try:
            version, read_only, damage = db.version(), db.read_only(), db.damage()
        finally:
            db.close()
    except DigestError as exc:  # names the URL already
        yield fail("database", str(exc).splitlines()[0])
        return
    except sa.exc.SQLAlchemyError as exc:
        yield fail("database", f"{url}: {getattr(exc, 'orig', None) or exc}".splitlines()[0])
        return
    if version != LATEST:
        yield fail("database", f"{url}: schema version {version}, this rl-digest expects {LATEST}")
    elif damage:
        yield fail("database", f"{url}: damaged ({damage}): restore it from a backup, or move it "
                   "aside to start afresh")
    elif read_only:
        yield fail("database", f"{url}: connected, but read-only: a run could not save what it "
                   "reads (a standby, default_transaction_read_only, or a file this user cannot write)")
    else:
        yield ok("database", f"{url}: connected, schema version {version} is current")


def own_line_problems(config: Config) -> list[str]:
    """What stops every run at start that doctor names on lines of its own (locks, database,
    calendar), for config check: the run lock's folder and the SQLite file's this user cannot
    write (PostgreSQL's lock is the server's), a calendar file that cannot be read."""
    problems, database = [], sqlite_file(config.storage.url)
    if database is not None:
        problems.append(files.unwritable(lock.lock_path(config).parent, "lock.dir"))
        if config.lock.dir is not None:  # the lock moved away: the file's own folder is not checked above
            problems.append(files.unwritable(database.parent, "storage.url", "a file in a folder"))
    try:  # every run reads it first, offline too
        calendar.load_calendar(config.sources.arxiv.calendar_files)
    except ConfigError as exc:
        problems.append(f"sources.arxiv.calendar_files: {exc}")
    return [problem for problem in problems if problem]


def check_state_folder(config: Config) -> Iterable[Check]:
    """The run lock, the scheduler's lock and heartbeat need a folder the process can write
    (a service may see the config's folder read-only: lock.dir moves them)."""
    folder = lock.lock_path(config).parent
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        yield fail("locks", f"{existing}: not a folder, so no run or scheduler can take its lock "
                            "below it; set lock.dir to a folder this user can write")
    elif os.access(existing, os.W_OK | os.X_OK):
        yield ok("locks", f"{folder}: writable (the run lock, the scheduler's lock and heartbeat)")
    else:
        yield fail("locks", f"{existing}: not writable, so no run or scheduler can take its lock there; "
                            + (files.not_yours(existing) or "set lock.dir to a folder this user can write"))


def check_arxiv(config: Config) -> Iterable[Check]:
    """One request to the API, one to each RSS feed and one to OAI-PMH, paced as a run
    paces them."""
    arxiv = config.sources.arxiv
    fetcher = collect.make_fetcher(config)
    fetcher.retries = 0
    if not arxiv.enabled:
        yield skip("arxiv api", "sources.arxiv.enabled is false")
    else:
        try:
            found = arxiv_api.search_titles(fetcher, arxiv.api_url, ["reinforcement learning"], 1)
            yield ok("arxiv api", f"{arxiv.api_url}: answered ({len(found)} paper"
                                   f"{'' if len(found) == 1 else 's'} for a test query)")
        except DigestError as exc:
            yield fail("arxiv api", str(exc))
    if not config.sources.rss.enabled:
        yield skip("arxiv rss", "sources.rss.enabled is false")
    for url in config.sources.rss.urls if config.sources.rss.enabled else []:
        try:
            feed = arxiv_rss.fetch_feed(fetcher, url)
            if feed.error is not None:  # an unknown category: every run would lose its papers
                yield fail("arxiv rss", f"{url}: arXiv reports a feed error "
                                        f"(check sources.rss.urls): {feed.error}")
            else:
                yield ok("arxiv rss", f"{url}: answered ({feed.items} items today)")
        except DigestError as exc:
            yield fail("arxiv rss", str(exc))
    oai = config.sources.oai
    if not oai.enabled:
        yield skip("arxiv oai", "sources.oai.enabled is false")
    else:  # a run that finds a gap asks it, and stops (exit 3) when it does not answer
        try:
            yield ok("arxiv oai", f"{oai.url}: answered Identify ({arxiv_oai.identify(fetcher, oai.url)})")
        except DigestError as exc:
            yield fail("arxiv oai", str(exc))


def check_calendar(config: Config) -> Iterable[Check]:
    """The arXiv calendar loads, and knows the holidays of this year and, in its last month,
    of the next: without them a holiday evening looks like a stale feed."""
    sources = config.sources
    if not (sources.arxiv.enabled or sources.rss.enabled or sources.oai.enabled):
        yield skip("calendar", "no arXiv source is enabled")
        return
    cal = calendar.load_calendar(sources.arxiv.calendar_files)  # a bad file: fail, naming it
    yield calendar_check(cal, datetime.now(cal.zone))


def calendar_check(cal: calendar.Calendar, now: datetime) -> Check:
    year = now.astimezone(cal.zone).year
    known = cal.known()
    if year not in cal.years:
        return warn("calendar", f"arXiv's holidays for {year} are not known (known: {known}): each "
                                "collect warns, and a holiday evening looks like a stale feed; "
                                + calendar.how_to_add(year))
    if year + 1 not in cal.years and date(year + 1, 1, 1) - now.date() <= timedelta(days=31):
        new_year = datetime(year + 1, 1, 1, tzinfo=cal.zone)  # a collect warns once it reads an evening of it
        first = cal.between(new_year, new_year + timedelta(days=14))[0].at
        return warn("calendar", f"arXiv's holidays for {year + 1} are not known yet (known: {known}): "
                                f"each collect warns from the one that reads {year + 1}'s first evening "
                                f"({first:%a %Y-%m-%d}); once arXiv publishes them, "
                                + calendar.how_to_add(year + 1))
    upcoming = cal.between(now, now + timedelta(days=14))
    after = f"; next announcement {upcoming[0].at:%a %Y-%m-%d %H:%M %Z}" if upcoming else ""
    return ok("calendar", f"holidays known for {known}{after}")


class DoctorReply(replies.Reply):
    ok: bool = Field(description="true")


def check_llm(config: Config) -> Iterable[Check]:
    """One tiny structured call, as enrichment makes them, with no retry."""
    cfg = config.enrich
    if cfg.provider == "none":
        yield skip("llm", "enrich.provider is none")
        return
    client = enrich.make_client(cfg, max_retries=0)
    prompt = templating.text_env(config.templates.dir).get_template("prompts/doctor.j2").render()
    fmt = ({"type": "json_object"} if cfg.structured == "json_object" else
           {"type": "json_schema", "json_schema": {"name": "doctor", "strict": True,
                                                   "schema": replies.wire_schema(DoctorReply)}})
    try:
        reply = client.complete(  # type: ignore[union-attr]
            model=cfg.model, messages=[{"role": "user", "content": prompt}], response_format=fmt,
            timeout=cfg.timeout_seconds, extra_body=dict(cfg.extra_body) or None)
        replies.parse_reply(reply.content, DoctorReply)
    except LLMCallFailed as exc:
        yield fail("llm", f"{exc.why} (model {cfg.model})")
        return
    except ValueError as exc:
        yield fail("llm", f"{cfg.base_url} ({cfg.model}): answered, but not the JSON asked for: {exc}")
        return
    finally:  # as a run closes its own: the provider keeps the connection alive
        client.close()  # type: ignore[union-attr]
    yield ok("llm", f"{cfg.base_url} ({cfg.model}): a structured reply ({cfg.structured})")


def check_channels(config: Config) -> Iterable[Check]:
    """Each delivery channel that is configured; the email channel's line is its SMTP check;
    then each `channels` entry by its name, through its own `check()` (posting nothing)."""
    for name, (configured, check, off) in CHANNELS.items():
        if configured(config):
            try:
                yield ok(name, check(config))
            except DigestError as exc:
                yield fail(name, str(exc))
        else:
            yield skip(name, off)
    with channels.opened(config, email=False) as opened:
        for name, channel in opened.items():
            look = getattr(channel, "check", None)
            if look is None:
                yield skip(name, "this channel type has no check")
                continue
            try:
                yield ok(name, look())
            except DigestError as exc:
                yield fail(name, str(exc))


def smtp_reachable(config: Config) -> str:
    """Connect, STARTTLS and log in as a send would, and offer the sender (MAIL FROM, then
    RSET: a server that wants a login refuses it); then quit without sending."""
    cfg = config.email
    where = f"{cfg.smtp_host}:{cfg.smtp_port}"
    try:
        smtp = email.connect(cfg)
    except smtplib.SMTPResponseException as exc:
        raise DigestError(f"{where}: {email.reply_words(exc.smtp_code, exc.smtp_error)}") from None
    except (smtplib.SMTPException, OSError) as exc:  # as a send says it (an SMTPException's strerror is None)
        raise DigestError(f"{where}: {email.failure(exc)}") from None
    except DigestError as exc:
        raise DigestError(f"{where}: {exc}") from None
    sender = email_message.wire_address(parseaddr(cfg.from_)[1])  # as a send offers it
    options = [] if sender.isascii() else ["SMTPUTF8"]
    try:
        if options and not smtp.has_extn("smtputf8"):
            raise DigestError(f"{where}: email.from {sender}: non-ASCII address, and the server does "
                              "not offer SMTPUTF8")
        code, resp = smtp.mail(sender, options)
        if code >= 400:
            raise DigestError(f"{where}: {email.sender_refused(code, resp, cfg)}")
        smtp.rset()
        smtp.quit()
    except (smtplib.SMTPException, OSError):
        pass
    finally:
        smtp.close()
    user = os.environ.get(cfg.username_env) if cfg.username_env else None
    return f"{where}: connected ({cfg.security})" + (f", logged in as {user}" if user else "")


def git_reachable(config: Config) -> str:
    assert config.outputs.git is not None
    return git.reachable(config.outputs.git)


# name: (is it on, its check, what its skip line says: the switch, as the sources' lines name theirs)
CHANNELS: dict[str, tuple[Callable[[Config], bool], Callable[[Config], str], str]] = {
    "smtp": (lambda config: config.email.enabled, smtp_reachable, "email.enabled is false"),
    "git": (lambda config: config.outputs.git is not None, git_reachable, "outputs.git is not set"),
}
CHECKS: list[Callable[[Config], Iterable[Check]]] = [
    check_config, check_database, check_state_folder, check_arxiv, check_calendar, check_llm, check_channels]
