"""Salvage what a damaged database can still give into a NEW data directory (``quire salvage --to DIR``).

Contract: the damaged database is only ever opened read-only; the new directory must be empty (or
absent). The new database is made by ``Quire.open`` (current schema), then every ordinary table is
copied row by row in rowid order, in pages; a page that cannot be read is stepped over (the next
readable rowid is searched for with growing jumps) and counted. Then what is derived is re-derived:
each base's vec0 and FTS5 rows from the salvaged chunks (float32 vectors from the old vec0 table where
readable, else from the float16 copies), the items' link targets from their metadata, and items whose
chunks did not all survive are parked ``failed`` with ``salvaged_incomplete`` so a reindex rebuilds them.
Blob files are copied when a salvaged ``blobs`` row names them. Foreign keys are off during the copy (rows
arrive table by table).
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from knowledge.errors import Conflict, InvalidInput
from knowledge.library import blobs, index, links, tree
from knowledge.principal import require_person
from knowledge.runtime import Quire
from knowledge.store.database import DB_FILENAME, Database, open_raw_connection

PAGE = 500
SALVAGED_INCOMPLETE = "salvaged_incomplete"
# Derived or bookkeeping tables: rebuilt, or already made by the new database's migrations.
SKIPPED = {"schema_migrations", "sqlite_sequence", "sqlite_stat1", "sqlite_stat4", "item_links"}
# Copied first: their insert triggers look at rows of later tables (a manifest row is refused once its
# run is bound to a job, so the manifest arrives before the run).
FIRST = ("folder_run_sources",)


@dataclass
class SalvageResult:
    to: str
    tables: dict[str, dict[str, int]] = field(default_factory=dict)  # table -> copied, unreadable_spans
    bases: int = 0
    chunks_reindexed_from_f16: int = 0
    items_parked: int = 0
    blob_files: int = 0
    blob_files_missing: int = 0
    blob_names_invalid: int = 0  # rows naming no hash: never used as a path
    blob_files_refused: int = 0  # links, or not regular files: never read

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def salvage(damaged_dir: Path, target: Path) -> SalvageResult:
    require_person("salvage a data directory")
    source = Path(damaged_dir) / DB_FILENAME
    if not source.is_file():
        raise InvalidInput(f"there is no database in {damaged_dir}")
    target = Path(target).expanduser().resolve()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise Conflict(f"{target} is not an empty folder; salvage into a new one")
    Quire.open(target).close()  # the current schema, migrated, owner-only
    old = _open_read_only(source)
    new = open_raw_connection(target / DB_FILENAME)
    result = SalvageResult(str(target))
    try:
        new.execute("PRAGMA foreign_keys=OFF").fetchall()
        tables = _tables_to_copy(old, new)
        for table in tables:
            result.tables[table] = _copy_table(old, new, table)
        result.bases, result.chunks_reindexed_from_f16 = _rederive_indexes(old, new)
        result.items_parked = _park_incomplete(target)
        _copy_blob_files(new, Path(damaged_dir), target, result)
    finally:
        new.close()
        old.close()
    return result


def _open_read_only(path: Path) -> apsw.Connection:
    """Read-only, with sqlite-vec loaded (the old vec0 tables hold the float32 vectors)."""
    import sqlite_vec

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    return conn


def _ordinary_tables(conn: apsw.Connection) -> list[str]:
    names = [
        str(r[0])
        for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'")
    ]
    return [n for n in names if n not in SKIPPED and not n.startswith(("vec_base_", "fts_base_", "vecbits_base_"))]


def _tables_to_copy(old: apsw.Connection, new: apsw.Connection) -> list[str]:
    try:
        readable = set(_ordinary_tables(old))
    except apsw.Error:
        raise InvalidInput("the damaged database's schema cannot be read; restore a backup instead") from None
    wanted = [t for t in _ordinary_tables(new) if t in readable]
    return [t for t in FIRST if t in wanted] + [t for t in wanted if t not in FIRST]


def _columns(conn: apsw.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]


def _copy_table(old: apsw.Connection, new: apsw.Connection, table: str) -> dict[str, int]:
    """Stream rows in rowid order; at an unreadable page, find the next readable rowid and go on."""
    cols = [c for c in _columns(new, table) if c in set(_columns(old, table))]
    quoted = ", ".join(f'"{c}"' for c in cols)
    select = f'SELECT rowid, {quoted} FROM "{table}" WHERE rowid >= ? ORDER BY rowid'
    insert = f'INSERT OR IGNORE INTO "{table}" (rowid, {quoted}) VALUES (?, {", ".join("?" for _ in cols)})'
    copied = spans = 0
    start: int | None = -(2**63)
    while start is not None:
        batch: list[Any] = []
        failed = False
        last = start - 1
        try:
            for row in old.execute(select, (start,)):
                batch.append(row)
                last = int(row[0])
                if len(batch) >= PAGE:
                    copied += _insert(new, insert, batch)
                    batch = []
        except apsw.Error:
            failed = True
        copied += _insert(new, insert, batch)
        if not failed:
            break
        spans += 1
        start = _next_readable(old, select + " LIMIT 1", last + 1)
    return {"copied": copied, "unreadable_spans": spans}


def _insert(new: apsw.Connection, sql: str, rows: list[Any]) -> int:
    if rows:
        with new:
            new.executemany(sql, rows)
    return len(rows)


def _next_readable(old: apsw.Connection, probe_sql: str, failing: int) -> int | None:
    """The smallest rowid above ``failing`` from which reading works: growing jumps, then bisection."""

    def readable(rowid: int) -> bool:
        try:
            old.execute(probe_sql, (rowid,)).fetchall()
            return True
        except apsw.Error:
            return False

    low, step = failing, 1
    while True:
        candidate = low + step
        if candidate > 2**62:
            return None
        if readable(candidate):
            break
        low, step = candidate, step * 2
    high = candidate
    while high - low > 1:
        middle = (low + high) // 2
        if readable(middle):
            high = middle
        else:
            low = middle
    return high


def _rederive_indexes(old: apsw.Connection, new: apsw.Connection) -> tuple[int, int]:
    from_f16 = 0
    base_rows: list[Any] = new.execute("SELECT id, dimension FROM bases").fetchall()
    for base_id, dimension in base_rows:
        vec, fts = index.vec_table(base_id), index.fts_table(base_id)
        with new:
            new.execute(f"DROP TABLE IF EXISTS {vec}")
            new.execute(f"DROP TABLE IF EXISTS {fts}")
            new.execute(
                f"CREATE VIRTUAL TABLE {vec} USING vec0(embedding float[{int(dimension)}] distance_metric=cosine)"
            )
            new.execute(f"CREATE VIRTUAL TABLE {fts} USING fts5(text, tokenize='{index.FTS_TOKENIZER}')")
        last = 0
        while True:
            rows: list[Any] = new.execute(
                "SELECT id, text, vector_f16 FROM chunks WHERE base_id = ? AND id > ? ORDER BY id LIMIT ?",
                (base_id, last, PAGE),
            ).fetchall()
            if not rows:
                break
            vectors, texts = [], []
            for cid, text, half in rows:
                floats = _old_vector(old, vec, cid)
                if floats is None and half is not None:
                    floats = np.frombuffer(half, dtype=np.float16).astype(np.float32).tobytes()
                    from_f16 += 1
                if floats is not None:
                    vectors.append((cid, floats))
                texts.append((cid, text))
            with new:
                new.executemany(f"INSERT INTO {vec} (rowid, embedding) VALUES (?, ?)", vectors)
                new.executemany(f"INSERT INTO {fts} (rowid, text) VALUES (?, ?)", texts)
            last = int(rows[-1][0])
    return len(base_rows), from_f16


def _old_vector(old: apsw.Connection, vec: str, chunk_id: int) -> bytes | None:
    with contextlib.suppress(apsw.Error):
        rows: list[Any] = old.execute(f"SELECT embedding FROM {vec} WHERE rowid = ?", (chunk_id,)).fetchall()
        if rows:
            return bytes(rows[0][0])
    return None


def _park_incomplete(target: Path) -> int:
    """Completed leaves whose chunks did not all survive: failed, for a reindex to rebuild them."""
    db = Database.in_dir(target)
    try:
        with db.write() as conn:
            links.rederive_all(conn)  # derived from the salvaged items' metadata, like the indexes
            return tree.park_incomplete(
                conn, tree.Reason(SALVAGED_INCOMPLETE, "some of its chunks were in damaged pages; reindex it")
            )
    finally:
        db.dispose()


def _copy_blob_files(new: apsw.Connection, old_dir: Path, target: Path, result: SalvageResult) -> None:
    """Blob files the salvaged rows name: hash-named regular files inside the old ``blobs/`` only (never
    through a link); other names and unsafe files are skipped and counted."""
    shas: list[Any] = new.execute("SELECT sha256 FROM blobs").fetchall()
    for (sha,) in shas:
        if not blobs.is_blob_name(sha):
            result.blob_names_invalid += 1
            continue
        try:
            data = blobs.read_foreign(old_dir / "blobs", sha)
        except blobs.UnsafeBlobFile:
            result.blob_files_refused += 1
            continue
        if data is None:
            result.blob_files_missing += 1
            continue
        blobs.write_file(target / "blobs", sha, data)
        result.blob_files += 1


def remove_partial(target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
