"""A toy channel for tests, added from outside pipeline/: each message is appended to a file
per reader in `folder`, so a test can count what each reader got.

It imports nothing from tests/, because the CLI under test loads it by itself: through the
`rl_digest.channels` entry-point group or as `toy_channel:FileChannel` in the config.
"""

from __future__ import annotations

from pathlib import Path

from pipeline import render
from pipeline.deliver.channels import ChannelSetup, Message
from pipeline.models import Digest

SEPARATOR = "\n----- message -----\n"
LIFE = "opened-and-closed.log"  # a line each time one is made, and each time one is closed


class FileChannel:
    def __init__(self, setup: ChannelSetup):
        self.name = setup.name
        self.config = setup.config
        self.count = setup.reading_count
        self.folder = Path(setup.options["folder"])
        self._readers = list(setup.options.get("readers", ["inbox"]))
        self.broken = dict(setup.options.get("broken", {}))  # reader -> "build" or "send": a bug there
        self._life("opened")  # as a channel that connects when made: each must be closed

    def _life(self, event: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with (self.folder / LIFE).open("a", encoding="utf-8") as handle:
            handle.write(event + "\n")

    def readers(self) -> list[str]:
        return self._readers

    def build(self, digest: Digest, reader: str, message_id: str | None = None) -> Message:
        if self.broken.get(reader) == "build":
            raise KeyError(f"no page for {reader}")
        text = render.digest_as(render.Settings.of(self.config), digest, "md", self.count)
        return Message(reader, message_id or f"<{digest.id}.{reader}.{self.name}@toy>", text)

    def send(self, message: Message) -> str:
        if self.broken.get(message.reader) == "send":
            raise RuntimeError(f"toy: the hand-over to {message.reader} broke\n  halfway")
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{message.reader}.md"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{SEPARATOR}Message-ID: {message.id}\n\n{message.body}")
        return f"appended to {path}"

    def close(self) -> None:
        self._life("closed")


def unclosed(folder: Path) -> int:
    """How many channels made with this folder were never closed."""
    events = (folder / LIFE).read_text(encoding="utf-8").split()
    return events.count("opened") - events.count("closed")


def messages(path: Path) -> list[str]:
    """The messages a reader's file holds."""
    return path.read_text(encoding="utf-8").split(SEPARATOR)[1:] if path.exists() else []
