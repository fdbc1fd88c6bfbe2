"""Issue 46 item 7 end to end, with the real model and an in-process worker: plain text files named
LICENSE, GPL-3, notes.2024 and Makefile, in a folder and inside an archive, are read and found; binary
files that no suffix names are skipped with their reason, not failed."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree

ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64

FILES = {
    "LICENSE": "Permission is granted to copy the zanzibarite notes.\n",
    "GPL-3": "GNU GENERAL PUBLIC LICENSE\nVersion 3 mentions the quokkaville clause.\n",
    "notes.2024": "Planted the quinces beside the marmoset shed.\n",
    "Makefile": "all: frobulator\n\nfrobulator: main.o\n\t$(CC) -o $@ $^\n",
}


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("docs/COPYING", "The wombatrix licence, inside an archive.\n")
        archive.writestr("bin/tool", ELF)
    return out.getvalue()


def test_text_named_by_no_suffix_is_read_and_found_and_binary_is_skipped(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = write_tree(tmp_path / "licences", {**FILES, "core": ELF, "blob.2024": ELF, "bundle.zip": _zip()})
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)

    items = {i.name: i for i in operations.list_items(quire, "kb", flat=True)}
    for name in FILES:
        assert (items[name].status, items[name].parser) == ("completed", "text"), name
    assert (items["docs/COPYING"].status, items["docs/COPYING"].parser) == ("completed", "text")
    for name in ("core", "blob.2024", "bin/tool"):
        assert (items[name].status, items[name].error_code) == ("skipped", "unsupported_type"), name
        assert (items[name].error_message or "").endswith("its content is not text)")
    assert items["licences"].status == "completed"  # skipped files never fail their folder

    for word, name in [
        ("zanzibarite", "LICENSE"),
        ("quokkaville", "GPL-3"),
        ("marmoset", "notes.2024"),
        ("frobulator", "Makefile"),
        ("wombatrix", "docs/COPYING"),
    ]:
        hits = search(quire, "kb", word, mode="keyword")
        assert hits and hits[0].item_name == name, word
