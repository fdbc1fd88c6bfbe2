"""``knowledge.index-documents`` (abandon): read, parse, chunk and embed each batch of a job's leaves outside
any transaction, then write the batch's material and statuses in one short fenced transaction. A job holds
up to a few batches, pipelined: a batch is encoded on the encoder's thread while the job's thread writes
the one before and prepares the one after (``knowledge.ingest.pipeline``)."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Sequence
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, select

from jobs.backoff import retry_transient
from jobs.errors import Superseded
from jobs.runtime import JobContext, sanitize_error
from knowledge.ingest.commit_material import commit_prepared_many, write_blob_files
from knowledge.ingest.material import BatchStats, Prepared, Rejected, prepare_many
from knowledge.ingest.models import model_spec
from knowledge.ingest.narrowing import Culprits, embed_narrowed
from knowledge.ingest.nesting import Tally
from knowledge.ingest.parse_worker import ParseWorker
from knowledge.ingest.pipeline import ENCODE_STAGE
from knowledge.ingest.remote import EmbedderUnavailable
from knowledge.library import tree
from knowledge.library.bases import Base, find_base
from knowledge.library.ids import ItemId
from knowledge.lifecycle.members import replace_members
from knowledge.lifecycle.scheduling import split_batches
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
    batches = [[todo[n] for n in batch] for batch in split_batches([_source_size(i) for i in todo])]
    stats = BatchStats()
    try:
        written, rejected = _pipeline(quire, ctx, base, batches, generations, stats)
    except Superseded:
        raise
    except EmbedderUnavailable as exc:  # bounded retries spent: these items fail; a reindex tries again
        _fail_items(ctx, [i.id for i in todo], exc.code, str(exc))
        return {"failed": len(todo), "reason": exc.code}
    except Exception as exc:
        _fail_items(ctx, [i.id for i in todo], "index_error", sanitize_error(exc))
        raise
    stats.rejected = rejected
    return {
        "written": written,
        "batches": len(batches),
        "embedded": stats.embedded,
        "reused": stats.reused_vectors,
        "copied": stats.copied,
        "rejected": stats.rejected,
        **stats.stage_seconds(),
    }


Outcomes = list[Prepared | Rejected]


def _source_size(item: tree.Item) -> int | None:
    """The bytes a leaf will bring, for its batch's byte budget: the size seen last, else the file's now
    (a new leaf has none recorded yet); None for what cannot be stat'ed (read and judged later)."""
    if item.size is not None or item.source_path is None:
        return item.size
    try:
        return os.stat(item.source_path).st_size
    except OSError:
        return None


def _pipeline(
    quire: Quire,
    ctx: JobContext,
    base: Base,
    batches: Sequence[Sequence[tree.Item]],
    generations: dict[ItemId, int],
    stats: BatchStats,
) -> tuple[int, int]:
    """Each batch: prepare (read, parse, chunk), encode, write in its own fenced transaction. The encode of
    batch k runs on the encoder's thread while this thread writes batch k-1 and prepares batch k+1, so at
    most three batches are held. Returns (items written, items rejected)."""
    parser = quire.parsers.for_this_thread()  # parse children belong to the executor thread, which lives on
    prepared: dict[int, Outcomes] = {0: _prepare_batch(quire, base, batches[0], ctx, stats, parser)}
    encoding: Future[Outcomes] | None = _start_encode(quire, ctx, base, prepared.pop(0), stats)
    written = rejected = 0
    try:
        if len(batches) > 1:
            prepared[1] = _prepare_batch(quire, base, batches[1], ctx, stats, parser)
        for k in range(len(batches)):
            assert encoding is not None
            with stats.timed("wait_encode"):  # the part of the encode nothing else overlapped
                outcomes = encoding.result()
            encoding = _start_encode(quire, ctx, base, prepared.pop(k + 1), stats) if k + 1 < len(batches) else None
            with stats.timed("write"):
                outcomes = _with_blobs(quire, outcomes)
                written += retry_transient(partial(_commit_in_one_transaction, quire, ctx, base, outcomes, generations))
            rejected += sum(1 for o in outcomes if isinstance(o, Rejected))
            if k + 2 < len(batches):
                prepared[k + 2] = _prepare_batch(quire, base, batches[k + 2], ctx, stats, parser)
    finally:
        if encoding is not None:  # never leave an encode of this job running behind it
            with contextlib.suppress(BaseException):
                encoding.result()
    return written, rejected


def _prepare_batch(
    quire: Quire, base: Base, batch: Sequence[tree.Item], ctx: JobContext, stats: BatchStats, parser: ParseWorker
) -> Outcomes:
    with ctx.write() as conn:  # in flight from here: a worker death now counts against these items
        tree.set_status(conn, [i.id for i in batch], "reading")
    return _prepare_all(quire, base, batch, ctx, stats, parser)


