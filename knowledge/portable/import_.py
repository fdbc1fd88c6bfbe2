"""Import an export file as a new base, without running the encoder.

Transaction contract
* Validation comes first and writes nothing: the file must be a Quire export of a format version this
  build reads, pass ``PRAGMA integrity_check``, match its content checksum, and carry a model stamp this
  installation has (same model id and dimension). Each refusal is an :class:`ImportRefused` with its own
  code.
* Then bounded write transactions (a few hundred rows, or a few MB of blobs, each): the first creates the
  base under a placeholder name together with a ``base_imports`` row, which hides it from listing, lookup,
  search and every operation (:mod:`knowledge.bases`); then folder runs, items (parents first), chunks with
  their vectors (vec0, FTS5 and the float16 copy are derived from the exported float32 vectors and text in
  the same transaction as their chunk rows), blobs; each transaction also advances the import's cursor.
  The last transaction writes the audit entries, gives the base its name and deletes the ``base_imports``
  row: the base appears complete, at once, or not at all.
* Item ids and chunk ids are the exported ids shifted by an offset fixed in the first transaction; the
  range is reserved (a placeholder item above it, ``chunks.next_id`` moved past it) so other writers never
  take an id the import will need, and a resumed import computes exactly the ids the crashed one did.
* After a crash the ``base_imports`` row names a dead process. Importing the same file again resumes from
  the cursor; a worker or window start (a repair scan) removes stale imports instead.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import apsw
import numpy as np
from sqlalchemy import Connection, delete, func, insert, select, text, update

from jobs.sessions import _process_started_at, is_alive
from knowledge import blobs, index
from knowledge.bases import INGEST_AGENT_NAME, load_base
from knowledge.bases import _validate_name as validate_name
from knowledge.errors import Conflict, GuardRejected, InvalidInput, NotFound
from knowledge.portable import fileformat as ff
from knowledge.runtime import Quire
from knowledge.store.schema import ACTIVE_STATUSES, bases, identities, items
from knowledge.store.schema_portable import base_imports
from knowledge.store.schema_runs import audit_log, folder_runs

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]
PAGE_ROWS = 500
BLOB_PAGE_BYTES = 32 * 1024 * 1024
STAGES = ("runs", "items", "chunks", "blobs", "finish")
EXPORTED_WHILE_ACTIVE = "exported_while_active"


class ImportRefused(GuardRejected):
    """The file cannot be imported here; ``code`` says why (exit code 5)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ExportInfo:
    path: Path
    checksum: str
    base: dict[str, Any]
    counts: dict[str, int]
    model_id: str
    dimension: int
    precision: str


@dataclass(frozen=True)
class ImportResult:
    base_id: int
    name: str
    items: int
    chunks: int
    blobs: int
    marked_for_reindex: int
    resumed: bool
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- validation (writes nothing) ----------------------------------------------------------------


def _open_export(path: Path) -> apsw.Connection:
    if not path.is_file():
        raise NotFound(f"{path.name} does not exist or is not a file")
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except apsw.Error:
        with open(path, "rb") as f:
            header = f.read(16)
        if header == b"SQLite format 3\x00":  # a database, cut short or overwritten
            raise ImportRefused("damaged", f"{path.name} is damaged (truncated or overwritten); export again") from None
        raise ImportRefused("not_an_export", f"{path.name} is not a Quire base export (not a database)") from None
    return conn


def _meta(conn: apsw.Connection, name: str) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    except apsw.CorruptError:
        raise ImportRefused("damaged", f"{name} is damaged (truncated or overwritten); export the base again") from None
    except apsw.Error:
        raise ImportRefused("not_an_export", f"{name} is not a Quire base export") from None


