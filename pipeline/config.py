"""Typed configuration: the bundled config.yaml, overlaid by the user's file.

Paths in a config resolve relative to that config file, never the working
directory, because cron starts the tool from `/`. Secrets are only ever read
from the environment variables the config names.

Here: the whole config (Config) and reading a file into it, with the wording of what is
wrong; what each section's keys take is in config_sections.py and config_email.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from difflib import get_close_matches
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from pipeline.config_email import Email, Reader, read_recipients
from pipeline.config_sections import (
    Digest,
    Enrich,
    Lock,
    Model,
    Outputs,
    PluginEntry,
    Relevance,
    Schedule,
    Seeds,
    Serve,
    Sources,
    Storage,
    Templates,
    Topic,
    TopicDef,
    channel_entry,
)
from pipeline.errors import ConfigError

SECRET_KEYS = re.compile(r"(password|passwd|api_?key|token|secret)$", re.IGNORECASE)
# extra_body and header-like names whose values are secrets, however they are spelt
SECRET_NAMES = re.compile(r"(password|passwd|api[-_]?key|token|secret|authorization|auth)", re.IGNORECASE)
MASK = "***"


class Config(Model):
    topic: Topic
    languages: list[Literal["zh", "en"]] = Field(min_length=1)
    sources: Sources
    seeds: Seeds
    relevance: Relevance
    topics: list[TopicDef] = Field(min_length=1)
    enrich: Enrich
    digest: Digest
    outputs: Outputs
    email: Email
    channels: list[PluginEntry] = []
    serve: Serve = Serve()
    schedule: Schedule
    storage: Storage
    lock: Lock = Lock()
    templates: Templates = Templates()
    path: Path | None = Field(None, exclude=True)  # the user's file, if any

    @model_validator(mode="before")
    @classmethod
    def _path_is_no_setting(cls, data: Any) -> Any:
        """`path` is set from where the file was read (load): one written in it was taken, unused."""
        if isinstance(data, dict) and "path" in data:
            raise ValueError("path: unknown key")
        return data

    @model_validator(mode="after")
    def _unique_languages(self) -> Config:
        if len(set(self.languages)) != len(self.languages):
            raise ValueError("languages: each language once")
        seen: set[str] = set()
        for number, entry in enumerate(self.channels):
            where = channel_entry(number, entry)
            if entry.type == "email":  # a second email channel: every reader mailed twice, email off or on
                raise ValueError(f"{where}.type: email is set up under `email:` (enabled, to, "
                                 "smtp_host...), not in channels")
            if not re.fullmatch(r"[a-z][a-z0-9_-]*", entry.key) or entry.key == "email":
                raise ValueError(f"{where}.name: {entry.key!r} is not a channel name "
                                 "(lower-case letters, digits, - or _; not 'email', which is the "
                                 "email key); give one with `name:`")
            if entry.key in seen:
                raise ValueError(f"{where}.name: {entry.key!r} twice; give each a "
                                 "`name:`")
            seen.add(entry.key)
        return self

    def channel_entry_of(self, key: str) -> str:
        """channel_entry of the `channels` entry called `key` (its name, else its type)."""
        number = next(n for n, entry in enumerate(self.channels) if entry.key == key)
        return channel_entry(number, self.channels[number])

    @property
    def site_url(self) -> str | None:
        """Where out/site/ is served, ending in "/": outputs.site_url, else serve's base_url
        (serve serves out/site/ at its root); None when the site is off or nobody serves it."""
        url = self.outputs.site_url or self.serve.base_url
        return url.rstrip("/") + "/" if url and self.outputs.site else None

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.schedule.timezone)

    def readers(self) -> list[Reader]:
        """email.to plus the lines of email.recipients_file, once per address (the first
        mention wins). A line that names no reader is skipped (recipient_problems says
        which): the other readers still get the week's digest."""
        found = list(self.email.to)
        if self.email.recipients_file:
            found += read_recipients(self.email.recipients_file, self.email.local)[0]
        first: dict[str, Reader] = {}
        for reader in found:
            first.setdefault(reader.address.lower(), reader)
        return list(first.values())

    def recipient_problems(self) -> list[str]:
        """A line for each line of email.recipients_file that names no reader."""
        return read_recipients(self.email.recipients_file, self.email.local)[1] \
            if self.email.recipients_file else []

    def password_env_problem(self) -> tuple[str, str] | None:
        """Why the database password cannot be read (and what to do), or None."""
        name = self.storage.password_env
        if not name or name in os.environ:
            return None
        return (f"storage.password_env: the environment variable {name} is not set",
                f"export {name} with the database password, or set storage.password_env: null "
                "if the server asks for none")

    def secret_values(self) -> list[str]:
        """What the environment variables the config names (every `*_env` key, the chat
        channels' too; not the SMTP user name, which doctor shows) hold: for logs.hide."""
        names: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, dict):
                for key, inner in value.items():
                    if str(key).endswith("_env") and key != "username_env" and isinstance(inner, str):
                        names.append(inner)
                    elif str(key).endswith("_envs") and isinstance(inner, list):  # previous_secret_envs
                        names.extend(name for name in inner if isinstance(name, str))
                    walk(inner)
            elif isinstance(value, list):
                for inner in value:
                    walk(inner)

        walk(self.model_dump(mode="json"))
        return [found for name in names if (found := os.environ.get(name))]

    def addresses(self) -> list[str]:
        """Every URL the config holds (the sources', enrich.base_url, a channel's api_url): for
        logs.hide, which shows each of their query values as *** (a mirror's key stands there)."""

        def walk(value: Any) -> Iterator[str]:
            if isinstance(value, dict | list):
                for inner in value.values() if isinstance(value, dict) else value:
                    yield from walk(inner)
            elif isinstance(value, str) and "://" in value and not value.startswith("sqlite"):
                yield value  # a SQLite URL is a file's path, whose folder may be named "digest?v=2"

        return list(walk(self.model_dump(mode="json")))

    def public_addresses(self) -> list[str]:
        """The URLs every digest shows its readers (the site's, the unsubscribe page's): what
        stands in them is no secret for logs.hide to mask, in `render`'s output above all."""
        return [url for url in (self.outputs.base_url, self.outputs.site_url, self.serve.base_url,
                                self.email.unsubscribe_url) if url]

    def secret(self, env_name: str | None) -> str | None:
        return os.environ.get(env_name) if env_name else None

    def database_url(self) -> str:
        """storage.url with the password from storage.password_env, when that is set. A
        variable named but not set is a config error: the server's refusal would say less."""
        problem = self.password_env_problem()
        if problem:
            raise ConfigError(*problem)
        password = self.secret(self.storage.password_env)
        if not password:
            return self.storage.url
        from sqlalchemy.engine import make_url

        return make_url(self.storage.url).set(password=password).render_as_string(hide_password=False)


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """yaml.safe_load's, through libyaml where PyYAML has it (about ten times faster, and
    every command reads the config), that refuses a key given twice in one mapping: YAML
    forbids it, and PyYAML kept the last one, so a setting written above it did nothing."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # a merge (<<: *base) may be overridden below it; that is what it is for
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"{key!r} is given twice in one mapping (also on line {seen[key] + 1}): "
                    "only the last would count", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def parse_yaml(text: str) -> Any:
    """yaml.safe_load, but a key given twice in one mapping is an error (_Loader)."""
    return yaml.load(text, Loader=_Loader)


def bundled(name: str) -> Path:
    """A file shipped with the package: inside it once installed, beside it in a checkout."""
    installed = Path(str(resources.files("pipeline"))) / "bundled" / name
    return installed if installed.exists() else Path(__file__).resolve().parent.parent / name


NO_CONFIG = "pass --config PATH or set RL_DIGEST_CONFIG"  # the hint when ./config.yaml is no file


def default_path() -> Path:
    """--config is handled by the CLI; here: $RL_DIGEST_CONFIG, else ./config.yaml, which
    must exist: a cron line that forgot --config must not run on the defaults."""
    env = os.environ.get("RL_DIGEST_CONFIG")
    return Path(env) if env else Path.cwd() / "config.yaml"


def load(path: Path | None, named_by: str | None = None) -> Config:
    """Validate the bundled defaults overlaid by `path`; raise ConfigError naming the key,
    and the file by its absolute path, as every other line names it (Config.path).
    `named_by`: what gave `path` (--config, RL_DIGEST_CONFIG), for the hint when it is no
    file; None for ./config.yaml."""
    base = _read_yaml(bundled("config.yaml"))
    user: dict[str, Any] = {}
    if path is not None:
        path = path.resolve()
        user = _read_yaml(path, named_by)
        try:
            _refuse_secrets(user, path)  # it walks every value first
        except RecursionError:
            raise ConfigError(f"{path}: not valid YAML: an alias (*name) stands inside what it names "
                              "(&name), so its settings never end") from None
    merged = _merge(base, user)
    try:
        config = Config.model_validate(merged)
    except ValidationError as exc:
        _whole_defaults(base)
        raise ConfigError(_first_error(path or bundled("config.yaml"), exc, merged)) from None
    root = (path.parent if path else Path.cwd())
    config = _resolve_paths(config, root, path)
    if "paths" not in (user.get("seeds") or {}):  # the default seeds/ beside a config is optional
        seeds = config.seeds.model_copy(update={"paths": [p for p in config.seeds.paths if p.exists()]})
        config = config.model_copy(update={"seeds": seeds})
    readers = config.email.recipients_file  # and so is the default readers.txt
    if readers and "recipients_file" not in (user.get("email") or {}) and not readers.exists():
        email = config.email.model_copy(update={"recipients_file": None})
        config = config.model_copy(update={"email": email})
    return config


def _whole_defaults(base: dict[str, Any]) -> None:
    """Raise ConfigError naming the built-in config.yaml when it is itself not whole: it is
    the top config.yaml of the tree rl-digest was installed from (pip install ., the Docker
    image), and a short config put there left every command saying the user's file lacked
    `topic`."""
    try:
        Config.model_validate(base)
    except ValidationError as exc:
        raise ConfigError(f"{_first_error(bundled('config.yaml'), exc, base)}: rl-digest's built-in "
                          "defaults are not whole",
                          "they are the config.yaml at the top of the tree it was installed from: "
                          "put the shipped one back there (git checkout config.yaml), keep your "
                          "settings in a file of your own, and install again") from None


def _read_yaml(path: Path, named_by: str | None = None) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file", f"the file {named_by} names: check the path, or write "
                          "a starter one with `rl-digest init DIR`" if named_by else NO_CONFIG) from None
    except IsADirectoryError:
        fix = "pass --config" if named_by == "--config" else f"set {named_by} to"
        hint = f"{fix} {path / 'config.yaml'}, or another file" if named_by else NO_CONFIG
        raise ConfigError(f"{path}: a folder, not a config file", hint) from None
    except OSError as exc:  # its strerror alone: str(exc) names the file a second time
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte {exc.object[exc.start]:#04x}): "
                          "save the file as UTF-8") from None
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_error(path, text, exc)) from None
    except (ValueError, TypeError) as exc:  # a tag's value it cannot read: !!int abc, !!timestamp 2026-13-01
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    return data


def _yaml_error(path: Path, text: str, exc: yaml.YAMLError) -> str:
    """`path`:line:column: the problem, and where what it is in began when that is elsewhere
    (an unclosed quote or bracket is found at the end of the file)."""
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow, e.g. NUL
        return f"{path}:{text.count(chr(10), 0, exc.position) + 1}: {exc.reason}"
    mark, context, began = (getattr(exc, name, None) for name in ("problem_mark", "context", "context_mark"))
    if mark is None:
        return f"{path}: not valid YAML"
    problem = getattr(exc, "problem", None) or "not valid YAML"
    lines = text.split("\n")
    if mark.line < len(lines) and lines[mark.line][mark.column:mark.column + 1] == "\t":
        problem = "a tab: YAML indents with spaces only"
    elif context and began is not None and began.line != mark.line:
        problem += f" ({context} begun on line {began.line + 1})"
    return f"{path}:{mark.line + 1}:{mark.column + 1}: {problem}"


def _refuse_secrets(data: Any, path: Path, dotted: str = "", kind: str | None = None,
                    entry: str | None = None) -> None:
    """No secret in the file: neither a key that names one nor credentials inside a URL
    (they would reach logs, errors, status and, for outputs.base_url, every email).
    `entry`: the `channels` entry `data` is in (channel_entry), `kind` its type, whose keys
    the hint names."""
    if isinstance(data, dict):
        for key, value in data.items():
            inner = f"{dotted}.{key}" if dotted else str(key)
            if isinstance(key, str) and SECRET_KEYS.search(key) and not key.endswith("_env"):
                raise ConfigError(
                    f"{path}: {inner}: secrets are not read from the config file",
                    f"put it in an environment variable and set "
                    f"{' or '.join(_env_keys_for(inner, kind, entry))} to its name",
                )
            _refuse_secrets(value, path, inner, kind, entry)
    elif isinstance(data, list):
        for n, value in enumerate(data):
            if dotted == "channels":
                said = value if isinstance(value, dict) else {}
                where, of = channel_entry(n, said), said.get("type")
                _refuse_secrets(value, path, where, of if isinstance(of, str) else None, where)
            else:
                _refuse_secrets(value, path, f"{dotted}[{n}]", kind, entry)
    elif isinstance(data, str) and (what := url_credentials(data)):
        raise ConfigError(
            f"{path}: {dotted}: holds {what} in the URL; secrets are not read from the config file",
            "take it out of the URL, put it in an environment variable and set storage.password_env "
            "to its name" if dotted == "storage.url" else
            f"put the URL in an environment variable and set "
            f"{' or '.join(_env_keys_for(dotted, kind, entry))} to its name"
            if entry is not None and _chat(kind) else
            "take it out of the URL; a secret goes in an environment variable (enrich.api_key_env, "
            "email.password_env, storage.password_env, a channel's *_env)",
        )


def _env_keys(model: type[BaseModel], dotted: str = "") -> list[str]:
    """Every `*_env` key of `model`'s schema, dotted (a channel's or a plug-in's are its own)."""
    found: list[str] = []
    for name, field in model.model_fields.items():
        key = f"{dotted}.{field.alias or name}" if dotted else field.alias or name
        if name.endswith("_env"):
            found.append(key)
        for inner in get_args(field.annotation) or (field.annotation,):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                found += _env_keys(inner, key)
    return found


