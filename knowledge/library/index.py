"""Per-base search material, all keyed by ``chunks.id``: a vec0 table of float vectors (cosine), an FTS5
table, and — in ``chunks.vector_f16`` — a float16 copy of each vector that search reads into memory
(:mod:`knowledge.search.vector_index`; column added by migration ``0007_search_vectors``).

Everything here runs inside the caller's write transaction, so an item's rows, chunks, vectors and
keyword entries commit together: a reader never sees half-written search material (vec0 and FTS5
pages are ordinary pages of the same database, so they commit and roll back with the rows).

Each base's vectors are also in a memory-mapped file search reads (:mod:`knowledge.library.vector_file`),
and its keywords in a tantivy index keyword search ranks with (:mod:`knowledge.library.keyword_file`), both
derived from these rows: brought up to them after every commit that wrote or cleared material (the keyword
index told which chunks the commit cleared) and rebuilt from the rows whenever they do not match them.

Two stamps let a search process keep its in-memory copy fresh cheaply, both written in the same
transactions as the material: every write or clear of a base's chunks bumps the base's
``vectors.version.<base id>`` setting, and chunk ids are never reused (:mod:`knowledge.library.chunk_ids`), so "what
was added since" is exactly "ids above the last one seen".

sqlite-vec 0.1.9 has no ``INSERT OR REPLACE`` on vec0: material is replaced by delete + insert.

On a team store (PostgreSQL) the two tables are a pgvector table and a ``tsvector`` table with the same
names and the same ``rowid`` key (``knowledge.library.index_postgres``); ``_on_postgres`` is the one
question this module asks of the engine, and the statements that differ are there.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, bindparam, delete, insert, select, text

from knowledge.library import chunk_ids, keyword_file
from knowledge.library import index_postgres as pg
from knowledge.library.vector_file import RemoveAfterCommit, SyncAfterCommit
from knowledge.store import settings
from knowledge.store.database import after_commit, queued_after_commit
from knowledge.store.pg_term_counts import drop_term_counts
from knowledge.store.schema import chunks

# Porter stemming over unicode61: "proteins" finds "protein" (measured on SciFact in tests/benchmarks).
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
# Cached vectors nothing uses are kept this long: a file being embedded over a crash or an item being rebuilt
# still needs them; after that the sweep takes them.
CACHE_KEEP_SECONDS = 7 * 24 * 3600.0


def vec_table(base_id: int) -> str:
    return f"vec_base_{int(base_id)}"


def fts_table(base_id: int) -> str:
    return f"fts_base_{int(base_id)}"


def version_key(base_id: int) -> str:
    return f"vectors.version.{int(base_id)}"


def _on_postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def _embedding(conn: Connection, alias: str) -> str:
    return pg.embedding_column(alias) if _on_postgres(conn) else f"{alias}.embedding"


def _vector(conn: Connection, value: object) -> np.ndarray:
    if _on_postgres(conn):
        return pg.as_array(value)
    assert isinstance(value, bytes)
    return np.frombuffer(value, dtype=np.float32).copy()


def create_base_index(conn: Connection, base_id: int, dimension: int) -> None:
    if _on_postgres(conn):
        pg.create_base_tables(conn, vec_table(base_id), fts_table(base_id), dimension)
        return
    conn.exec_driver_sql(
        f"CREATE VIRTUAL TABLE {vec_table(base_id)} USING vec0("
        f"embedding float[{int(dimension)}] distance_metric=cosine)"
    )
    conn.exec_driver_sql(f"CREATE VIRTUAL TABLE {fts_table(base_id)} USING fts5(text, tokenize='{FTS_TOKENIZER}')")


def drop_base_index(conn: Connection, base_id: int) -> None:
    if _on_postgres(conn):
        pg.cancel_hnsw_builds(conn, base_id)
        drop_term_counts(conn, fts_table(base_id))
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {vec_table(base_id)}")
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {fts_table(base_id)}")
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS vecbits_base_{int(base_id)}")  # made by 0004, dropped by 0007
    settings.remove(conn, version_key(base_id))
    if not _on_postgres(conn) and conn.in_transaction():
        after_commit(conn, RemoveAfterCommit(base_id))
        after_commit(conn, keyword_file.RemoveAfterCommit(base_id))


def _existing_tables(conn: Connection, base_id: int) -> list[str]:
    wanted = (vec_table(base_id), fts_table(base_id))
    if _on_postgres(conn):
        found = pg.existing_tables(conn, wanted)
        return [name for name in wanted if name in found]
    rows = conn.execute(
        text("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (:a, :b)"),
        {"a": wanted[0], "b": wanted[1]},
    ).all()
    return [name for name in wanted if name in {r[0] for r in rows}]


def base_index_exists(conn: Connection, base_id: int) -> bool:
    names = {vec_table(base_id), fts_table(base_id)}
    if _on_postgres(conn):
        return pg.existing_tables(conn, (vec_table(base_id), fts_table(base_id))) == names
    found = conn.execute(
        text("SELECT name FROM sqlite_master WHERE name IN (:a, :b)"),
        {"a": vec_table(base_id), "b": fts_table(base_id)},
    ).all()
    return {r[0] for r in found} == names


def vectors_version(conn: Connection, base_id: int) -> int:
    """How many times the base's chunks were written or cleared (0 if never)."""
    return settings.get_int(conn, version_key(base_id), 0)


