"""The YAML seed format: the one a user writes by hand (see seeds/README.md).

Apart from seeds.py, whose page-copy text formats are guessed line by line: YAML is
parsed, then read entry by entry, and an unknown key or a wrong type costs that entry
alone, with a warning naming its line.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Callable
from typing import Any

import yaml

from pipeline.models import ARXIV_ID, SeedDocument, SeedEntry, SeedWarning, split_arxiv_id
from pipeline.sources.seeds import DATE, LINE_BREAK, YAML_KEYS, parse_date, summary_of
from pipeline.text import clean_name, prose

# A wrong value as a warning shows it: its start, a few items two levels deep (YAML aliases
# make a list of 9^n items out of n short lines, whose whole repr never ends).
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict = 2, 4, 4


class _Loader(yaml.SafeLoader):
    """Safe loader that leaves dates as text, so one bad date costs an entry, not the file."""


def _as_text(loader: _Loader, node: yaml.Node) -> str:
    assert isinstance(node, yaml.ScalarNode)  # a timestamp is always a scalar
    return str(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _as_text)


def parse_yaml(source: str, text: str) -> SeedDocument:
    n_lines = max(1, len(LINE_BREAK.split(text.rstrip("\r\n"))))
    warnings: list[SeedWarning] = []

    def warn(line: int, message: str) -> None:
        warnings.append(SeedWarning(source, min(max(line, 1), n_lines), message))

    try:
        root, data = _load_yaml(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        warn(mark.line + 1 if mark else 1, f"not valid YAML: {err.problem or err.context}")
        return SeedDocument(source=source, warnings=tuple(warnings))
    except yaml.reader.ReaderError as err:
        warn(text.count("\n", 0, err.position) + 1, f"not valid YAML: {err.reason}")
        return SeedDocument(source=source, warnings=tuple(warnings))
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as err:
        warn(1, f"not valid YAML: {err}")  # yaml raises assorted errors on hostile input
        return SeedDocument(source=source, warnings=tuple(warnings))

    items, node = data, root
    if isinstance(data, dict) and "entries" in data and root is not None:
        fields = _fields(root)
        for key in data:
            if key != "entries":
                warn(
                    fields[str(key)][0] if str(key) in fields else 1,
                    f"unknown top-level key {key!r} ignored",
                )
        items, node = data["entries"], fields.get("entries", (1, root))[1]
    if items is None:
        items = []
    if not isinstance(items, list):
        warn(node.start_mark.line + 1 if node is not None else 1,
             "expected a list of entries (or 'entries:' with a list)")
        items = []

    entries = [
        _yaml_entry(source, item, item_node, warn)
        for item, item_node in zip(items, node.value if items and node is not None else [],
                                   strict=False)
    ]
    return SeedDocument(
        source=source, entries=tuple(e for e in entries if e), warnings=tuple(warnings)
    )


def _load_yaml(text: str) -> tuple[yaml.Node | None, object]:
    """The node tree (for line numbers) and the plain data, from one parse."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        return root, loader.construct_document(root) if root is not None else None
    finally:
        loader.dispose()


def _fields(node: yaml.Node) -> dict[str, tuple[int, yaml.Node]]:
    """Key -> (1-based line of the key, value node), for messages and raw scalar text."""
    return {
        str(key.value): (key.start_mark.line + 1, value)
        for key, value in node.value
        if isinstance(key, yaml.ScalarNode)
    }


def _values(item: dict[str, Any], fields: dict[str, tuple[int, yaml.Node]], line: int,
            warn: Callable[[int, str], None]) -> dict[str, Any] | None:
    """An entry's values by key, a number as its text; None (warned) for an unknown key or a wrong type."""
    values: dict[str, Any] = {}
    for key, value in item.items():
        where, value_node = fields.get(str(key), (line, None))
        if key not in YAML_KEYS:
            warn(where, f"unknown key {key!r}; entry skipped")
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "featured":
            # arxiv_id: 2410.10110 would lose its last digit as a float: keep the text as written
            value = value_node.value if isinstance(value_node, yaml.ScalarNode) else str(value)
        if key == "featured" and not isinstance(value, bool):
            warn(where, f"key 'featured' must be true or false, not {_SHORT.repr(value)}; entry skipped")
            return None
        if key != "featured" and value is not None and not isinstance(value, str):
            warn(where, f"key {key!r} must be text, not {_SHORT.repr(value)}; entry skipped")
            return None
        values[key] = value
    return values


def _yaml_entry(source: str, item: object, node: yaml.Node,
                warn: Callable[[int, str], None]) -> SeedEntry | None:
    """One mapping -> SeedEntry; any unknown key or wrong type skips just this entry."""
    line = node.start_mark.line + 1
    if not isinstance(item, dict):
        warn(line, "entry is not a mapping (expected 'title: ...')")
        return None
    fields = _fields(node)
    given: dict[str, int] = {}  # YAML forbids a key twice; PyYAML kept the last one unsaid
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value in given:
            warn(key_node.start_mark.line + 1, f"key {key_node.value!r} is given twice in one entry "
                 f"(also on line {given[key_node.value]}); entry skipped")
            return None
        given[str(key_node.value)] = key_node.start_mark.line + 1
    values = _values(item, fields, line, warn)
    if values is None:
        return None
    title = clean_name(values.get("title"))
    if not title:
        warn(line, "key 'title' is missing or empty; entry skipped")
        return None
    when = None
    if values.get("date"):
        match = re.fullmatch(DATE, values["date"].strip())
        when = parse_date(*match.groups()) if match else None
        if when is None:
            warn(
                fields.get("date", (line, None))[0],
                f"key 'date' must be YYYY-MM-DD, not {values['date']!r}; entry skipped",
            )
            return None
    # 'arXiv:2410.10110' or its abs URL, as pasted, is the id; anything else was never found
    # (the entry waited for a paper no search could return, and never showed)
    arxiv_id = split_arxiv_id(clean_name(values.get("arxiv_id")))[0] or None
    if arxiv_id and not ARXIV_ID.fullmatch(arxiv_id):
        warn(fields.get("arxiv_id", (line, None))[0],
             f"key 'arxiv_id' must be an arXiv id such as 2410.10110, not {values['arxiv_id']!r}; "
             "entry skipped")
        return None
    summary, truncated = summary_of(values.get("summary_zh"), title)
    return SeedEntry(
        title=title,
        source=source,
        line=line,
        summary_zh=summary,
        summary_en=prose(values.get("summary_en")) or None,
        date=when,
        arxiv_id=arxiv_id,
        topic=clean_name(values.get("topic")) or None,
        featured=bool(values.get("featured", False)),
        truncated=truncated,
    )
