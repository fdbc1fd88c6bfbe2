"""Migration ``items_deaths``: the claim counter ``items.attempts`` becomes the death counter ``items.deaths``,
zero for every item (what the old column counted were claims, successful ones included, not deaths)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from knowledge.store import migrations as mig
from knowledge.store.database import Database
from tests.support.migrations import migrate_before

DEATHS = "0022_items_deaths"


def test_claims_counted_before_become_zero_deaths(tmp_path: Path) -> None:
    db = Database.in_dir(tmp_path)
    migrate_before(db, DEATHS)
    with db.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO bases (id, name, model_id, dimension, precision, chunk_size, chunk_overlap, created_at,"
            " updated_at) VALUES (1, 'kb', 'm', 3, 'fp32', 256, 32, 0, 0)"
        )
        conn.exec_driver_sql(
            "INSERT INTO items (id, base_id, type, name, status, attempts, created_at, updated_at)"
            " VALUES (1, 1, 'file', 'indexed-twice.txt', 'completed', 2, 0, 0),"
            " (2, 1, 'file', 'fresh.txt', 'processing', 0, 0, 0)"
        )

    assert DEATHS in mig.migrate(db)

    with db.read() as conn:
        columns = {r[1] for r in conn.execute(text("PRAGMA table_info(items)")).all()}
        assert "deaths" in columns and "attempts" not in columns
        rows = conn.execute(text("SELECT name, status, deaths FROM items ORDER BY id")).all()
        assert [tuple(r) for r in rows] == [("indexed-twice.txt", "completed", 0), ("fresh.txt", "processing", 0)]
        assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
    assert mig.migrate(db) == []  # applied once, recorded
