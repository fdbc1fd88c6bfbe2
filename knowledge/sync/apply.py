"""Applying a diff: the changes in bounded batches, each in its own write transaction that re-checks the claim
and judges the base, each change re-validated there (the row still live and of the scanned generation, the
target path still free), so a redo never duplicates. The cursor moves in the last batch's transaction.

Removed rows go ``deleting`` with their ``delete-subtree`` job in the same transaction (they leave search at
once); added and changed leaves get their ``index-documents`` job in the transaction that creates or resets
them, so no row is ever active without a durable job. Moves update the row in place and keep its material.

One live item per source: a file another item of the base already stands for (a folder run's, a root of its
own) gets no second item in the synced folder's tree — that item keeps standing for it, read again where it is
if it changed; a row moved onto such a file goes (the other item holds the file now).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Connection, and_, select

from knowledge.library import audit, tree
from knowledge.library.tree import NewItem, create_item
from knowledge.lifecycle import INDEX_JOB_LEAVES, Upload, read_files, record_uploads, schedule_delete, schedule_index
from knowledge.lifecycle.identity import find_live_file, is_stale
from knowledge.lifecycle.scheduling import schedule_reindex
from knowledge.store.schema import items
from knowledge.sync.claim import Claim, Outcome, StoodDown, assert_base_takes_writes, target_of
from knowledge.sync.roots import APPLY_BATCH, SyncRoot, move_cursor, setting
from knowledge.sync.scan import Change, Diff

if TYPE_CHECKING:
    from knowledge.runtime import Quire

SYNC_APPLIED = audit.SYNC_BATCH_APPLIED

_ORDER = {"added": 0, "moved": 1, "changed": 2, "removed": 3}


def _apply_order(changes: Sequence[Change]) -> list[Change]:
    """Folders first (parents before children), then moves (out of a folder before it is removed),
    then new and changed files, removals last."""

    def key(c: Change) -> tuple[int, int, int, str]:
        return (_ORDER[c.kind], 0 if c.is_dir else 1, c.relative.count("/"), c.relative)

    return sorted(changes, key=key)


def apply_all(held: Claim, changes: Sequence[Change], diff: Diff, outcome: Outcome, *, pending_after: int = 0) -> None:
    """Apply ``changes`` in batches of ``sync.apply_batch``, each in its own write transaction re-checking the
    claim and the base; the last batch moves the cursor and audits what the diff applied."""
    quire, root = held.quire, held.root
    ordered = _apply_order(changes)
    size = max(1, int(setting(quire.db, APPLY_BATCH)))
    batches = [ordered[i : i + size] for i in range(0, len(ordered), size)] or [[]]
    for number, batch in enumerate(batches):
        uploads = _read_uploads(quire, root, batch)  # a team store: the files travel with their jobs
        with held.writer() as conn:
            held.check(conn)
            assert_base_takes_writes(conn, root.base_id)
            outcome.applied += _apply_batch(quire, conn, root, batch, uploads)
            if number == len(batches) - 1:
                _checkpoint(conn, held, diff, pending_after)
                _audit_applied(conn, held, changes)


def _checkpoint(conn: Connection, held: Claim, diff: Diff, pending: int) -> None:
    """Move the cursor by compare-and-swap, in the transaction of the last change it covers."""
    state = json.dumps({"counts": diff.counts(), "files": diff.files_seen}, sort_keys=True)
    if not move_cursor(conn, held.root, held.generation, held.owner, state, pending):
        raise StoodDown("the cursor moved under this reconcile")


def _audit_applied(conn: Connection, held: Claim, changes: Sequence[Change]) -> None:
    """One audit entry for what this diff applied, per kind (review mode applies a subset); none for nothing."""
    if not changes:
        return
    applied_counts: dict[str, int] = {}
    for c in changes:
        applied_counts[c.kind] = applied_counts.get(c.kind, 0) + 1
    root = held.root
    payload = {"root": root.id, "generation": held.generation, "mode": root.mode, "counts": applied_counts}
    audit.append(conn, SYNC_APPLIED, held.actor, base_id=root.base_id, payload=payload)


def _parent_id(conn: Connection, root: SyncRoot, tree_root_id: int, relative: str) -> int | None:
    parent_rel = relative.rsplit("/", 1)[0] if "/" in relative else None
    root_item = tree.load_item(conn, root.item_id)
    if root_item is None:
        return None
    if parent_rel is None or parent_rel == root_item.relative_path:
        return root_item.id
    row = conn.execute(
        select(items.c.id).where(
            and_(
                items.c.root_id == tree_root_id,
                items.c.relative_path == parent_rel,
                items.c.type == "directory",
                items.c.status != "deleting",
            )
        )
    ).first()
    return None if row is None else int(row.id)


def _live_at(conn: Connection, tree_root_id: int, relative: str) -> int | None:
    row = conn.execute(
        select(items.c.id).where(
            and_(items.c.root_id == tree_root_id, items.c.relative_path == relative, items.c.status != "deleting")
        )
    ).first()
    return None if row is None else int(row.id)


def _live_row(conn: Connection, item_id: int | None, generation: int | None) -> tree.Item | None:
    if item_id is None:
        return None
    item = tree.load_item(conn, item_id)
    if item is None or item.status == "deleting" or (generation is not None and item.generation != generation):
        return None
    return item


@dataclass
class _Batch:
    """One batch's changes in the making: the synced folder's tree, and what the changes leave for the end
    of the batch (leaves to index, items whose containers to reconcile, rows to remove)."""

    root: SyncRoot
    root_item: tree.Item
    tree_root_id: int
    to_index: list[int] = field(default_factory=list)
    touched: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    elsewhere: list[int] = field(default_factory=list)  # files another tree's item stands for, changed since read
    uploads: Mapping[str, Upload] = field(default_factory=dict)  # by relative path (a team store)
    relative_of: dict[int, str] = field(default_factory=dict)  # the leaves to index, where they lie


def _read_uploads(quire: Quire, root: SyncRoot, batch: Sequence[Change]) -> dict[str, Upload]:
    """Outside the batch's transaction: the files it will index, read here for workers elsewhere (team store)."""
    target = target_of(quire, root)
    wanted = {
        c.relative: c.path
        for c in batch
        if c.path is not None
        and not c.is_dir
        and ((c.kind == "added" and c.failure is None) or (c.kind == "changed" and not c.same_bytes))
    }
    return {} if target is None else read_files(quire, target.folder, wanted)