def _env_keys_for(secret: str, channel: str | None = None, entry: str | None = None) -> list[str]:
    """The `*_env` keys that name the variable for the secret written at `secret` (dotted):
    in a `channels` entry (`entry`, channel_entry) of a built-in `channel` type, those that
    type reads; else `secret`_env where that is a key (a plug-in's entry keeps its own), else
    those of its kind (password, api_key...) in its section, else its section's, else anywhere."""
    if entry is not None and (chat := _chat(channel)):
        return [f"{entry}.{key}" for key in chat.secret_keys(channel, secret.rsplit(".", 1)[-1])]
    if f"{secret}_env" in _env_keys(Config) or entry is not None or secret.startswith("sources.plugins["):
        return [f"{secret}_env"]
    kind = SECRET_KEYS.search(secret)
    word = {"passwd": "password", "apikey": "api_key"}.get(kind[1].lower(), kind[1].lower()) if kind else ""
    secrets = [k for k in _env_keys(Config) if not k.endswith(".username_env")]
    same = [k for k in secrets if k.rsplit(".", 1)[-1] == f"{word}_env"]
    section = [k for k in secrets if k.split(".")[0] == secret.split(".")[0]]
    return [k for k in same if k in section] or section or same or [f"a channel's {word}_env"]


def _chat(kind: str | None) -> Any:
    """pipeline.deliver.chat when `kind` is one of its platforms, else None."""
    from pipeline.deliver import chat  # it imports this module: only an error's hint needs it

    return chat if kind in chat.PLATFORMS else None