def validate_export(path: Path, *, check_model: bool = True) -> ExportInfo:
    """Check an export file thoroughly; raise :class:`ImportRefused` with a specific code if it is unusable."""
    path = Path(path)
    conn = _open_export(path)
    try:
        meta = _meta(conn, path.name)
        if meta.get("format") != ff.FORMAT_NAME:
            raise ImportRefused("not_an_export", f"{path.name} is not a Quire base export")
        try:
            version = int(meta.get("format_version", ""))
        except ValueError:
            raise ImportRefused("damaged", f"{path.name} has no readable format version") from None
        if version > ff.FORMAT_VERSION:
            raise ImportRefused(
                "newer_format",
                f"{path.name} was written by a newer Quire (export format {version}; this one reads up to "
                f"{ff.FORMAT_VERSION}); update Quire to import it",
            )
        try:
            problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
            checksum = ff.content_checksum(conn)
        except apsw.Error:
            raise ImportRefused("damaged", f"{path.name} is damaged (truncated or overwritten); export again") from None
        if problems != ["ok"]:
            raise ImportRefused("damaged", f"{path.name} is damaged ({problems[0][:120]}); export the base again")
        if checksum != meta.get(ff.CHECKSUM_KEY):
            raise ImportRefused(
                "checksum_mismatch",
                f"{path.name} was changed after it was exported (its content checksum does not match); "
                "export the base again",
            )
        info = ExportInfo(
            path=path,
            checksum=checksum,
            base=json.loads(meta["base"]),
            counts={k: int(v) for k, v in json.loads(meta["counts"]).items()},
            model_id=meta["model_id"],
            dimension=int(meta["dimension"]),
            precision=meta["precision"],
        )
    finally:
        conn.close()
    if check_model:
        _check_model(info)
    return info


def _check_model(info: ExportInfo) -> None:
    """The model stamp must name a model this installation has, of the same dimension (never loaded here)."""
    from knowledge.models import model_spec

    try:
        spec = model_spec(info.model_id)
    except (InvalidInput, ImportError, OSError):
        raise ImportRefused(
            "model_missing",
            f"the base was made with the embedding model {info.model_id!r}, which this installation does not "
            "have; its vectors cannot be searched here",
        ) from None
    if spec.dimension != info.dimension:
        raise ImportRefused(
            "model_mismatch",
            f"the base's vectors have {info.dimension} dimensions but this installation's {info.model_id!r} "
            f"makes {spec.dimension}",
        )


# -- applying -----------------------------------------------------------------------------------


@dataclass
class _State:
    base_id: int
    stage: str
    cursor: int
    item_offset: int
    chunk_offset: int


def import_base(quire: Quire, path: Path, *, name: str | None = None, progress: Progress | None = None) -> ImportResult:
    started = time.monotonic()
    report = progress or (lambda _stage, _done, _total: None)
    report("validate", 0, 1)
    info = validate_export(Path(path))
    report("validate", 1, 1)
    final_name = validate_name(name or str(info.base["name"]))
    conn = _open_export(info.path)
    try:
        state, resumed = _begin_or_resume(quire, info, conn, final_name)
        while state.stage != "done":
            _apply_stage(quire, info, conn, state, final_name, report)
    finally:
        conn.close()
    with quire.db.read() as c:
        counts = c.execute(
            select(func.count(), func.coalesce(func.sum(items.c.chunk_count), 0)).where(
                items.c.base_id == state.base_id
            )
        ).one()
        reindex = c.execute(
            select(func.count()).where(items.c.base_id == state.base_id, items.c.error_code == EXPORTED_WHILE_ACTIVE)
        ).scalar_one()
        chunk_rows = c.execute(
            text("SELECT count(*) FROM chunks WHERE base_id = :b"), {"b": state.base_id}
        ).scalar_one()
    return ImportResult(
        base_id=state.base_id,
        name=final_name,
        items=int(counts[0]),
        chunks=int(chunk_rows),
        blobs=info.counts.get("blobs", 0),
        marked_for_reindex=int(reindex),
        resumed=resumed,
        seconds=round(time.monotonic() - started, 3),
    )


def _owner_values() -> dict[str, Any]:
    import os

    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "pid": pid,
        "process_started_at": _process_started_at(pid),
        "heartbeat_at": time.time(),
    }


def _name_taken(conn: Connection, name: str, except_id: int | None = None) -> bool:
    query = select(bases.c.id).where(func.lower(bases.c.name) == name.lower())
    if except_id is not None:
        query = query.where(bases.c.id != except_id)
    return conn.execute(query).first() is not None