def _apply_batch(
    quire: Quire, conn: Connection, root: SyncRoot, batch: Sequence[Change], uploads: Mapping[str, Upload]
) -> int:
    """Apply one batch (re-validating each change in this transaction); returns how many were applied."""
    root_item = tree.load_item(conn, root.item_id)
    if root_item is None or root_item.status == "deleting":
        raise StoodDown("the synced folder is being deleted")
    state = _Batch(root, root_item, root_item.root_id or root_item.id, uploads=uploads)
    applied = sum(_APPLY.get(c.kind, _nothing_to_apply)(conn, state, c) for c in batch)
    _schedule_and_reconcile(quire, conn, state)
    return applied


def _held_elsewhere(conn: Connection, b: _Batch, c: Change) -> tree.Item | None:
    """The live file item outside this tree that already stands for the change's file, if any (a folder
    run's item, a root of its own): it keeps standing for it, and is read again there if it changed."""
    if c.is_dir or c.path is None:
        return None
    other = find_live_file(conn, b.root.base_id, str(c.path))
    if other is None or other.root_id == b.tree_root_id:
        return None
    if is_stale(other) and other.id not in b.elsewhere:
        b.elsewhere.append(other.id)
    return other


def _apply_added(conn: Connection, b: _Batch, c: Change) -> bool:
    if _live_at(conn, b.tree_root_id, c.relative) is not None:
        return False  # applied by an earlier, interrupted reconcile
    if _held_elsewhere(conn, b, c) is not None:
        return True  # the file has its item already
    parent = _parent_id(conn, b.root, b.tree_root_id, c.relative)
    if parent is None:
        return False  # its folder is not there (yet): the next scan adds it
    new_id = create_item(
        conn,
        NewItem(
            b.root.base_id,
            "directory" if c.is_dir else "file",
            c.relative.rsplit("/", 1)[-1],
            "completed" if c.is_dir else "processing",
            parent_id=parent,
            root_id=b.tree_root_id,
            source_path=str(c.path),
            relative_path=c.relative,
            owner=b.root_item.owner,
            error=c.failure,
        ),
    )
    if not c.is_dir:
        tree.set_file_stat(conn, new_id, tree.FileStat(c.size, c.mtime))
        if c.failure is None:
            b.to_index.append(new_id)
            b.relative_of[new_id] = c.relative
    b.touched.append(new_id)
    return True