def url_credentials(value: str) -> str | None:
    """What secret a URL carries before its host, or None: a password anywhere, and in a
    web address a user too, since a token often stands there (https://TOKEN@host/); a
    database URL's user is a role name."""
    if "://" not in value or "@" not in value:
        return None
    try:
        parts = urlsplit(value.strip())
        if parts.password is not None:
            return "a password"
        return "a user or token" if parts.username and parts.scheme in ("http", "https") else None
    except ValueError:
        return None  # not a URL: the key's own check says so


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; anything else in `over` replaces the default."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merged[key] = _merge(base[key], value)
        else:
            merged[key] = value
    return merged


def _first_error(path: Path, exc: ValidationError, data: dict[str, Any]) -> str:
    """The first of `exc`'s errors, naming its key in `data` as the file holds it: a list's
    item by its place (`email.to[1]`), a `channels` entry by channel_entry."""
    errors = exc.errors()
    first = errors[0]
    parts = [f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]]
    if len(parts) > 1 and parts[0] == ".channels" and isinstance(number := first["loc"][1], int):
        entry = (data.get("channels") or [])[number]
        parts[:2] = [channel_entry(number, entry if isinstance(entry, dict) else {})]
    loc = "".join(parts).removeprefix(".")
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = unknown_key(str(first["loc"][-1]), _keys_at(first["loc"][:-1]))
    msg = msg.removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    where = f"{loc}: " if loc else ""  # a check across keys names them in its message
    return f"{path}: {where}{msg}{more}"


