"""One live item per source in a base, whatever the order things are added in (seed 003 rule 1): a file
then its folder, a folder then a file inside it (held, new, or changed), nested folders either way round,
a synced folder inside a folder added later, and an empty file that later gets text. After every order
the checked invariant (``identity.duplicate_sources``) holds and every sentinel word has one search hit."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge import sync
from knowledge.lifecycle import ALREADY_COVERED, ALREADY_PRESENT, operations
from knowledge.lifecycle.identity import duplicate_sources
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree

TREE = {
    "a.txt": "The first note mentions alfalfa.",
    "b.txt": "The second note mentions bergamot.",
    "sub/c.txt": "Deeper, a note mentions cardamom.",
    "sub/deep/e.txt": "Deepest, a note mentions elderflower.",
}
SENTINELS = ("alfalfa", "bergamot", "cardamom", "elderflower")

ORDERS = {
    "file then folder": [["a.txt"], [""]],
    "file and folder in one call": [["a.txt", ""]],
    "folder then file": [[""], ["a.txt"]],
    "folder then a folder inside": [[""], ["sub"]],
    "inner folder then folder": [["sub"], [""]],
    "nested folders inside out": [["sub/deep/e.txt"], ["sub/deep"], ["sub"], [""]],
    "two files then their folder": [["a.txt"], ["sub/c.txt"], [""], ["b.txt"]],
}


def _add(quire: Quire, root: Path, relatives: list[str]) -> operations.Changes:
    changes = operations.add_items(quire, "kb", [PathInput(root / r if r else root) for r in relatives])
    drain(quire)
    return changes


def _assert_one_item_per_source(quire: Quire, root: Path, sentinels: tuple[str, ...] = SENTINELS) -> None:
    base_id = operations.list_items(quire, "kb", flat=True)[0].base_id
    with quire.db.read() as conn:
        assert duplicate_sources(conn, base_id) == []
        files = conn.execute(
            text("SELECT source_path, status FROM items WHERE type = 'file' AND status != 'deleting'")
        ).all()
    on_disk = sorted(str(p) for p in root.rglob("*") if p.is_file())
    assert sorted(f.source_path for f in files) == on_disk
    assert {f.status for f in files} <= {"completed", "skipped"}
    for word in sentinels:
        assert len(search(quire, "kb", word, mode="keyword", limit=20)) == 1, word
    roots = [i for i in operations.list_items(quire, "kb") if i.type == "directory"]
    assert len(roots) <= 1 and all(i.status == "completed" for i in operations.list_items(quire, "kb"))


@pytest.mark.parametrize("order", list(ORDERS), ids=list(ORDERS))
def test_every_add_order_gives_one_item_per_source(quire: Quire, tmp_path: Path, order: str) -> None:
    make_base(quire)
    root = write_tree(tmp_path / "D", TREE)
    for step in ORDERS[order]:
        _add(quire, root, step)
    _assert_one_item_per_source(quire, root)
    again = _add(quire, root, [""])  # the folder re-added after all that: still one of each
    assert again.created == []
    _assert_one_item_per_source(quire, root)


def test_an_adopted_file_keeps_its_chunks_and_vectors(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    root = write_tree(tmp_path / "D", TREE)
    file_id = _add(quire, root, ["a.txt"]).created[0]
    with quire.db.read() as conn:
        chunk_ids = [r[0] for r in conn.execute(text("SELECT id FROM chunks WHERE item_id = :i"), {"i": file_id})]
    folder_id = _add(quire, root, [""]).created[0]
    adopted = operations.get_item(quire, "kb", file_id)
    assert (adopted.parent_id, adopted.root_id, adopted.relative_path) == (folder_id, folder_id, "a.txt")
    with quire.db.read() as conn:
        after = [r[0] for r in conn.execute(text("SELECT id FROM chunks WHERE item_id = :i"), {"i": file_id})]
    assert after == chunk_ids and chunk_ids  # the same chunk rows: nothing was embedded again
    _assert_one_item_per_source(quire, root)


def test_a_new_or_changed_file_inside_a_covered_folder_is_indexed(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    root = write_tree(tmp_path / "D", TREE)
    folder_id = _add(quire, root, [""]).created[0]
    (root / "c2.txt").write_text("A new note mentions chervil.")
    (root / "sub" / "new" / "n.txt").parent.mkdir()
    (root / "sub" / "new" / "n.txt").write_text("A new note in a new folder mentions nutmeg.")
    added = _add(quire, root, ["c2.txt", "sub/new/n.txt"])
    assert [(o.outcome, o.item_id, o.refreshed) for o in added.outcomes] == [(ALREADY_COVERED, folder_id, True)] * 2
    (root / "b.txt").write_text("The second note now mentions borage instead.")
    changed = _add(quire, root, ["b.txt"])
    assert [(o.outcome, o.refreshed) for o in changed.outcomes] == [(ALREADY_COVERED, True)]
    unchanged = _add(quire, root, ["sub/c.txt"])
    assert [(o.outcome, o.refreshed) for o in unchanged.outcomes] == [(ALREADY_COVERED, False)]
    words = ("alfalfa", "borage", "cardamom", "elderflower", "chervil", "nutmeg")
    _assert_one_item_per_source(quire, root, words)
    assert search(quire, "kb", "bergamot", mode="keyword") == []


def test_a_synced_folder_inside_a_folder_added_later_stays_one_copy(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    root = write_tree(tmp_path / "D", TREE)
    sub_id = _add(quire, root, ["sub"]).created[0]
    sync_root = sync.enable_sync(quire, "kb", sub_id)
    drain(quire)
    _add(quire, root, [""])
    _assert_one_item_per_source(quire, root)
    (root / "sub" / "s.txt").write_text("A synced note mentions sorrel.")
    outcome = sync.reconcile(quire, sync_root.id, quire.db.write)
    assert outcome.stood_down is None and outcome.counts.get("added") == 1
    drain(quire)
    _assert_one_item_per_source(quire, root, (*SENTINELS, "sorrel"))


def test_an_empty_file_that_gets_text_is_read_on_re_add(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    path = tmp_path / "later.txt"
    path.write_text("   \n")
    item_id = _add(quire, tmp_path, ["later.txt"]).created[0]
    assert operations.get_item(quire, "kb", item_id).status == "skipped"
    path.write_text("Now it mentions tarragon.")
    again = _add(quire, tmp_path, ["later.txt"])
    assert [(o.outcome, o.item_id, o.refreshed) for o in again.outcomes] == [(ALREADY_PRESENT, item_id, True)]
    assert operations.get_item(quire, "kb", item_id).status == "completed"
    assert len(search(quire, "kb", "tarragon", mode="keyword")) == 1