def _apply_moved(conn: Connection, b: _Batch, c: Change) -> bool:
    item = _live_row(conn, c.item_id, c.generation)
    parent = _parent_id(conn, b.root, b.tree_root_id, c.relative)
    if item is None or item.relative_path != c.moved_from or parent is None:
        return False
    if _live_at(conn, b.tree_root_id, c.relative) is not None:
        return False
    if _held_elsewhere(conn, b, c) is not None:
        b.removed.append(item.id)  # its bytes now lie where another item stands: that one holds the file
        return True
    stat = tree.FileStat(c.size, c.mtime)
    tree.move(conn, item.id, parent_id=parent, source_path=str(c.path), relative_path=c.relative, stat=stat)
    b.touched.append(item.id)
    if item.parent_id is not None:
        b.touched.append(item.parent_id)
    return True


def _apply_changed(conn: Connection, b: _Batch, c: Change) -> bool:
    item = _live_row(conn, c.item_id, c.generation)
    if item is None:
        return False
    if c.same_bytes:  # touched, same content: only size and mtime are restamped
        tree.set_file_stat(conn, item.id, tree.FileStat(c.size, c.mtime))
        return True
    tree.reset_leaves(conn, b.root.base_id, [item.id], stat=tree.FileStat(c.size, c.mtime))
    b.to_index.append(item.id)
    b.relative_of[item.id] = c.relative
    b.touched.append(item.id)
    return True


def _apply_removed(conn: Connection, b: _Batch, c: Change) -> bool:
    item = _live_row(conn, c.item_id, None)
    if item is None:
        return False
    b.removed.append(item.id)
    return True


def _nothing_to_apply(conn: Connection, b: _Batch, c: Change) -> bool:
    return True  # reported, not applied (unreadable, unstable): counted so the batch is done with it


_APPLY = {"added": _apply_added, "moved": _apply_moved, "changed": _apply_changed, "removed": _apply_removed}


def _schedule_and_reconcile(quire: Quire, conn: Connection, b: _Batch) -> None:
    """The end of a batch: removed rows go ``deleting`` with their cleanup, new and reset leaves get their
    index jobs, and the containers above every change follow their children."""
    base_id = b.root.base_id
    if b.removed:
        outermost = [r.id for r in tree.outermost_selected(conn, base_id, b.removed)]
        schedule_delete(quire.queue, conn, base_id, outermost)
    found = {i: b.uploads[b.relative_of[i]].for_item(i) for i in b.to_index if b.relative_of.get(i) in b.uploads}
    settled = record_uploads(quire, conn, found)  # unreadable here: settled with its reason, no job
    to_index = [i for i in b.to_index if i not in settled]
    for start in range(0, len(to_index), INDEX_JOB_LEAVES):  # a job pipelines its batches (index_documents)
        schedule_index(quire.queue, conn, base_id, to_index[start : start + INDEX_JOB_LEAVES])
    if b.elsewhere:  # read again where they are, in this transaction (as a folder's re-walk does)
        schedule_reindex(quire.queue, conn, base_id, b.elsewhere)
    tree.reconcile_above(conn, [i for i in b.touched if tree.load_item(conn, i) is not None])
    if b.removed:
        gone = (tree.load_item(conn, i) for i in b.removed)
        parents = {r.parent_id for r in gone if r is not None and r.parent_id is not None}
        for p in parents:
            tree.reconcile_container(conn, p)
        tree.reconcile_above(conn, list(parents))
