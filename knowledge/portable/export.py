"""Export one base to a self-contained file (see :mod:`knowledge.portable.fileformat`).

Transaction contract: everything exported is read inside ONE read transaction (``Database.read()``, a
WAL snapshot), so a worker writing into the base meanwhile never produces a torn copy — an item's
chunks and vectors are either all in the file or none are, and the file holds exactly the committed
state at the moment the snapshot began. The snapshot never blocks writers. Rows stream from the
snapshot through apsw cursors into the new file, committed every few hundred rows, so memory stays
flat in the base's size. Owned blob files are content-addressed and immutable, so they are read beside
the snapshot; a blob purged between the snapshot and its read is reported as missing.

The file is written as ``.<name>.partial`` beside the target, owner-only (0600), checked with
``PRAGMA integrity_check`` and its checksum recomputed from the written file, then renamed into place.
Items still being indexed when the snapshot began are exported as they stand and counted
(``active_items``); an import marks them for reindex.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import apsw
from sqlalchemy import Connection

from knowledge.errors import Conflict, InvalidInput, StoreError
from knowledge.library import blobs, index, index_postgres
from knowledge.library.bases import Base, assert_base_can_run_runtime_operation, resolve_base
from knowledge.portable import fileformat as ff
from knowledge.principal import require_person
from knowledge.runtime import Quire
from knowledge.store.database import raw_apsw
from knowledge.store.permissions import FILE_MODE, create_private_file
from knowledge.store.schema import ACTIVE_STATUSES

Progress = Callable[[str, int, int], None]
ROWS_PER_COMMIT = 500
BLOB_BYTES_PER_COMMIT = 32 * 1024 * 1024


@dataclass(frozen=True)
class ExportResult:
    path: str
    base: str
    items: int
    active_items: int
    chunks: int
    blobs: int
    blobs_missing: int
    folder_runs: int
    audit_entries: int
    bytes: int
    checksum: str
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _quire_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("quire")
    except PackageNotFoundError:
        return "unknown"


class _Writer:
    """The export file being written: batched inserts, periodic commits, the running checksum."""

    def __init__(self, path: Path) -> None:
        self.conn = apsw.Connection(str(path))
        # a crash leaves a .partial file that the next export replaces: no journal needed
        self.conn.execute("PRAGMA journal_mode=OFF").fetchall()
        self.conn.execute("PRAGMA synchronous=OFF").fetchall()
        self.conn.execute(ff.META_CREATE)
        for table in ff.ROW_TABLES:
            self.conn.execute(table.create_sql())
        self.hasher = ff.RowHasher()
        self.pending = 0
        self.conn.execute("BEGIN")

    def copy(self, table: ff.RowTable, rows: Iterator[tuple[Any, ...]], tick: Callable[[], None]) -> int:
        self.hasher.table(table.name)
        sql = table.insert_sql()
        batch: list[tuple[Any, ...]] = []
        seq = 0
        batch_bytes = 0
        for row in rows:
            seq += 1
            self.hasher.row(row)
            batch.append((seq, *row))
            if table is ff.BLOBS:
                batch_bytes += len(row[3])
            if len(batch) >= ROWS_PER_COMMIT or batch_bytes >= BLOB_BYTES_PER_COMMIT:
                self._flush(sql, batch)
                batch, batch_bytes = [], 0
                tick()
        self._flush(sql, batch)
        return seq

    def _flush(self, sql: str, batch: list[tuple[Any, ...]]) -> None:
        if batch:
            self.conn.executemany(sql, batch)
            self.conn.execute("COMMIT")
            self.conn.execute("BEGIN")

    def finish(self, meta: dict[str, str]) -> str:
        ff.hash_meta(self.hasher, meta.items())
        checksum = self.hasher.hexdigest()
        self.conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)", [*meta.items(), (ff.CHECKSUM_KEY, checksum)]
        )
        self.conn.execute("COMMIT")
        return checksum

    def close(self) -> None:
        self.conn.close()


def export_base(quire: Quire, base_ref: str | int, target: Path, *, progress: Progress | None = None) -> ExportResult:
    """Write ``base_ref`` to ``target`` (refusing to overwrite an existing file). A person's: an export holds every
    item, those kept from agents too, so an agent principal is refused."""
    require_person("export a knowledge base")
    started = time.monotonic()
    target = Path(target)
    if target.exists():
        raise Conflict(f"{target.name} already exists; choose another file name")
    if not target.parent.is_dir():
        raise InvalidInput(f"the folder for {target.name} does not exist")
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    create_private_file(partial)
    os.chmod(partial, FILE_MODE)
    report = progress or (lambda _stage, _done, _total: None)
    writer = _Writer(partial)
    try:
        with quire.db.read() as conn:
            src: Source = raw_apsw(conn) if conn.dialect.name == "sqlite" else _TeamSource(conn)
            base = resolve_base(conn, base_ref)
            assert_base_can_run_runtime_operation(base)  # a failed base's index cannot be read whole
            counts, meta = _snapshot_facts(src, base)
            copied = _copy_rows(src, writer, base, quire, counts, report)
        checksum = writer.finish({**meta, "counts": json.dumps({**counts, **copied}, sort_keys=True)})
    except BaseException:
        writer.close()
        partial.unlink(missing_ok=True)
        raise
    writer.close()
    report("check", 0, 1)
    try:
        _verify_written(partial, checksum)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    report("check", 1, 1)
    return ExportResult(
        path=str(target),
        base=base.name,
        items=counts["items"],
        active_items=counts["active_items"],
        chunks=counts["chunks"],
        blobs=copied["blobs"],
        blobs_missing=copied["blobs_missing"],
        folder_runs=counts["folder_runs"],
        audit_entries=counts["audit_entries"],
        bytes=target.stat().st_size,
        checksum=checksum,
        seconds=round(time.monotonic() - started, 3),
    )


class Source(Protocol):
    """What the export reads its snapshot through: apsw's cursor on a data directory, or :class:`_TeamSource`."""

    def execute(self, sql: str, params: tuple[Any, ...] = ..., /) -> Any: ...


