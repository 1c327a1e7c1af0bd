"""Recorded answers and samples in tests/data: each is read by a test and said where it came from.

A file no test names any more is a fixture gone stale (STYLE.md, after arxiv.py's suite): it
would still look like coverage of a real answer while nothing reads it.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent
DATA = TESTS / "data"


def test_every_file_in_tests_data_is_named_by_a_test_and_each_recording_by_its_readme():
    sources = "\n".join(p.read_text(encoding="utf-8") for p in TESTS.rglob("*.py") if DATA not in p.parents)
    files = [p for p in DATA.rglob("*") if p.is_file() and p.name != "README.md" and "__pycache__" not in p.parts]

    assert len(files) >= 10
    assert [str(p.relative_to(DATA)) for p in files if p.name not in sources] == []
    for readme in DATA.rglob("README.md"):
        text = readme.read_text(encoding="utf-8")
        assert [p.name for p in readme.parent.iterdir() if p.is_file() and f"`{p.name}`" not in text
                and p.name != "README.md"] == [], readme
