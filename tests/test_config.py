"""Config loading: defaults, paths relative to the file, one-line errors that name the key."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

from pipeline import config, config_email
from pipeline.errors import ConfigError
from tests.helpers import ROOT, cli_command, cli_env, write_config


def test_bundled_config_is_valid_and_complete():
    cfg = config.load(ROOT / "config.yaml")
    assert cfg.sources.arxiv.categories[:2] == ["cs.LG", "cs.CL"]
    assert cfg.languages == ["zh", "en"]
    assert cfg.enrich.api_key_env == "OPENAI_API_KEY"


def test_built_in_defaults_that_are_not_whole_are_named_not_the_users_file(tmp_path, monkeypatch):
    """Installed from a tree whose top config.yaml was the short starter (README's Docker steps
    once copied it there), every command said the user's file lacked `topic`."""
    (tmp_path / "bundled").mkdir()
    (tmp_path / "bundled" / "config.yaml").write_bytes((ROOT / "templates/init/config.yaml").read_bytes())
    monkeypatch.setattr(config, "bundled", lambda name: tmp_path / "bundled" / name)
    mine = tmp_path / "config.yaml"
    mine.write_text("languages: [en]\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        config.load(mine)
    said = str(raised.value)
    assert said.startswith(f"{tmp_path / 'bundled' / 'config.yaml'}: topic: Field required (and ")
    assert "rl-digest's built-in defaults are not whole" in said and "git checkout config.yaml" in said
    assert str(mine) not in said and "\n" not in said
    mine.write_text("languages: [fr]\n", encoding="utf-8")  # whole defaults: the user's file is named
    monkeypatch.undo()
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(mine))}: languages\[0\]: "):
        config.load(mine)


def sections(model: type[BaseModel], where: str = "") -> dict[str, type[BaseModel] | None]:
    """Every key of the config model by its dotted path: a mapping of keys (a section, or
    an optional one such as outputs.git) to its model, any other key to None. The entries
    of a list (topics, channels, email.to) are not walked."""
    found: dict[str, type[BaseModel] | None] = {}
    for name, field in model.model_fields.items():
        if model is config.Config and name == "path":
            continue  # the file itself, not a key
        path = f"{where}{field.alias or name}"
        kinds = () if get_origin(field.annotation) is list else get_args(field.annotation)
        inner = next((kind for kind in (field.annotation, *kinds)  # a model, or a model | None
                      if isinstance(kind, type) and issubclass(kind, BaseModel)), None)
        found[path] = inner
        if inner is not None:
            found.update(sections(inner, path + "."))
    return found


def test_the_commented_default_holds_every_key_there_is():
    """config.yaml is the commented default (CONTRACT: every key documented in the README
    and the commented config): a key the model takes that it lacks has no comment anywhere."""
    default = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    missing = []
    for path in sections(config.Config):
        *parents, key = path.split(".")
        holder = default
        for part in parents:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and key not in holder:
            missing.append(path)
    assert missing == ["sources.arxiv.html_url"]  # the older key, still read; README names it