def bump_version(conn: Connection, base_id: int) -> None:
    settings.increment(conn, version_key(base_id))


@dataclass(frozen=True)
class ChunkRow:
    ordinal: int
    text: str
    start: int
    end: int
    page: int | None
    line_start: int | None
    line_end: int | None
    token_count: int
    text_sha256: str


def write_item_material(
    conn: Connection, base_id: int, item_id: int, rows: Sequence[ChunkRow], vectors: np.ndarray
) -> list[int]:
    """Replace an item's chunks, vectors and keyword entries; return the new chunk ids."""
    return write_items_material(conn, base_id, [(item_id, rows, vectors)])[0]


def write_items_material(
    conn: Connection,
    base_id: int,
    materials: Sequence[tuple[int, Sequence[ChunkRow], np.ndarray]],
    *,
    new_items: bool = False,
) -> list[list[int]]:
    """Replace several items' chunks, vectors and keyword entries (``(item_id, rows, vectors)`` each); return
    each item's new chunk ids. ``new_items``: they were created in this transaction, so there is nothing to clear.

    One clear, one id allocation and one multi-row statement per table (``executemany``) for all of them: an
    index batch's items cost the statements of one, not of each.
    """
    for item_id, rows, vectors in materials:
        if len(rows) != len(vectors):
            raise ValueError(f"item {item_id}: {len(rows)} chunks but {len(vectors)} vectors")
    if not new_items:
        tables = _existing_tables(conn, base_id)
        _clear(conn, base_id, [item_id for item_id, _rows, _vectors in materials], tables, keep_vectors=False)
    total = sum(len(rows) for _item_id, rows, _vectors in materials)
    if not total:
        return [[] for _ in materials]
    next_id = chunk_ids.issue(conn, total)
    ids: list[list[int]] = []
    chunk_rows: list[dict[str, Any]] = []
    for item_id, rows, _vectors in materials:
        ids.append(list(range(next_id, next_id + len(rows))))
        next_id += len(rows)
        chunk_rows.extend(
            {
                "id": cid,
                "item_id": item_id,
                "ordinal": row.ordinal,
                "text": row.text,
                "start": row.start,
                "end": row.end,
                "page": row.page,
                "line_start": row.line_start,
                "line_end": row.line_end,
                "token_count": row.token_count,
                "text_sha256": row.text_sha256,
            }
            for cid, row in zip(ids[-1], rows, strict=True)
        )
    floats = np.concatenate([np.asarray(v, dtype=np.float32) for _i, rows, v in materials if len(rows)])
    insert_chunks(conn, base_id, chunk_rows, floats)
    bump_version(conn, base_id)
    sync_file_after_commit(conn, base_id, check_dead=False)
    return ids