def _start_encode(quire: Quire, ctx: JobContext, base: Base, outcomes: Outcomes, stats: BatchStats) -> Future[Outcomes]:
    """Mark the batch's prepared items ``embedding`` (here, in the job's thread) and hand their encode to
    the encoder's thread; the future answers the outcomes with every culprit of the encode in place."""
    prepared = [o for o in outcomes if isinstance(o, Prepared)]
    if prepared:
        with ctx.write() as conn:
            tree.set_status(conn, [p.item.id for p in prepared], "embedding")

    def encode() -> Outcomes:
        if not prepared:
            return outcomes
        culprits = embed_narrowed(quire, base, prepared, quire.document_encoder(base), stats)
        return [culprits.get(o.item.id, o) for o in outcomes]

    return ENCODE_STAGE.submit(encode)


def _with_blobs(quire: Quire, outcomes: Outcomes) -> Outcomes:
    culprits = _write_blobs_per_item(quire, [o for o in outcomes if isinstance(o, Prepared)])
    return [culprits.get(o.item.id, o) for o in outcomes]


def _write_blobs_per_item(quire: Quire, prepared: Sequence[Prepared]) -> Culprits:
    """Owned copies, item by item: a copy that cannot be written fails its own item (``blob_write_error``)."""
    failed = Culprits()
    for p in prepared:
        try:
            retry_transient(lambda p=p: write_blob_files(quire.blobs_dir, [p]), attempts=3)  # type: ignore[misc]
        except OSError as exc:
            failed[p.item.id] = Rejected(
                p.item, "blob_write_error", f"the base's own copy could not be written: {sanitize_error(exc)}"
            )
    return failed


def _commit_in_one_transaction(
    quire: Quire, ctx: JobContext, base: Base, outcomes: Sequence[Prepared | Rejected], generations: dict[ItemId, int]
) -> int:
    with ctx.write() as conn:
        return _commit_outcomes(quire, conn, base, outcomes, generations)


def _prepare_all(
    quire: Quire, base: Base, todo: Sequence[tree.Item], ctx: JobContext, stats: BatchStats, parser: ParseWorker
) -> list[Prepared | Rejected]:
    """Parse the batch in this thread's parse process (one request); a hang or crash costs its item."""
    ctx.check_cancelled()
    model_path = model_spec(base.model_id).tokenizer_path
    try:
        return prepare_many(quire, base, todo, model_path, parser, stats)
    except Exception:  # e.g. chunking bug: narrow it to its item, one by one in this process
        log.warning("batch preparation failed; preparing item by item", exc_info=True)
    outcomes: list[Prepared | Rejected] = []
    for item in todo:
        try:
            outcomes.append(prepare_many(quire, base, [item], model_path, parser)[0])
        except Exception as exc:  # a bug isolates this item (poison-item isolation), not the batch
            log.warning("item %s could not be prepared: %s", item.id, exc)
            outcomes.append(Rejected(item, "index_error", sanitize_error(exc)))
    return outcomes


def _still_ours(conn: Connection, generations: dict[ItemId, int], item_ids: Sequence[int]) -> set[int]:
    """Which of the batch's items are still active at the generation this job read (one statement)."""
    ours: set[int] = set()
    for start in range(0, len(item_ids), 500):
        rows = conn.execute(
            select(items.c.id, items.c.generation).where(
                and_(items.c.id.in_(item_ids[start : start + 500]), items.c.status.in_(ACTIVE_STATUSES))
            )
        ).all()
        ours.update(int(r.id) for r in rows if r.generation == generations[ItemId(int(r.id))])
    return ours


def _commit_outcomes(
    quire: Quire, conn: Connection, base: Base, outcomes: Sequence[Prepared | Rejected], generations: dict[ItemId, int]
) -> int:
    """Write the batch's outcomes (the prepared ones' material together, :func:`commit_prepared_many`); a
    container among them gets its members, with their jobs, in this same transaction. An item deleted, reset
    or finished by someone else meanwhile is left alone: never overwrite newer state."""
    ours = _still_ours(conn, generations, [o.item.id for o in outcomes])
    mine = [o for o in outcomes if o.item.id in ours]
    for outcome in mine:
        if isinstance(outcome, Rejected):
            status = tree.terminal_status_for(outcome.code)  # not read by design → skipped, else failed
            tree.set_status(
                conn, [outcome.item.id], status, error_code=outcome.code, error_message=outcome.message, reconcile=False
            )
    prepared = [o for o in mine if isinstance(o, Prepared)]
    commit_prepared_many(conn, quire.blobs_dir, base, prepared, time.time())
    tally: Tally = {}  # sibling containers of one file added share one count of its tree
    for p in prepared:
        if p.members or p.refused:
            replace_members(conn, quire.queue, quire.blobs_dir, base, p.item.id, p.members, p.refused, tally)
    written = [o.item.id for o in mine]
    tree.clear_deaths(conn, written)
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