def test_the_readme_config_table_names_every_key_there_is_and_no_other():
    """Each key README's table names is one the config takes (a renamed key left behind is
    refused by config check), and each key the config takes is named there: by its path,
    under a row for its section (`email.*` rows name each key), or under a named parent."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = [row.split("|")[1:3] for row in table.splitlines() if row.startswith("| `")]
    keys = sections(config.Config)
    named = {name for first, _ in rows for name in re.findall(r"`([a-z_.]+?)(?:\.\*)?`", first)}
    assert sorted(named - set(keys)) == []
    starred = {name: cell for first, cell in rows for name in re.findall(r"`([a-z_.]+)\.\*`", first)}
    weights = {"relevance", "digest.importance"}  # their many weights: config.yaml's comments
    unnamed = []
    for path, inner in keys.items():
        parent, _, key = path.rpartition(".")
        if inner is not None or path in named or f"`{path}`" in table:
            continue
        if parent in starred and (f"`{key}`" in starred[parent] or parent in weights):
            continue
        if not any(path.startswith(name + ".") for name in named - set(starred)):
            unnamed.append(path)
    assert unnamed == []


def test_a_partial_config_takes_the_rest_from_defaults(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("digest: {featured: 3}\n", encoding="utf-8")
    cfg = config.load(path)
    assert cfg.digest.featured == 3
    assert cfg.digest.max_papers == 30


def test_a_merged_mapping_may_be_overridden_below_it(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("relevance:\n  rl_terms: &rl {ppo: 1.0, grpo: 1.0}\n"
                    "  lm_terms: {<<: *rl, ppo: 0.5, llm: 1.0}\n", encoding="utf-8")
    terms = config.load(path).relevance.lm_terms  # over the defaults'
    assert (terms["ppo"], terms["grpo"], terms["llm"]) == (0.5, 1.0, 1.0)


def test_paths_resolve_relative_to_the_config_file_not_the_cwd(tmp_path, monkeypatch):
    path = tmp_path / "conf" / "config.yaml"
    (path.parent / "seeds").mkdir(parents=True)
    path.write_text("outputs: {dir: out}\n", encoding="utf-8")
    monkeypatch.chdir("/")
    cfg = config.load(path)
    assert cfg.outputs.dir == path.parent / "out"
    assert cfg.storage.url == f"sqlite:///{path.parent}/state/digest.sqlite3"
    assert cfg.seeds.paths == [path.parent / "seeds"]
    # ~/ is the home folder: it made a folder named ~ beside the config, the digests in it
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path.write_text("outputs: {dir: ~/digests}\nstorage: {url: 'sqlite:///~/state/x.db'}\n", encoding="utf-8")
    cfg = config.load(path)
    assert (cfg.outputs.dir, cfg.storage.url) == (tmp_path / "home" / "digests", f"sqlite:///{tmp_path}/home/state/x.db")


def test_a_missing_seeds_folder_is_reported_only_when_the_config_names_it(tmp_path, cli):
    """The default seeds/ beside a config is optional: a weekly cron run of a config that
    never mentions seeds must not mail its operator a warning about it."""
    path = tmp_path / "config.yaml"
    path.write_text(f"storage: {{url: 'sqlite:///{tmp_path}/s.db'}}\noutputs: {{dir: out}}\n", encoding="utf-8")
    quiet = cli("--config", str(path), "run", "--offline")
    assert "seeds" not in quiet.stderr
    assert "7 seeds" in quiet.stdout  # the built-in pages are still read
    path.write_text(path.read_text(encoding="utf-8") + "seeds: {paths: [seeds]}\n", encoding="utf-8")
    named = cli("--config", str(path), "run", "--offline")
    assert f"seeds.paths: {tmp_path / 'seeds'}: no such file or directory" in named.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("email: {smtp_port: abc}\n", "email.smtp_port: Input should be a valid integer"),
        ("emial: {}\n", "emial: unknown key (did you mean email?)"),
        # YAML's yes and no are booleans, which pydantic took as 1 and 0
        ("digest: {featured: yes}\n", "digest.featured: a number, not true"),
        ("sources: {arxiv: {retries: no}}\n", "sources.arxiv.retries: a number, not false"),
        # an empty path was the config's own folder: every YAML file beside it read as seeds
        ("seeds: {paths: ['']}\n", "seeds.paths: an empty path: write the folder or file"),
        ("outputs: {dir: ''}\n", "outputs.dir: an empty path"),
        ("digest: {max_paper: 3}\n", "digest.max_paper: unknown key (did you mean max_papers?)"),
        ("email: {form: 'a@example.org'}\n", "email.form: unknown key (did you mean from?)"),
        ("sources: {arxiv: {zzz: 1}}\n", "sources.arxiv.zzz: unknown key"),
        ("path: /srv/rl-digest\n", "config.yaml: path: unknown key"),  # the file's own place, no setting
        # a list's item by its place, as YAML readers count it (it was email.to.1)
        ("email: {to: [a@example.org, nobody]}\n", "email.to[1]: not an email address: 'nobody'"),
        ("sources: {plugins: [{name: x}]}\n", "sources.plugins[0].type: Field required"),
        ("sources: {plugins: [{type: x, api_key: y}]}\n", "sources.plugins[0].api_key: secrets are not read from "
         "the config file (put it in an environment variable and set sources.plugins[0].api_key_env to its name)"),
        ("sources: {arxiv: {page_size: 5000}}\n", "sources.arxiv.page_size: Input should be less than or equal to 2000"),
        ("email: {password: hunter2}\n", "email.password: secrets are not read from the config file"),
        ("enrich: {api_key: sk-123}\n", "enrich.api_key: secrets are not read from the config file"),
        ("storage: {url: 'postgresql+psycopg://rl:pw@db/rl'}\n",
         "storage.url: holds a password in the URL; secrets are not read from the config file"),
        ("email: [unclosed\n", "config.yaml:2"),
        # line and column, a tab named as such, where an unclosed quote began, a file not in UTF-8
        ("digest:\n\tfeatured: 1\n", "config.yaml:2:1: a tab: YAML indents with spaces only"),
        ("topic: {name: {zh: \"x, en: y}}\nlanguages: [en]\n", "config.yaml:3:1: found unexpected end of stream "
         "(while scanning a quoted scalar begun on line 1)"),
        ("languages: [en]\n\x00\n", "config.yaml:2: control characters are not allowed"),
        ("digest: {featured: 1}\ntopic: {name: {zh: 甲, en: caf\udce9}}\n",
         "config.yaml:2: not UTF-8 text (byte 0xe9): save the file as UTF-8"),
        # a key given twice: the first was dropped unseen
        ("digest: {max_papers: 3}\ndigest: {featured: 1}\n",
         "config.yaml:2:1: 'digest' is given twice in one mapping (also on line 1): only the last would count"),
        ("relevance:\n  include: [robot]\n  include: [agent]\n", "config.yaml:3:3: 'include' is given twice"),
        # a tag's value it cannot read, an alias inside what it names: 'unexpected error', exit 1
        ("digest: {max_papers: !!int ten}\n", "config.yaml: not valid YAML: invalid literal for int()"),
        ("schedule: {timezone: !!timestamp 2026-13-01}\n", "config.yaml: not valid YAML: month must be in 1..12"),
        ("digest: &d {featured: *d}\n", "config.yaml: not valid YAML: an alias (*name) stands inside what it "
         "names (&name)"),
        ("- just\n- a list\n", "expected a mapping"),
        ("schedule: {timezone: Mars/Olympus}\n", "unknown time zone"),
        # none: each collect ended with 'unexpected error: ValueError: a search needs at least one
        # category'; a blank or two in one entry was asked for and matched nothing, unsaid
        ("sources: {arxiv: {categories: []}}\n", "sources.arxiv.categories: List should have at least 1 item"),
        ("sources: {arxiv: {categories: [cs.LG, 'cs.CL cs.AI']}}\n", "sources.arxiv.categories: entry 2 "
         "('cs.CL cs.AI') is not an arXiv category, such as cs.LG or stat.ML (one category an entry)"),
        ("sources: {arxiv: {categories: ['']}}\n", "sources.arxiv.categories: entry 1 ('') is not an arXiv"),
        # an empty one passed: each send failed with 'smtp :587: please run connect() first'
        ("email: {smtp_host: ''}\n", "email.smtp_host: String should have at least 1 character"),
        ("enrich: {model: ''}\n", "enrich.model: String should have at least 1 character"),
        ("schedule: {timezone: asia/shanghai}\n",
         "schedule.timezone: unknown time zone: 'asia/shanghai' (the IANA name is 'Asia/Shanghai')"),
        ("schedule: {timezone: 'utc '}\n", "schedule.timezone: unknown time zone: 'utc ' (the IANA name is 'UTC')"),
        # a crontab of a day no month has: the scheduler ran on, its next publish 'never'
        ("schedule: {publish_cron: '0 8 31 2 *'}\n",
         "schedule.publish_cron: '0 8 31 2 *': matches no date, so it would never fire"),
        ("email: {to: [not-an-address]}\n", "not an email address"),
        # a check across keys names its key itself, with no "(top level)" before it
        ("languages: [en, en]\n", "config.yaml: languages: each language once"),
        ("channels: [{type: webhook, url: 'https://a.example'}, {type: webhook, url: 'https://b.example'}]\n",
         "config.yaml: channels[1] (webhook).name: 'webhook' twice"),
        # it mailed every reader again (with email.enabled: false too), its own keys unread
        ("channels: [{type: email, name: team, colour: red}]\n",
         "config.yaml: channels[0] (email, name 'team').type: email is set up under `email:` (enabled, to, "
         "smtp_host...), not in channels"),
        # a profile entry that would silently do nothing
        ("relevance: {include: [robot, '']}\n", "relevance.include: entry 2 is blank"),
        ("relevance: {follow_authors: [' ']}\n", "relevance.follow_authors: entry 1 is blank"),
        # a list's separator left in an entry: 'diffusion,' matched only 'diffusion' before a comma
        ("relevance: {include: [robot, 'diffusion,']}\n",
         "relevance.include: entry 2 ('diffusion,') ends with ',': one phrase or name an entry, "
         "without the ','"),
        ("relevance: {exclude: ['；survey']}\n", "relevance.exclude: entry 1 ('；survey') begins with '；'"),
        ("relevance: {follow_authors: ['Sergey Levine,']}\n",
         "relevance.follow_authors: entry 1 ('Sergey Levine,') ends with ','"),
        ("relevance: {include: [',']}\n",
         "relevance.include: entry 1 (',') has no letter or digit: it would match nothing"),
        # a '*' is a prefix match: after one letter it kept every paper with a q-word, inside
        # a phrase it matched nothing
        ("relevance: {include: [grpo, 'Q*']}\n", "relevance.include: entry 2 ('Q*') would keep every "
         "paper with a word that starts with 'q' (a '*' matches any ending): give two letters or more"),
        ("relevance: {exclude: ['A* search']}\n", "relevance.exclude: entry 1 ('A* search') has a '*' inside"),
        ("relevance: {include: [text-to-image], exclude: [Text to Image]}\n",
         "relevance.exclude: 'Text to Image' is in include too; exclude wins over include"),
    ],
)
def test_config_errors_name_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")  # \udce9: a byte 0xe9 alone
    with pytest.raises(ConfigError) as caught:
        config.load(path)
    assert str(path.name) in str(caught.value)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_secret_in_file_hints_at_the_env_var(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("email: {password: hunter2}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        config.load(path)
    assert "email.password_env" in str(caught.value)
    assert "hunter2" not in str(caught.value)
    path.write_text("storage: {url: 'postgresql+psycopg://rl:hunter2@db/rl'}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        config.load(path)
    assert "storage.password_env" in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_recipients_file_is_read_with_comments(tmp_path):
    (tmp_path / "people.txt").write_text("# readers\na@example.org\n\nb@example.org # lab\n", encoding="utf-8")
    path = tmp_path / "config.yaml"
    path.write_text("email: {to: [c@example.org], recipients_file: people.txt}\n", encoding="utf-8")
    assert [r.address for r in config.load(path).readers()] == [
        "c@example.org", "a@example.org", "b@example.org"]


def test_readers_with_names_and_languages_from_the_list_and_the_file(tmp_path):
    (tmp_path / "people.txt").write_text(
        "# readers\nAda Lovelace <ada@example.org> lang=en\n李雷 <li@example.org>  lang=zh,en # lab\n"
        "bo@example.org\nADA@example.org lang=zh\n", encoding="utf-8")
    path = tmp_path / "config.yaml"
    path.write_text("email: {to: ['Alan <alan@example.org>', {address: bo@example.org, name: Bo, "
                    "languages: [zh]}], recipients_file: people.txt}\n", encoding="utf-8")
    found = [(r.mailbox, r.languages) for r in config.load(path).readers()]
    assert found == [("Alan <alan@example.org>", None), ("Bo <bo@example.org>", ["zh"]),
                     ("Ada Lovelace <ada@example.org>", ["en"]), ("李雷 <li@example.org>", ["zh", "en"])]


@pytest.mark.parametrize("lines, error", [
    ("a@example.org\nnobody\n", "people.txt:2: not an email address"),
    ("a@example.org lang=fr\nb@example.org lang= en\n", "people.txt:1: lang= takes zh, en or zh,en, not 'fr'")])
def test_a_bad_recipient_line_is_named_and_skipped_and_the_others_read(tmp_path, lines, error):
    (tmp_path / "people.txt").write_text(lines, encoding="utf-8")
    path = tmp_path / "config.yaml"
    path.write_text("email: {recipients_file: people.txt}\n", encoding="utf-8")
    readers, problems = config_email.read_recipients(tmp_path / "people.txt")
    (problem,) = problems
    assert problem.startswith(f"{tmp_path}/{error}") and problem.endswith("; line skipped")
    assert len(config.load(path).readers()) == len(lines.splitlines()) - 1 == len(readers)


def test_a_readers_file_not_in_utf8_is_a_config_error_naming_its_line(tmp_path):
    """Found by fuzzing: a list saved as Latin-1 made readers, config check, doctor, run and
    send say 'unexpected error: UnicodeDecodeError', naming no file."""
    (tmp_path / "people.txt").write_bytes(b"a@example.org\nM\xfcller <m@example.org>\n")
    path = tmp_path / "config.yaml"
    path.write_text("email: {recipients_file: people.txt}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        config.load(path).readers()
    assert str(caught.value) == (f"email.recipients_file: {tmp_path}/people.txt:2: not UTF-8 text "
                                 "(byte 0xfc): save the file as UTF-8")


def test_a_reader_entry_keeps_the_name_out_of_its_address(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("email: {to: [{address: 'A <a@example.org>'}]}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"email.to"):
        config.load(path)


def test_show_masks_secrets_and_says_whether_they_are_set(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    shown = config.masked(config.load(ROOT / "config.yaml"))
    assert shown["enrich"]["api_key_env"] == "OPENAI_API_KEY (set)"
    assert "sk-very-secret" not in repr(shown)


def test_show_says_of_every_env_key_whether_its_variable_is_set(tmp_path, cli):
    """serve.secret_env and the channels' url_env, token_env and secret_env were shown bare,
    while enrich, email and storage's said (set) or (unset)."""
    path = tmp_path / "config.yaml"
    path.write_text("channels:\n  - {type: slack, name: team, url_env: TEAM_URL}\n"
                    "  - {type: telegram, token_env: TG_TOKEN, chat_id: '-1001'}\n"
                    "  - {type: feishu, url_env: FEISHU_URL, secret_env: FEISHU_SECRET}\n", encoding="utf-8")
    shown = cli("--config", str(path), "config", "show", env={"TEAM_URL": "https://hooks.example.org/x",
                                                              "RL_DIGEST_SECRET": "s3cret"}).stdout
    envs = [line.strip() for line in shown.splitlines() if re.match(r"\s*-?\s*\w+_env: (?!null$)", line)]
    assert all(line.endswith(("(set)", "(unset)")) for line in envs), envs
    for line in ("url_env: TEAM_URL (set)", "token_env: TG_TOKEN (unset)", "secret_env: FEISHU_SECRET (unset)",
                 "secret_env: RL_DIGEST_SECRET (set)"):
        assert line in shown, line
    assert "hooks.example.org" not in shown and "s3cret" not in shown