def insert_chunks(conn: Connection, base_id: int, rows: Sequence[dict[str, Any]], floats: np.ndarray) -> None:
    """The one insert of chunk material: chunk rows (``id`` from :func:`chunk_ids.issue`, ``item_id``, the
    text and its place) with their float16 copy, their float32 vectors and their keyword entries, in the
    caller's write transaction; one multi-row statement per table. The caller bumps the base's version."""
    if len(rows) != len(floats):
        raise ValueError(f"{len(rows)} chunks but {len(floats)} vectors")
    halves = floats.astype(np.float16)
    conn.execute(
        insert(chunks), [{**row, "base_id": base_id, "vector_f16": halves[n].tobytes()} for n, row in enumerate(rows)]
    )
    ids = [int(row["id"]) for row in rows]
    insert_vectors(conn, base_id, ids, floats)
    conn.execute(
        text(f"INSERT INTO {fts_table(base_id)} (rowid, text) VALUES (:id, :t)"),
        [{"id": cid, "t": row["text"]} for cid, row in zip(ids, rows, strict=True)],
    )


def insert_vectors(conn: Connection, base_id: int, ids: Sequence[int], floats: np.ndarray) -> None:
    """Write chunks' float32 vectors into the base's vector table (vec0, or pgvector on a team store)."""
    if _on_postgres(conn):
        pg.insert_vectors(conn, vec_table(base_id), list(ids), floats)
        return
    conn.execute(
        text(f"INSERT INTO {vec_table(base_id)} (rowid, embedding) VALUES (:id, :e)"),
        [{"id": cid, "e": floats[n].tobytes()} for n, cid in enumerate(ids)],
    )


def sync_file_after_commit(conn: Connection, base_id: int, *, check_dead: bool, cleared: Sequence[int] = ()) -> None:
    """Bring the base's vector file and keyword index up to the rows once they are committed, the index told
    which chunk ids this transaction ``cleared`` (``knowledge.library.vector_file``, ``keyword_file``; a search
    that finds either behind syncs it itself, so a crash before this runs loses only deletes the index then
    holds until a rebuild, which search's join to live rows hides)."""
    if not _on_postgres(conn) and conn.in_transaction():
        after_commit(conn, SyncAfterCommit(base_id, check_dead=check_dead))
        queued_after_commit(conn, keyword_file.SyncAfterCommit(base_id)).cleared.update(cleared)


def clear_items_material(conn: Connection, base_id: int, item_ids: Iterable[int], *, keep_vectors: bool = False) -> int:
    """Delete the chunks, vectors and keyword entries of these items; return how many chunks went.

    ``keep_vectors`` (reindex, re-expansion) first stashes the vectors in ``vector_cache`` by text hash,
    so the rebuild embeds only chunks whose text changed. Deletes never keep anything.
    """
    # a failed base may have lost one of its tables: clear what is there
    return _clear(conn, base_id, list(item_ids), _existing_tables(conn, base_id), keep_vectors=keep_vectors)


def _clear(conn: Connection, base_id: int, item_list: list[int], tables: Sequence[str], *, keep_vectors: bool) -> int:
    removed: list[int] = []
    for start in range(0, len(item_list), 500):
        part = item_list[start : start + 500]
        if keep_vectors:
            _stash_vectors(conn, base_id, part)
        chunk_ids = [r[0] for r in conn.execute(select(chunks.c.id).where(chunks.c.item_id.in_(part))).all()]
        if not chunk_ids:
            continue
        for table in tables:
            for cstart in range(0, len(chunk_ids), 500):
                conn.execute(
                    text(f"DELETE FROM {table} WHERE rowid IN :ids").bindparams(bindparam("ids", expanding=True)),
                    {"ids": chunk_ids[cstart : cstart + 500]},
                )
        conn.execute(delete(chunks).where(chunks.c.item_id.in_(part)))
        removed.extend(chunk_ids)
    if removed:
        bump_version(conn, base_id)
        sync_file_after_commit(conn, base_id, check_dead=True, cleared=removed)
    return len(removed)


