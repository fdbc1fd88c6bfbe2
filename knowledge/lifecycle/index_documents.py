"""``knowledge.index-documents`` (abandon): read, parse, chunk and embed a batch of leaves outside any
transaction, then write their material and statuses in one short fenced transaction."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, select

from jobs.errors import Superseded
from jobs.runtime import JobContext, sanitize_error
from knowledge.ingest.material import (
    BatchStats,
    Prepared,
    Rejected,
    commit_prepared,
    embed_batch,
    prepare_one,
    write_blob_files,
)
from knowledge.ingest.models import model_spec
from knowledge.library import items as tree
from knowledge.library.bases import Base, find_base
from knowledge.library.ids import ItemId
from knowledge.store.schema import ACTIVE_STATUSES, items

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


# -- index-documents ---------------------------------------------------------------------------


def index_documents(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    base = find_base(quire.db, ctx.payload["base_id"])
    if base is None:
        return {"skipped": "base deleted"}
    with quire.db.read() as conn:
        loaded = [tree.load_item(conn, i) for i in ctx.payload["item_ids"]]
    todo = [i for i in loaded if i is not None and i.status in ACTIVE_STATUSES]
    if not todo:
        return {"skipped": "nothing active"}
    generations = {i.id: i.generation for i in todo}
    with ctx.write() as conn:
        tree.set_status(conn, [i.id for i in todo], "reading")
    stats = BatchStats()
    try:
        outcomes = _prepare_all(quire, base, todo, ctx)
        prepared = [o for o in outcomes if isinstance(o, Prepared)]
        if prepared:
            with ctx.write() as conn:
                tree.set_status(conn, [p.item.id for p in prepared], "embedding")
            precision = base.precision
            embed_batch(quire, base, prepared, quire.document_encoder(base.model_id, precision), stats)
        write_blob_files(quire.blobs_dir, prepared)
        with ctx.write() as conn:
            written = _commit_outcomes(quire, conn, base, outcomes, generations)
    except Superseded:
        raise
    except Exception as exc:
        _fail_items(ctx, [i.id for i in todo], "index_error", sanitize_error(exc))
        raise
    stats.rejected = sum(1 for o in outcomes if isinstance(o, Rejected))
    return {
        "written": written,
        "embedded": stats.embedded,
        "reused": stats.reused_vectors,
        "copied": stats.copied,
        "rejected": stats.rejected,
    }


def _prepare_all(quire: Quire, base: Base, todo: Sequence[tree.Item], ctx: JobContext) -> list[Prepared | Rejected]:
    model_path = model_spec(base.model_id).path
    outcomes: list[Prepared | Rejected] = []
    for item in todo:
        ctx.check_cancelled()
        try:
            outcomes.append(prepare_one(quire, base, item, model_path))
        except Exception as exc:  # a parser bug isolates this item (poison-item isolation), not the batch
            log.warning("item %s could not be prepared: %s", item.id, exc)
            outcomes.append(Rejected(item, "index_error", sanitize_error(exc)))
    return outcomes


def _still_ours(conn: Connection, item_id: int, generation: int) -> bool:
    current = tree.load_item(conn, item_id)
    return current is not None and current.status in ACTIVE_STATUSES and current.generation == generation


def _commit_outcomes(
    quire: Quire, conn: Connection, base: Base, outcomes: Sequence[Prepared | Rejected], generations: dict[ItemId, int]
) -> int:
    written: list[int] = []
    now = time.time()
    for outcome in outcomes:
        item_id = outcome.item.id
        if not _still_ours(conn, item_id, generations[item_id]):
            continue  # deleted, reset or finished by someone else meanwhile: never overwrite newer state
        if isinstance(outcome, Rejected):
            status = tree.terminal_status_for(outcome.code)  # not read by design → skipped, else failed
            tree.set_status(
                conn, [item_id], status, error_code=outcome.code, error_message=outcome.message, reconcile=False
            )
        else:
            commit_prepared(conn, quire.blobs_dir, base, outcome, now)
        written.append(item_id)
    tree.reconcile_above(conn, written)
    return len(written)


def _fail_items(ctx: JobContext, item_ids: Sequence[int], code: str, message: str) -> None:
    try:
        with ctx.write() as conn:
            active = [
                r.id
                for r in conn.execute(
                    select(items.c.id).where(and_(items.c.id.in_(list(item_ids)), items.c.status.in_(ACTIVE_STATUSES)))
                ).all()
            ]
            tree.set_status(conn, active, "failed", error_code=code, error_message=message)
    except Superseded:
        pass
