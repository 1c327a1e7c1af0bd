"""Cut arxiv_rss_2024-11-28_all_archives_slice.xml out of the 2.8 MB capture in ../shared.

Run from the repository root: python tests/data/arxiv/slice_rss.py [FULL.xml]. The channel
header and the items kept are the capture's own bytes, in its order; only items are left out.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FULL = HERE.parents[3] / "shared" / "data" / "formats" / "arxiv_rss_2024-11-28_all_archives.xml"
SLICE = HERE / "arxiv_rss_2024-11-28_all_archives_slice.xml"
ITEM = re.compile(rb"    <item>\n.*?    </item>\n", re.S)
# papers test_arxiv_rss.py names beyond the rules below: TeX with &lt;, a list of authors
# with affiliations, a collaboration as the last author
NAMED = {b"2411.17730", b"2411.17817", b"2411.18149"}


def _field(item: bytes, pattern: bytes) -> bytes:
    found = re.search(pattern, item, re.S)
    return found.group(1) if found else b""


def _kept(items: list[bytes]) -> list[bool]:
    """The first ten `new` items, every other kind but `replace`, the first five and the last
    `replace`, the first five with a DOI or a journal reference, every title with an escape."""
    kinds = [_field(item, rb"<arxiv:announce_type>(.*?)<") for item in items]
    replaces = [n for n, kind in enumerate(kinds) if kind == b"replace"]
    doi = [n for n, item in enumerate(items) if b"<arxiv:DOI>" in item][:5]
    journal = [n for n, item in enumerate(items) if b"<arxiv:journal_reference>" in item][:5]
    keep = {*[n for n, kind in enumerate(kinds) if kind == b"new"][:10], *replaces[:5], replaces[-1],
            *[n for n, kind in enumerate(kinds) if kind not in (b"new", b"replace")], *doi, *journal}
    for n, item in enumerate(items):
        guid = _field(item, rb"<guid[^>]*>oai:arXiv.org:(.*?)v\d+</guid>")
        if guid in NAMED or re.search(rb"&(amp|lt|gt);", _field(item, rb"<title>(.*?)</title>")):
            keep.add(n)
    return [n in keep for n in range(len(items))]


def slice_feed(full: bytes) -> bytes:
    items = ITEM.findall(full)
    head, tail = full[: full.index(items[0])], full[full.rindex(items[-1]) + len(items[-1]):]
    return head + b"".join(item for item, keep in zip(items, _kept(items), strict=True) if keep) + tail


if __name__ == "__main__":
    SLICE.write_bytes(slice_feed(Path(sys.argv[1] if len(sys.argv) > 1 else FULL).read_bytes()))
