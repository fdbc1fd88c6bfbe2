"""Delete wins reindex races (both checks); deleting rows never become failed; late jobs never overwrite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge.lifecycle import index_documents, operations, recovery, reindex_subtree
from knowledge.lifecycle.operations import NoteInput, PathInput
from knowledge.runtime import Quire
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree


def item_statuses(quire: Quire) -> dict[int, str]:
    with quire.db.read() as conn:
        return {r[0]: r[1] for r in conn.execute(text("SELECT id, status FROM items")).all()}


@pytest.fixture
def folder(quire: Quire, tmp_path: Path) -> int:
    make_base(quire)
    write_tree(tmp_path / "docs", {"a.txt": "alpha", "b.txt": "beta"})
    root = operations.add_items(quire, "kb", [PathInput(tmp_path / "docs")]).created[0]
    drain(quire)
    return root


def test_delete_after_reindex_enqueue_wins_at_job_entry(quire: Quire, folder: int) -> None:
    reindex = operations.reindex_items(quire, "kb", [folder]).job_ids[0]
    operations.delete_items(quire, "kb", [folder])  # lands between enqueue and execution
    drain(quire)
    assert quire.queue.get(reindex).result == {"skipped": "deleting"}
    assert item_statuses(quire) == {}  # cleaned up, never turned back to preparing


def test_delete_during_reindex_entry_wins_at_the_write_check(
    quire: Quire, folder: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job passes its entry check; delete commits before its write transaction begins."""
    real = reindex_subtree._deleting_or_missing
    calls: list[bool] = []

    def entry_check_then_delete(conn: Any, root_ids: Any) -> bool:
        result = real(conn, root_ids)
        if not calls:
            operations.delete_items(quire, "kb", [folder])  # another caller, between the two checks
        calls.append(result)
        return result

    monkeypatch.setattr(reindex_subtree, "_deleting_or_missing", entry_check_then_delete)
    reindex = operations.reindex_items(quire, "kb", [folder]).job_ids[0]
    seen: list[dict[int, str]] = []
    drain(quire)
    seen.append(item_statuses(quire))
    assert calls == [False, True]
    assert quire.queue.get(reindex).result == {"skipped": "deleting"}
    assert seen == [{}]


def test_interrupted_hook_never_turns_deleting_into_failed(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    changes = operations.add_items(quire, "kb", [NoteInput("first"), NoteInput("second")])
    job_id = changes.job_ids[0]
    operations.delete_items(quire, "kb", [changes.created[0]])
    record = quire.queue.get(job_id)
    with quire.db.write() as conn:
        recovery.on_abandon_index(conn, record)
    st = item_statuses(quire)
    assert st[changes.created[0]] == "deleting"
    assert st[changes.created[1]] == "failed"


def test_index_job_drops_results_for_items_deleted_meanwhile(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    changes = operations.add_items(quire, "kb", [NoteInput("kept note"), NoteInput("deleted note")])
    from knowledge.ingest import material

    real_embed = material.embed_batch

    def embed_then_delete(*args: Any, **kwargs: Any) -> None:
        real_embed(*args, **kwargs)
        operations.delete_items(quire, "kb", [changes.created[1]])  # delete preempts active work

    monkeypatch.setattr(index_documents, "embed_batch", embed_then_delete)
    drain(quire)
    st = item_statuses(quire)
    assert st == {changes.created[0]: "completed"}
    with quire.db.read() as conn:
        texts = [r[0] for r in conn.execute(text("SELECT text FROM chunks")).all()]
    assert texts == ["kept note"]


def test_late_job_never_overwrites_a_newer_generation(quire: Quire) -> None:
    make_base(quire)
    changes = operations.add_items(quire, "kb", [NoteInput("original")])
    item_id = changes.created[0]
    drain(quire)
    # A reindex resets the item (generation + 1); a stale job of the old generation then reaches its write.
    with quire.db.write() as conn:
        conn.execute(text("UPDATE items SET status='processing', generation=generation+1 WHERE id=:i"), {"i": item_id})
    from knowledge.ingest.material import Prepared

    stale = Prepared(
        item=operations.get_item(quire, "kb", item_id),
        raw=None,
        raw_sha=None,
        text="stale",
        text_sha="x",
        parser="note",
        parser_version="0",
        metadata={},
        rows=[],
    )
    with quire.db.write() as conn:
        from knowledge.library.bases import get_base

        written = index_documents._commit_outcomes(quire, conn, get_base(quire.db, "kb"), [stale], {item_id: 0})
    assert written == 0
    assert item_statuses(quire)[item_id] == "processing"


def test_recovery_hooks_are_registered_for_abandon_jobs(quire: Quire) -> None:
    for name in (operations.PREPARE_ROOT, operations.INDEX_DOCUMENTS, operations.REINDEX_SUBTREE):
        spec = quire.registry.get(name)
        assert spec.recovery == "abandon" and spec.on_abandon is not None
    assert quire.registry.get(operations.DELETE_SUBTREE).recovery == "retry"