def _owner_alive(row: Any) -> bool:
    return is_alive(row.host, row.pid, row.process_started_at, row.heartbeat_at, None)


def _begin_or_resume(quire: Quire, info: ExportInfo, export: apsw.Connection, name: str) -> tuple[_State, bool]:
    with quire.db.write() as conn:
        for row in conn.execute(select(base_imports).where(base_imports.c.checksum == info.checksum)).all():
            if _owner_alive(row):
                raise Conflict(f"this file is already being imported (process {row.pid}); wait for it to finish")
            conn.execute(
                update(base_imports).where(base_imports.c.base_id == row.base_id).values(**_owner_values(), name=name)
            )
            log.info("resuming the import of base %s at stage %s", row.base_id, row.stage)
            return _State(row.base_id, row.stage, row.cursor, row.item_offset, row.chunk_offset), True
        if _name_taken(conn, name):
            raise Conflict(f"a knowledge base named {name!r} already exists; import it under another name (--name)")
        return _create_hidden_base(conn, info, export, name), False


def _span(export: apsw.Connection, table: str) -> tuple[int, int] | None:
    row: Any = export.execute(f"SELECT min(id), max(id) FROM {table}").fetchall()[0]
    return None if row[0] is None else (int(row[0]), int(row[1]))


def _create_hidden_base(conn: Connection, info: ExportInfo, export: apsw.Connection, name: str) -> _State:
    now = time.time()
    settings = info.base
    placeholder = f".importing {info.checksum[:16]} {time.time_ns()}"
    pk = conn.execute(
        insert(bases).values(
            name=placeholder,
            model_id=info.model_id,
            dimension=info.dimension,
            precision=info.precision,
            chunk_size=int(settings["chunk_size"]),
            chunk_overlap=int(settings["chunk_overlap"]),
            locked=int(bool(settings.get("locked"))),
            created_at=float(settings.get("created_at") or now),
            updated_at=now,
        )
    ).inserted_primary_key
    assert pk is not None
    base_id = int(pk[0])
    index.create_base_index(conn, base_id, info.dimension)
    exported_identities = list(export.execute(ff.IDENTITIES.select_sql()))
    if not any(r[2] == "ingest_agent" for r in exported_identities):
        conn.execute(
            insert(identities).values(base_id=base_id, name=INGEST_AGENT_NAME, kind="ingest_agent", created_at=now)
        )
    for _seq, ident_name, kind, disabled, created_at in exported_identities:
        conn.execute(
            insert(identities).values(
                base_id=base_id, name=ident_name, kind=kind, disabled=disabled, created_at=created_at
            )
        )
    item_offset = chunk_offset = 0
    item_span = _span(export, "items")
    if item_span is not None:
        top = int(conn.execute(select(func.coalesce(func.max(items.c.id), 0))).scalar_one())
        item_offset = top + 1 - item_span[0]
        # reserve the id range: rowids are max + 1, so nobody else lands inside it before the import ends
        conn.execute(
            insert(items).values(
                id=item_span[1] + item_offset + 1,
                base_id=base_id,
                type="note",
                name=".import placeholder",
                status="failed",
                created_at=now,
                updated_at=now,
            )
        )
    chunk_span = _span(export, "chunks")
    if chunk_span is not None:
        first = index._allocate_chunk_ids(conn, chunk_span[1] - chunk_span[0] + 1)
        chunk_offset = first - chunk_span[0]
    conn.execute(
        insert(base_imports).values(
            base_id=base_id,
            name=name,
            checksum=info.checksum,
            stage=STAGES[0],
            cursor=0,
            item_offset=item_offset,
            chunk_offset=chunk_offset,
            started_at=now,
            **_owner_values(),
        )
    )
    return _State(base_id, STAGES[0], 0, item_offset, chunk_offset)


