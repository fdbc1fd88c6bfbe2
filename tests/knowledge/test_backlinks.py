"""Backlinks (knowledge/library/links.py) on a real indexed vault: by name, by path, never to itself, and a
note being deleted links to nothing from the moment its delete commits."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.library.links import backlinks
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree

pytestmark = pytest.mark.model


def test_links_resolve_by_name_and_path_and_vanish_with_a_deleted_note(quire: Quire, tmp_path: Path) -> None:
    base = make_base(quire)
    write_tree(
        tmp_path / "vault",
        {
            "Harbour plan.md": "# Harbour plan\n\nDredging in spring. See [[Harbour plan#Spring]] above.\n",
            "daily/2024-05-02.md": "Met the pilots about [[harbour PLAN|the plan]] and ![[chart.png]].\n",
            "projects/summary.md": "Overview: [[other/Harbour plan]] and [[daily/2024-05-02]]; [[Nowhere]].\n",
            "other/Harbour plan.markdown": "A second plan of the same name, about the marina.\n",
            "chart.png.txt": "not an image: a file whose name no link uses\n",
        },
    )
    operations.add_items(quire, "kb", [PathInput(tmp_path / "vault")])
    drain(quire)
    files = {i.relative_path: i.id for i in operations.list_items(quire, "kb", flat=True) if i.type == "file"}

    def linked() -> dict[str, list[str]]:
        with quire.db.read() as conn:
            found = backlinks(conn, base.id, files.values())
        return {path: [b.name for b in found[item]] for path, item in files.items()}

    before = linked()
    assert before["Harbour plan.md"] == ["2024-05-02.md"]  # by name; its own [[Harbour plan#Spring]] not
    # by name both plans answer to [[harbour PLAN]] (and to the first plan's self-link); by path only this
    # one to [[other/Harbour plan]]
    assert before["other/Harbour plan.markdown"] == ["2024-05-02.md", "Harbour plan.md", "summary.md"]
    assert before["daily/2024-05-02.md"] == ["summary.md"]  # by path below the added folder
    assert before["projects/summary.md"] == [] and before["chart.png.txt"] == []

    operations.delete_items(quire, "kb", [files["daily/2024-05-02.md"]])  # deleting, cleanup not run yet
    after = linked()
    assert after["Harbour plan.md"] == [] and after["daily/2024-05-02.md"] == []
    assert after["other/Harbour plan.markdown"] == ["Harbour plan.md", "summary.md"]
