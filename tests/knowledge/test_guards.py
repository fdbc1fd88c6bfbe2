"""One test per guard and compensation rule of adding, deleting, reindexing and listing chunks, on both engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from jobs.errors import EnqueueError
from knowledge.errors import Conflict, GuardRejected, InvalidInput, NotFound
from knowledge.library import bases
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import NoteInput, PathInput
from knowledge.runtime import Quire
from tests.knowledge.helpers import drain, make_base, statuses
from tests.sources.builders import make_pdf
from tests.support.engine_fixtures import ENGINES, engine_quire, second_session
from tests.support.files import write_tree

quire = pytest.fixture(params=ENGINES)(engine_quire)  # every test here runs on SQLite and on PostgreSQL


def fail_enqueue_on(quire: Quire, monkeypatch: pytest.MonkeyPatch, call: int) -> list[str]:
    """Make the n-th enqueue (1-based) raise, as a full disk or a broken queue would."""
    real = quire.queue.enqueue
    seen: list[str] = []

    def enqueue(conn: Any, job_type: str, payload: dict[str, Any], **kw: Any) -> Any:
        seen.append(job_type)
        if len(seen) == call:
            raise EnqueueError("injected enqueue failure")
        return real(conn, job_type, payload, **kw)

    monkeypatch.setattr(quire.queue, "enqueue", enqueue)
    return seen


def job_count(quire: Quire) -> int:
    with quire.db.read() as conn:
        return int(conn.execute(text("SELECT count(*) FROM jobs")).scalar_one())


def item_status(quire: Quire, item_id: int) -> str:
    return operations.get_item(quire, "kb", item_id).status


def set_item_status(quire: Quire, item_id: int, status: str) -> None:
    from knowledge.library import tree

    with quire.db.write() as conn:
        tree.set_status(conn, [item_id], status)


# -- add ---------------------------------------------------------------------------------------


def test_add_rejects_a_failed_base(quire: Quire, tmp_path: Path) -> None:
    base = make_base(quire)
    bases.mark_base_failed(quire.db, base.id, "index missing")
    with pytest.raises(Conflict, match="failed"):
        operations.add_items(quire, "kb", [NoteInput("hello")])
    assert job_count(quire) == 0


def test_add_rejects_a_locked_base(quire: Quire) -> None:
    make_base(quire)
    bases.set_locked(quire.db, "kb", True)
    with pytest.raises(Conflict, match="locked"):
        operations.add_items(quire, "kb", [NoteInput("hello")])


def test_add_with_no_inputs_is_a_noop(quire: Quire) -> None:
    make_base(quire)
    changes = operations.add_items(quire, "kb", [])
    assert changes.noop and changes.created == [] and job_count(quire) == 0


def test_add_sets_containers_preparing_and_leaves_processing(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    write_tree(tmp_path / "folder", {"a.txt": "alpha"})
    write_tree(tmp_path, {"b.txt": "beta"})
    changes = operations.add_items(quire, "kb", [PathInput(tmp_path / "folder"), PathInput(tmp_path / "b.txt")])
    folder_id, file_id = changes.created
    assert item_status(quire, folder_id) == "preparing"
    assert item_status(quire, file_id) == "processing"
    with quire.db.read() as conn:
        types = [r[0] for r in conn.execute(text("SELECT type FROM jobs ORDER BY id")).all()]
    assert types == [operations.PREPARE_ROOT, operations.INDEX_DOCUMENTS]


def test_add_of_a_file_quire_does_not_read_is_skipped_without_a_job(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    (tmp_path / "layers.psd").write_bytes(b"8BPS" + bytes(64))  # a type Quire does not read: skipped by design
    changes = operations.add_items(quire, "kb", [PathInput(tmp_path / "layers.psd")])
    item = operations.get_item(quire, "kb", changes.created[0])
    assert (item.status, item.error_code) == ("skipped", "unsupported_type")
    assert job_count(quire) == 0


def test_add_of_a_missing_path_is_refused_up_front(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    with pytest.raises(NotFound):
        operations.add_items(quire, "kb", [PathInput(tmp_path / "missing.txt")])
    assert operations.list_items(quire, "kb", flat=True) == [] and job_count(quire) == 0


def test_add_enqueue_failure_fails_the_failing_and_later_items_only(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    write_tree(tmp_path / "one", {"a.txt": "alpha"})
    write_tree(tmp_path / "two", {"b.txt": "beta"})
    write_tree(tmp_path / "three", {"c.txt": "gamma"})
    fail_enqueue_on(quire, monkeypatch, call=2)
    inputs = [PathInput(tmp_path / n) for n in ("one", "two", "three")]
    with pytest.raises(EnqueueError, match="injected"):
        operations.add_items(quire, "kb", inputs)
    found = {i.name: i for i in operations.list_items(quire, "kb", flat=True)}
    assert found["one"].status == "preparing"  # scheduled before the failure: left alone
    assert (found["two"].status, found["two"].error_code) == ("failed", "enqueue_failed")
    assert (found["three"].status, found["three"].error_code) == ("failed", "enqueue_failed")
    assert job_count(quire) == 1


# -- delete ------------------------------------------------------------------------------------


@pytest.fixture
def indexed(quire: Quire, tmp_path: Path) -> dict[str, int]:
    """A completed folder (two files in a sub-folder) and a completed note."""
    make_base(quire)
    write_tree(tmp_path / "docs", {"sub/a.txt": "alpha particles", "sub/b.txt": "beta decay"})
    changes = operations.add_items(quire, "kb", [PathInput(tmp_path / "docs"), NoteInput("gamma rays")])
    drain(quire)
    ids = {i.relative_path or i.name: i.id for i in operations.list_items(quire, "kb", flat=True)}
    assert set(statuses(quire, changes.base_id).values()) == {"completed"}
    return ids


def test_delete_dedupes_collapses_nested_and_uses_the_key(quire: Quire, indexed: dict[str, int]) -> None:
    docs, sub, a = indexed["docs"], indexed["sub"], indexed["sub/a.txt"]
    changes = operations.delete_items(quire, "kb", [a, sub, docs, docs])
    assert set(changes.statuses) == {docs, sub, a, indexed["sub/b.txt"]}
    job = quire.queue.get(changes.job_ids[0])
    assert job.payload["root_ids"] == [docs]
    assert job.idempotency_key == f"knowledge:{changes.base_id}:{docs}:delete"


def test_delete_rejects_items_outside_the_base(quire: Quire, indexed: dict[str, int]) -> None:
    make_base(quire, "other")
    with pytest.raises(NotFound):
        operations.delete_items(quire, "other", [indexed["docs"]])
    with pytest.raises(NotFound):
        operations.delete_items(quire, "kb", [999_999])
    assert item_status(quire, indexed["docs"]) == "completed"


def test_delete_with_no_ids_is_a_noop(quire: Quire, indexed: dict[str, int]) -> None:
    before = job_count(quire)
    assert operations.delete_items(quire, "kb", []).noop
    assert job_count(quire) == before


def test_delete_enqueue_failure_changes_nothing(
    quire: Quire, indexed: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = job_count(quire)
    fail_enqueue_on(quire, monkeypatch, call=1)
    with pytest.raises(EnqueueError):
        operations.delete_items(quire, "kb", [indexed["docs"]])
    assert item_status(quire, indexed["docs"]) == "completed"
    assert item_status(quire, indexed["sub/a.txt"]) == "completed"
    assert job_count(quire) == before


def test_delete_works_on_a_failed_base(quire: Quire, indexed: dict[str, int]) -> None:
    bases.mark_base_failed(quire.db, bases.get_base(quire.db, "kb").id, "cannot open index")
    operations.delete_items(quire, "kb", [indexed["gamma rays"]])
    drain(quire)
    with pytest.raises(NotFound):
        operations.get_item(quire, "kb", indexed["gamma rays"])


def test_deleting_is_hidden_from_listing_at_once(quire: Quire, indexed: dict[str, int]) -> None:
    operations.delete_items(quire, "kb", [indexed["sub"]])
    visible = {i.id for i in operations.list_items(quire, "kb", flat=True)}
    assert indexed["sub"] not in visible and indexed["sub/a.txt"] not in visible
    assert indexed["docs"] in visible


# -- reindex -----------------------------------------------------------------------------------


def test_reindex_rejects_a_failed_base(quire: Quire, indexed: dict[str, int]) -> None:
    bases.mark_base_failed(quire.db, bases.get_base(quire.db, "kb").id, "x")
    with pytest.raises(Conflict):
        operations.reindex_items(quire, "kb", [indexed["docs"]])


def test_reindex_rejects_foreign_ids(quire: Quire, indexed: dict[str, int]) -> None:
    make_base(quire, "other")
    with pytest.raises(NotFound):
        operations.reindex_items(quire, "other", [indexed["docs"]])


@pytest.mark.parametrize("status", ["idle", "preparing", "processing", "reading", "embedding", "deleting"])
def test_reindex_rejects_non_terminal_subtrees(quire: Quire, indexed: dict[str, int], status: str) -> None:
    with quire.db.write() as conn:
        conn.execute(text("UPDATE items SET status = :s WHERE id = :i"), {"s": status, "i": indexed["sub/b.txt"]})
    before = job_count(quire)
    with pytest.raises(GuardRejected, match=status):
        operations.reindex_items(quire, "kb", [indexed["docs"]])
    assert job_count(quire) == before


def test_reindex_collapses_writes_no_status_and_uses_the_key(quire: Quire, indexed: dict[str, int]) -> None:
    changes = operations.reindex_items(quire, "kb", [indexed["sub/a.txt"], indexed["docs"], indexed["docs"]])
    assert changes.statuses == {}
    assert statuses(quire, changes.base_id)["docs"] == "completed"
    job = quire.queue.get(changes.job_ids[0])
    assert job.payload["root_ids"] == [indexed["docs"]]
    assert job.idempotency_key == f"knowledge:{changes.base_id}:{indexed['docs']}:reindex"
    assert operations.reindex_items(quire, "kb", []).noop


def test_reindex_enqueue_failure_writes_no_status(
    quire: Quire, indexed: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_enqueue_on(quire, monkeypatch, call=1)
    with pytest.raises(EnqueueError):
        operations.reindex_items(quire, "kb", [indexed["docs"]])
    assert set(statuses(quire, bases.get_base(quire.db, "kb").id).values()) == {"completed"}


def test_reindex_job_schedule_failure_marks_roots_failed(
    quire: Quire, indexed: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    operations.reindex_items(quire, "kb", [indexed["docs"], indexed["gamma rays"]])
    fail_enqueue_on(quire, monkeypatch, call=1)  # the job's own scheduling of the roots
    drain(quire)
    assert item_status(quire, indexed["docs"]) == "failed"
    assert item_status(quire, indexed["gamma rays"]) == "failed"


def test_reindex_brings_a_failed_item_back(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    path = tmp_path / "late.pdf"
    path.write_bytes(b"%PDF-1.4 this is not a PDF at all")  # corrupt: a parse error, which is a failure
    changes = operations.add_items(quire, "kb", [PathInput(path)])
    drain(quire)
    assert item_status(quire, changes.created[0]) == "failed"
    path.write_bytes(make_pdf([["now it has text"]]))  # a failed item is terminal, so it can be reindexed
    operations.reindex_items(quire, "kb", changes.created)
    drain(quire)
    assert item_status(quire, changes.created[0]) == "completed"


# -- chunk listing -----------------------------------------------------------------------------


def test_chunks_reject_a_failed_base_and_foreign_items(quire: Quire, indexed: dict[str, int]) -> None:
    make_base(quire, "other")
    with pytest.raises(NotFound):
        operations.list_item_chunks(quire, "other", indexed["sub/a.txt"])
    bases.mark_base_failed(quire.db, bases.get_base(quire.db, "kb").id, "x")
    with pytest.raises(Conflict):
        operations.list_item_chunks(quire, "kb", indexed["sub/a.txt"])


def test_chunks_only_for_completed_items(quire: Quire, indexed: dict[str, int]) -> None:
    chunks = operations.list_item_chunks(quire, "kb", indexed["sub/a.txt"])
    assert [c["text"] for c in chunks] == ["alpha particles"]
    assert chunks[0]["line_start"] == 1
    set_item_status(quire, indexed["sub/a.txt"], "processing")
    with pytest.raises(GuardRejected, match="completed"):
        operations.list_item_chunks(quire, "kb", indexed["sub/a.txt"])


def test_container_stays_completed_while_a_child_is_deleting_but_chunks_refuse(
    quire: Quire, indexed: dict[str, int]
) -> None:
    operations.delete_items(quire, "kb", [indexed["sub/a.txt"]])
    assert item_status(quire, indexed["sub"]) == "completed"
    with pytest.raises(GuardRejected, match="deleted"):
        operations.list_item_chunks(quire, "kb", indexed["sub"])
    drain(quire)
    assert [c["text"] for c in operations.list_item_chunks(quire, "kb", indexed["sub"])] == ["beta decay"]


# -- reconciliation ----------------------------------------------------------------------------


def test_container_status_follows_children(quire: Quire, indexed: dict[str, int]) -> None:
    set_item_status(quire, indexed["sub/a.txt"], "failed")
    assert item_status(quire, indexed["sub"]) == "failed"
    assert item_status(quire, indexed["docs"]) == "failed"
    set_item_status(quire, indexed["sub/b.txt"], "embedding")
    assert item_status(quire, indexed["sub"]) == "processing"
    assert item_status(quire, indexed["docs"]) == "processing"
    set_item_status(quire, indexed["sub/b.txt"], "completed")
    set_item_status(quire, indexed["sub/a.txt"], "completed")
    assert item_status(quire, indexed["docs"]) == "completed"


def test_invalid_arguments_are_refused(quire: Quire) -> None:
    make_base(quire)
    with pytest.raises(InvalidInput):
        operations.add_items(quire, "kb", [NoteInput("   ")])
    with pytest.raises(NotFound):
        operations.add_items(quire, "no-such-base", [NoteInput("x")])


def test_a_base_whose_index_is_missing_is_failed_at_open(quire: Quire) -> None:
    base = make_base(quire)
    note = operations.add_items(quire, "kb", [NoteInput("keep me listed")]).created[0]
    drain(quire)
    with quire.db.write() as conn:
        conn.exec_driver_sql(f"DROP TABLE vec_base_{base.id}")
    reopened = second_session(quire)
    try:
        failed = bases.get_base(reopened.db, "kb")
        assert failed.status == "failed" and "index" in (failed.status_reason or "")
        with pytest.raises(Conflict, match="failed"):
            operations.add_items(reopened, "kb", [NoteInput("refused")])
        with pytest.raises(Conflict, match="failed"):
            operations.list_item_chunks(reopened, "kb", note)
        assert [i.id for i in operations.list_items(reopened, "kb", flat=True)] == [note]
        operations.delete_items(reopened, "kb", [note])  # delete stays possible
        drain(reopened)
        assert operations.list_items(reopened, "kb", flat=True) == []
    finally:
        reopened.close()