def _advance(conn: Connection, state: _State, cursor: int, *, next_stage: bool = False) -> None:
    if next_stage:
        state.stage = STAGES[STAGES.index(state.stage) + 1]
        state.cursor = 0
    else:
        state.cursor = cursor
    conn.execute(
        update(base_imports)
        .where(base_imports.c.base_id == state.base_id)
        .values(stage=state.stage, cursor=state.cursor, heartbeat_at=time.time())
    )


def _apply_stage(
    quire: Quire, info: ExportInfo, export: apsw.Connection, state: _State, name: str, report: Progress
) -> None:
    if state.stage == "runs":
        _apply_runs(quire, export, state)
    elif state.stage == "items":
        _apply_items(quire, export, state, info.counts.get("items", 0), report)
    elif state.stage == "chunks":
        _apply_chunks(quire, export, state, info.counts.get("chunks", 0), report)
    elif state.stage == "blobs":
        _apply_blobs(quire, export, state, info.counts.get("blobs", 0), report)
    elif state.stage == "finish":
        _finish(quire, export, state, name)
        state.stage = "done"
        report("finish", 1, 1)
    else:
        raise InvalidInput(f"unknown import stage {state.stage!r}")


def _imported_key(key: str, base_id: int) -> str:
    return f"{key}#imported-into-{base_id}"


def _shift(value: Any, offset: int) -> Any:
    return None if value is None else int(value) + offset


def _apply_runs(quire: Quire, export: apsw.Connection, state: _State) -> None:
    """One transaction per folder run: the run, its manifest, batches and outcomes, with fresh ids."""
    runs = list(export.execute(ff.FOLDER_RUNS.select_sql(after_seq=True), (state.cursor,)))
    for run in runs:
        seq, values = run[0], dict(zip(ff.FOLDER_RUNS.columns, run[1:], strict=True))
        old_id = values.pop("id")
        with quire.db.write() as conn:
            if values["status"] in ("pending", "running"):
                values.update(status="failed", error="the base was exported while this run was in progress")
            values.update(
                base_id=state.base_id,
                idempotency_key=_imported_key(values["idempotency_key"], state.base_id),
                job_id=None,
                container_item_id=_shift(values["container_item_id"], state.item_offset),
            )
            pk = conn.execute(insert(folder_runs).values(**values)).inserted_primary_key
            assert pk is not None
            new_run = int(pk[0])
            sources = _copy_children(conn, export, ff.RUN_SOURCES, old_id, {"run_id": new_run})
            batches = _copy_children(
                conn, export, ff.INGEST_BATCHES, old_id, {"run_id": new_run}, sources=sources, offset=state.item_offset
            )
            _copy_children(
                conn,
                export,
                ff.RUN_OUTCOMES,
                old_id,
                {"run_id": new_run},
                sources=sources,
                batches=batches,
                offset=state.item_offset,
            )
            _advance(conn, state, seq)
    with quire.db.write() as conn:
        _advance(conn, state, 0, next_stage=True)


def _copy_children(
    conn: Connection,
    export: apsw.Connection,
    table: ff.RowTable,
    old_run: int,
    fixed: dict[str, Any],
    *,
    sources: dict[int, int] | None = None,
    batches: dict[int, int] | None = None,
    offset: int = 0,
) -> dict[int, int]:
    cols = ", ".join(f'"{c}"' for c in table.columns)
    mapping: dict[int, int] = {}
    for row in export.execute(f"SELECT {cols} FROM {table.name} WHERE run_id = ? ORDER BY seq", (old_run,)):
        values = dict(zip(table.columns, row, strict=True))
        old_id = int(values.pop("id"))
        values.update(fixed)
        if sources is not None and "source_id" in values:
            values["source_id"] = sources[int(values["source_id"])]
        if batches is not None and values.get("batch_id") is not None:
            values["batch_id"] = batches.get(int(values["batch_id"]))
        if "item_id" in values:
            values["item_id"] = _shift(values["item_id"], offset)
        cols_new = ", ".join(f'"{c}"' for c in values)
        marks = ", ".join(f":{c}" for c in values)
        result = conn.execute(text(f"INSERT INTO {table.name} ({cols_new}) VALUES ({marks})"), values)
        mapping[old_id] = int(result.lastrowid)
    return mapping