def test_config_errors_through_the_cli_exit_2_with_one_line(tmp_path, cli):
    path = tmp_path / "config.yaml"
    path.write_text("email: {smtp_port: abc}\n", encoding="utf-8")
    result = cli("--config", str(path), "config", "check", check=2)
    assert result.stderr.strip().splitlines() == [
        f"rl-digest: {path}: email.smtp_port: Input should be a valid integer, unable to parse string as an integer"
    ]


@pytest.mark.parametrize(("text", "hint"), [
    ("password: x\n", "set email.password_env or storage.password_env to its name"),
    ("smtp: {password: x}\n", "set email.password_env or storage.password_env to its name"),
    ("email: {smtp_password: x}\n", "set email.password_env to its name"),
    ("storage: {passwd: x}\n", "set storage.password_env to its name"),
    ("api_key: x\n", "set enrich.api_key_env to its name"),
    ("enrich: {extra_body: {api_key: x}}\n", "set enrich.api_key_env to its name"),
    ("serve: {secret: x}\n", "set serve.secret_env to its name"),
    # a section's own key, whatever the secret was called there (they named a channel's token_env)
    ("serve: {password: x}\n", "set serve.secret_env to its name"),
    ("enrich: {token: x}\n", "set enrich.api_key_env to its name"),
    ("email: {smtp_token: x}\n", "set email.password_env to its name"),
    # a channel entry: the key its type reads (a Slack token was told 'channels.0.token_env')
    ("channels: [{type: slack, token: x}]\n", "set channels[0] (slack).url_env (the webhook URL) to its name"),
    ("channels: [{type: webhook, name: a, url_env: A}, {type: webhook, password: x}]\n",
     "set channels[1] (webhook).url_env (the webhook URL) to its name"),
    ("channels: [{type: telegram, token: x, chat_id: '-1'}]\n",
     "set channels[0] (telegram).token_env (the bot token) to its name"),
    ("channels: [{type: feishu, secret: x}]\n", "set channels[0] (feishu).secret_env (the signing secret) to its name"),
    ("channels: [{type: dingtalk, name: ops, access_token: x}]\n",
     "set channels[0] (dingtalk, name 'ops').url_env (the webhook URL) or channels[0] (dingtalk, name 'ops')"
     ".secret_env (the signing secret) to its name"),
    ("channels: [{type: 'tests.toy_channel:make', token: x}]\n",
     "set channels[0] (tests.toy_channel:make).token_env to its name"),
])
def test_a_secret_in_the_file_is_refused_with_a_hint_naming_a_key_there_is(tmp_path, cli, text, hint):
    """A top-level `password: x` was told to 'set password_env', and `email.smtp_password`
    'email.smtp_password_env': keys that are not there, read by nothing."""
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    (line,) = cli("--config", str(path), "config", "check", check=2).stderr.strip().splitlines()
    assert line.endswith(f"secrets are not read from the config file (put it in an environment variable "
                         f"and {hint})"), line


