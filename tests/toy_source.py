"""A toy source for tests, added from outside pipeline/: papers from a JSONL file, one JSON
object a line (id, title, abstract, categories, submitted), so a test can hand a run papers
that no arXiv stand-in serves. A line with `"update": true` is a new version of a paper
held (id, version, title), one with `"seed"` a seed document of one entry (title, summary_zh).

It imports nothing from tests/, because the CLI under test loads it by itself: through the
`rl_digest.sources` entry-point group or as `toy_source:JsonlSource` in the config.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from pipeline.models import Paper, SeedDocument, SeedEntry
from pipeline.sources import Found, SourceReport, SourceSetup, Window
from pipeline.sources.http import Fetcher


class JsonlSource:
    label, online = "toy JSONL", False

    def __init__(self, setup: SourceSetup):
        self.name = setup.name
        self.path = Path(setup.options["path"])

    def fetch(self, window: Window, fetcher: Fetcher) -> Found:
        """Every line, each time; remembers how many lines it read the last time."""
        rows = [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line]
        papers = [Paper(id=row["id"], title=row["title"], abstract=row.get("abstract", ""),
                        categories=tuple(row.get("categories", ())),
                        submitted=datetime.fromisoformat(row["submitted"]), sources=(self.name,))
                  for row in rows if "seed" not in row and not row.get("update")]
        updates = [Paper(id=row["id"], version=row["version"], title=row["title"], sources=(self.name,))
                   for row in rows if row.get("update")]
        documents = [SeedDocument(source=row["seed"], entries=(SeedEntry(
            title=row["title"], source=row["seed"], line=1, summary_zh=row.get("summary_zh")),))
            for row in rows if "seed" in row]
        before = (window.memory or {}).get("lines", 0)
        notes = [f"{len(rows) - before} lines more than last time"]
        return Found(papers=papers, updates=updates, documents=documents, report=SourceReport(seen=len(rows), notes=notes),
                     memory={"lines": len(rows)})