def _run_map(conn: Connection, export: apsw.Connection, base_id: int) -> dict[int, int]:
    """Exported run id -> imported run id (found by the imported idempotency key)."""
    keys = {
        _imported_key(str(k), base_id): int(i) for i, k in export.execute("SELECT id, idempotency_key FROM folder_runs")
    }
    found = conn.execute(
        select(folder_runs.c.id, folder_runs.c.idempotency_key).where(folder_runs.c.base_id == base_id)
    ).all()
    return {keys[r.idempotency_key]: int(r.id) for r in found if r.idempotency_key in keys}


def _apply_items(quire: Quire, export: apsw.Connection, state: _State, total: int, report: Progress) -> None:
    active = set(ACTIVE_STATUSES) | {"deleting"}
    done = 0
    with quire.db.read() as conn:
        runs = _run_map(conn, export, state.base_id)
    while True:
        page = list(export.execute(ff.ITEMS.select_sql(after_seq=True, limit=True), (state.cursor, PAGE_ROWS)))
        if not page:
            break
        rows = []
        for row in page:
            values = dict(zip(ff.ITEMS.columns, row[1:], strict=True))
            values.update(
                id=int(values["id"]) + state.item_offset,
                base_id=state.base_id,
                parent_id=_shift(values["parent_id"], state.item_offset),
                root_id=_shift(values["root_id"], state.item_offset),
                job_id=None,
                run_id=None if values["run_id"] is None else runs.get(int(values["run_id"])),
            )
            if values["status"] in active:
                values.update(
                    status="failed",
                    error_code=EXPORTED_WHILE_ACTIVE,
                    error_message="it was still being indexed when the base was exported; reindex it",
                )
            rows.append(values)
        with quire.db.write() as conn:
            conn.execute(insert(items), rows)
            _advance(conn, state, int(page[-1][0]))
        done += len(page)
        report("items", done, total)
    with quire.db.write() as conn:
        _advance(conn, state, 0, next_stage=True)


def _apply_chunks(quire: Quire, export: apsw.Connection, state: _State, total: int, report: Progress) -> None:
    base_id = state.base_id
    vec, fts = index.vec_table(base_id), index.fts_table(base_id)
    done = 0
    while True:
        page = list(export.execute(ff.CHUNKS.select_sql(after_seq=True, limit=True), (state.cursor, PAGE_ROWS)))
        if not page:
            break
        chunk_rows, vec_rows, fts_rows = [], [], []
        for row in page:
            v = dict(zip(ff.CHUNKS.columns, row[1:], strict=True))
            cid = int(v["id"]) + state.chunk_offset
            floats = np.frombuffer(v.pop("embedding"), dtype=np.float32)
            v.update(
                id=cid,
                base_id=base_id,
                item_id=int(v["item_id"]) + state.item_offset,
                vector_f16=floats.astype(np.float16).tobytes(),
            )
            chunk_rows.append(v)
            vec_rows.append({"id": cid, "e": floats.tobytes()})
            fts_rows.append({"id": cid, "t": v["text"]})
        with quire.db.write() as conn:
            conn.execute(
                text(
                    'INSERT INTO chunks (id, base_id, item_id, ordinal, text, start, "end", page, line_start, '
                    "line_end, token_count, text_sha256, vector_f16) VALUES (:id, :base_id, :item_id, :ordinal, "
                    ":text, :start, :end, :page, :line_start, :line_end, :token_count, :text_sha256, :vector_f16)"
                ),
                chunk_rows,
            )
            conn.execute(text(f"INSERT INTO {vec} (rowid, embedding) VALUES (:id, :e)"), vec_rows)
            conn.execute(text(f"INSERT INTO {fts} (rowid, text) VALUES (:id, :t)"), fts_rows)
            _advance(conn, state, int(page[-1][0]))
        done += len(page)
        report("chunks", done, total)
    with quire.db.write() as conn:
        _advance(conn, state, 0, next_stage=True)


