"""``add`` of a file below a folder run's container that the run did not ingest, when a folder added before the
run already holds it: the folder's item keeps standing for it (read again if it changed), no root of its own is
made beside it — which the schema would now refuse (one live item per source)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from knowledge import folder_runs
from knowledge.folder_runs import commit
from knowledge.lifecycle import ALREADY_COVERED, operations
from knowledge.lifecycle.identity import duplicate_sources
from knowledge.runtime import Quire
from knowledge.search import search
from tests.folder_runs.helpers import PERSON, drain, make_base, rows
from tests.support.files import write_tree

TREE = {"a.txt": "The first note mentions alfalfa.", "sub/b.txt": "The second note mentions bergamot."}


def test_adding_a_file_a_folder_holds_below_a_runs_container_reuses_the_folders_item(
    quire: Quire, tmp_path: Path
) -> None:
    base = make_base(quire)
    root = write_tree(tmp_path / "D", TREE)
    folder = operations.add_items(quire, "kb", [operations.PathInput(root)]).created[0]
    drain(quire)
    (root / "sub" / "c.txt").write_text("A third note mentions cardamom.", encoding="utf-8")
    folder_runs.start_run(quire, PERSON, "kb", root / "sub")  # b.txt: already covered; c.txt: the run's
    drain(quire)
    b = root / "sub" / "b.txt"
    before = b.stat()
    b.write_text("The second note, rewritten, mentions quinceblossom.", encoding="utf-8")
    os.utime(b, ns=(before.st_atime_ns, before.st_mtime_ns + 5_000_000_000))

    changes = operations.add_items(quire, "kb", [operations.PathInput(b)])
    drain(quire)

    [outcome] = changes.outcomes
    assert (outcome.outcome, outcome.item_id, outcome.refreshed) == (ALREADY_COVERED, folder, True)
    live = rows(quire, "SELECT source_path FROM items WHERE type = 'file' AND status != 'deleting'")
    assert Counter(r[0] for r in live) == Counter(str(p) for p in root.rglob("*") if p.is_file())
    with quire.db.read() as conn:
        assert duplicate_sources(conn, base.id) == []
    assert [h.item_name for h in search(quire, "kb", "quinceblossom", mode="keyword", limit=5)] == ["b.txt"]
    assert [h.item_name for h in search(quire, "kb", "bergamot", mode="keyword", limit=5)] == []


def test_a_run_that_meets_another_writers_item_for_its_file_settles_it_covered(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's item for the file lands between the run's check and its insert (a team store's writers
    do not queue on one lock): the database refuses the run's second item, and the run judges the source again
    in a new transaction, settling it ``already_covered`` with that item instead of failing."""
    make_base(quire)
    root = write_tree(tmp_path / "D", TREE)
    b = root / "sub" / "b.txt"
    operations.add_items(quire, "kb", [operations.PathInput(b)])
    drain(quire)
    before = b.stat()
    b.write_text("The second note, rewritten, mentions quinceblossom.", encoding="utf-8")  # not covered by content
    os.utime(b, ns=(before.st_atime_ns, before.st_mtime_ns + 5_000_000_000))
    real, missed = commit.find_live_file, []

    def not_yet(conn: Any, base_id: int, key: str) -> Any:
        if key == str(b) and not missed:
            missed.append(key)
            return None  # as if the other writer's item were not committed yet
        return real(conn, base_id, key)

    monkeypatch.setattr(commit, "find_live_file", not_yet)
    started = folder_runs.start_run(quire, PERSON, "kb", root / "sub")
    drain(quire)

    assert missed
    run = folder_runs.show_run(quire, started.run_id)
    assert run.summary.run.status == "completed"
    assert {s.relative_path: s.disposition for s in run.sources} == {"b.txt": "already_covered"}
    live = rows(quire, "SELECT source_path FROM items WHERE type = 'file' AND status != 'deleting'")
    assert Counter(r[0] for r in live) == Counter([str(b)])  # one item for b.txt: the one added first
    assert [h.item_name for h in search(quire, "kb", "quinceblossom", mode="keyword", limit=5)] == ["b.txt"]
