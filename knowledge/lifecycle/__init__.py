"""The life of an item: the add/delete/reindex operations with their guards, the four knowledge jobs and
their recovery.

* ``knowledge.prepare-root`` (abandon): purge an earlier partial expansion, walk the folder, create
  children, schedule leaves.
* ``knowledge.index-documents`` (abandon): read → parse → chunk → embed outside any transaction, then
  one short write transaction.
* ``knowledge.reindex-subtree`` (abandon): skip if anything is deleting (at entry and again in the
  write transaction), clear, reset, reschedule.
* ``knowledge.delete-subtree`` (retry): purge vectors, keyword entries and owned files, then rows; on
  failure the rows stay ``deleting`` and the job is retried.

Abandoned jobs never resume silently: their hook parks the items they left active as ``failed`` with the
code ``indexing_interrupted`` (reindex brings them back). The one exception is an ``index-documents``
batch of a base on the packaged local model (the reason to park, never to spend a paid endpoint's calls
again unasked, does not apply): it is re-enqueued at once, its in-flight items counting one worker death
each (``items.deaths``;
two quarantine an item). A base on a remote endpoint always parks. Every write goes through ``ctx.write()`` — fenced on
the job's attempt — and re-reads what it is about to change, so a late or superseded attempt, or an item
that became ``deleting`` or was reset meanwhile (its ``generation`` moved on), is never overwritten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobs.registry import JobType
from knowledge.lifecycle import delete_subtree, index_documents, prepare_root, reindex_subtree
from knowledge.lifecycle.identity import ALREADY_COVERED, ALREADY_PRESENT, CREATED, AddOutcome
from knowledge.lifecycle.ocr_language import installed_languages, set_ocr_language
from knowledge.lifecycle.operations import (
    Changes,
    ItemInput,
    NoteInput,
    PathInput,
    add_items,
    delete_items,
    get_item,
    list_item_chunks,
    list_items,
    reindex_items,
)
from knowledge.lifecycle.passages import DocumentPassages, Passage, open_passages
from knowledge.lifecycle.progress import (
    BaseProgress,
    WorkTotals,
    base_progress,
    live_jobs_total,
    recent_failures,
    work_totals,
)
from knowledge.lifecycle.reading import owned_copy_path
from knowledge.lifecycle.recovery import (
    INTERRUPTED,
    QUARANTINED,
    interrupted_counts,
    interrupted_items,
    on_abandon_prepare,
    on_abandon_reindex,
    release_index,
    repair_blob_files,
    repair_deleting_roots,
    repair_orphan_active_items,
    requeue_interrupted_index,
)
from knowledge.lifecycle.retry_failed import Retried, reindex_failed
from knowledge.lifecycle.scheduling import (
    DELETE_SUBTREE,
    INDEX_BATCH,
    INDEX_DOCUMENTS,
    INDEX_JOB_LEAVES,
    PREPARE_ROOT,
    REINDEX_SUBTREE,
    schedule_delete,
    schedule_index,
)
from knowledge.lifecycle.stale import Stamps, current_stamps, is_stale, reindex_stale, stale_items
from knowledge.lifecycle.tree_pages import (
    ChangedItems,
    SortKey,
    child_status_counts,
    children_page,
    existing_ids,
    items_changed_since,
    sort_key,
)
from knowledge.lifecycle.uploads import Upload, read_files, record_uploads
from knowledge.lifecycle.work_rate import Progress, ProgressTracker, progress_text

if TYPE_CHECKING:
    from knowledge.runtime import Quire

__all__ = [
    "ALREADY_COVERED",
    "ALREADY_PRESENT",
    "CREATED",
    "INDEX_BATCH",
    "INDEX_JOB_LEAVES",
    "INTERRUPTED",
    "QUARANTINED",
    "AddOutcome",
    "BaseProgress",
    "ChangedItems",
    "Changes",
    "DocumentPassages",
    "ItemInput",
    "NoteInput",
    "Passage",
    "PathInput",
    "Progress",
    "ProgressTracker",
    "Retried",
    "SortKey",
    "Stamps",
    "Upload",
    "WorkTotals",
    "add_items",
    "base_progress",
    "child_status_counts",
    "children_page",
    "current_stamps",
    "delete_items",
    "existing_ids",
    "get_item",
    "installed_languages",
    "interrupted_counts",
    "interrupted_items",
    "is_stale",
    "items_changed_since",
    "list_item_chunks",
    "list_items",
    "live_jobs_total",
    "open_passages",
    "owned_copy_path",
    "progress_text",
    "read_files",
    "recent_failures",
    "record_uploads",
    "register",
    "reindex_failed",
    "reindex_items",
    "reindex_stale",
    "schedule_delete",
    "schedule_index",
    "set_ocr_language",
    "sort_key",
    "stale_items",
    "work_totals",
]


def register(quire: Quire) -> None:
    """Add the four knowledge job types and their repair scans to this process's registry."""

    def bind(fn: Any) -> Any:
        return lambda ctx: fn(quire, ctx)

    quire.registry.register(
        JobType(PREPARE_ROOT, bind(prepare_root.prepare_root), "abandon", on_abandon=on_abandon_prepare, pinned=True)
    )
    quire.registry.register(
        JobType(
            INDEX_DOCUMENTS,
            bind(index_documents.index_documents),
            "abandon",
            on_abandon=lambda conn, record: requeue_interrupted_index(quire.queue, conn, [record]),
            on_abandon_batch=lambda conn, records: requeue_interrupted_index(quire.queue, conn, records),
            on_release=release_index,
        )
    )
    quire.registry.register(
        JobType(
            REINDEX_SUBTREE,
            bind(reindex_subtree.reindex_subtree),
            "abandon",
            on_abandon=on_abandon_reindex,
            pinned=True,  # re-reads (and on a team store uploads) the files of the machine that asked
        )
    )
    quire.registry.register(JobType(DELETE_SUBTREE, bind(delete_subtree.delete_subtree), "retry", max_attempts=1000))
    quire.registry.add_repair_scan(repair_deleting_roots)
    quire.registry.add_repair_scan(repair_orphan_active_items)
    quire.registry.add_repair_scan(repair_blob_files(quire))
