"""Migration ``folder_run_cancelled``: a run of a database made before it may end ``cancelled`` (the status CHECK
widened in place, the forward-only trigger allowing pending | running → cancelled → reverted) and ``cancelled``
is one of the one terminal entry a run files."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from knowledge.store import migrations as mig
from knowledge.store.database import Database
from tests.support.migrations import migrate_before

CANCELLED = "0028_folder_run_cancelled"
ENTRY = "INSERT INTO audit_log (at, action, actor, run_id, payload) VALUES (1, :a, 'system', :r, '{}')"


def _older_database_with_runs(tmp_path: Path) -> Database:
    db = Database.in_dir(tmp_path)
    migrate_before(db, CANCELLED)
    with db.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO bases (id, name, model_id, dimension, precision, chunk_size, chunk_overlap, created_at,"
            " updated_at) VALUES (1, 'kb', 'm', 3, 'fp32', 256, 32, 0, 0)"
        )
        for run_id, status in ((1, "pending"), (2, "running")):
            conn.execute(
                text(
                    "INSERT INTO folder_runs (id, base_id, folder, idempotency_key, request_fingerprint, approved_by,"
                    " status, declared_size, walked, created_at, updated_at)"
                    " VALUES (:i, 1, '/f', :k, 'fp', 'person:ada', :s, 3, 3, 0, 0)"
                ),
                {"i": run_id, "k": f"key-{run_id}", "s": status},
            )
        conn.execute(text(ENTRY), {"a": "ingest.folder_run.cancelled", "r": 2})  # unknown to the old index
    return db


def test_runs_made_before_may_be_cancelled_once_migrated(tmp_path: Path) -> None:
    db = _older_database_with_runs(tmp_path)
    with pytest.raises(sa_exc.IntegrityError), db.write() as conn:  # the old CHECK and trigger refuse it
        conn.exec_driver_sql("UPDATE folder_runs SET status = 'cancelled' WHERE id = 2")

    assert CANCELLED in mig.migrate(db)

    with db.write() as conn:
        conn.exec_driver_sql("UPDATE folder_runs SET status = 'cancelled' WHERE id IN (1, 2)")
    with pytest.raises(sa_exc.IntegrityError, match="illegal folder run status transition"), db.write() as conn:
        conn.exec_driver_sql("UPDATE folder_runs SET status = 'running' WHERE id = 1")
    with pytest.raises(sa_exc.IntegrityError, match=r"(?i)unique"), db.write() as conn:
        conn.execute(text(ENTRY), {"a": "ingest.folder_run.completed", "r": 2})  # a second terminal entry
    with db.write() as conn:
        conn.exec_driver_sql("UPDATE folder_runs SET status = 'reverted' WHERE id = 2")
    with db.read() as conn:
        statuses = conn.execute(text("SELECT id, status FROM folder_runs ORDER BY id")).all()
        assert [tuple(r) for r in statuses] == [(1, "cancelled"), (2, "reverted")]
        assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
    assert mig.migrate(db) == []  # applied once, recorded
