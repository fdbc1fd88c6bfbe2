"""How accepted items get their work, in order: a folder gets ``prepare-root``, leaves ``index-documents``
grouped into jobs by count and source bytes, an item with an invalid reason is settled with no job, an item
that became ``deleting`` meanwhile is passed over. Each group is scheduled in its own write transaction; when an
enqueue fails, the items of that group and every later one become ``failed`` (no row is left active without a
durable job) and the error reaches the caller. Used by add, the folder walk and a subtree's reindex."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy import Connection, and_, select

from jobs.queue import JobId, JobQueue
from knowledge.library import tree
from knowledge.library.bases import Base
from knowledge.library.ids import ItemId
from knowledge.library.tree import Reason
from knowledge.lifecycle.changes import Changes
from knowledge.lifecycle.scheduling import (
    INDEX_JOB_BYTES,
    INDEX_JOB_LEAVES,
    UNKNOWN_SIZE,
    schedule_index,
    schedule_prepare,
)
from knowledge.lifecycle.uploads import read_uploads, record_uploads
from knowledge.store.schema import items

if TYPE_CHECKING:
    from knowledge.runtime import Quire


class Scheduled(NamedTuple):
    """An accepted item on its way to a job: a folder gets prepare-root, a leaf index-documents, and an
    item with an ``invalid`` reason is failed with no job."""

    item_id: ItemId
    kind: str
    invalid: Reason | None


def schedule(
    quire: Quire,
    base: Base,
    accepted: Sequence[Scheduled],
    changes: Changes,
    *,
    sizes: Mapping[ItemId, int] | None = None,
) -> None:
    """Schedule accepted items in order; on an enqueue failure, compensate and re-raise.

    Containers get ``prepare-root``, leaves ``index-documents`` (grouped by count and ``sizes``, in
    bytes, where known), invalid items are marked ``failed`` with no job, items that became
    ``deleting`` meanwhile are skipped.
    """
    groups = _group_for_scheduling(accepted, sizes or {})
    for position, group in enumerate(groups):
        try:
            _schedule_group(quire, base, group, changes)
        except Exception:
            later = [item_id for g in groups[position:] for item_id, _kind, _bad in g]
            _fail_unscheduled(quire, later, changes)
            raise


def schedule_leaves_in(
    queue: JobQueue, conn: Connection, base_id: int, leaf_ids: Sequence[ItemId], sizes: Mapping[ItemId, int]
) -> list[JobId]:
    """In the caller's write transaction: index-documents jobs for fresh leaves, grouped like ``schedule``,
    so the leaves and the jobs that advance them commit together (a crash between the two cannot exist)."""
    groups = _group_for_scheduling([Scheduled(i, "file", None) for i in leaf_ids], sizes)
    return [schedule_index(queue, conn, base_id, [entry[0] for entry in group]) for group in groups]


def _group_for_scheduling(accepted: Sequence[Scheduled], sizes: Mapping[ItemId, int]) -> list[list[Scheduled]]:
    groups: list[list[Scheduled]] = []
    leaves: list[Scheduled] = []
    leaf_bytes = 0
    for entry in accepted:
        item_id, kind, invalid = entry
        if kind == "directory" or invalid is not None:
            if leaves:
                groups.append(leaves)
                leaves = []
            groups.append([entry])
            continue
        cost = sizes.get(item_id, UNKNOWN_SIZE)
        if leaves and (len(leaves) >= INDEX_JOB_LEAVES or leaf_bytes + cost > INDEX_JOB_BYTES):
            groups.append(leaves)
            leaves = []
        if not leaves:
            leaf_bytes = 0
        leaves.append(entry)
        leaf_bytes += cost
    if leaves:
        groups.append(leaves)
    return groups


def _schedule_group(quire: Quire, base: Base, group: Sequence[Scheduled], changes: Changes) -> None:
    leaves = [item_id for item_id, kind, invalid in group if kind != "directory" and invalid is None]
    uploads = read_uploads(quire, leaves)  # a team store: the files' bytes travel with their job
    with quire.db.write() as conn:
        live_ids = [
            r.id
            for r in conn.execute(
                select(items.c.id).where(and_(items.c.id.in_([g[0] for g in group]), items.c.status != "deleting"))
            ).all()
        ]
        entries = [g for g in group if g[0] in live_ids]
        if not entries:
            return
        item_id, kind, invalid = entries[0]
        if invalid is not None:
            status = tree.terminal_status_for(invalid.code)  # an unsupported type is skipped, a missing file failed
            tree.set_status(conn, [item_id], status, error_code=invalid.code, error_message=invalid.message)
            changes.statuses[item_id] = status
            return
        if kind == "directory":
            job_id = schedule_prepare(quire.queue, conn, base.id, item_id)
        else:
            settled = record_uploads(quire, conn, {e[0]: uploads[e[0]] for e in entries if e[0] in uploads})
            changes.statuses.update({ItemId(i): status for i, status in settled.items()})
            ids = [e[0] for e in entries if e[0] not in settled]
            if not ids:
                return
            job_id = schedule_index(quire.queue, conn, base.id, ids)
        changes.job_ids.append(job_id)


def _fail_unscheduled(quire: Quire, item_ids: Sequence[ItemId], changes: Changes) -> None:
    with quire.db.write() as conn:
        tree.set_status(
            conn, list(item_ids), "failed", error_code="enqueue_failed", error_message="could not schedule indexing"
        )
    for item_id in item_ids:
        changes.statuses[item_id] = "failed"
