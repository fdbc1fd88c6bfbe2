"""One live item per source file once folder runs are involved: a run over a sub-folder then the folder added,
the folder added then a run over a sub-folder, the same folder run twice, a file added then a run over its
folder — each with a file edited between the two gestures. Afterwards every file on disk has exactly one live
item, a word only in the edited version is found and a word only in the old version is not."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from knowledge import folder_runs
from knowledge.lifecycle import operations
from knowledge.lifecycle.identity import duplicate_sources
from knowledge.runtime import Quire
from knowledge.search import search
from tests.folder_runs.helpers import PERSON, drain, make_base, rows, scalar
from tests.support.files import write_tree

TREE = {
    "a.txt": "The first note mentions alfalfa.",
    "sub/b.txt": "The second note mentions bergamot.",
    "sub/c.txt": "A third note mentions cardamom.",
}
OLD_WORD, NEW_WORD = "bergamot", "quinceblossom"
KEPT_WORDS = ("alfalfa", "cardamom")


def _edit(root: Path) -> None:
    path = root / "sub" / "b.txt"
    before = path.stat()
    path.write_text(f"The second note, rewritten, now mentions {NEW_WORD} instead.", encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 5_000_000_000))  # a later mtime whatever the clock


def _run(quire: Quire, folder: Path) -> None:
    folder_runs.start_run(quire, PERSON, "kb", folder)
    drain(quire)


def _add(quire: Quire, path: Path) -> None:
    operations.add_items(quire, "kb", [operations.PathInput(path)])
    drain(quire)


ORDERS: dict[str, list[Callable[[Quire, Path], None]]] = {
    "run a sub-folder, edit, add the folder": [
        lambda q, d: _run(q, d / "sub"),
        lambda q, d: _edit(d),
        lambda q, d: _add(q, d),
    ],
    "add the folder, edit, run a sub-folder": [
        lambda q, d: _add(q, d),
        lambda q, d: _edit(d),
        lambda q, d: _run(q, d / "sub"),
    ],
    "run the folder, edit, run it again": [
        lambda q, d: _run(q, d),
        lambda q, d: _edit(d),
        lambda q, d: _run(q, d),
    ],
    "add a file, edit, run its folder": [
        lambda q, d: _add(q, d / "sub" / "b.txt"),
        lambda q, d: _edit(d),
        lambda q, d: _run(q, d),
    ],
}


def _live_files(quire: Quire) -> Counter[str]:
    found = rows(quire, "SELECT source_path FROM items WHERE type = 'file' AND status != 'deleting'")
    return Counter(r[0] for r in found)


def _keyword(quire: Quire, word: str) -> list[str]:
    return [h.item_name for h in search(quire, "kb", word, mode="keyword", limit=20)]


@pytest.mark.parametrize("order", list(ORDERS), ids=list(ORDERS))
def test_one_live_item_per_source_whatever_the_order(quire: Quire, tmp_path: Path, order: str) -> None:
    base = make_base(quire)
    root = write_tree(tmp_path / "D", TREE)
    for step in ORDERS[order]:
        step(quire, root)
    on_disk = sorted(str(p) for p in root.rglob("*") if p.is_file())
    assert _live_files(quire) == Counter(on_disk)  # exactly one live item per file, none for anything else
    with quire.db.read() as conn:
        assert duplicate_sources(conn, base.id) == []
    assert _keyword(quire, NEW_WORD) == ["b.txt"]
    assert _keyword(quire, OLD_WORD) == []
    for word in KEPT_WORDS:
        assert len(_keyword(quire, word)) == 1, word
    active = scalar(quire, "SELECT count(*) FROM items WHERE status NOT IN ('completed', 'skipped', 'deleting')")
    assert active == 0


def test_reverting_the_run_removes_only_its_items_and_the_folder_takes_the_files_next(
    quire: Quire, tmp_path: Path
) -> None:
    make_base(quire)
    root = write_tree(tmp_path / "D", TREE)
    started = folder_runs.start_run(quire, PERSON, "kb", root / "sub")
    drain(quire)
    _add(quire, root)  # the folder leaves sub/b.txt and sub/c.txt to the run's items
    run_items = {
        r[0] for r in rows(quire, "SELECT source_path FROM items WHERE run_id = :r AND type = 'file'", r=started.run_id)
    }
    assert run_items == {str(root / "sub" / "b.txt"), str(root / "sub" / "c.txt")}
    assert _live_files(quire) == Counter(str(p) for p in root.rglob("*") if p.is_file())

    folder_runs.revert_run(quire, PERSON, started.run_id)
    drain(quire)
    assert _live_files(quire) == Counter([str(root / "a.txt")])  # the run's files went, the folder's stayed
    assert _keyword(quire, OLD_WORD) == [] and _keyword(quire, "alfalfa") == ["a.txt"]

    _add(quire, root)  # the folder re-walked: it takes the files the run no longer stands for
    assert _live_files(quire) == Counter(str(p) for p in root.rglob("*") if p.is_file())
    assert _keyword(quire, OLD_WORD) == ["b.txt"]
