"""The stages of an import, each in bounded transactions that advance the import's cursor."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import apsw
import numpy as np
from sqlalchemy import Connection, select

from knowledge.errors import Conflict
from knowledge.folder_runs import add_batch, add_outcome, add_source, create_run
from knowledge.library import blobs, index, tree
from knowledge.portable import fileformat as ff
from knowledge.portable import import_record
from knowledge.portable.import_check import (
    BLOB_PAGE_BYTES,
    EXPORTED_WHILE_ACTIVE,
    PAGE_ROWS,
    STAGES,
    Progress,
)
from knowledge.portable.import_rules import ImportRefused, blob_problem, vector_problem
from knowledge.runtime import Quire
from knowledge.store.schema import ACTIVE_STATUSES
from knowledge.store.schema_runs import folder_runs

log = logging.getLogger(__name__)


@dataclass
class ImportState:
    """Where an import stands. Ids are renumbered densely, never taken from the file: item ``n`` (in the
    order of the exported ids) becomes ``first_item + n``, chunk row ``seq`` becomes ``first_chunk + seq - 1``
    (both ranges reserved by the first transaction), so no file can push ids anywhere."""

    base_id: int
    stage: str
    cursor: int
    first_item: int
    first_chunk: int
    item_ids: dict[int, int] = field(default_factory=dict)  # exported item id -> imported id

    def item(self, exported: Any) -> int | None:
        return None if exported is None else self.item_ids[int(exported)]


def load_item_ids(export: apsw.Connection, state: ImportState) -> None:
    """The exported -> imported item ids (the same every time for the same file: a resume agrees)."""
    ids = export.execute("SELECT id FROM items ORDER BY id")
    state.item_ids = {int(old): state.first_item + n for n, (old,) in enumerate(ids)}


def _advance(conn: Connection, state: ImportState, cursor: int, *, next_stage: bool = False) -> None:
    """Move the cursor by compare-and-set, in the transaction of the rows it covers: from exactly where this
    import left it. Another process that took the import over and moved it makes this one stop loudly
    (``Conflict``), its transaction rolled back, rather than write over the other's progress."""
    expected = (state.stage, state.cursor)
    stage = STAGES[STAGES.index(state.stage) + 1] if next_stage else state.stage
    new_cursor = 0 if next_stage else cursor
    if not import_record.move_cursor(conn, state.base_id, expected, (stage, new_cursor)):
        raise Conflict(
            f"the import's cursor moved under it (expected {expected[0]} at {expected[1]}): another process is "
            "importing this file; this import stopped without writing"
        )
    state.stage, state.cursor = stage, new_cursor


def _imported_key(key: str, base_id: int) -> str:
    return f"{key}#imported-into-{base_id}"


def apply_runs(quire: Quire, export: apsw.Connection, state: ImportState) -> None:
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
                container_item_id=state.item(values["container_item_id"]),
            )
            new_run = create_run(conn, **values)
            fixed = {"run_id": new_run}
            sources = _copy_children(conn, export, ff.RUN_SOURCES, add_source, old_id, fixed, state=state)
            batches = _copy_children(
                conn, export, ff.INGEST_BATCHES, add_batch, old_id, fixed, sources=sources, state=state
            )
            _copy_children(
                conn,
                export,
                ff.RUN_OUTCOMES,
                add_outcome,
                old_id,
                fixed,
                sources=sources,
                batches=batches,
                state=state,
            )
            _advance(conn, state, seq)
    with quire.db.write() as conn:
        _advance(conn, state, 0, next_stage=True)


