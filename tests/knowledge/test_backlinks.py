"""Backlinks (knowledge/library/links.py) on a real indexed vault: by name, by path, never to itself, a note
being deleted links to nothing from the moment its delete commits, and the stored link rows follow
reindex, move, delete and the migration that fills them."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.library import tree
from knowledge.library.item import FileStat
from knowledge.library.links import backlinks
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.store.migrations import migrate
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


def test_stored_links_follow_reindex_move_delete_and_the_migration(quire: Quire, tmp_path: Path) -> None:
    """The ``item_links`` rows stay what the notes say: a reindexed note's new links replace its old ones, a
    moved document answers to its new path (a moved note keeps its links), a deleted note's rows go with it,
    and migration 0025 fills them again from the metadata of a database that had none."""
    base = make_base(quire)
    vault = tmp_path / "vault"
    write_tree(
        vault,
        {
            "Harbour plan.md": "# Harbour plan\n\nDredging in spring.\n",
            "projects/brief.md": "The brief for the marina.\n",
            "a.md": "See [[Harbour plan]] and [[projects/brief]].\n",
            "b.md": "See [[brief]].\n",
        },
    )
    operations.add_items(quire, "kb", [PathInput(vault)])
    drain(quire)
    everything = {i.relative_path: i for i in operations.list_items(quire, "kb", flat=True)}
    ids = {path: item.id for path, item in everything.items() if item.type == "file"}
    plan, brief, a, b = ids["Harbour plan.md"], ids["projects/brief.md"], ids["a.md"], ids["b.md"]

    def linked(item_id: int) -> list[str]:
        with quire.db.read() as conn:
            return [link.name for link in backlinks(conn, base.id, [item_id])[item_id]]

    def stored(item_id: int) -> list[str]:
        with quire.db.read() as conn:
            rows = conn.execute(text("SELECT target FROM item_links WHERE item_id = :i"), {"i": item_id}).all()
        return sorted(r[0] for r in rows)

    assert (linked(plan), linked(brief)) == (["a.md"], ["a.md", "b.md"])
    assert stored(a) == ["harbour plan", "projects/brief"] and stored(b) == ["brief"]

    (vault / "a.md").write_text("Only [[projects/brief]] now.\n")
    operations.reindex_items(quire, "kb", [a])
    drain(quire)
    assert stored(a) == ["projects/brief"]
    assert (linked(plan), linked(brief)) == ([], ["a.md", "b.md"])

    root, projects = everything["Harbour plan.md"].parent_id, everything["projects/brief.md"].parent_id
    assert root is not None and projects is not None
    with quire.db.write() as conn:  # what sync does when it finds a rename: the row moves, its index stays
        tree.move(conn, brief, parent_id=root, source_path=str(vault / "brief.md"), relative_path="brief.md",
                  stat=FileStat(None, None))  # fmt: skip
        tree.move(conn, b, parent_id=projects, source_path=str(vault / "projects/b.md"), relative_path="projects/b.md",
                  stat=FileStat(None, None))  # fmt: skip
    assert linked(brief) == ["b.md"]  # a's path link names projects/brief no more; b's name link still does

    operations.delete_items(quire, "kb", [a])
    drain(quire)
    assert stored(a) == [] and linked(brief) == ["b.md"]

    with quire.db.write() as conn:  # a database from before migration 0025
        conn.exec_driver_sql("DROP TABLE item_links")
        conn.execute(text("DELETE FROM schema_migrations WHERE name = '0025_item_links'"))
    assert migrate(quire.db) == ["0025_item_links"]
    assert stored(b) == ["brief"] and stored(plan) == [] and linked(brief) == ["b.md"]
