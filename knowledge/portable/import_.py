"""Import an export file as a new base, without running the encoder.

Transaction contract
* Validation comes first and writes nothing: the file must be a Quire export of a format version this
  build reads, pass ``PRAGMA integrity_check``, match its content checksum, and carry a model stamp this
  installation has (same model id and dimension). Each refusal is an :class:`ImportRefused` with its own
  code.
* Then bounded write transactions (a few hundred rows, or a few MB of blobs, each): the first creates the
  base under a placeholder name together with a ``base_imports`` row, which hides it from listing, lookup,
  search and every operation (:mod:`knowledge.library.bases`); then folder runs, items (parents first), chunks with
  their vectors (vec0, FTS5 and the float16 copy are derived from the exported float32 vectors and text in
  the same transaction as their chunk rows), blobs; each transaction also advances the import's cursor.
  The last transaction writes the audit entries, gives the base its name and deletes the ``base_imports``
  row: the base appears complete, at once, or not at all.
* Nothing in the file is trusted (:mod:`knowledge.portable.import_rules`): it is opened as a foreign
  database, its schema and content are checked before any row is applied, and the whole import reads one
  snapshot of it. Item and chunk ids are renumbered densely from ranges fixed in the first transaction
  (:class:`ImportState`); the ranges are reserved (a placeholder item above them, ``chunks.next_id``
  moved past them) so other writers never take an id the import will need, and a resumed import
  computes exactly the ids the crashed one did.
* What the file says about the world outside is held back until a person vouches for it: source paths
  are marked unverified (reindex reads the owned copies until ``quire base relocate``), and a remote
  embedder's endpoint is kept but disabled until ``quire base confirm-endpoint``.
* After a crash the ``base_imports`` row names a dead process. Importing the same file again resumes from
  the cursor; a worker or window start (a repair scan) removes stale imports instead."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import apsw
from sqlalchemy import Connection, func, select, text
from sqlalchemy import exc as sa_exc

from knowledge.errors import Conflict, InvalidInput
from knowledge.library import audit, chunk_ids, index, tree
from knowledge.library.bases import (
    ENDPOINT_UNCONFIRMED,
    insert_base,
    load_base,
    remove_base,
    set_name,
    validate_name,
)
from knowledge.library.vector_indexes import build_if_due
from knowledge.portable import fileformat as ff
from knowledge.portable import import_record
from knowledge.portable.import_check import (
    EXPORTED_WHILE_ACTIVE,
    STAGES,
    ImportResult,
    Progress,
    check_export,
    open_export,
)
from knowledge.portable.import_rules import ExportInfo, ImportRefused
from knowledge.portable.import_stages import (
    ImportState,
    apply_blobs,
    apply_chunks,
    apply_items,
    apply_runs,
    load_item_ids,
    run_map,
    second_copies,
)
from knowledge.principal import require_person
from knowledge.runtime import Quire
from knowledge.store.schema import bases, items
from knowledge.store.schema_portable import base_imports

log = logging.getLogger(__name__)


def import_base(quire: Quire, path: Path, *, name: str | None = None, progress: Progress | None = None) -> ImportResult:
    require_person("import a knowledge base")
    started = time.monotonic()
    report = progress or (lambda _stage, _done, _total: None)
    report("validate", 0, 1)
    conn = open_export(Path(path))
    try:
        conn.execute("BEGIN")  # one snapshot of the file: the rows applied are the rows checked
        try:
            info = check_export(conn, Path(path))
        except apsw.Error:
            raise ImportRefused("damaged", f"{Path(path).name} is damaged; export the base again") from None
        report("validate", 1, 1)
        final_name = validate_name(name or str(info.base["name"]))
        state, resumed = _begin_or_resume(quire, info, conn, final_name)
        load_item_ids(conn, state)
        _apply_all(quire, info, conn, state, final_name, report)
    finally:
        conn.close()
    # a team store's bulk load is done: a large base gets its HNSW index now (vector_indexes says why now)
    index_seconds = build_if_due(quire.db, state.base_id)
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
        vector_index_seconds=None if index_seconds is None else round(index_seconds, 1),
    )


def _apply_all(
    quire: Quire, info: ExportInfo, export: apsw.Connection, state: ImportState, name: str, report: Progress
) -> None:
    """Every stage; a row the database refuses (a value no export holds) removes the hidden import."""
    try:
        while state.stage != "done":
            _apply_stage(quire, info, export, state, name, report)
    except (ImportRefused, sa_exc.IntegrityError, apsw.Error) as exc:
        discard_import(quire, state.base_id)
        if isinstance(exc, ImportRefused):
            raise
        log.warning("import refused by a database constraint: %s", exc)
        raise ImportRefused(
            "invalid_rows", f"{info.path.name} holds rows Quire never writes; nothing was imported"
        ) from None


def _name_taken(conn: Connection, name: str, except_id: int | None = None) -> bool:
    query = select(bases.c.id).where(func.lower(bases.c.name) == name.lower())
    if except_id is not None:
        query = query.where(bases.c.id != except_id)
    return conn.execute(query).first() is not None


def _begin_or_resume(quire: Quire, info: ExportInfo, export: apsw.Connection, name: str) -> tuple[ImportState, bool]:
    with quire.db.write() as conn:
        for row in conn.execute(select(base_imports).where(base_imports.c.checksum == info.checksum)).all():
            if import_record.owner_alive(row):
                raise Conflict(f"this file is already being imported (process {row.pid}); wait for it to finish")
            import_record.take_over(conn, row.base_id, name)
            log.info("resuming the import of base %s at stage %s", row.base_id, row.stage)
            return ImportState(row.base_id, row.stage, row.cursor, row.item_offset, row.chunk_offset), True
        if _name_taken(conn, name):
            raise Conflict(f"a knowledge base named {name!r} already exists; import it under another name (--name)")
        return _create_hidden_base(conn, info, export, name), False


def _count(export: apsw.Connection, table: str) -> int:
    row: Any = export.execute(f"SELECT count(*) FROM {table}").fetchall()[0]
    return int(row[0])


def _held_back_embedder(info: ExportInfo) -> str | None:
    """A remote embedder's configuration, disabled until a person confirms its endpoint on this machine."""
    embedder = info.base.get("embedder")
    return None if embedder is None else json.dumps({**embedder, ENDPOINT_UNCONFIRMED: True}, sort_keys=True)


