"""Delete wins reindex races (both checks); recovery never turns deleting rows into anything else; late jobs
never overwrite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge.ingest.remote import CallSettings, RemoteConfig
from knowledge.library import bases
from knowledge.lifecycle import index_documents, operations, reindex_subtree
from knowledge.lifecycle.operations import INDEX_DOCUMENTS, PREPARE_ROOT, REINDEX_SUBTREE, NoteInput, PathInput
from knowledge.runtime import Quire
from tests.knowledge.helpers import die_in_flight, drain, make_base, recover_as_a_new_start
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


@pytest.mark.parametrize("embedder", [None, "remote"])
def test_recovery_of_an_index_batch_never_touches_deleting_items(quire: Quire, embedder: str | None) -> None:
    """The hook really registered for index-documents (run by recovery as a new start runs it) requeues (local
    model) or parks (remote endpoint) the live items of a killed batch; the deleted one stays deleting."""
    base = make_base(quire) if embedder is None else _remote_base(quire)
    changes = operations.add_items(quire, base.id, [NoteInput("first"), NoteInput("second")])
    deleted, live = changes.created
    operations.delete_items(quire, base.id, [deleted])
    die_in_flight(quire, changes.job_ids[0], [live])
    recover_as_a_new_start(quire)
    st = item_statuses(quire)
    assert st[deleted] == "deleting"
    assert st[live] == ("processing" if embedder is None else "failed")


def test_recovery_never_turns_deleting_into_anything_else(quire: Quire, folder: int) -> None:
    """Every abandon hook registered (prepare-root, index-documents, reindex-subtree) and every repair scan,
    over a subtree whose child is being deleted: the deleting rows stay deleting until their cleanup ends."""
    children = {i.name: i.id for i in operations.list_items(quire, "kb", parent_id=folder)}
    operations.delete_items(quire, "kb", [children["a.txt"]])
    base_id = operations.get_item(quire, "kb", folder).base_id
    with quire.db.write() as conn:  # what a killed worker could have been running over this subtree
        killed = [
            quire.queue.enqueue(conn, PREPARE_ROOT, {"base_id": base_id, "item_id": folder}).job_id,
            quire.queue.enqueue(
                conn, INDEX_DOCUMENTS, {"base_id": base_id, "item_ids": [children["a.txt"], children["b.txt"]]}
            ).job_id,
            quire.queue.enqueue(conn, REINDEX_SUBTREE, {"base_id": base_id, "root_ids": [folder]}).job_id,
        ]
        conn.execute(text("UPDATE items SET status = 'processing' WHERE id = :i"), {"i": children["b.txt"]})
    for job_id in killed:
        die_in_flight(quire, job_id, [])
    recover_as_a_new_start(quire)
    assert {quire.queue.get(j).status for j in killed} == {"cancelled"}
    assert item_statuses(quire)[children["a.txt"]] == "deleting"
    drain(quire)
    assert children["a.txt"] not in item_statuses(quire)  # its cleanup ran; it never came back


def _remote_base(quire: Quire) -> bases.Base:
    """A base on a remote endpoint nobody listens on (no request may reach it in these tests)."""
    config = RemoteConfig("http://127.0.0.1:9", "minilm", 384, None, CallSettings(timeout=5, max_retries=0))
    return bases.create_base(
        quire.db, "remote", model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32", embedder=config.as_json()
    )


def test_index_job_drops_results_for_items_deleted_meanwhile(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    changes = operations.add_items(quire, "kb", [NoteInput("kept note"), NoteInput("deleted note")])
    from knowledge.ingest import material, narrowing

    real_embed = material.embed_batch

    def embed_then_delete(*args: Any, **kwargs: Any) -> None:
        real_embed(*args, **kwargs)
        operations.delete_items(quire, "kb", [changes.created[1]])  # delete preempts active work

    monkeypatch.setattr(narrowing, "embed_batch", embed_then_delete)
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

        written = index_documents._commit_outcomes(
            quire, conn, get_base(quire.db, "kb"), [stale], {item_id: 0}
        )
    assert written == 0
    assert item_statuses(quire)[item_id] == "processing"


def test_recovery_hooks_are_registered_for_abandon_jobs(quire: Quire) -> None:
    for name in (operations.PREPARE_ROOT, operations.INDEX_DOCUMENTS, operations.REINDEX_SUBTREE):
        spec = quire.registry.get(name)
        assert spec.recovery == "abandon" and spec.on_abandon is not None
    assert quire.registry.get(operations.DELETE_SUBTREE).recovery == "retry"
