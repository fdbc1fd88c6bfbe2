"""The lifecycle's scheduling verbs: the one place its four jobs are enqueued.

Every verb works in the caller's write transaction, so an item and the job that advances it commit
together (no row is left active without a durable job) or not at all. Other rooms (sync, folder runs)
schedule through these verbs, never by enqueueing a job type of this room by name.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from jobs.queue import JobId, JobQueue
from knowledge.library import tree
from knowledge.library.ids import ItemId

PREPARE_ROOT = "knowledge.prepare-root"
INDEX_DOCUMENTS = "knowledge.index-documents"
REINDEX_SUBTREE = "knowledge.reindex-subtree"
DELETE_SUBTREE = "knowledge.delete-subtree"

# A *batch* is what one fenced write transaction of an index job commits: at most INDEX_BATCH leaves and
# about INDEX_BATCH_BYTES of source bytes (an unknown size counts as UNKNOWN_SIZE). Big batches keep the
# encoder in long, length-sorted runs of full batches (measured: ~10 % more chunks/s at ~240 chunks per
# call than at ~60) and cost fewer transactions; the byte budget keeps a batch of large files from
# holding too much text in memory. A *job* holds up to INDEX_JOB_BATCHES batches, so its stages overlap:
# batch k+1 is read, parsed and chunked, and batch k-1 written, while batch k is encoded
# (``knowledge.ingest.pipeline``); only the first batch's preparation and the last one's write are not.
INDEX_BATCH = 128
INDEX_BATCH_BYTES = 512 * 1024
UNKNOWN_SIZE = 64 * 1024
INDEX_JOB_BATCHES = 4
INDEX_JOB_LEAVES = INDEX_BATCH * INDEX_JOB_BATCHES
INDEX_JOB_BYTES = INDEX_BATCH_BYTES * INDEX_JOB_BATCHES


def split_batches(
    sizes: Sequence[int | None], *, leaves: int = INDEX_BATCH, budget: int = INDEX_BATCH_BYTES
) -> list[range]:
    """Consecutive index ranges of at most ``leaves`` entries and about ``budget`` bytes each (an entry
    larger than the budget is a batch of its own; ``None`` is a size not known)."""
    batches: list[range] = []
    start, used = 0, 0
    for position, size in enumerate(sizes):
        cost = UNKNOWN_SIZE if size is None else size
        if position > start and (position - start >= leaves or used + cost > budget):
            batches.append(range(start, position))
            start, used = position, 0
        used += cost
    if start < len(sizes):
        batches.append(range(start, len(sizes)))
    return batches


def idempotency_key(base_id: int, root_ids: Sequence[int], action: str) -> str:
    return f"knowledge:{base_id}:{','.join(str(i) for i in sorted(root_ids))}:{action}"


def schedule_prepare(queue: JobQueue, conn: Connection, base_id: int, folder_id: int) -> JobId:
    """Enqueue prepare-root for a folder (walk it, create and schedule its children) and attach the job."""
    job = queue.enqueue(conn, PREPARE_ROOT, {"base_id": base_id, "item_id": folder_id}, base_id=base_id)
    tree.attach_job(conn, [folder_id], job.job_id)
    return job.job_id


def schedule_index(
    queue: JobQueue, conn: Connection, base_id: int, item_ids: Sequence[int], *, status: str | None = None
) -> JobId:
    """Enqueue one index-documents job for these leaves (at most ``INDEX_JOB_LEAVES``) and attach it to them,
    optionally with the status they take up again (recovery's retry of an interrupted batch)."""
    ids = list(item_ids)
    job = queue.enqueue(conn, INDEX_DOCUMENTS, {"base_id": base_id, "item_ids": ids}, base_id=base_id)
    tree.attach_job(conn, ids, job.job_id, status=status)
    return job.job_id


def schedule_reindex(queue: JobQueue, conn: Connection, base_id: int, root_ids: Sequence[int]) -> JobId:
    """Enqueue reindex-subtree for these roots; the job resets them. A request already pending for the
    same roots answers for this one (its key)."""
    return _enqueue_for_roots(queue, conn, REINDEX_SUBTREE, base_id, root_ids, "reindex")


def schedule_delete(
    queue: JobQueue, conn: Connection, base_id: int, root_ids: Sequence[int]
) -> tuple[list[ItemId], JobId]:
    """Mark whole subtrees ``deleting`` (they leave every listing and search at once) and enqueue their
    cleanup; returns the ids marked and the job."""
    ids = sorted(root_ids)
    marked = tree.mark_deleting(conn, ids)
    return marked, enqueue_delete(queue, conn, base_id, ids)


def enqueue_delete(queue: JobQueue, conn: Connection, base_id: int, root_ids: Sequence[int]) -> JobId:
    """Enqueue the cleanup of subtrees already ``deleting`` (a live one for the same roots answers)."""
    return _enqueue_for_roots(queue, conn, DELETE_SUBTREE, base_id, root_ids, "delete")


def _enqueue_for_roots(
    queue: JobQueue, conn: Connection, job_type: str, base_id: int, root_ids: Sequence[int], action: str
) -> JobId:
    ids = sorted(root_ids)
    key = idempotency_key(base_id, ids, action)
    return queue.enqueue(conn, job_type, {"base_id": base_id, "root_ids": ids}, base_id=base_id, key=key).job_id