@pytest.mark.parametrize(("overrides", "key"), [
    ({"enrich": {"provider": "openai", "api_key_env": "sk-proj-S3CR3T"}}, "enrich.api_key_env"),
    ({"email": {"password_env": "hunter2-S3CR3T"}}, "email.password_env"),
    ({"storage": {"password_env": "pw:S3CR3T"}}, "storage.password_env"),
    ({"serve": {"base_url": "https://digest.example.org", "secret_env": "0f-S3CR3T"}}, "serve.secret_env"),
    ({"channels": [{"type": "slack", "url_env": "https://hooks.slack.com/services/T/B/S3CR3T"}]},
     "channels[0] (slack).url_env"),
    ({"channels": [{"type": "telegram", "token_env": "123456:S3CR3T", "chat_id": "-100"}]},
     "channels[0] (telegram).token_env"),
])
def test_a_secret_written_where_its_variable_is_named_is_refused_and_not_shown(tmp_path, cli, overrides, key):
    """`api_key_env: sk-...` was taken for a variable's name: config check warned 'the
    environment variable sk-... is not set', doctor and run printed it, config show too."""
    config = write_config(tmp_path, overrides, seeds=False)
    for command in (("config", "check"), ("config", "show"), ("doctor",), ("run", "--offline")):
        result = cli("--config", str(config), *command, check=2)
        assert result.stderr.splitlines() == [
            f"rl-digest: {config}: {key}: not the name of an environment variable (letters, digits and _): "
            "put the secret in a variable and write its name here (what is written is not shown)"]
        assert "S3CR3T" not in result.stdout + result.stderr


