"""Migration ``items_skipped_status``: a database made before issue 12 accepts ``skipped``, keeps its rows
and chunks (the CHECK is edited in place, never by a table rebuild that would cascade), and still refuses
statuses nobody defined — also on connections that were open before the migration ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from knowledge.store import migrations as mig
from knowledge.store.database import Database
from tests.support.migrations import migrate_before

SKIPPED = "0015_items_skipped_status"


def test_old_database_accepts_skipped_and_keeps_its_chunks(tmp_path: Path) -> None:
    db = Database.in_dir(tmp_path)
    migrate_before(db, SKIPPED)
    with db.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO bases (id, name, model_id, dimension, precision, chunk_size, chunk_overlap, created_at,"
            " updated_at) VALUES (1, 'kb', 'm', 3, 'fp32', 256, 32, 0, 0)"
        )
        conn.exec_driver_sql(
            "INSERT INTO items (id, base_id, type, name, status, created_at, updated_at)"
            " VALUES (1, 1, 'file', 'a.txt', 'completed', 0, 0)"
        )
        conn.exec_driver_sql(
            'INSERT INTO chunks (base_id, item_id, ordinal, text, start, "end", token_count, text_sha256)'
            " VALUES (1, 1, 0, 'alpha', 0, 5, 1, 'x')"
        )
    with pytest.raises(sa_exc.IntegrityError), db.write() as conn:  # before: refused by the old CHECK
        conn.exec_driver_sql("UPDATE items SET status = 'skipped' WHERE id = 1")

    assert mig.migrate(db)[0] == SKIPPED  # pooled connections opened above must see the new schema too

    with db.write() as conn:
        conn.exec_driver_sql("UPDATE items SET status = 'skipped' WHERE id = 1")
    with pytest.raises(sa_exc.IntegrityError), db.write() as conn:
        conn.exec_driver_sql("UPDATE items SET status = 'ignored' WHERE id = 1")
    with db.read() as conn:
        assert conn.execute(text("SELECT status FROM items WHERE id = 1")).scalar_one() == "skipped"
        assert conn.execute(text("SELECT count(*) FROM chunks WHERE item_id = 1")).scalar_one() == 1
        assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
        assert conn.execute(text("PRAGMA foreign_key_check")).all() == []
    assert mig.migrate(db) == []  # applied once, recorded


def test_fresh_database_accepts_skipped(tmp_path: Path) -> None:
    db = Database.in_dir(tmp_path)
    mig.migrate(db)
    with db.read() as conn:
        sql = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'items'")).scalar_one()
    assert "'failed', 'skipped', 'deleting'" in sql
