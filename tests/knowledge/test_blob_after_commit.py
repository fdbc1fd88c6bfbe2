"""Blob files are unlinked only after the transaction that dropped their last reference committed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.library import blobs
from knowledge.runtime import Quire
from knowledge.store.database import Database, after_commit


def _stored(quire: Quire, data: bytes) -> str:
    sha = blobs.sha256_bytes(data)
    with quire.db.write() as conn:
        blobs.record(conn, quire.blobs_dir, sha, data, "raw")
    return sha


def _row_count(quire: Quire, sha: str) -> int:
    with quire.db.read() as conn:
        return int(conn.execute(text("SELECT count(*) FROM blobs WHERE sha256 = :s"), {"s": sha}).scalar_one())


def test_rollback_after_a_purge_keeps_the_file(quire: Quire) -> None:
    sha = _stored(quire, b"kept on rollback")
    with pytest.raises(RuntimeError), quire.db.write() as conn:
        assert blobs.purge_unreferenced(conn, quire.blobs_dir, [sha]) == 1
        assert blobs.blob_path(quire.blobs_dir, sha).exists()  # not unlinked inside the transaction
        raise RuntimeError("the transaction fails after the purge")
    assert blobs.blob_path(quire.blobs_dir, sha).exists()
    assert _row_count(quire, sha) == 1


def test_a_failed_commit_after_a_purge_keeps_the_file(quire: Quire) -> None:
    """A real COMMIT failure: a deferred foreign-key violation makes SQLite refuse the commit."""
    sha = _stored(quire, b"kept when the commit fails")
    with pytest.raises(Exception, match="FOREIGN KEY"), quire.db.write() as conn:
        blobs.purge_unreferenced(conn, quire.blobs_dir, [sha])
        conn.exec_driver_sql("PRAGMA defer_foreign_keys = ON")
        conn.exec_driver_sql(
            'INSERT INTO chunks (base_id, item_id, ordinal, text, start, "end", token_count, text_sha256) '
            "VALUES (424242, 424242, 0, 'x', 0, 1, 1, 'x')"
        )
    assert blobs.blob_path(quire.blobs_dir, sha).exists()
    assert _row_count(quire, sha) == 1


def test_a_committed_purge_unlinks_the_file(quire: Quire) -> None:
    sha = _stored(quire, b"gone after commit")
    with quire.db.write() as conn:
        blobs.purge_unreferenced(conn, quire.blobs_dir, [sha])
    assert not blobs.blob_path(quire.blobs_dir, sha).exists()
    assert _row_count(quire, sha) == 0


def test_a_purge_in_a_rolled_back_savepoint_unlinks_nothing(quire: Quire) -> None:
    sha = _stored(quire, b"savepoint")
    with quire.db.write(), pytest.raises(RuntimeError), quire.db.write() as inner:
        blobs.purge_unreferenced(inner, quire.blobs_dir, [sha])
        raise RuntimeError("the savepoint rolls back")
    assert blobs.blob_path(quire.blobs_dir, sha).exists()
    assert _row_count(quire, sha) == 1


def test_a_blob_recorded_again_before_the_unlink_keeps_its_file(quire: Quire) -> None:
    """A writer that re-records the blob between the purge's commit and its unlink keeps the file."""
    data = b"re-recorded"
    sha = _stored(quire, data)
    with quire.db.write() as conn:
        blobs.purge_unreferenced(conn, quire.blobs_dir, [sha])
        # a writer gets the lock between the purge's commit and its unlink, and records the blob again
        conn.info["quire_after_commit"].insert(0, lambda db: _rerecord(db, quire.blobs_dir, sha, data))
    assert blobs.blob_path(quire.blobs_dir, sha).exists()
    assert _row_count(quire, sha) == 1


def _rerecord(db: Database, root: Path, sha: str, data: bytes) -> None:
    with db.write() as conn:
        blobs.record(conn, root, sha, data, "raw")


def test_after_commit_runs_in_order_outside_the_transaction(quire: Quire) -> None:
    ran: list[tuple[int, bool]] = []
    with quire.db.write() as conn:
        after_commit(conn, lambda db: ran.append((1, db.current_write() is None)))
        after_commit(conn, lambda db: ran.append((2, db.current_write() is None)))
        assert ran == []
    assert ran == [(1, True), (2, True)]


def test_a_crash_between_commit_and_unlink_is_swept(quire: Quire) -> None:
    """The hook never ran (the process died): the file has no row, and the orphan sweep removes it."""
    sha = _stored(quire, b"orphaned by a crash")
    with quire.db.write() as conn:
        blobs.purge_unreferenced(conn, quire.blobs_dir, [sha])
        conn.info["quire_after_commit"].clear()  # as if the process died right after COMMIT
    assert blobs.blob_path(quire.blobs_dir, sha).exists()
    with quire.db.write() as conn:
        assert blobs.sweep_orphan_files(conn, quire.blobs_dir) == 1
    assert not blobs.blob_path(quire.blobs_dir, sha).exists()


def test_temporary_names_are_unique_per_thread(quire: Quire, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real_replace = blobs.os.replace

    def spy(src: Path, dst: Path) -> None:
        seen.append(Path(src).name)
        real_replace(src, dst)

    monkeypatch.setattr(blobs.os, "replace", spy)
    data = b"same blob from two threads"
    sha = blobs.sha256_bytes(data)
    barrier = threading.Barrier(2)

    def write() -> None:
        barrier.wait()
        blobs.write_file(quire.blobs_dir, sha, data)

    threads = [threading.Thread(target=write) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert blobs.blob_path(quire.blobs_dir, sha).read_bytes() == data
    assert len(seen) == len(set(seen)) >= 1


def test_recovery_sweeps_an_orphan_file_and_reports_it(quire: Quire) -> None:
    """The repair scan behind startup recovery (and the worker's periodic repair) removes the file and says
    so in the recovery report; a second start finds nothing left."""
    sha = _stored(quire, b"orphaned by a crash, found at start-up")
    with quire.db.write() as conn:
        blobs.purge_unreferenced(conn, quire.blobs_dir, [sha])
        conn.info["quire_after_commit"].clear()  # as if the process died right after COMMIT
    assert quire.recover().repaired == 1
    assert not blobs.blob_path(quire.blobs_dir, sha).exists()
    assert quire.recover().repaired == 0