def test_a_config_given_by_a_relative_path_is_named_by_its_absolute_path_in_every_error(tmp_path, cli):
    """A schema, YAML or secret error named 'c.yaml' as typed, while config check's ok line
    and the errors about the files it names gave absolute paths."""
    path = tmp_path / "c.yaml"
    for text, error in (("email: {smtp_port: abc}\n", "email.smtp_port: Input should be a valid integer"),
                        ("email: [\n", None), ("storage: {password: x}\n", "storage.password: secrets")):
        path.write_text(text, encoding="utf-8")
        result = cli("--config", "c.yaml", "config", "check", cwd=tmp_path, check=2)
        assert result.stderr.startswith(f"rl-digest: {path}:"), result.stderr
        assert error is None or f"{path}: {error}" in result.stderr
    path.write_text("enrich: {provider: none}\n", encoding="utf-8")
    assert cli("--config", "c.yaml", "config", "check", cwd=tmp_path).stdout.startswith(f"{path}: ok")


def test_a_sender_at_localhost_is_taken_and_warned_of_only_through_a_remote_server(tmp_path, cli):
    """root@localhost is the From of a server whose own MTA takes the mail (it was exit 2,
    'It should have a period'); relayed through smtp.gmail.com it may be refused: a warning."""
    path = tmp_path / "config.yaml"
    mail = "email: {enabled: true, from: 'Cron <root@localhost>', to: [ops@example.org]}\n"
    path.write_text(f"enrich: {{provider: none}}\noutputs: {{base_url: 'https://x.example.org/'}}\n{mail}"
                    "sources: {arxiv: {contact: ops@lab.test}}\n",
                    encoding="utf-8")
    local = cli("--config", str(path), "config", "check")
    path.write_text(path.read_text(encoding="utf-8").replace("enabled: true", "enabled: true, "
                                                              "smtp_host: smtp.gmail.com"), encoding="utf-8")
    remote = cli("--config", str(path), "config", "check")
    assert local.stderr == "" and local.stdout.strip() == f"{path}: ok"
    assert remote.stderr.strip() == (f"warning: {path}: email.from: @localhost has no period, which "
                                     "suits a mail server on this host (smtp_host: localhost) that "
                                     "delivers or rewrites it; smtp.gmail.com may refuse it")
    typo = path.read_text(encoding="utf-8").replace("root@localhost", "root@@localhost")
    path.write_text(typo, encoding="utf-8")
    assert "email.from: not an email address" in cli("--config", str(path), "config", "check",
                                                     check=2).stderr


