"""The in-memory vector index behind vector search: exact and quantized search against a brute-force
reference, freshness after writes, clears and a base deleted and re-created, and migration 0007.

No model is needed: vectors are written directly through ``knowledge.library.index`` (clustered random unit
vectors; queries near stored vectors, as a query is near the chunks that answer it).
"""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import text

from knowledge.library import bases, index
from knowledge.library.bases import get_base
from knowledge.library.index import ChunkRow, vectors_version
from knowledge.library.tree import NewItem, create_item
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from knowledge.search import query as search
from knowledge.search import vector_index
from knowledge.store.migrations import migrate
from tests.knowledge.helpers import make_base

DIM = 384


def clustered(rng: np.random.Generator, n: int, centres: int = 40, spread: float = 0.03) -> np.ndarray:
    base = rng.normal(size=(centres, DIM))
    vectors = base[rng.integers(0, centres, n)] / np.sqrt(DIM) + rng.normal(0, spread, (n, DIM))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def near(rng: np.random.Generator, vectors: np.ndarray, n: int) -> np.ndarray:
    queries = vectors[rng.integers(0, len(vectors), n)] + rng.normal(0, 0.03, (n, DIM)).astype(np.float32)
    return (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)


def fill(quire: Quire, base_id: int, vectors: np.ndarray, per_item: int = 5, start: int = 0) -> list[int]:
    """Items of ``per_item`` chunks; chunk n's text is "chunk n" (n counts from ``start``)."""
    items: list[int] = []
    with quire.db.write() as conn:
        for first in range(0, len(vectors), per_item):
            part = vectors[first : first + per_item]
            item = create_item(conn, NewItem(base_id, "note", f"n{start + first}", "completed", note_text="x"))
            rows = [
                ChunkRow(i, f"chunk {start + first + i}", 0, 1, None, None, None, 2, f"h{start + first + i}")
                for i in range(len(part))
            ]
            index.write_item_material(conn, base_id, item, rows, part)
            items.append(item)
    return items


def nearest_texts(quire: Quire, query: np.ndarray, depth: int = 10) -> list[tuple[str, float]]:
    with quire.db.read() as conn:
        found = search.vector_candidates(conn, get_base(quire.db, "kb"), query, depth, None, index=quire.vectors)
        rows = search.hit_rows(conn, [c.id for c, _score in found])
    return [(rows[c.id].text, score) for c, score in found]


def test_material_carries_float16_copies_fresh_ids_and_a_version(quire: Quire) -> None:
    base = make_base(quire)
    vectors = clustered(np.random.default_rng(1), 10)
    items = fill(quire, base.id, vectors)
    with quire.db.read() as conn:
        rows = conn.execute(text("SELECT id, vector_f16 FROM chunks ORDER BY id")).all()
        assert vectors_version(conn, base.id) == 2
    halves = np.stack([np.frombuffer(r[1], dtype=np.float16) for r in rows])
    assert np.allclose(halves.astype(np.float32), vectors, atol=1e-3)
    last = rows[-1][0]
    with quire.db.write() as conn:
        index.clear_items_material(conn, base.id, [items[-1]])
        assert vectors_version(conn, base.id) == 3
        again = index.write_item_material(
            conn, base.id, items[-1], [ChunkRow(0, "new", 0, 3, None, None, None, 1, "n")], vectors[:1]
        )
    assert again[0] > last  # an id once used is never handed out again


def test_exact_search_matches_a_brute_force_scan(quire: Quire) -> None:
    make_base(quire)
    rng = np.random.default_rng(2)
    vectors = clustered(rng, 600)
    fill(quire, 1, vectors)
    for q in near(rng, vectors, 10):
        true = vectors @ q
        tenth = np.sort(true)[-10]
        found = nearest_texts(quire, q)
        assert int(found[0][0].split()[1]) == int(np.argmax(true))
        # the same ten up to float16 rounding: nothing found is worse than the true tenth best
        assert all(true[int(t.split()[1])] >= tenth - 2e-3 for t, _s in found) and len(found) == 10
        for t, score in found:
            assert score == pytest.approx(float(vectors[int(t.split()[1])] @ q), abs=2e-3)


def test_quantized_search_finds_what_the_exact_scan_finds(quire: Quire, monkeypatch: pytest.MonkeyPatch) -> None:
    make_base(quire)
    rng = np.random.default_rng(4)
    vectors = clustered(rng, 3000)
    fill(quire, 1, vectors, per_item=50)
    recalls = []
    for q in near(rng, vectors, 30):
        monkeypatch.setattr(vector_index, "EXACT_SCAN_MAX", 10**9)
        quire.vectors.forget(1)  # the way to search is chosen when a base is read in
        exact = nearest_texts(quire, q)
        monkeypatch.setattr(vector_index, "EXACT_SCAN_MAX", 0)
        quire.vectors.forget(1)
        quantized = nearest_texts(quire, q)
        recalls.append(len({t for t, _s in exact} & {t for t, _s in quantized}) / 10)
        scores = [s for _t, s in quantized]
        assert scores == sorted(scores, reverse=True)
        for t, score in quantized:
            assert score == pytest.approx(float(vectors[int(t.split()[1])] @ q), abs=2e-3)
    assert np.mean(recalls) >= 0.95, recalls


