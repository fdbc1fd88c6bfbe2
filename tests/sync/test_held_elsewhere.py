"""Sync keeps one live item per source: a file of a synced folder that a folder run's item already stands for
gets no second item in the folder's tree (the run's item keeps it, and is read again where it is when the file
changes), and a row moved onto such a file goes."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from knowledge import folder_runs, sync
from knowledge.lifecycle import PathInput, add_items
from knowledge.lifecycle.identity import duplicate_sources
from knowledge.runtime import Quire
from knowledge.search import search
from tests.folder_runs.helpers import PERSON, drain, make_base, rows
from tests.support.files import write_tree
from tests.sync.helpers import reconcile_now

TREE = {"a.txt": "The first note mentions alfalfa.", "sub/b.txt": "The second note mentions bergamot."}


def _live_files(quire: Quire) -> Counter[str]:
    found = rows(quire, "SELECT source_path FROM items WHERE type = 'file' AND status != 'deleting'")
    return Counter(r[0] for r in found)


def _hits(quire: Quire, word: str) -> list[str]:
    return [h.item_name for h in search(quire, "kb", word, mode="keyword", limit=20)]


def _rewrite(path: Path, text: str) -> None:
    before = path.stat()
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 5_000_000_000))  # a later mtime whatever the clock


def _run_sub_then_sync_folder(quire: Quire, root: Path) -> sync.SyncRoot:
    make_base(quire)
    folder_runs.start_run(quire, PERSON, "kb", root / "sub")
    drain(quire)
    changes = add_items(quire, "kb", [PathInput(root)])  # the folder leaves sub/b.txt to the run's item
    drain(quire)
    synced = sync.enable_sync(quire, "kb", changes.created[0], mode="auto")
    drain(quire)  # its first reconcile finds sub/b.txt outside the folder's tree
    return synced


def test_a_synced_folder_makes_no_second_item_for_a_run_file(quire: Quire, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "D", TREE)
    synced = _run_sub_then_sync_folder(quire, root)
    assert _live_files(quire) == Counter(str(p) for p in root.rglob("*") if p.is_file())

    _rewrite(root / "sub" / "b.txt", "The second note, rewritten, mentions quinceblossom.")
    reconcile_now(quire, synced.id)
    drain(quire)
    assert _live_files(quire) == Counter(str(p) for p in root.rglob("*") if p.is_file())
    with quire.db.read() as conn:
        assert duplicate_sources(conn, synced.base_id) == []
    assert _hits(quire, "quinceblossom") == ["b.txt"]  # the run's item, read again where it is
    assert _hits(quire, "bergamot") == []


def test_a_row_moved_onto_a_run_file_goes(quire: Quire, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "D", TREE)
    synced = _run_sub_then_sync_folder(quire, root)
    os.replace(root / "a.txt", root / "sub" / "b.txt")  # a.txt's bytes now lie where the run's item stands
    reconcile_now(quire, synced.id)
    drain(quire)
    assert _live_files(quire) == Counter([str(root / "sub" / "b.txt")])
    assert _hits(quire, "alfalfa") == ["b.txt"]  # the run's item holds the file now, read again
    assert _hits(quire, "bergamot") == []