def _apply_blobs(quire: Quire, export: apsw.Connection, state: _State, total: int, report: Progress) -> None:
    done = 0
    sql = ff.BLOBS.select_sql(after_seq=True)
    while True:
        page: list[tuple[Any, ...]] = []
        size = 0
        for row in export.execute(sql, (state.cursor,)):
            page.append(tuple(row))
            size += len(row[4])
            if len(page) >= PAGE_ROWS or size >= BLOB_PAGE_BYTES:
                break
        if not page:
            break
        for _seq, sha, _kind, _size, data in page:  # files first, outside the transaction (blobs.py's rule)
            blobs.write_file(quire.blobs_dir, sha, bytes(data))
        with quire.db.write() as conn:
            for _seq, sha, kind, _size, data in page:
                blobs.record(conn, quire.blobs_dir, sha, bytes(data), kind)
            _advance(conn, state, int(page[-1][0]))
        done += len(page)
        report("blobs", done, total)
    with quire.db.write() as conn:
        _advance(conn, state, 0, next_stage=True)


def _finish(quire: Quire, export: apsw.Connection, state: _State, name: str) -> None:
    """The flip: audit entries, the real name, and the end of hiding — one transaction."""
    with quire.db.write() as conn:
        row = conn.execute(select(base_imports).where(base_imports.c.base_id == state.base_id)).one()
        name = row.name
        if _name_taken(conn, name, except_id=state.base_id):
            raise Conflict(f"a knowledge base named {name!r} was created meanwhile; import again with --name")
        runs = _run_map(conn, export, state.base_id)
        entries = [
            {
                "at": at,
                "action": action,
                "actor": actor,
                "base_id": state.base_id,
                "run_id": None if run_id is None else runs.get(int(run_id)),
                "attempt": attempt,
                "payload": payload,
            }
            for _seq, _id, at, action, actor, run_id, attempt, payload in export.execute(ff.AUDIT.select_sql())
        ]
        if entries:
            conn.execute(insert(audit_log), entries)
        item_span = _span(export, "items")
        if item_span is not None:  # the id-range reservation made by the first transaction
            placeholder = item_span[1] + state.item_offset + 1
            conn.execute(delete(items).where(items.c.id == placeholder, items.c.base_id == state.base_id))
        conn.execute(update(bases).where(bases.c.id == state.base_id).values(name=name, updated_at=time.time()))
        index._bump_version(conn, state.base_id)
        conn.execute(delete(base_imports).where(base_imports.c.base_id == state.base_id))


# -- stale imports --------------------------------------------------------------------------------


def discard_import(quire: Quire, base_id: int) -> None:
    """Remove a hidden, unfinished import and everything it wrote (blobs no one else uses included)."""
    with quire.db.write() as conn:
        if conn.execute(select(base_imports.c.base_id).where(base_imports.c.base_id == base_id)).first() is None:
            return
        load_base(conn, base_id)
        index.drop_base_index(conn, base_id)
        ids = [r.id for r in conn.execute(select(items.c.id).where(items.c.base_id == base_id)).all()]
        shas = blobs.shas_of_items(conn, ids)
        conn.execute(delete(items).where(items.c.base_id == base_id))
        blobs.purge_unreferenced(conn, quire.blobs_dir, shas)
        conn.execute(delete(identities).where(identities.c.base_id == base_id))
        conn.execute(delete(bases).where(bases.c.id == base_id))  # cascades folder runs and the import row


def stale_imports(quire: Quire) -> list[int]:
    with quire.db.read() as conn:
        rows = conn.execute(select(base_imports)).all()
    return [int(r.base_id) for r in rows if not _owner_alive(r)]


def discard_stale_imports(quire: Quire) -> int:
    gone = 0
    for base_id in stale_imports(quire):
        discard_import(quire, base_id)
        log.warning("removed the unfinished import of base %s (its process is gone)", base_id)
        gone += 1
    return gone


def register(quire: Quire) -> None:
    """Worker and window starts clean up imports a crashed process left behind (a repair scan)."""

    def repair_stale_imports(_queue: Any, _limit: int) -> int:
        discard_stale_imports(quire)
        return 0

    quire.registry.add_repair_scan(repair_stale_imports)
