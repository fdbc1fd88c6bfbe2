"""Vector search on a team store runs in the server: an exact scan while a base is small, pgvector's HNSW index
once it is large — built after the rows are there, by an import or a worker's repair scan, rebuilt when a build
was cut short, cancelled when its base is deleted — and it finds what the exact scan finds."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from sqlalchemy import text

from knowledge.compose import open_team_quire
from knowledge.library import bases, index, index_postgres, vector_indexes
from knowledge.library.bases import get_base
from knowledge.library.index import ChunkRow, vec_table
from knowledge.library.tree import NewItem, create_item
from knowledge.runtime import Quire
from tests.conftest import wait_until
from tests.knowledge.helpers import make_base

pytestmark = pytest.mark.engines

ROWS = 400
THRESHOLD = 300  # HNSW_MIN_ROWS for these tests: a base of ROWS chunks is "large"


@pytest.fixture
def team(postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Quire]:
    monkeypatch.setattr(index_postgres, "HNSW_MIN_ROWS", THRESHOLD)
    quire = open_team_quire(postgres_url, data_dir=tmp_path / "local", hosts_worker=True)
    yield quire
    quire.close()


def fill(quire: Quire, rows: int, seed: int = 3) -> np.ndarray:
    """``rows`` one-chunk notes with random unit vectors in clusters (near neighbours exist); their vectors."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, 384))
    vectors = (centres[rng.integers(0, 20, rows)] + 0.6 * rng.normal(size=(rows, 384))).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with quire.db.write() as conn:
        for n in range(rows):
            item = create_item(conn, NewItem(1, "note", f"n{n}", "completed", note_text=f"note {n}"))
            row = ChunkRow(0, f"note {n}", 0, 6, None, 1, 1, 2, f"h{n}")
            index.write_item_material(conn, 1, item, [row], vectors[n : n + 1])
    return vectors


def chunk_ids(quire: Quire) -> np.ndarray:
    with quire.db.read() as conn:
        return np.array([r[0] for r in conn.execute(text("SELECT id FROM chunks ORDER BY item_id")).all()])