class _TeamSource:
    """A team store's read snapshot with apsw's face: the same statements (``?`` placeholders), and vectors
    read back as the float32 bytes the file keeps (pgvector answers ``real[]`` through ``CAST``)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        vectors = "v.embedding FROM" in sql
        if vectors:
            sql = sql.replace("v.embedding FROM", f"{index_postgres.embedding_column('v')} FROM")
        rows = self.conn.exec_driver_sql(sql.replace("?", "%s"), params)
        for row in rows:
            values = [bytes(v) if isinstance(v, memoryview) else v for v in row]
            if vectors:
                values[-1] = index_postgres.as_blob(values[-1])
            yield tuple(values)


def _scalar(src: Source, sql: str, *params: Any) -> int:
    value: Any = next(iter(src.execute(sql, params)))[0]
    return int(value)


def _snapshot_facts(src: Source, base: Base) -> tuple[dict[str, int], dict[str, str]]:
    active = ", ".join(f"'{s}'" for s in (*ACTIVE_STATUSES, "deleting"))
    counts = {
        "items": _scalar(src, "SELECT count(*) FROM items WHERE base_id = ?", base.id),
        "active_items": _scalar(src, f"SELECT count(*) FROM items WHERE base_id = ? AND status IN ({active})", base.id),
        "chunks": _scalar(src, "SELECT count(*) FROM chunks WHERE base_id = ?", base.id),
        "folder_runs": _scalar(src, "SELECT count(*) FROM folder_runs WHERE base_id = ?", base.id),
        "audit_entries": _scalar(src, "SELECT count(*) FROM audit_log WHERE base_id = ?", base.id),
    }
    meta = {
        "format": ff.FORMAT_NAME,
        "format_version": str(ff.FORMAT_VERSION),
        "exported_at": repr(time.time()),
        "quire_version": _quire_version(),
        "base": json.dumps(
            {k: v for k, v in base.as_dict().items() if k not in ("id", "status", "status_reason")}, sort_keys=True
        ),
        "model_id": base.model_id,
        "dimension": str(base.dimension),
        "precision": base.precision,
    }
    return counts, meta


def _copy_rows(
    src: Source, writer: _Writer, base: Base, quire: Quire, counts: dict[str, int], report: Progress
) -> dict[str, int]:
    b = base.id
    item_cols = ", ".join(f'i."{c}"' for c in ff.ITEM_COLUMNS)
    queries: dict[str, tuple[str, tuple[Any, ...]]] = {
        "identities": ("SELECT name, kind, disabled, created_at FROM identities WHERE base_id = ? ORDER BY id", (b,)),
        "folder_runs": (_cols_query(ff.FOLDER_RUNS, "folder_runs", "base_id = ?"), (b,)),
        "folder_run_sources": (
            _cols_query(
                ff.RUN_SOURCES, "folder_run_sources", "run_id IN (SELECT id FROM folder_runs WHERE base_id = ?)"
            ),
            (b,),
        ),
        "ingest_batches": (
            _cols_query(
                ff.INGEST_BATCHES, "ingest_batches", "run_id IN (SELECT id FROM folder_runs WHERE base_id = ?)"
            ),
            (b,),
        ),
        "folder_run_outcomes": (
            _cols_query(
                ff.RUN_OUTCOMES, "folder_run_outcomes", "run_id IN (SELECT id FROM folder_runs WHERE base_id = ?)"
            ),
            (b,),
        ),
        # parents before children, so an import can apply items page by page with foreign keys on
        "items": (
            "WITH RECURSIVE tree(id, depth) AS (SELECT id, 0 FROM items WHERE base_id = ? AND parent_id IS NULL "
            "UNION ALL SELECT c.id, tree.depth + 1 FROM items c JOIN tree ON c.parent_id = tree.id) "
            f"SELECT {item_cols} FROM tree JOIN items i ON i.id = tree.id ORDER BY tree.depth, i.id",
            (b,),
        ),
        "chunks": (
            'SELECT c.id, c.item_id, c.ordinal, c.text, c.start, c."end", c.page, c.line_start, c.line_end, '
            f"c.token_count, c.text_sha256, v.embedding FROM chunks c JOIN {index.vec_table(b)} v ON v.rowid = c.id "
            "WHERE c.base_id = ? ORDER BY c.id",
            (b,),
        ),
        "audit_log": (_cols_query(ff.AUDIT, "audit_log", "base_id = ?"), (b,)),
    }
    totals = {"items": counts["items"], "chunks": counts["chunks"]}
    copied = {"blobs": 0, "blobs_missing": 0}
    for table in ff.ROW_TABLES:
        total = totals.get(table.name, 0)
        done = [0]

        def tick(name: str = table.name, total: int = total, done: list[int] = done) -> None:
            done[0] += ROWS_PER_COMMIT
            report(name, min(done[0], total), total)

        if table is ff.BLOBS:
            rows: Iterator[tuple[Any, ...]] = _blob_rows(src, b, quire, copied)
        else:
            sql, params = queries[table.name]
            rows = (tuple(r) for r in src.execute(sql, params))
        written = writer.copy(table, rows, tick)
        if table.name in totals:
            if written != totals[table.name]:  # the snapshot guarantees this; a mismatch is a bug, not a race
                raise StoreError(f"export of {table.name} wrote {written} rows, expected {totals[table.name]}")
            report(table.name, written, total)
    return copied


def _cols_query(table: ff.RowTable, source: str, where: str) -> str:
    cols = ", ".join(f'"{c}"' for c in table.columns)
    return f"SELECT {cols} FROM {source} WHERE {where} ORDER BY id"


def _blob_rows(src: Source, base_id: int, quire: Quire, copied: dict[str, int]) -> Iterator[tuple[Any, ...]]:
    sql = (
        "SELECT b.sha256, b.kind, b.size FROM blobs b WHERE b.sha256 IN ("
        "SELECT blob_sha256 FROM items WHERE base_id = ? AND blob_sha256 IS NOT NULL UNION "
        "SELECT text_sha256 FROM items WHERE base_id = ? AND text_sha256 IS NOT NULL) ORDER BY b.sha256"
    )
    for sha, kind, size in src.execute(sql, (base_id, base_id)):
        data = blobs.read_owned(quire.db, quire.blobs_dir, sha)  # a team store's copy, or this machine's file
        if data is None:
            copied["blobs_missing"] += 1
            continue
        copied["blobs"] += 1
        yield (sha, kind, size, data)


def _verify_written(path: Path, checksum: str) -> None:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            raise StoreError(f"the written export failed its integrity check: {'; '.join(result[:3])}")
        if ff.content_checksum(conn) != checksum:
            raise StoreError("the written export does not read back as written (checksum differs)")
    finally:
        conn.close()
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
