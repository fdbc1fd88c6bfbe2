"""A folder run looks up, in every source's transaction, the live item that already stands for its file: by
``(base_id, source_path)``, through an index, never a scan of the whole base (migration 0031)."""

from __future__ import annotations

from sqlalchemy import text

from knowledge.runtime import Quire


def test_the_live_file_lookup_by_source_uses_its_index(quire: Quire) -> None:
    with quire.db.read() as conn:
        plan = conn.execute(
            text(
                "EXPLAIN QUERY PLAN SELECT * FROM items WHERE base_id = 1 AND type = 'file' "
                "AND status != 'deleting' AND source_path = '/d/sub/b.txt' ORDER BY id LIMIT 1"
            )
        ).all()
    details = " ".join(str(r[-1]) for r in plan)
    # either index on (base_id, source_path): the unique live one of migration 0033 serves it best
    assert "items_base_source" in details or "items_live_file_source" in details, details