@pytest.mark.parametrize(("text", "key"), [
    ("enrich: {base_url: 'localhost:11434/v1'}\n", "enrich.base_url"),
    ("sources: {arxiv: {api_url: export.arxiv.org/api/query}}\n", "sources.arxiv.api_url"),
    ("sources: {rss: {urls: [rss.arxiv.org/rss/cs.LG]}}\n", "sources.rss.urls[0]"),
    ("sources: {oai: {url: oaipmh.arxiv.org/oai}}\n", "sources.oai.url"),
    ("sources: {fulltext: {url: 'arxiv.org/html/{id}v{version}'}}\n", "sources.fulltext.url"),
])
def test_an_address_without_http_is_exit_2_naming_its_key(tmp_path, cli, text, key):
    """A run read 'localhost:11434/v1' as unreachable (exit 0, every summary fell back) and
    an API URL without its scheme as a dead source (exit 3, the whole query in the line)."""
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    result = cli("--config", str(path), "config", "check", check=2)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"rl-digest: {path}: {key}: not an http(s):// address: '")


def test_missing_config_file_is_exit_2(tmp_path, cli):
    result = cli("--config", str(tmp_path / "nope.yaml"), "config", "check", check=2)
    assert "nope.yaml: no such file" in result.stderr


def test_config_show_hides_nothing_it_should_not(tmp_path, cli):
    result = cli("--config", str(ROOT / "config.yaml"), "config", "show",
                 env={"SMTP_PASSWORD": "pw-should-not-show"})
    assert "password_env: SMTP_PASSWORD (set)" in result.stdout
    assert "pw-should-not-show" not in result.stdout + result.stderr


def test_only_relative_sqlite_urls_move_to_the_config_folder():
    assert config._sqlite_at("sqlite:///state/x.db", Path("/a")) == "sqlite:////a/state/x.db"
    assert config._sqlite_at("sqlite:////abs/x.db", Path("/a")) == "sqlite:////abs/x.db"
    assert config._sqlite_at("sqlite:///../x.db", Path("/a/etc")) == "sqlite:////a/x.db"  # not /a/etc/../x.db
    assert config._sqlite_at("postgresql://h/db", Path("/a")) == "postgresql://h/db"
    # the driver named, as SQLAlchemy's tutorial does: it stayed relative to the working folder
    assert config._sqlite_at("sqlite+pysqlite:///state/x.db", Path("/a")) == "sqlite+pysqlite:////a/state/x.db"
    assert config.sqlite_file("sqlite+pysqlite:////a/x.db") == Path("/a/x.db")  # its lock goes beside it


def test_the_site_is_on_by_default_and_served_where_serve_is(tmp_path):
    assert config.load(ROOT / "config.yaml").outputs.site is True
    assert config.load(ROOT / "config.yaml").site_url is None
    path = tmp_path / "config.yaml"
    path.write_text("serve: {base_url: 'https://digest.example.org'}\n")
    assert config.load(path).site_url == "https://digest.example.org/"
    path.write_text("serve: {base_url: 'https://digest.example.org'}\n"
                    "outputs: {site_url: 'https://example.org/rl/site'}\n")
    assert config.load(path).site_url == "https://example.org/rl/site/"
    path.write_text("serve: {base_url: 'https://digest.example.org'}\noutputs: {site: false}\n")
    assert config.load(path).site_url is None  # no site: the email links its Markdown copy
    path.write_text("outputs: {site_url: 'ftp://example.org/'}\n")
    with pytest.raises(ConfigError, match="outputs.site_url: not an http"):
        config.load(path)


def test_a_template_of_templates_dir_that_does_not_compile_or_render_is_one_line_naming_it(tmp_path, cli):
    """run ended with 'unexpected error: TemplateSyntaxError: Unexpected end of template...'
    (or UndefinedError), exit 1, naming neither file nor line, after config check said ok."""
    (tmp_path / "mine").mkdir()
    template = tmp_path / "mine" / "digest.md.j2"
    config = write_config(tmp_path, {"templates": {"dir": "mine"}})
    template.write_text("# My digest\n{% if no_such %}\n", encoding="utf-8")
    unclosed = (f"templates.dir: {template}:2: Unexpected end of template. Jinja was looking for the "
                "following tags: 'elif' or 'else' or 'endif'.")
    for command in (("config", "check"), ("run", "--offline")):
        (line,) = cli("--config", str(config), *command, check=2).stderr.splitlines()
        assert unclosed in line and line.endswith("(fix it, or take it out of the folder to use the built-in "
                                                  "one)"), line
    template.write_text("# My digest\n{{ no_such.thing }}\n", encoding="utf-8")
    assert cli("--config", str(config), "config", "check").returncode == 0  # what it is given is not known
    (line,) = cli("--config", str(config), "run", "--offline", check=2).stderr.splitlines()
    assert f"templates.dir: {template}:2: 'no_such' is undefined" in line, line


