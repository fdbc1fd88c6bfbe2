"""Reuse of identical bytes honours the parser a compressed file's inner name picks: ``notes.md.gz`` and
``notes.txt.gz`` with the same bytes are parsed by different parsers, so one never takes the other's material."""

from __future__ import annotations

import gzip
from pathlib import Path

from knowledge.lifecycle import PathInput, operations
from knowledge.runtime import Quire
from tests.knowledge.helpers import drain, make_base


def test_same_bytes_under_another_inner_suffix_are_parsed_again(quire: Quire, tmp_path: Path) -> None:
    packed = gzip.compress(b"---\ntitle: Shared\n---\n# Heading\n\nThe same bytes twice.\n")
    make_base(quire, precision="fp32")
    first, second = tmp_path / "a" / "notes.md.gz", tmp_path / "b" / "notes.txt.gz"
    for path in (first, second):
        path.parent.mkdir()
        path.write_bytes(packed)
    operations.add_items(quire, "kb", [PathInput(first)])
    drain(quire)
    operations.add_items(quire, "kb", [PathInput(second)])  # identical bytes, now a completed twin exists
    drain(quire)
    items = {i.name: i for i in operations.list_items(quire, "kb", flat=True) if not i.is_container}
    assert items["notes.md.gz"].parser == "markdown" and items["notes.md.gz"].metadata["title"] == "Shared"
    assert items["notes.txt.gz"].parser == "text" and items["notes.txt.gz"].status == "completed"