def _create_hidden_base(conn: Connection, info: ExportInfo, export: apsw.Connection, name: str) -> ImportState:
    now = time.time()
    settings = info.base
    placeholder = f".importing {info.checksum[:16]} {time.time_ns()}"
    values = {
        "name": placeholder,
        "model_id": info.model_id,
        "dimension": info.dimension,
        "precision": info.precision,
        "backend": info.backend,
        "chunk_size": int(settings["chunk_size"]),
        "chunk_overlap": int(settings["chunk_overlap"]),
        "locked": int(bool(settings.get("locked"))),
        "embedder": _held_back_embedder(info),
        "created_at": float(settings.get("created_at") or now),
        "updated_at": now,
    }
    identity_rows = [
        {"name": ident_name, "kind": kind, "disabled": disabled, "created_at": created_at}
        for _seq, ident_name, kind, disabled, created_at in export.execute(ff.IDENTITIES.select_sql())
    ]
    base_id = insert_base(conn, values, identity_rows)
    first_item = first_chunk = 0
    item_count = _count(export, "items")
    if item_count:
        first_item = tree.reserve_ids(conn, base_id, item_count, now)
    chunk_count = _count(export, "chunks")
    if chunk_count:
        first_chunk = chunk_ids.issue(conn, chunk_count)
    import_record.begin(
        conn,
        base_id,
        name=name,
        checksum=info.checksum,
        stage=STAGES[0],
        first_item=first_item,
        first_chunk=first_chunk,
    )
    return ImportState(base_id, STAGES[0], 0, first_item, first_chunk)


def _apply_stage(
    quire: Quire, info: ExportInfo, export: apsw.Connection, state: ImportState, name: str, report: Progress
) -> None:
    if state.stage == "runs":
        apply_runs(quire, export, state)
    elif state.stage == "items":
        apply_items(quire, export, state, info.counts.get("items", 0), report)
    elif state.stage == "chunks":
        apply_chunks(quire, export, state, info.dimension, info.counts.get("chunks", 0), report)
    elif state.stage == "blobs":
        apply_blobs(quire, export, state, info.counts.get("blobs", 0), report)
    elif state.stage == "finish":
        _finish(quire, export, state, name)
        state.stage = "done"
        report("finish", 1, 1)
    else:
        raise InvalidInput(f"unknown import stage {state.stage!r}")


def _finish(quire: Quire, export: apsw.Connection, state: ImportState, name: str) -> None:
    """The flip: audit entries, the real name, and the end of hiding — one transaction."""
    with quire.db.write() as conn:
        row = conn.execute(select(base_imports).where(base_imports.c.base_id == state.base_id)).one()
        name = row.name
        if _name_taken(conn, name, except_id=state.base_id):
            raise Conflict(f"a knowledge base named {name!r} was created meanwhile; import again with --name")
        runs = run_map(conn, export, state.base_id)
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
        audit.copy_entries(conn, entries)
        item_count = _count(export, "items")
        if item_count:  # the id-range reservation made by the first transaction
            tree.release_reservation(conn, state.base_id, state.first_item, item_count)
        second = sorted(state.item(i) or 0 for i in second_copies(export))
        tree.mark_deleting(conn, second)  # one live item per source: the repair scan's cleanup removes these
        set_name(conn, state.base_id, name)
        index.bump_version(conn, state.base_id)
        index.sync_file_after_commit(conn, state.base_id, check_dead=False)  # its vector file, built now
        import_record.end(conn, state.base_id)


# -- stale imports --------------------------------------------------------------------------------


def discard_import(quire: Quire, base_id: int) -> None:
    """Remove a hidden, unfinished import and everything it wrote (blobs no one else uses included)."""
    with quire.db.write() as conn:
        if conn.execute(select(base_imports.c.base_id).where(base_imports.c.base_id == base_id)).first() is None:
            return
        load_base(conn, base_id)
        remove_base(conn, base_id, quire.blobs_dir)  # cascades folder runs and the import row


def stale_imports(quire: Quire) -> list[int]:
    with quire.db.read() as conn:
        rows = conn.execute(select(base_imports)).all()
    return [int(r.base_id) for r in rows if not import_record.owner_alive(r)]


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
