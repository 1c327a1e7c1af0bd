"""Atomic writes of published files."""

from pipeline.deliver.files import write_atomic


def test_the_next_write_clears_what_a_killed_run_left_half_written(tmp_path):
    (tmp_path / ".READING_LIST.md.k1ll3d.tmp").write_text("half a reading list")
    (tmp_path / ".feed.xml.k1ll3d.tmp").write_text("another file's, left for its own write")

    write_atomic(tmp_path / "READING_LIST.md", "whole")

    assert (tmp_path / "READING_LIST.md").read_text() == "whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".feed.xml.k1ll3d.tmp", "READING_LIST.md"]