def test_a_lock_folder_this_user_cannot_write_is_refused_by_config_check_as_by_run(tmp_path):
    """config check said ok; run and send stopped at once, 'cannot take the run lock:
    Permission denied', exit 1."""
    (tmp_path / "locks").mkdir(mode=0o555)
    config = write_config(tmp_path, {"lock": {"dir": "locks"}}, seeds=False)
    # root writes anywhere: run it without the capabilities that let it, as another user would be
    drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--"]
    for command, says in ((("config", "check"), f"{config}: lock.dir: {tmp_path / 'locks'}: cannot write: "
                                                "Permission denied; set lock.dir to a folder this user can write"),
                          (("run", "--offline"), f"{tmp_path / 'locks'}/digest.sqlite3.lock: cannot take the run "
                                                 "lock: Permission denied (set lock.dir to a folder this user can "
                                                 "write)")):
        args = [*cli_command(), "--config", str(config), *command]
        result = subprocess.run([*drop, *args] if os.geteuid() == 0 else args, cwd="/", env=cli_env(),
                                capture_output=True, text=True, timeout=60, check=False)
        assert (result.returncode, result.stderr.splitlines()) == (2, [f"rl-digest: {says}"])


def test_a_database_folder_this_user_cannot_write_is_refused_by_config_check(tmp_path):
    """lock.dir and outputs.dir moved to a writable folder, storage.url left at the starter's
    state/ beside a config folder the service cannot write (/etc/rl-digest under systemd):
    config check said ok, and every run stopped, exit 1, with '…/state: cannot create state
    folder: Permission denied', which named no key."""
    (tmp_path / "etc").mkdir()
    config = write_config(tmp_path / "etc", {"lock": {"dir": str(tmp_path / "var")},
                                             "outputs": {"dir": str(tmp_path / "var" / "out")}}, seeds=False)
    (tmp_path / "etc").chmod(0o555)
    drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--"]
    args = [*cli_command(), "--config", str(config), "config", "check"]
    result = subprocess.run([*drop, *args] if os.geteuid() == 0 else args, cwd="/", env=cli_env(),
                            capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stderr.splitlines()) == (2, [
        f"rl-digest: {config}: storage.url: {tmp_path / 'etc' / 'state'}: cannot write in {tmp_path / 'etc'} "
        "to make it: Permission denied; set storage.url to a file in a folder this user can write"])


def test_config_check_finds_what_would_stop_a_run_in_channels_and_serve(tmp_path, cli):
    """`run` refuses these with exit 2 and nobody gets the digest, email included; `config
    check` (and doctor's config line) said ok."""
    def check(extra: dict, env: dict | None = None) -> list[str]:
        path = write_config(tmp_path, extra, seeds=False)
        result = cli("--config", str(path), "config", "check", env=env, check=None)
        return [result.returncode, *result.stderr.strip().splitlines()]

    hook = {"SLACK_URL": "http://127.0.0.1:9/hook"}
    assert check({"channels": [{"type": "slack", "url_env": "SLACK_URL", "colour": "red"}]}, hook)[:2] == [
        2, f"rl-digest: {tmp_path / 'config.yaml'}: channels[0] (slack).colour: unknown key"]
    literal = check({"channels": [{"type": "slack", "url": "https://hooks.slack.com/services/T/B/x"}]})
    assert literal[0] == 2 and "channels[0] (slack).url: unknown key (secrets are not read " \
        "from the config file: put it in an environment variable and set url_env (the webhook URL) to its name)" \
        in literal[1]
    # telegram reads no webhook URL: it was told to set url_env, then that telegram takes none
    assert check({"channels": [{"type": "telegram", "url": "https://api.telegram.org", "token_env": "TG",
                                "chat_id": "-1"}]})[1].endswith("channels[0] (telegram).url: unknown key (did you mean api_url?)")
    token = check({"channels": [{"type": "slack", "url": "https://T0K3N@hooks.slack.com/services/x"}]})
    assert token[1].endswith("channels[0] (slack).url: holds a user or token in the URL; secrets are not read "
                             "from the config file (put the URL in an environment variable and set channels[0] "
                             "(slack).url_env (the webhook URL) to its name)") and "T0K3N" not in token[1]
    assert "channels[0] (telegram, name 'team').chat_id: required for a telegram channel" in check(
        {"channels": [{"type": "telegram", "name": "team", "token_env": "TG"}]}, {"TG": "1:x"})[1]
    unset = check({"channels": [{"type": "slack", "url_env": "SLACK_URL"}]}, {"SLACK_URL": ""})
    assert unset[0] == 0 and unset[1].startswith("warning: ")  # the posts wait in the outbox
    assert "channels[0] (slack).url_env: the environment variable SLACK_URL is not set" in unset[1]
    assert check({"channels": [{"type": "slack", "url_env": "SLACK_URL"}]}, hook) == [0]
    serve = {"serve": {"base_url": "https://digest.example.org/"}}
    assert "serve.secret_env: RL_DIGEST_SECRET is not set" in check(serve, {"RL_DIGEST_SECRET": ""})[1]
    assert "shorter than 16 characters" in check(serve, {"RL_DIGEST_SECRET": "abc"})[1]
    assert check(serve, {"RL_DIGEST_SECRET": "0123456789abcdef0123"}) == [0]


