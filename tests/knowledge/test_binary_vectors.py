"""Binary-quantized vectors: kept in step with the float vectors, derived by the migration for old bases,
and a two-stage search (Hamming candidates, float rescoring) whose results match the exact scan.

No model is needed: vectors are written directly through ``knowledge.index`` (clustered random unit
vectors, like real embeddings in that near neighbours share most signs).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from knowledge import index, search
from knowledge.bases import get_base
from knowledge.index import ChunkRow, bits_table, vec_table
from knowledge.operations import create_item
from knowledge.runtime import Quire
from knowledge.store.migrations import migrate
from tests.knowledge.helpers import make_base

DIM = 384


def clustered(rng: np.random.Generator, n: int, centres: int = 40, spread: float = 0.06) -> np.ndarray:
    base = rng.normal(size=(centres, DIM))
    vectors = base[rng.integers(0, centres, n)] / np.sqrt(DIM) + rng.normal(0, spread, (n, DIM))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def fill(quire: Quire, base_id: int, vectors: np.ndarray, per_item: int = 5) -> list[int]:
    items: list[int] = []
    with quire.db.write() as conn:
        for start in range(0, len(vectors), per_item):
            part = vectors[start : start + per_item]
            item = create_item(conn, base_id, "note", f"n{start}", "completed", note_text="x")
            rows = [
                ChunkRow(i, f"chunk {start + i}", 0, 1, None, None, None, 2, f"h{start + i}") for i in range(len(part))
            ]
            index.write_item_material(conn, base_id, item, rows, part)
            items.append(item)
    return items


def count(quire: Quire, table: str) -> int:
    with quire.db.read() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_writes_and_clears_keep_the_binary_table_in_step(quire: Quire) -> None:
    base = make_base(quire)
    vectors = clustered(np.random.default_rng(1), 50)
    items = fill(quire, base.id, vectors)
    assert count(quire, bits_table(base.id)) == count(quire, vec_table(base.id)) == 50
    with quire.db.read() as conn:
        bits = conn.execute(
            text(f"SELECT rowid, vec_to_json(embedding) FROM {bits_table(base.id)} ORDER BY rowid")
        ).all()
        ids = [r[0] for r in conn.execute(text("SELECT id FROM chunks ORDER BY id")).all()]
    assert [r[0] for r in bits] == ids
    signs = np.array([[int(b) for b in r[1].strip("[]").split(",")] for r in bits])
    assert (signs == (vectors > 0)).all()
    with quire.db.write() as conn:
        index.clear_items_material(conn, base.id, items[:4], keep_vectors=True)
    assert count(quire, bits_table(base.id)) == count(quire, vec_table(base.id)) == 30
    with quire.db.write() as conn:
        index.drop_base_index(conn, base.id)
        names = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master")).all()}
    assert bits_table(base.id) not in names


def test_the_migration_derives_binary_vectors_for_an_existing_base(quire: Quire, data_dir: Path) -> None:
    base = make_base(quire)
    fill(quire, base.id, clustered(np.random.default_rng(2), 30))
    with quire.db.write() as conn:  # the database as it was before 0004
        conn.exec_driver_sql(f"DROP TABLE {bits_table(base.id)}")
        conn.execute(text("DELETE FROM schema_migrations WHERE name >= '0004'"))
    applied = migrate(quire.db)
    assert applied[0] == "0004_binary_vectors" and all(name > "0004" for name in applied)
    assert count(quire, bits_table(base.id)) == 30
    with quire.db.read() as conn:
        mismatched = conn.execute(
            text(
                f"SELECT count(*) FROM {bits_table(base.id)} b JOIN {vec_table(base.id)} v ON v.rowid = b.rowid "
                "WHERE vec_to_json(b.embedding) != vec_to_json(vec_quantize_binary(v.embedding))"
            )
        ).scalar_one()
    assert mismatched == 0


def test_a_base_without_its_binary_table_still_writes_and_searches_exactly(quire: Quire) -> None:
    base = make_base(quire)
    with quire.db.write() as conn:
        conn.exec_driver_sql(f"DROP TABLE {bits_table(base.id)}")
    vectors = clustered(np.random.default_rng(3), 40)
    fill(quire, base.id, vectors)
    with quire.db.read() as conn:
        hits = search.vector_candidates(conn, get_base(quire.db, "kb"), vectors[7], 5, None)
    assert hits[0][0].text == "chunk 7" and hits[0][1] == pytest.approx(1.0, abs=1e-5)


def test_quantized_search_matches_the_exact_scan(quire: Quire, monkeypatch: pytest.MonkeyPatch) -> None:
    base = make_base(quire)
    rng = np.random.default_rng(4)
    vectors = clustered(rng, 3000, spread=0.03)
    fill(quire, base.id, vectors, per_item=50)
    loaded = get_base(quire.db, "kb")
    # queries near stored vectors, as a query is near the chunks that answer it
    queries = vectors[rng.integers(0, len(vectors), 30)] + rng.normal(0, 0.03, (30, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    recalls = []
    for q in queries:
        with quire.db.read() as conn:
            monkeypatch.setattr(search, "EXACT_SCAN_MAX", 10**9)
            exact = search.vector_candidates(conn, loaded, q, 10, None)
            monkeypatch.setattr(search, "EXACT_SCAN_MAX", 0)
            quantized = search.vector_candidates(conn, loaded, q, 10, None)
        exact_ids = [row.id for row, _s in exact]
        quantized_ids = [row.id for row, _s in quantized]
        recalls.append(len(set(exact_ids) & set(quantized_ids)) / 10)
        exact_scores = {row.id: s for row, s in exact}
        for row, score in quantized:  # scores are the exact cosine, whichever path found the chunk
            expected = float(vectors[int(row.text.split()[1])] @ q)
            assert score == pytest.approx(expected, abs=1e-5)
            if row.id in exact_scores:
                assert score == pytest.approx(exact_scores[row.id], abs=1e-6)
        assert [s for _r, s in quantized] == sorted((s for _r, s in quantized), reverse=True)
    assert np.mean(recalls) >= 0.95, recalls
