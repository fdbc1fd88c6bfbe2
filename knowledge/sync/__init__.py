"""Folders that stay in sync (the cursor is checkpointed last, by compare-and-swap, so a crash replays changes
and never loses one).

Any folder item of a base can be marked synced (``sync_roots``, migration ``0018_sync_roots``), in mode
``auto`` (changes applied as found) or ``review`` (listed as pending until a person applies or dismisses
them). Events are hints, the scan is the truth:

* The **watcher** (``watcher.py``, a thread of the worker process) only schedules work: on an event under
  a root it bumps the root's ``dirty_seq`` and enqueues a ``knowledge.sync-root`` job under the root's
  idempotency key (bursts coalesce into a pending job, never into a running one, which may already have
  taken its last look at ``dirty_seq``: two keys alternate). Roots it cannot watch are polled; every root
  gets a periodic full reconcile. It never reads a file and never writes an item.
* The **scan** (``scan.py``) is read-only and bounded: the folder walked with the add-a-folder rules,
  the item rows paged by relative path in short read snapshots, a file hashed only when its size or
  mtime differ. It yields an explicit diff: added, changed, removed, moved, unreadable, unstable.
* **Transaction and cursor contract** (``reconcile.py``, which runs ``claim.py`` → ``apply.py`` or
  ``review.py``; ``roots.py`` alone writes ``sync_roots`` and ``pending.py`` ``sync_pending``): a reconcile
  claims the root first (``scan_generation`` s → s+1 by compare-and-swap, owner stamped; a live claim
  makes a newcomer stand down writing nothing, a dead one's claim is taken over), scans after the claim,
  then applies at most
  ``sync.apply_batch`` changes per write transaction (the job's ``ctx.write()``, re-checking the claim, each
  change re-validated). The cursor (``cursor_generation`` + ``cursor_state``) moves only in the
  transaction of the last batch, by ``UPDATE … WHERE cursor_generation = old AND scan_generation = s+1
  AND scan_owner = me``: a reconcile that lost the race stands down and its transaction rolls back; a
  crash leaves the cursor behind, never ahead, and the next reconcile redoes the remaining difference
  without duplicates. Removed rows go ``deleting`` with their ``delete-subtree`` job in one transaction
  (they leave search at once); added/changed leaves get their ``index-documents`` job in the transaction
  that creates or resets them. Moves update the row in place and keep its material (nothing re-embedded).
* Each applied diff is audited (``sync.batch.applied``: who, when, counts per kind).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobs.registry import JobType
from knowledge.sync import job
from knowledge.sync.claim import Outcome, StoodDown
from knowledge.sync.pending import list_pending, page_pending
from knowledge.sync.reconcile import apply_pending, reconcile
from knowledge.sync.review import dismiss
from knowledge.sync.roots import (
    APPLY_BATCH,
    FULL_RECONCILE_SECONDS,
    POLL_SECONDS,
    QUIET_SECONDS,
    SYNC_ROOT,
    SyncRoot,
    disable_sync,
    enable_sync,
    kept_here,
    list_roots,
    request_reconcile,
    resolve_root,
    root_for_item,
    set_setting,
    setting,
    toggle_sync,
)
from knowledge.sync.scan import Change, Diff
from knowledge.sync.status import RootStatus, SyncState, root_statuses, states_by_item
from knowledge.sync.watcher import SyncWatcher, describe, polling_reason

if TYPE_CHECKING:
    from knowledge.runtime import Quire

__all__ = [
    "APPLY_BATCH",
    "FULL_RECONCILE_SECONDS",
    "POLL_SECONDS",
    "QUIET_SECONDS",
    "SYNC_ROOT",
    "Change",
    "Diff",
    "Outcome",
    "RootStatus",
    "StoodDown",
    "SyncRoot",
    "SyncState",
    "SyncWatcher",
    "apply_pending",
    "describe",
    "disable_sync",
    "dismiss",
    "enable_sync",
    "kept_here",
    "list_pending",
    "list_roots",
    "page_pending",
    "polling_reason",
    "reconcile",
    "register",
    "request_reconcile",
    "resolve_root",
    "root_for_item",
    "root_statuses",
    "set_setting",
    "setting",
    "states_by_item",
    "toggle_sync",
]


def register(quire: Quire) -> None:
    """Add ``knowledge.sync-root`` (recovery ``retry``: a crashed reconcile is simply run again)."""

    def handler(ctx: Any) -> Any:
        return job.sync_root(quire, ctx)

    quire.registry.register(JobType(SYNC_ROOT, handler, "retry", max_attempts=1000, pinned=True))