SECRET = {"RL_DIGEST_SECRET": "0123456789abcdef0123"}  # signs the links


def config_check(tmp_path, cli, extra: dict) -> list:
    """`config check` of a config with `extra` (the site's address set, a secret for links):
    its exit code and stderr lines."""
    path = write_config(tmp_path, {"outputs": {"base_url": "https://digest.example.org/"}, **extra},
                        seeds=False)
    result = cli("--config", str(path), "config", "check", env=SECRET, check=None)
    return [result.returncode, *result.stderr.strip().splitlines()]


def test_config_check_refuses_a_url_whose_port_there_cannot_be(tmp_path, cli):
    """An email.unsubscribe_url (or any URL key) with a port there cannot be was taken, and
    every email's unsubscribe link led nowhere: exit 2 naming the key."""
    mail = {"enabled": True, "to": ["ada@example.org"], "from": "digest@ada-lab.org"}

    def check(extra: dict) -> list:
        return config_check(tmp_path, cli, extra)

    config = tmp_path / "config.yaml"
    assert check({"email": {**mail, "unsubscribe_url": "https://x.org:99999/u?r={recipient}"}}) == [
        2, f"rl-digest: {config}: email.unsubscribe_url: not a port (1-65535) in "
           "'https://x.org:99999/u?r={recipient}'"]
    assert check({"serve": {"base_url": "https://digest.example.org:0/"}})[:2] == [
        2, f"rl-digest: {config}: serve.base_url: not a port (1-65535) in 'https://digest.example.org:0/'"]
    # outputs.base_url too, and one without https:// (the email's links to it led nowhere)
    assert check({"outputs": {"base_url": "digest.example.org/rl/"}})[:2] == [
        2, f"rl-digest: {config}: outputs.base_url: not an http(s):// address: 'digest.example.org/rl/'"]
    assert check({"email": {**mail, "unsubscribe_url": "https://x.org:8443/u?r={recipient}"}}) == [0]
    assert check({"email": mail, "serve": {"base_url": "https://digest.example.org/"}}) == [0]


def test_config_check_warns_of_an_http_unsubscribe_address(tmp_path, cli):
    """An http:// serve.base_url (or email.unsubscribe_url) gives the emails no one-click
    unsubscribe (RFC 8058 is for https), and config check said nothing of it."""
    mail = {"enabled": True, "to": ["ada@example.org"], "from": "digest@ada-lab.org"}

    def check(extra: dict) -> list:
        return config_check(tmp_path, cli, extra)

    config = tmp_path / "config.yaml"
    assert check({"email": mail, "serve": {"base_url": "http://digest.example.org/"}}) == [
        0, f"warning: {config}: serve.base_url: an http:// address, so the emails carry no one-click "
           "unsubscribe (RFC 8058 is for https alone; Gmail and Yahoo ask bulk senders for it): serve it "
           "over HTTPS and write its https:// address"]
    assert "email.unsubscribe_url: an http:// address" in check(
        {"email": {**mail, "unsubscribe_url": "http://x.org/u?r={recipient}"}})[1]
    assert check({"email": mail, "serve": {"base_url": "https://digest.example.org/"}}) == [0]
    assert check({"email": {**mail, "unsubscribe_url": "mailto:leave@example.org"}}) == [0]
    path = write_config(tmp_path, {
        "sources": {"arxiv": {"enabled": False}, "rss": {"enabled": False}},
        "email": {**mail, "smtp_host": "127.0.0.1", "smtp_port": 9, "security": "none"},
        "serve": {"base_url": "http://digest.example.org/"}}, seeds=False)
    report = cli("--config", str(path), "doctor", env=SECRET, check=None).stdout
    line = next(ln for ln in report.splitlines() if ln.startswith("config"))
    assert line.split()[1] == "WARN" and "serve.base_url: an http:// address" in line, line


def test_a_config_path_that_is_a_folder_or_empty_says_so_and_what_to_pass(tmp_path, cli):
    """A folder names the file to pass. `--config "$CONF"` with CONF unset is an empty path,
    said as such: it read the working folder and said '/srv: a folder, not a config file'."""
    for given in (".", str(tmp_path)):
        result = cli("--config", given, "status", cwd=tmp_path, check=2)
        assert result.stderr == (f"rl-digest: {tmp_path}: a folder, not a config file (pass --config "
                                 f"{tmp_path / 'config.yaml'}, or another file)\n"), result.stderr
    for args in (["--config", "", "status"], ["status", "--config", ""]):
        result = cli(*args, cwd=tmp_path, check=2).stderr  # --config "$CONF", CONF unset
        assert result == ("rl-digest: --config: the path is empty (a variable not set? name a config "
                          "file, or leave --config out for $RL_DIGEST_CONFIG or ./config.yaml)\n"), result