def exact(vectors: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    scores = vectors @ query
    order = np.lexsort((ids, -scores))[:k]
    return [int(ids[i]) for i in order]


def nearest(quire: Quire, query: np.ndarray, k: int) -> list[int]:
    base = get_base(quire.db, "kb")
    with quire.db.read() as conn:
        return [cid for cid, _d in quire.vectors.nearest(conn, base, query, k)]


def plan(quire: Quire, query: np.ndarray) -> str:
    with quire.db.read() as conn:
        conn.execute(text("SELECT set_config('enable_seqscan', 'off', true)"))  # as nearest() plans
        sql = (
            f"EXPLAIN SELECT rowid FROM {vec_table(1)} "
            "ORDER BY embedding <=> CAST(CAST(:q AS real[]) AS vector) LIMIT 10"
        )
        return "\n".join(r[0] for r in conn.execute(text(sql), {"q": query.tolist()}).all())


def state(quire: Quire) -> str | None:
    with quire.db.read() as conn:
        return index_postgres.hnsw_state(conn, vec_table(1))


def test_a_small_base_is_scanned_exactly_and_a_large_one_gets_an_index_that_agrees(team: Quire) -> None:
    make_base(team)
    vectors = fill(team, ROWS)
    ids = chunk_ids(team)
    queries = vectors[:20] + 0.05 * np.random.default_rng(9).normal(size=(20, 384)).astype(np.float32)
    assert vector_indexes.due_bases(team.db) == [1]
    assert state(team) is None
    for q in queries:  # no index yet: the exact scan, the same order as numpy's
        assert nearest(team, q, 10) == exact(vectors, ids, q, 10)

    seconds = vector_indexes.build_if_due(team.db, 1)
    assert seconds is not None and state(team) == "valid"
    assert "hnsw" in plan(team, queries[0])  # the index answers now, not a scan
    assert vector_indexes.due_bases(team.db) == []
    assert vector_indexes.build_if_due(team.db, 1) is None  # built once
    found = [set(nearest(team, q, 10)) & set(exact(vectors, ids, q, 10)) for q in queries]
    assert sum(len(f) for f in found) / (10 * len(queries)) >= 0.95


def test_a_base_below_the_threshold_gets_no_index(team: Quire) -> None:
    make_base(team)
    fill(team, THRESHOLD - 1)
    assert vector_indexes.due_bases(team.db) == []
    assert vector_indexes.build_if_due(team.db, 1) is None
    assert state(team) is None


def test_a_workers_repair_scan_builds_the_index_in_the_background(team: Quire) -> None:
    make_base(team)
    fill(team, ROWS)
    assert team.vector_builds is not None
    team.recover()  # what a worker runs at start and every repair period
    team.vector_builds.wait(120)
    assert state(team) == "valid"
    assert set(team.vector_builds.built) == {1}


def test_a_build_cut_short_is_dropped_and_built_again(team: Quire) -> None:
    make_base(team)
    fill(team, ROWS)
    assert vector_indexes.build_if_due(team.db, 1) is not None
    with team.db.write() as conn:  # what a cancelled CREATE INDEX CONCURRENTLY leaves: an invalid index
        conn.execute(
            text("UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(:n)"),
            {"n": index_postgres.hnsw_name(vec_table(1))},
        )
    assert state(team) == "invalid"
    assert vector_indexes.due_bases(team.db) == [1]
    assert vector_indexes.build_if_due(team.db, 1) is not None
    assert state(team) == "valid"


def test_a_search_over_fetching_past_ef_search_keeps_walking_the_graph(
    team: Quire, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(team)
    vectors = fill(team, ROWS)
    assert vector_indexes.build_if_due(team.db, 1) is not None
    monkeypatch.setattr(index_postgres, "EF_SEARCH", 10)
    found = nearest(team, vectors[0], 250)
    assert len(found) == 250 == len(set(found))  # 25 times ef_search: iterative scan went on
    with team.db.read() as conn:  # nearest first
        distances = [d for _c, d in team.vectors.nearest(conn, get_base(team.db, "kb"), vectors[0], 250)]
    assert distances == sorted(distances)


def test_deleting_a_base_cancels_its_build(team: Quire, postgres_url: str) -> None:
    make_base(team)
    fill(team, 20)
    server_url = team.db.url  # type: ignore[attr-defined]
    failure: list[BaseException] = []

    def build_stand_in() -> None:  # a connection named as a build of base 1, busy until cancelled
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f"SET application_name = '{index_postgres.hnsw_builder_name(1)}'")
            try:
                conn.execute("SELECT pg_sleep(120)")
            except psycopg.errors.QueryCanceled as exc:
                failure.append(exc)

    thread = threading.Thread(target=build_stand_in)
    thread.start()
    wait_until(lambda: _sleeping(server_url), timeout=30, interval=0.05, what="the stand-in build to start")
    bases.delete_base(team.db, team.queue, "kb", team.blobs_dir)
    thread.join(60)
    assert failure and isinstance(failure[0], psycopg.errors.QueryCanceled)  # not left to sleep out its 120 s


def _sleeping(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND query LIKE 'SELECT pg_sleep%%'",
            (index_postgres.hnsw_builder_name(1),),
        ).fetchone()
    return bool(row and row[0])


def test_an_import_of_a_large_base_builds_its_index_at_the_end(team: Quire, tmp_path: Path) -> None:
    from knowledge.portable.export import export_base
    from knowledge.portable.import_ import import_base

    make_base(team)
    fill(team, ROWS)
    export_base(team, "kb", tmp_path / "kb.quirebase")
    result = import_base(team, tmp_path / "kb.quirebase", name="copy")
    assert result.chunks == ROWS and result.vector_index_seconds is not None
    with team.db.read() as conn:
        assert index_postgres.hnsw_state(conn, vec_table(result.base_id)) == "valid"
    assert state(team) is None  # the base the rows were written into one by one: left to a worker