def _copy_children(
    conn: Connection,
    export: apsw.Connection,
    table: ff.RowTable,
    add: Callable[..., int],
    old_run: int,
    fixed: dict[str, Any],
    *,
    sources: dict[int, int] | None = None,
    batches: dict[int, int] | None = None,
    state: ImportState,
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
            values["item_id"] = state.item(values["item_id"])
        mapping[old_id] = add(conn, **values)  # the ledger's own verb for the table
    return mapping


def run_map(conn: Connection, export: apsw.Connection, base_id: int) -> dict[int, int]:
    """Exported run id -> imported run id (found by the imported idempotency key)."""
    keys = {
        _imported_key(str(k), base_id): int(i) for i, k in export.execute("SELECT id, idempotency_key FROM folder_runs")
    }
    found = conn.execute(
        select(folder_runs.c.id, folder_runs.c.idempotency_key).where(folder_runs.c.base_id == base_id)
    ).all()
    return {keys[r.idempotency_key]: int(r.id) for r in found if r.idempotency_key in keys}


# The exported file items that would be a second live item for their source once imported (the one item per
# source rule, ``store.schema_identity``): an export taken while a deleted copy's cleanup ran (a ``deleting`` row
# becomes a live ``failed`` one here), or of a base that held duplicates before migration 0033. Per source the
# item that stays is the one migration 0033 keeps (not deleting, completed, last updated, highest id); the others,
# with their subtrees, come in without a source path and go ``deleting`` when the import finishes (``_finish``),
# so the normal delete path removes them once the base shows. A ``UNION`` walk: a crafted parent cycle ends.
_SECOND_COPIES = """
WITH RECURSIVE ranked AS (
    SELECT id, row_number() OVER (
        PARTITION BY source_path
        ORDER BY CASE WHEN status = 'deleting' THEN 1 ELSE 0 END, CASE WHEN status = 'completed' THEN 0 ELSE 1 END,
            updated_at DESC, id DESC
    ) AS place
    FROM items WHERE type = 'file' AND source_path IS NOT NULL
),
doomed (id) AS (
    SELECT id FROM ranked WHERE place > 1
    UNION
    SELECT items.id FROM items JOIN doomed ON items.parent_id = doomed.id
)
SELECT id FROM doomed
"""


def second_copies(export: apsw.Connection) -> set[int]:
    """The exported ids of the items that come in as second copies (above), the same on every resume."""
    return {int(r[0]) for r in export.execute(_SECOND_COPIES)}


def apply_items(quire: Quire, export: apsw.Connection, state: ImportState, total: int, report: Progress) -> None:
    active = set(ACTIVE_STATUSES) | {"deleting"}
    second = second_copies(export)
    done = 0
    with quire.db.read() as conn:
        runs = run_map(conn, export, state.base_id)
    while True:
        page = list(export.execute(ff.ITEMS.select_sql(after_seq=True, limit=True), (state.cursor, PAGE_ROWS)))
        if not page:
            break
        rows = []
        for row in page:
            values = dict(zip(ff.ITEMS.columns, row[1:], strict=True))
            if values["id"] in second:
                values["source_path"] = None  # it goes when the import finishes: no second claim on the file
            values.update(
                id=state.item(values["id"]),
                base_id=state.base_id,
                parent_id=state.item(values["parent_id"]),
                root_id=state.item(values["root_id"]),
                job_id=None,
                run_id=None if values["run_id"] is None else runs.get(int(values["run_id"])),
                # someone else's word for where the original is: reindex reads the owned copy (relocate vouches)
                source_unverified=int(values["source_path"] is not None),
            )
            if values["status"] in active:
                values.update(
                    status="failed",
                    error_code=EXPORTED_WHILE_ACTIVE,
                    error_message="it was still being indexed when the base was exported; reindex it",
                )
            rows.append(values)
        with quire.db.write() as conn:
            tree.insert_rows(conn, rows)
            _advance(conn, state, int(page[-1][0]))
        done += len(page)
        report("items", done, total)
    with quire.db.write() as conn:
        _advance(conn, state, 0, next_stage=True)


def apply_chunks(
    quire: Quire, export: apsw.Connection, state: ImportState, dimension: int, total: int, report: Progress
) -> None:
    base_id = state.base_id
    done = 0
    while True:
        page = list(export.execute(ff.CHUNKS.select_sql(after_seq=True, limit=True), (state.cursor, PAGE_ROWS)))
        if not page:
            break
        chunk_rows = []
        vec_floats: list[np.ndarray] = []
        for row in page:
            v = dict(zip(ff.CHUNKS.columns, row[1:], strict=True))
            cid = state.first_chunk + int(row[0]) - 1
            if (problem := vector_problem(v["embedding"], dimension)) is not None:
                raise ImportRefused("invalid_vector", f"the file holds {problem}; not imported")
            vec_floats.append(np.frombuffer(v.pop("embedding"), dtype=np.float32))
            v.update(id=cid, item_id=state.item(v["item_id"]))
            chunk_rows.append(v)
        with quire.db.write() as conn:
            index.insert_chunks(conn, base_id, chunk_rows, np.stack(vec_floats))
            _advance(conn, state, int(page[-1][0]))
        done += len(page)
        report("chunks", done, total)
    with quire.db.write() as conn:
        _advance(conn, state, 0, next_stage=True)


def apply_blobs(quire: Quire, export: apsw.Connection, state: ImportState, total: int, report: Progress) -> None:
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
        for _seq, sha, kind, _size, data in page:  # files first, outside the transaction (blobs.py's rule)
            if (problem := blob_problem(sha, kind, data)) is not None:
                raise ImportRefused("blob_mismatch", f"the file holds {problem}; not imported")
            blobs.write_file(quire.blobs_dir, sha, bytes(data))
        with quire.db.write() as conn:
            for _seq, sha, kind, _size, data in page:
                blobs.record(conn, quire.blobs_dir, sha, bytes(data), kind)
            _advance(conn, state, int(page[-1][0]))
        done += len(page)
        report("blobs", done, total)
    with quire.db.write() as conn:
        _advance(conn, state, 0, next_stage=True)