def test_the_index_follows_writes_and_deletes_and_never_returns_deleted_chunks(quire: Quire) -> None:
    make_base(quire)
    rng = np.random.default_rng(5)
    vectors = clustered(rng, 200)
    items = fill(quire, 1, vectors)
    query = vectors[7]
    assert nearest_texts(quire, query, 1)[0][0] == "chunk 7"
    extra = clustered(rng, 5)
    fill(quire, 1, extra, start=1000)
    assert nearest_texts(quire, extra[2], 1)[0][0] == "chunk 1002"  # added after the first search
    operations.delete_items(quire, "kb", [items[1]])  # chunks 5-9: deleting, hidden at once
    assert all(t not in {f"chunk {n}" for n in range(5, 10)} for t, _s in nearest_texts(quire, query, 20))
    with quire.db.write() as conn:  # the delete job's work: the chunks go
        index.clear_items_material(conn, 1, items[1:30])
    held = quire.vectors.held_count(1)
    assert all(not 5 <= int(t.split()[1]) < 150 for t, _s in nearest_texts(quire, query, 20))
    assert quire.vectors.held_count(1) < held  # mostly deleted: read again from scratch


def test_a_base_recreated_under_the_same_id_starts_afresh(quire: Quire) -> None:
    base = make_base(quire)
    rng = np.random.default_rng(6)
    fill(quire, base.id, clustered(rng, 50))
    nearest_texts(quire, clustered(rng, 1)[0])
    bases.delete_base(quire.db, quire.queue, "kb", quire.blobs_dir)
    again = make_base(quire)
    assert again.id == base.id
    fresh = clustered(rng, 5)
    fill(quire, again.id, fresh, start=500)
    found = nearest_texts(quire, fresh[0], 10)
    assert {t for t, _s in found} == {f"chunk {n}" for n in range(500, 505)}


def test_chunks_without_a_float16_copy_are_read_from_the_float_table(quire: Quire) -> None:
    make_base(quire)
    vectors = clustered(np.random.default_rng(7), 40)
    fill(quire, 1, vectors)
    with quire.db.write() as conn:  # as a process older than migration 0007 would have written them
        conn.execute(text("UPDATE chunks SET vector_f16 = NULL WHERE id % 2 = 0"))
    for n in (3, 4, 17, 18):
        assert nearest_texts(quire, vectors[n], 1)[0][0] == f"chunk {n}"


def test_migration_0007_copies_the_vectors_and_drops_the_binary_tables(quire: Quire) -> None:
    base = make_base(quire)
    vectors = clustered(np.random.default_rng(8), 30)
    fill(quire, base.id, vectors)
    with quire.db.write() as conn:  # the database as it was before 0007
        conn.execute(text("UPDATE chunks SET vector_f16 = NULL"))
        conn.exec_driver_sql(f"CREATE VIRTUAL TABLE vecbits_base_{base.id} USING vec0(embedding bit[384])")
        conn.execute(text("DELETE FROM schema_migrations WHERE name LIKE '0007%'"))
    assert migrate(quire.db)[0] == "0007_search_vectors"
    with quire.db.read() as conn:
        rows = conn.execute(text("SELECT vector_f16 FROM chunks ORDER BY id")).all()
        names = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master")).all()}
    assert np.allclose(np.stack([np.frombuffer(r[0], dtype=np.float16) for r in rows]), vectors, atol=1e-3)
    assert f"vecbits_base_{base.id}" not in names


@pytest.mark.parametrize("n", [1, 7, 65_536 + 3, 140_001])
def test_the_blocked_hamming_scan_and_the_counting_selection_match_the_plain_ones(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(n)
    bits = vector_index.sign_bits(rng.normal(size=(n, DIM)))
    query = vector_index.sign_bits(rng.normal(size=(1, DIM)))[0]
    plain = np.bitwise_count(bits ^ query).sum(axis=1)
    distances = vector_index.hamming(bits, query)
    assert np.array_equal(distances, plain)
    monkeypatch.setattr(vector_index, "SCAN_BLOCK", 1000)  # a last block shorter than the others
    assert np.array_equal(vector_index.hamming(bits, query), plain)
    for count in {1, min(n, 40), n // 2 or 1, n, n + 5}:
        chosen = vector_index.nearest_by_distance(distances, count, DIM)
        assert len(chosen) == min(count, n) and len(set(chosen.tolist())) == len(chosen)
        assert list(chosen) == sorted(chosen)
        if count < n:  # exactly the `count` smallest: nothing left out is nearer than what was taken
            left_out = np.setdiff1d(np.arange(n), chosen)
            assert distances[chosen].max() <= distances[left_out].min()


def test_rescored_rows_give_small_searches_the_full_factor_and_bound_larger_ones() -> None:
    from knowledge.search.vector_index import MAX_CANDIDATES, OVERSAMPLE, OVERSAMPLE_FLOOR, RESCORE_ROWS, rescored_rows

    assert rescored_rows(20) == 20 * OVERSAMPLE == RESCORE_ROWS  # a vector search of 10 hits: x160
    assert rescored_rows(62) == RESCORE_ROWS  # hybrid's 50 a side: the budget, x52
    assert rescored_rows(200) == 200 * OVERSAMPLE_FLOOR  # never under x40
    assert rescored_rows(4_096) == MAX_CANDIDATES  # and never past the hard bound
    assert rescored_rows(1) == OVERSAMPLE