def unknown_key(key: str, known: Iterable[str]) -> str:
    """What a key the schema does not have is called, with the closest one it has."""
    near = get_close_matches(key, list(known), n=1)
    return "unknown key" + (f" (did you mean {near[0]}?)" if near else "")


def _keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys the schema has at `loc` (a mapping's place, e.g. ("digest",)), or []."""
    model: Any = Config
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        inner = [t for t in get_args(field.annotation) or (field.annotation,)
                 if isinstance(t, type) and issubclass(t, BaseModel)] if field else []
        if not inner:
            return []
        model = inner[0]
    return [field.alias or name for name, field in model.model_fields.items()]


def _resolve_paths(config: Config, root: Path, path: Path | None) -> Config:
    def at(p: Path | None) -> Path | None:  # ~/ is the home folder, as a shell reads it
        return None if p is None else _normal(root / p.expanduser())  # (an absolute path stays)

    outputs = config.outputs
    git = outputs.git.model_copy(update={"repo": at(outputs.git.repo)}) if outputs.git else None
    return config.model_copy(
        update={
            "path": path.resolve() if path else None,
            "seeds": config.seeds.model_copy(update={"paths": [at(p) for p in config.seeds.paths]}),
            "sources": config.sources.model_copy(update={"arxiv": config.sources.arxiv.model_copy(
                update={"calendar_files": [at(p) for p in config.sources.arxiv.calendar_files]})}),
            "outputs": outputs.model_copy(update={"dir": at(outputs.dir), "git": git}),
            "email": config.email.model_copy(
                update={"recipients_file": at(config.email.recipients_file)}
            ),
            "templates": Templates(dir=at(config.templates.dir)),
            "lock": config.lock.model_copy(update={"dir": at(config.lock.dir)}),
            "storage": config.storage.model_copy(update={"url": _sqlite_at(config.storage.url, root)}),
        }
    )


_SQLITE = re.compile(r"sqlite(\+pysqlite)?:///")  # SQLAlchemy's tutorial names the driver


def _sqlite_at(url: str, root: Path) -> str:
    """sqlite:///state/x.db is relative to the config file; sqlite:////abs stays;
    sqlite:///~/x.db is in the home folder."""
    prefix, path = _SQLITE.match(url), sqlite_file(url)
    if prefix is None or path is None or path.is_absolute():
        return url
    return prefix[0] + str(_normal(root / path.expanduser()))


def _normal(path: Path) -> Path:
    """`path` without its `..`: ../reading-list beside /etc/rl-digest/config.yaml was named
    /etc/rl-digest/../reading-list in every line. The config's folder is resolved already
    (load), so a `..` after it names the same folder; symlinks are kept as they are."""
    return Path(os.path.normpath(path))


def sqlite_file(url: str) -> Path | None:
    prefix = _SQLITE.match(url)
    return Path(url[prefix.end():]) if prefix and ":memory:" not in url else None


def masked(config: Config) -> dict[str, Any]:
    """The effective config for `config show`: every `*_env` key's variable name shown with
    set/unset (the channels' and plug-ins' too) and secret-looking extra_body entries as ***
    (a URL holds no credentials: load refuses them)."""
    data = config.model_dump(mode="json", by_alias=True, exclude={"path"})
    extra = data["enrich"]["extra_body"]  # sent to the LLM as written: its keys name no variable
    data = _mark_envs(data)
    data["enrich"]["extra_body"] = _mask_names(extra)
    return data


def _mark_envs(value: Any) -> Any:
    """`value` with each `*_env` key's variable name (each of an `*_envs` key's) followed by
    (set) or (unset)."""
    if isinstance(value, dict):
        return {k: _marked(v) if str(k).endswith("_env") and isinstance(v, str) and v else
                [_marked(name) for name in v] if str(k).endswith("_envs") and isinstance(v, list)
                else _mark_envs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark_envs(v) for v in value]
    return value


def _marked(name: str) -> str:
    return f"{name} ({'set' if os.environ.get(name) else 'unset'})"


def _mask_names(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: MASK if SECRET_NAMES.search(str(k)) else _mask_names(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_names(v) for v in value]
    return value