def _stash_vectors(conn: Connection, base_id: int, item_ids: list[int]) -> None:
    """Cached vectors keep the model stamp of the item they came from (reuse takes only today's)."""
    if _on_postgres(conn):
        _stash_vectors_postgres(conn, base_id, item_ids)
        return
    conn.execute(
        text(
            f"INSERT OR IGNORE INTO vector_cache (base_id, text_sha256, embedding, created_at, model_fingerprint) "
            f"SELECT c.base_id, c.text_sha256, v.embedding, unixepoch('subsec'), i.model_fingerprint FROM chunks c "
            f"JOIN items i ON i.id = c.item_id "
            f"JOIN {vec_table(base_id)} v ON v.rowid = c.id WHERE c.item_id IN :ids"
        ).bindparams(bindparam("ids", expanding=True)),
        {"ids": item_ids},
    )


def _stash_vectors_postgres(conn: Connection, base_id: int, item_ids: list[int]) -> None:
    """The same stash on a team store: vectors leave pgvector as ``real[]`` and are cached as float32 bytes."""
    rows = conn.execute(
        text(
            f"SELECT c.base_id, c.text_sha256, {_embedding(conn, 'v')}, i.model_fingerprint FROM chunks c "
            f"JOIN items i ON i.id = c.item_id JOIN {vec_table(base_id)} v ON v.rowid = c.id WHERE c.item_id IN :ids"
        ).bindparams(bindparam("ids", expanding=True)),
        {"ids": item_ids},
    ).all()
    if rows:
        conn.execute(
            text(
                "INSERT INTO vector_cache (base_id, text_sha256, embedding, created_at, model_fingerprint) "
                "VALUES (:b, :h, :e, extract(epoch FROM clock_timestamp()), :m) ON CONFLICT DO NOTHING"
            ),
            [{"b": r[0], "h": r[1], "e": pg.as_blob(r[2]), "m": r[3]} for r in rows],
        )


def vectors_for_hashes(
    conn: Connection, base_id: int, hashes: Iterable[str], model_stamp: str
) -> dict[str, np.ndarray]:
    """Vectors this base already has for these chunk texts, made by the model ``model_stamp`` names —
    live chunks of items stamped so first, then the cache rows stamped so. Stale vectors are never taken."""
    wanted = list(set(hashes))
    found: dict[str, np.ndarray] = {}
    live = text(
        f"SELECT c.text_sha256, {_embedding(conn, 'v')} FROM chunks c JOIN {vec_table(base_id)} v ON v.rowid = c.id "
        "JOIN items i ON i.id = c.item_id WHERE c.base_id = :b AND c.text_sha256 IN :h AND i.model_fingerprint = :m"
    ).bindparams(bindparam("h", expanding=True))
    cached = text(
        "SELECT text_sha256, embedding FROM vector_cache WHERE base_id = :b AND text_sha256 IN :h "
        "AND model_fingerprint = :m"
    ).bindparams(bindparam("h", expanding=True))
    for query, decode in ((live, lambda value: _vector(conn, value)), (cached, _cached_vector)):
        missing = [h for h in wanted if h not in found]
        for start in range(0, len(missing), 500):
            rows = conn.execute(query, {"b": base_id, "h": missing[start : start + 500], "m": model_stamp}).all()
            for sha, value in rows:
                found.setdefault(sha, decode(value))
    return found


def _cached_vector(value: object) -> np.ndarray:
    return np.frombuffer(bytes(value), dtype=np.float32).copy()  # type: ignore[call-overload]


