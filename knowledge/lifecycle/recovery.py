"""Recovery of the knowledge jobs: abandon hooks park what an interrupted job left active (or, for an index
batch on the packaged local model, retry it and count worker deaths), and bounded, paginated repair scans
re-enqueue cleanup and park orphans. Nothing here writes a ``deleting`` row: parking and requeueing only
touch active items (``items.set_status`` never overwrites ``deleting``)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, func, or_, select

from jobs.queue import JobQueue, JobRecord
from jobs.schema import jobs
from knowledge.library import blobs, index, tree
from knowledge.lifecycle.scheduling import DELETE_SUBTREE, enqueue_delete, schedule_index
from knowledge.store import settings
from knowledge.store.schema import ACTIVE_STATUSES, bases, items

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


INTERRUPTED = "indexing_interrupted"
INTERRUPTED_MESSAGE = "indexing was interrupted (the app or worker stopped); reindex to try again"
# -- recovery ----------------------------------------------------------------------------------


def park_interrupted(conn: Connection, item_ids: Sequence[int], job_id: int | None) -> int:
    """Active items of an interrupted job become ``failed`` (indexing_interrupted); reindex retries them."""
    return park_interrupted_many(conn, [(item_ids, job_id)])


def park_interrupted_many(conn: Connection, jobs_items: Sequence[tuple[Sequence[int], int | None]]) -> int:
    """:func:`park_interrupted` for many interrupted jobs at once: one status write, one reconciliation.

    Each entry is (the job's item ids, the job id or None). An item is parked when it is active and no
    other job took it over meanwhile (its ``job_id`` is unset or this job's; folders always).
    """
    claims: dict[int, set[int | None]] = {}
    for item_ids, job_id in jobs_items:
        for item_id in item_ids:
            claims.setdefault(int(item_id), set()).add(job_id)
    ids = sorted(claims)
    parked: list[int] = []
    for start in range(0, len(ids), 500):
        rows = conn.execute(
            select(items.c.id, items.c.job_id, items.c.type).where(
                and_(items.c.id.in_(ids[start : start + 500]), items.c.status.in_(ACTIVE_STATUSES))
            )
        ).all()
        for row in rows:
            jobs_of_item = claims[row.id]
            if None in jobs_of_item or row.job_id is None or row.job_id in jobs_of_item or row.type == "directory":
                parked.append(row.id)
    tree.set_status(conn, parked, "failed", error_code=INTERRUPTED, error_message=INTERRUPTED_MESSAGE)
    return len(parked)


QUARANTINED = "quarantined"
QUARANTINED_MESSAGE = "the worker stopped twice while indexing this file"
DEATHS_BEFORE_QUARANTINE = 2
IN_FLIGHT = ("reading", "embedding")


def requeue_interrupted_index(queue: JobQueue, conn: Connection, records: Sequence[JobRecord]) -> None:
    """The abandon hook of ``index-documents`` (one job or a recovery page of them).

    Recovery parks an interrupted job's items so that a restart never silently re-spends a paid
    embedding API. That reason holds for a base on a remote endpoint (``bases.embedder`` set): its items
    are parked ``failed`` / ``indexing_interrupted`` and nothing reaches the endpoint until a person
    reindexes. On the packaged local model it does not, so the batch is retried at once, without its
    culprit (poison isolation: one bad file must not stop a worker for good):

    * each item that was in flight (``reading``/``embedding``) counts one more worker death
      (``items.deaths``); at ``DEATHS_BEFORE_QUARANTINE`` it is quarantined (``failed``,
      ``quarantined``) — a reindex is the person's explicit retry (every reset clears the count);
    * the other in-flight items go back one job each, so a second death names its culprit exactly;
    * items the batch had not started yet go back together in one job, their count untouched.

    Items another job took over meanwhile are left alone (as in :func:`park_interrupted_many`); items
    that became ``deleting`` are not active, so nothing here ever touches them.
    """
    for record in records:
        item_ids = [int(i) for i in record.payload.get("item_ids", [])]
        base_id = record.payload.get("base_id")
        rows: list[Any] = []
        for start in range(0, len(item_ids), 500):
            rows.extend(
                conn.execute(
                    select(items.c.id, items.c.status, items.c.deaths, items.c.job_id).where(
                        and_(items.c.id.in_(item_ids[start : start + 500]), items.c.status.in_(ACTIVE_STATUSES))
                    )
                ).all()
            )
        mine = [r for r in rows if r.job_id is None or r.job_id == record.id]
        if base_id is None or not _resumes_on_its_own(conn, int(base_id)):
            park_interrupted(conn, [r.id for r in mine], record.id)
            continue
        in_flight = [r for r in mine if r.status in IN_FLIGHT]
        tree.count_death(conn, [r.id for r in in_flight])
        culprits = [r.id for r in in_flight if r.deaths + 1 >= DEATHS_BEFORE_QUARANTINE]
        tree.set_status(conn, culprits, "failed", error_code=QUARANTINED, error_message=QUARANTINED_MESSAGE)
        singles = [[r.id] for r in in_flight if r.deaths + 1 < DEATHS_BEFORE_QUARANTINE]
        waiting = [r.id for r in mine if r.status not in IN_FLIGHT]
        for group in [*singles, *([waiting] if waiting else [])]:
            schedule_index(queue, conn, int(base_id), group, status="processing")
        if culprits:
            log.warning("quarantined %d item(s) of interrupted job %s", len(culprits), record.id)


def release_index(conn: Connection, record: JobRecord) -> None:
    """A stopping worker hands an index job back (a graceful stop, not a death): its items in hand go back
    to waiting, so nothing later reads them as in flight when a worker died (:func:`requeue_interrupted_index`)."""
    item_ids = [int(i) for i in record.payload.get("item_ids", [])]
    in_hand: list[int] = []
    for start in range(0, len(item_ids), 500):
        in_hand.extend(
            int(r.id)
            for r in conn.execute(
                select(items.c.id, items.c.job_id).where(
                    and_(items.c.id.in_(item_ids[start : start + 500]), items.c.status.in_(IN_FLIGHT))
                )
            ).all()
            if r.job_id is None or r.job_id == record.id
        )
    tree.set_status(conn, in_hand, "processing", reconcile=False)  # active either way: containers stand


def _resumes_on_its_own(conn: Connection, base_id: int) -> bool:
    """An interrupted batch of this base may be retried without asking: the base exists and embeds with
    the packaged local model (no remote endpoint that a retry would spend again)."""
    row = conn.execute(select(bases.c.embedder).where(bases.c.id == base_id)).first()
    return row is not None and row.embedder is None


def on_abandon_prepare(conn: Connection, record: JobRecord) -> None:
    root_id = record.payload["item_id"]
    park_interrupted(conn, tree.subtree_ids(conn, [root_id]), record.id)


def on_abandon_reindex(conn: Connection, record: JobRecord) -> None:
    park_interrupted(conn, tree.subtree_ids(conn, record.payload["root_ids"]), record.id)


def repair_deleting_roots(queue: JobQueue, limit: int) -> int:
    """Re-enqueue cleanup for ``deleting`` roots that have no live delete job (bounded, paginated)."""
    enqueued = 0
    after = 0
    while enqueued < limit:
        with queue.db.write() as conn:
            parent = items.alias("parent")
            rows = conn.execute(
                select(items.c.id, items.c.base_id)
                .outerjoin(parent, parent.c.id == items.c.parent_id)
                .where(and_(items.c.status == "deleting", items.c.id > after))
                .where(or_(items.c.parent_id.is_(None), parent.c.status != "deleting"))
                .order_by(items.c.id)
                .limit(200)
            ).all()
            if not rows:
                break
            after = rows[-1].id
            covered = _roots_with_live_delete(conn, [row.id for row in rows])
            for row in rows:
                if row.id in covered or enqueued >= limit:
                    continue
                enqueue_delete(queue, conn, row.base_id, [row.id])
                enqueued += 1
    return enqueued


LIVE_DELETE_PAGE = 500


def _roots_with_live_delete(conn: Connection, roots: Sequence[int]) -> set[int]:
    """Which of ``roots`` a live (pending or running) delete job already covers. The live delete jobs are read
    a page at a time, by id, and only the roots asked about are kept: no read and no answer grows with the
    number of jobs in flight; the reading stops once every root asked about is covered."""
    wanted = set(roots)
    covered: set[int] = set()
    after = 0
    while covered != wanted:
        page = conn.execute(
            select(jobs.c.id, jobs.c.payload)
            .where(and_(jobs.c.type == DELETE_SUBTREE, jobs.c.status.in_(("pending", "running")), jobs.c.id > after))
            .order_by(jobs.c.id)
            .limit(LIVE_DELETE_PAGE)
        ).all()
        for row in page:
            covered |= wanted.intersection(json.loads(row.payload).get("root_ids", []))
        if len(page) < LIVE_DELETE_PAGE:
            break
        after = page[-1].id
    return covered


ORPHAN_GRACE_SECONDS = 30.0
ORPHAN_GRACE_SETTING = "repair.orphan_grace_seconds"
ORPHAN_PAGE = 500


def repair_orphan_active_items(queue: JobQueue, limit: int) -> int:
    """Active items with no live job to advance them → parked ``indexing_interrupted``. Every page, by id.

    An item whose job ended (cancelled, failed, gone) is parked whatever its age: job liveness, not a
    clock, decides (a job left running by a dead session was cancelled by recovery just before this
    scan). An item with no job at all is one a crash caught between its commit and its scheduling; the
    scheduling follows that commit within moments, so only those idle longer than a short grace
    (setting ``repair.orphan_grace_seconds``) are parked. ``limit`` bounds each page's transaction,
    not the scan: it pages on until no orphan is left.
    """
    parked = 0
    after = 0
    page = max(1, min(limit, ORPHAN_PAGE))
    while True:
        with queue.db.write() as conn:
            cutoff = time.time() - orphan_grace_seconds(conn)
            live = select(jobs.c.id).where(jobs.c.status.in_(("pending", "running")))
            rows = conn.execute(
                select(items.c.id)
                .where(items.c.id > after)
                .where(
                    or_(
                        and_(items.c.type != "directory", items.c.status.in_(ACTIVE_STATUSES)),
                        and_(items.c.type == "directory", items.c.status == "preparing"),
                    )
                )
                .where(
                    or_(
                        and_(items.c.job_id.is_(None), items.c.updated_at < cutoff),
                        and_(items.c.job_id.is_not(None), items.c.job_id.not_in(live)),
                    )
                )
                .order_by(items.c.id)
                .limit(page)
            ).all()
            if not rows:
                return parked
            after = rows[-1].id
            parked += park_interrupted(conn, [r.id for r in rows], None)


def orphan_grace_seconds(conn: Connection) -> float:
    return settings.get_float(conn, ORPHAN_GRACE_SETTING, ORPHAN_GRACE_SECONDS)


def repair_blob_files(quire: Quire) -> Any:
    """A repair scan: remove owned files that no row records (a crash between a purge's commit and its
    unlink) and cached vectors nothing uses; reports the files removed (the cache sweep is upkeep)."""

    def scan(queue: JobQueue, limit: int) -> int:
        with queue.db.write() as conn:
            removed = blobs.sweep_orphan_files(conn, quire.blobs_dir, limit)
            index.sweep_vector_cache(conn)
        if removed:
            log.info("removed %d owned file(s) no row records", removed)
        return removed

    return scan


INTERRUPTED_PAGE = 500


def _parked_by_recovery() -> Any:
    return and_(items.c.status == "failed", items.c.error_code == INTERRUPTED)


def interrupted_counts(quire: Quire) -> dict[int, int]:
    """How many items recovery parked, per base (for the start-up notice): one grouped count, a row per base
    that has any, however many items there are."""
    query = (
        select(items.c.base_id, func.count())
        .where(_parked_by_recovery())
        .group_by(items.c.base_id)
        .order_by(items.c.base_id)
    )
    with quire.db.read() as conn:
        return {int(base_id): int(count) for base_id, count in conn.execute(query).all()}


def interrupted_items(
    quire: Quire, base_id: int | None = None, *, after_id: int = 0, limit: int | None = None
) -> list[tree.Item]:
    """Items parked by recovery, one page by id (at most ``INTERRUPTED_PAGE``), for the start-up notice's
    reindex action; ``after_id`` (the last id of the page before) pages on."""
    page = INTERRUPTED_PAGE if limit is None else max(1, min(limit, INTERRUPTED_PAGE))
    query = select(items).where(and_(_parked_by_recovery(), items.c.id > after_id))
    if base_id is not None:
        query = query.where(items.c.base_id == base_id)
    with quire.db.read() as conn:
        return [tree.Item.from_row(r) for r in conn.execute(query.order_by(items.c.id).limit(page)).all()]
