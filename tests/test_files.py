"""Atomic writes of published files."""

import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.deliver.files import spool, streamed_if_changed, write_atomic, write_if_changed
from pipeline.errors import DigestError
from tests.processes import config_with


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    return int(child.stdout)


def test_the_next_write_clears_what_a_killed_run_left_half_written(tmp_path):
    dead = _dead_pid()
    (tmp_path / f".READING_LIST.md.{dead}.k1ll3d.tmp").write_text("half a reading list")
    (tmp_path / f".feed.xml.{dead}.k1ll3d.tmp").write_text("another file's, left for its own write")

    write_atomic(tmp_path / "READING_LIST.md", "whole")

    assert (tmp_path / "READING_LIST.md").read_text() == "whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".feed.xml.{dead}.k1ll3d.tmp",
                                                          "READING_LIST.md"]


def test_a_live_writers_half_written_file_is_left_alone(tmp_path):
    """Two schedulers write heartbeat.json at once: neither removes the other's file."""
    busy = tmp_path / f".heartbeat.json.{os.getppid()}.busy.tmp"
    busy.write_text("being written by a live process")

    write_atomic(tmp_path / "heartbeat.json", "{}")

    assert busy.exists()
    assert (tmp_path / "heartbeat.json").read_text() == "{}"


def test_an_unchanged_page_is_not_rewritten(tmp_path):
    page = tmp_path / "site" / "index.html"
    assert write_if_changed(page, "<p>week 1</p>")
    os.utime(page, (1_000_000, 1_000_000))

    assert not write_if_changed(page, "<p>week 1</p>")
    assert page.stat().st_mtime == 1_000_000
    assert write_if_changed(page, "<p>week 2</p>")
    assert page.read_text() == "<p>week 2</p>" and page.stat().st_mtime > 1_000_000


def test_a_streamed_file_replaces_the_old_only_when_its_bytes_differ_and_leaves_no_draft(tmp_path):
    """An export is written piece by piece beside the old one (never copied afterwards): the
    same bytes keep the old file and its date, new bytes replace it, a failure keeps it."""
    export = tmp_path / "exports" / "reading-list.bib"
    changed: list = []
    with streamed_if_changed(export, changed) as out:
        out.write("@misc{a}\n")
    assert export.read_text() == "@misc{a}\n" and changed == [export]
    os.utime(export, (1_000_000, 1_000_000))

    changed.clear()
    with streamed_if_changed(export, changed) as out:
        out.write("@misc{a}\n")
    assert changed == [] and export.stat().st_mtime == 1_000_000

    with pytest.raises(RuntimeError), streamed_if_changed(export, changed) as out:
        out.write("@misc{half")
        raise RuntimeError("the store went away")
    assert changed == [] and export.read_text() == "@misc{a}\n"

    with streamed_if_changed(export, changed) as out:
        out.write("@misc{b}\n")
    assert changed == [export] and export.read_text() == "@misc{b}\n"
    assert oct(export.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert [p.name for p in export.parent.iterdir()] == ["reading-list.bib"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_device_or_a_pipe_is_written_to_not_replaced(tmp_path):
    """`render -o /dev/null` as root put a regular file in /dev/null's place, and `-o
    /dev/stdout` would have replaced the link in /dev; a FIFO stands in for both here."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    try:
        write_atomic(fifo, "the digest\n")
        assert reader.communicate(timeout=10)[0] == "the digest\n"
    finally:
        reader.kill()
    assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_spool_disk_is_not_blamed_on_the_file_being_written(tmp_path):
    """The web edition's exports are written in a block that also fills spool files in
    TMPDIR: a full TMPDIR was 'out/site/exports/reading-list.jsonl: cannot write: No space
    left on device', and the operator freed space on a disk that had plenty. A spool's write
    now names TMPDIR, and what fails in the block is not the draft's to name. /dev/full is a
    full disk anywhere."""
    target = tmp_path / "reading-list.jsonl"
    with pytest.raises(DigestError) as caught, streamed_if_changed(target, []) as out:
        out.write("{}\n")
        with spool(Path("/dev/full")) as spooled:
            spooled.write(b"a topic's rows")
    assert str(caught.value) == ("/: cannot write: No space left on device (the run keeps its spool "
                                 "files there: free space, or set TMPDIR)")
    with pytest.raises(OSError) as other, streamed_if_changed(target, []) as out:
        out.write("{}\n")
        raise OSError(errno.EIO, "Input/output error")
    assert other.value.errno == errno.EIO
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(DigestError, match="^/dev/full: cannot write: No space left on device$"), \
            streamed_if_changed(Path("/dev/full"), []) as out:
        out.write("x" * 10_000)


def test_a_link_to_a_file_stays_a_link(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "READING_LIST.md").write_text("old")
    link = tmp_path / "READING_LIST.md"
    link.symlink_to(tmp_path / "shared" / "READING_LIST.md")
    write_atomic(link, "new")
    assert link.is_symlink()
    assert (tmp_path / "shared" / "READING_LIST.md").read_text() == "new"


def test_a_publish_clears_what_a_killed_run_left_even_where_no_file_is_written(tmp_path, cli):
    """A page the next run writes the same (not rewritten) or not at all: no write of it comes
    to clear its draft; a publish clears every folder of outputs.dir once (a live writer's
    file stays)."""
    config, dead, out = config_with(tmp_path), _dead_pid(), tmp_path / "out"
    left = [out / "site" / f".gone.html.{dead}.ab12cd34.tmp", out / f".GONE.md.{dead}.ab12cd34.tmp",
            out / "site" / "papers" / "month" / f".2020-01.html.{dead}.ab12cd34.tmp"]
    live = out / "site" / f".gone.html.{os.getpid()}.busy1234.tmp"
    for path in (*left, live):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("half a page")
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02")
    assert [path for path in left if path.exists()] == [] and live.exists()


def test_a_run_removes_the_spool_folders_a_killed_run_of_this_machine_left(tmp_path, cli):
    """kill -9 mid-publish left rl-digest-site-… in TMPDIR for good; a live process's, another
    machine's (a TMPDIR shared with a container) and one not saying its pid stay."""
    config, dead, host, tmp = config_with(tmp_path), _dead_pid(), socket.gethostname(), tmp_path / "tmp"
    left = [tmp / f"rl-digest-site-{host}.{dead}.k1ll3d00", tmp / f"rl-digest-reading-{host}.{dead}.k1ll3d00"]
    kept = [tmp / f"rl-digest-site-{host}.{os.getpid()}.busy0000", tmp / f"rl-digest-site-elsewhere.{dead}.k1ll3d00",
            tmp / "rl-digest-site-k1ll3d00"]
    for folder in (*left, *kept):
        folder.mkdir(parents=True)
        (folder / "t0").write_text("a topic's spool")
    cli("--config", str(config), "run", "--offline", "--as-of", "2026-11-02", env={"TMPDIR": str(tmp)})
    assert sorted(p for p in tmp.iterdir() if p.name.startswith("rl-digest-")) == sorted(kept)