def keep_vectors(conn: Connection, base_id: int, vectors: Sequence[tuple[str, np.ndarray]], model_stamp: str) -> None:
    """Cache vectors just embedded for a big file's passages (text hash, vector), before its item is written,
    so a worker that takes the file over after a crash embeds only what is left."""
    rows = [
        {"b": base_id, "h": sha, "e": np.asarray(v, dtype=np.float32).tobytes(), "t": time.time(), "m": model_stamp}
        for sha, v in vectors
    ]
    if not rows:
        return
    conn.execute(  # today's model's vector replaces another model's for the same text (one row per text)
        text(
            "INSERT INTO vector_cache (base_id, text_sha256, embedding, created_at, model_fingerprint) "
            "VALUES (:b, :h, :e, :t, :m) ON CONFLICT (base_id, text_sha256) DO UPDATE SET "
            "embedding = excluded.embedding, created_at = excluded.created_at, "
            "model_fingerprint = excluded.model_fingerprint"
        ),
        rows,
    )


def forget_cached(conn: Connection, base_id: int, hashes: Iterable[str], model_stamp: str) -> None:
    """Drop cached vectors of texts whose chunks are now written by the model ``model_stamp`` names (their
    vectors live there from now on); another model's stay for the sweep."""
    wanted = sorted(set(hashes))
    probe = text("SELECT 1 FROM vector_cache WHERE base_id = :b LIMIT 1")
    if not wanted or conn.execute(probe, {"b": base_id}).first() is None:  # the usual case: nothing cached
        return
    statement = text(
        "DELETE FROM vector_cache WHERE base_id = :b AND text_sha256 IN :h AND model_fingerprint = :m"
    ).bindparams(bindparam("h", expanding=True))
    for start in range(0, len(wanted), 500):
        conn.execute(statement, {"b": base_id, "h": wanted[start : start + 500], "m": model_stamp})


def sweep_vector_cache(conn: Connection, limit: int = 5000, keep_seconds: float = CACHE_KEEP_SECONDS) -> int:
    """Drop cached vectors that no chunk of their base uses any more (bounded per call), once they are older
    than ``keep_seconds``: a younger one may belong to a file being embedded or an item being rebuilt."""
    cutoff = {"n": limit, "c": time.time() - keep_seconds}
    if _on_postgres(conn):
        result = conn.execute(
            text(
                "DELETE FROM vector_cache WHERE (base_id, text_sha256) IN (SELECT vc.base_id, vc.text_sha256 "
                "FROM vector_cache vc WHERE vc.created_at < :c AND NOT EXISTS (SELECT 1 FROM chunks c "
                "WHERE c.base_id = vc.base_id AND c.text_sha256 = vc.text_sha256) LIMIT :n)"
            ),
            cutoff,
        )
        return int(result.rowcount or 0)
    result = conn.execute(
        text(
            "DELETE FROM vector_cache WHERE rowid IN (SELECT vc.rowid FROM vector_cache vc WHERE vc.created_at < :c "
            "AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.base_id = vc.base_id AND c.text_sha256 = vc.text_sha256) "
            "LIMIT :n)"
        ),
        cutoff,
    )
    return int(result.rowcount or 0)


def item_vectors(conn: Connection, base_id: int, item_id: int) -> tuple[list[ChunkRow], np.ndarray]:
    """An item's chunk rows and vectors in order (to copy material to an item with identical content)."""
    rows = conn.execute(
        text(
            f'SELECT c.ordinal, c.text, c.start, c."end", c.page, c.line_start, c.line_end, c.token_count, '
            f"c.text_sha256, {_embedding(conn, 'v')} FROM chunks c JOIN {vec_table(base_id)} v ON v.rowid = c.id "
            "WHERE c.item_id = :i ORDER BY c.ordinal"
        ),
        {"i": item_id},
    ).all()
    chunk_rows = [ChunkRow(*r[:9]) for r in rows]
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    return chunk_rows, np.stack([_vector(conn, r[9]) for r in rows])
