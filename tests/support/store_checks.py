"""What a crash test checks after a SIGKILLed worker was restarted, on either engine (and one kill point).

``assert_consistent_after_restart``: the store is intact (SQLite's ``integrity_check``; on PostgreSQL amcheck
over every B-tree index and every table of the store), a base's vector and keyword rows are exactly its live
chunks, every live chunk is found by its own vector and by its own words within its document, and no search
result is a deleted chunk. On SQLite the searches are checked through the files derived from the rows in the
data directory (the vector file and the keyword index, tests/knowledge/test_vector_file.py and
test_keyword_file.py), which a team store does not have: it searches its tables.
"""

from __future__ import annotations

import re

import numpy as np
from sqlalchemy import text

from knowledge.library.bases import Base, get_base
from knowledge.library.index import fts_table, vec_table
from knowledge.runtime import Quire
from knowledge.search.keyword import keyword_candidates
from knowledge.search.query import vector_candidates
from knowledge.search.scope import build_scope
from knowledge.search.syntax import parse
from tests.support.engine_fixtures import on_team_store

KEYWORD_SAMPLE = 60  # chunks looked for by keyword (each is a query; a team store's costs more than FTS5's)
QUERY_WORDS = 12  # of a chunk's words, its keyword query


def assert_consistent_after_restart(quire: Quire, base_name: str) -> None:
    base = get_base(quire.db, base_name)
    live = _live_chunks(quire, base.id)
    assert live, "no live chunks to look for"
    _assert_rows_are_the_live_chunks(quire, base, set(live))
    if on_team_store(quire):
        _amcheck(quire.db.url)  # type: ignore[attr-defined]
        _assert_found_by_own_vector(quire, base, live)
        _assert_found_by_own_words(quire, base, live)
        return
    # a data directory's searches go through the files derived from the rows: these checks find every live
    # chunk through them (by its vector, by its words) after SQLite's integrity_check
    from tests.knowledge.test_keyword_file import assert_keywords_consistent_after_restart
    from tests.knowledge.test_vector_file import assert_consistent_after_restart as vector_file_consistent

    vector_file_consistent(quire, base_name)
    assert_keywords_consistent_after_restart(quire, base_name)


def store_write_locked(quire: Quire) -> bool:
    """On a team store: whether another session holds the store's write lock (a worker mid-write)."""
    from knowledge.store.postgres import WRITE_LOCK_KEY

    with quire.db.read() as conn:
        held = conn.execute(
            text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND classid::bigint = :high AND objid::bigint = :low AND pid != pg_backend_pid()"
            ),
            {"high": WRITE_LOCK_KEY >> 32, "low": WRITE_LOCK_KEY & 0xFFFFFFFF},
        ).scalar_one()
    return bool(held)


def _amcheck(url: str) -> None:
    """Every B-tree index of the store checked against its table (``heapallindexed``), every table's pages
    verified: amcheck raises or reports what it finds."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        indexes = conn.execute(
            "SELECT c.oid, c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'btree' AND c.relnamespace = 'public'::regnamespace"
        ).fetchall()
        assert indexes, "no index to check"
        for oid, _name in indexes:
            conn.execute("SELECT bt_index_check(%s, true)", (oid,))
        damaged = conn.execute(
            "SELECT c.relname, v.msg FROM pg_class c, LATERAL verify_heapam(c.oid) v "
            "WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace"
        ).fetchall()
        assert damaged == []


def _live_chunks(quire: Quire, base_id: int) -> dict[int, tuple[int, str, bytes]]:
    with quire.db.read() as conn:
        rows = conn.execute(
            text("SELECT id, item_id, text, vector_f16 FROM chunks WHERE base_id = :b"), {"b": base_id}
        ).all()
    return {int(r[0]): (int(r[1]), str(r[2]), bytes(r[3])) for r in rows}


def _assert_rows_are_the_live_chunks(quire: Quire, base: Base, live: set[int]) -> None:
    with quire.db.read() as conn:
        for table in (vec_table(base.id), fts_table(base.id)):
            held = [int(r[0]) for r in conn.execute(text(f"SELECT rowid FROM {table}")).all()]
            assert len(held) == len(set(held)), f"{table} holds a chunk twice"
            assert set(held) == live, (table, sorted(set(held) ^ live)[:10])


def _assert_found_by_own_vector(quire: Quire, base: Base, live: dict[int, tuple[int, str, bytes]]) -> None:
    with quire.db.read() as conn:
        for cid, (_item, _body, blob) in live.items():
            query = np.frombuffer(blob, dtype=np.float16).astype(np.float32)
            found = [c.id for c, _s in vector_candidates(conn, base, query, 10, None, index=quire.vectors)]
            assert set(found) <= set(live), "a vector search returned a deleted chunk"
            assert cid in found, f"live chunk {cid} is not found by its own vector"


def _assert_found_by_own_words(quire: Quire, base: Base, live: dict[int, tuple[int, str, bytes]]) -> None:
    ids = sorted(live)
    sample = ids[:: max(1, len(ids) // KEYWORD_SAMPLE)]
    with quire.db.read() as conn:
        for n, cid in enumerate(sample):
            item_id, body, _blob = live[cid]
            parsed = parse(" ".join(re.findall(r"\w+", body)[:QUERY_WORDS]))
            within = build_scope(conn, base, parsed, item_id)
            found = [c.id for c, _s in keyword_candidates(conn, base, parsed, 1000, within, index=quire.keywords)]
            assert cid in found, f"live chunk {cid} is not found by keyword"
            if n < 10:  # the same words over the whole base: nothing deleted comes back
                everywhere = build_scope(conn, base, parsed, None)
                hits = keyword_candidates(conn, base, parsed, 50, everywhere, index=quire.keywords)
                assert {c.id for c, _s in hits} <= set(live), "a keyword search returned a deleted chunk"
