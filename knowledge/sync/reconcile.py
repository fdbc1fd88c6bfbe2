"""One reconcile of a synced root: claim → scan → apply in bounded batches → compare-and-swap the cursor.

Contract (see also the room's docstring in ``knowledge/sync/__init__.py``):

* **Claim first.** A reconcile first claims the root in a tiny write transaction: ``scan_generation``
  goes from ``s`` to ``s + 1`` with ``scan_owner`` stamped (``UPDATE … WHERE scan_generation = s``). A
  claim held by a live process (not stale) makes the newcomer stand down at once, writing nothing. A
  claim left by a dead process is taken over. The scan reads the item rows *after* the claim, so it sees
  everything an earlier, interrupted reconcile committed.
* **Fenced batches.** Changes are applied at most ``sync.apply_batch`` (200) per write transaction, each opened by
  the caller's writer (``ctx.write()`` in a job: fenced on the job attempt) and re-checking the claim
  (``scan_generation``/``scan_owner``); a reconcile whose claim was taken over raises ``StoodDown`` and
  its transaction rolls back. Each change is re-validated inside the transaction (the row is still live
  and of the scanned generation, the target path still free), so a redo never duplicates.
* **Checkpoint last.** The cursor moves (``cursor_generation = s + 1``) only in the transaction of the
  last batch, by compare-and-swap on the old cursor and the claim. A crash anywhere leaves the cursor
  behind; the next reconcile scans again and redoes only the difference that is left.
* **The base is judged in each batch's own transaction.** A base that is locked or failed takes nothing:
  the batch rolls back, the claim is released with the reason in ``last_error`` (``base_unavailable: …``,
  so the root's state reads ``waiting``) and the root is looked at again every ``sync.poll_seconds``; the
  next reconcile that finds the base writable applies what is still there.
* Removed rows are marked ``deleting`` with their ``delete-subtree`` job in the same transaction (seed
  001: they leave search at once); added and changed leaves get their ``index-documents`` job in the
  transaction that creates or resets them, so no row is ever active without a durable job.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, delete, select, update

from jobs.sanitize import sanitize_error, sanitize_optional
from jobs.sessions import live_session_ids
from knowledge.errors import Conflict, NotFound
from knowledge.library import audit, tree
from knowledge.library.bases import failed_refusal, load_base, locked_refusal
from knowledge.library.tree import NewItem, create_item
from knowledge.lifecycle import INDEX_JOB_LEAVES, Upload, read_files, record_uploads, schedule_delete, schedule_index
from knowledge.principal import require_person
from knowledge.store.schema import items
from knowledge.store.schema_sync import sync_pending, sync_roots
from knowledge.sync.roots import (
    APPLY_BATCH,
    POLL_SECONDS,
    QUIET_SECONDS,
    WAITING_FOR_BASE,
    SyncRoot,
    Writer,
    load_root,
    schedule_reconcile,
    setting,
)
from knowledge.sync.scan import Change, Diff, Target, scan

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)

STALE_CLAIM_SECONDS = 600.0  # a claim older than this is taken over even if its process lives
SYNC_APPLIED = audit.SYNC_BATCH_APPLIED
PREPARING_RETRY_SECONDS = 1.0  # a root still being expanded by prepare-root is looked at again after this


class StoodDown(Conflict):
    """Another reconcile holds (or took over) this root: this one writes nothing more."""

    code = "sync_stood_down"


class BaseUnavailable(StoodDown):
    """The root's base is locked or failed: nothing is written into it; the root waits."""

    code = WAITING_FOR_BASE


def _assert_base_takes_writes(conn: Connection, base_id: int) -> None:
    """Judged inside the batch's write transaction, so the verdict still holds when the batch commits."""
    try:
        base = load_base(conn, base_id)
    except NotFound:
        raise StoodDown("the base is gone") from None
    refusal = failed_refusal(base) or locked_refusal(base, "sync into it")
    if refusal:
        raise BaseUnavailable(refusal)


@dataclass
class Outcome:
    root_id: int
    generation: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    applied: int = 0
    pending: int = 0
    hashed: int = 0
    files_seen: int = 0
    stood_down: str | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def new_owner(quire: Quire, tag: str = "") -> str:
    """A claim's owner: this process's session id (for liveness) and a nonce."""
    return f"{quire.queue.session.id}|{tag or uuid.uuid4().hex[:10]}"


def _session_of(owner: str) -> str:
    return owner.split("|", 1)[0]


def claim(quire: Quire, writer: Writer, root_id: int, owner: str) -> tuple[SyncRoot, int]:
    """Claim the root for one reconcile; return it and the claimed generation, or raise ``StoodDown``."""
    with writer() as conn:
        quire.queue.ensure_session(conn)
        root = load_root(conn, root_id)
        if root is None:
            raise StoodDown("this folder is no longer kept in sync")
        if root.scan_owner is not None and root.scan_owner != owner:
            fresh = root.scan_started_at is not None and time.time() - root.scan_started_at < STALE_CLAIM_SECONDS
            if fresh and _session_of(root.scan_owner) in live_session_ids(conn):
                raise StoodDown("another reconcile of this folder is running")
        generation = root.scan_generation + 1
        won = conn.execute(
            update(sync_roots)
            .where(and_(sync_roots.c.id == root_id, sync_roots.c.scan_generation == root.scan_generation))
            .values(scan_generation=generation, scan_owner=owner, scan_started_at=time.time())
        ).rowcount
        if won != 1:
            raise StoodDown("another reconcile of this folder claimed it first")
    return root, generation


@dataclass(frozen=True)
class Claim:
    """One reconcile's hold on its root: the root as claimed, the generation and owner that claimed it (every
    write re-checks both, :meth:`check`), the writer its transactions go through and the actor its audit
    entries name."""

    quire: Quire
    writer: Writer
    root: SyncRoot
    generation: int
    owner: str
    actor: str

    def check(self, conn: Connection) -> SyncRoot:
        """The root as it is now, or ``StoodDown`` if another reconcile took it over."""
        return _check_claim(conn, self.root.id, self.generation, self.owner)


def _check_claim(conn: Connection, root_id: int, generation: int, owner: str) -> SyncRoot:
    root = load_root(conn, root_id)
    if root is None or root.scan_generation != generation or root.scan_owner != owner:
        raise StoodDown("another reconcile took this folder over")
    return root


def release(quire: Quire, root_id: int, owner: str, error: str | None = None) -> None:
    """Give the claim back without moving the cursor (a review scan, a failure)."""
    with quire.db.write() as conn:
        conn.execute(
            update(sync_roots)
            .where(and_(sync_roots.c.id == root_id, sync_roots.c.scan_owner == owner))
            .values(scan_owner=None, last_error=sanitize_optional(error), updated_at=time.time())
        )


def target_of(quire: Quire, root: SyncRoot) -> Target | None:
    with quire.db.read() as conn:
        item = tree.load_item(conn, root.item_id)
    if item is None or item.status in ("deleting", "preparing") or not item.source_path:
        return None
    prefix = f"{item.relative_path}/" if item.relative_path else ""
    return Target(Path(item.source_path), item.root_id or item.id, prefix)


def reconcile(
    quire: Quire,
    root_id: int,
    writer: Writer,
    *,
    owner: str | None = None,
    apply_review: bool = False,
    actor: str = audit.SYSTEM_ACTOR,
) -> Outcome:
    """Reconcile one root. ``auto`` roots apply what they find; ``review`` roots list it as pending,
    unless ``apply_review`` (a person pressed Apply), which applies the pending changes still current."""
    if apply_review:
        require_person("apply sync changes")  # a person's decision; the automatic reconciles are the system's
    owner = owner or new_owner(quire)
    outcome = Outcome(root_id)
    try:
        root, generation = claim(quire, writer, root_id, owner)
    except StoodDown as exc:
        outcome.stood_down = str(exc)
        return outcome
    outcome.generation = generation
    try:
        target = target_of(quire, root)
        if target is None:  # being prepared or deleted: its own job owns it now; look again later
            release(quire, root_id, owner)
            with quire.db.write() as conn:
                schedule_reconcile(quire, conn, root, delay=PREPARING_RETRY_SECONDS, tag="revisit")
            outcome.stood_down = "the folder is being prepared or deleted"
            return outcome
        diff = scan(quire.db, target, hidden=[quire.data_dir], quiet_seconds=setting(quire.db, QUIET_SECONDS))
        outcome.counts, outcome.hashed, outcome.files_seen = diff.counts(), diff.hashed, diff.files_seen
        outcome.changes = [c.as_dict() for c in diff.changes[:200]]
        held = Claim(quire, writer, root, generation, owner, actor)
        if root.mode == "review":
            _review(held, diff, outcome, apply_review)
        else:
            _apply_all(held, diff.applicable, diff, outcome)
        if diff.of("unstable"):
            with quire.db.write() as conn:
                schedule_reconcile(quire, conn, root, delay=setting(quire.db, QUIET_SECONDS), tag="revisit")
    except BaseUnavailable as exc:
        _wait_for_base(quire, root, owner, generation, str(exc))
        outcome.stood_down = str(exc)
    except StoodDown as exc:
        outcome.stood_down = str(exc)
    except BaseException as exc:
        release(quire, root_id, owner, error=sanitize_error(exc))
        raise
    return outcome


def _wait_for_base(quire: Quire, root: SyncRoot, owner: str, generation: int, why: str) -> None:
    """Release the claim with the reason the root waits, and look again later (the tag alternates with the
    claim generation, so a waiting reconcile job can schedule its successor while it still runs)."""
    release(quire, root.id, owner, error=f"{WAITING_FOR_BASE}: {why}")
    delay = setting(quire.db, POLL_SECONDS)
    with quire.db.write() as conn:
        schedule_reconcile(quire, conn, root, delay=delay, tag=f"waiting{generation % 2}")


# -- applying ----------------------------------------------------------------------------------

_ORDER = {"added": 0, "moved": 1, "changed": 2, "removed": 3}


def _apply_order(changes: Sequence[Change]) -> list[Change]:
    """Folders first (parents before children), then moves (out of a folder before it is removed),
    then new and changed files, removals last."""

    def key(c: Change) -> tuple[int, int, int, str]:
        return (_ORDER[c.kind], 0 if c.is_dir else 1, c.relative.count("/"), c.relative)

    return sorted(changes, key=key)


def _apply_all(held: Claim, changes: Sequence[Change], diff: Diff, outcome: Outcome, *, pending_after: int = 0) -> None:
    quire, root, generation = held.quire, held.root, held.generation
    ordered = _apply_order(changes)
    size = max(1, int(setting(quire.db, APPLY_BATCH)))
    batches = [ordered[i : i + size] for i in range(0, len(ordered), size)] or [[]]
    for number, batch in enumerate(batches):
        last = number == len(batches) - 1
        uploads = _read_uploads(quire, root, batch)  # a team store: the files travel with their jobs
        with held.writer() as conn:
            held.check(conn)
            _assert_base_takes_writes(conn, root.base_id)
            outcome.applied += _apply_batch(quire, conn, root, batch, uploads)
            if last:
                _checkpoint(conn, root, generation, held.owner, diff, pending_after)
                applied_counts: dict[str, int] = {}
                for c in changes:  # what this diff applied, per kind (review mode applies a subset)
                    applied_counts[c.kind] = applied_counts.get(c.kind, 0) + 1
                if changes:
                    audit.append(
                        conn,
                        SYNC_APPLIED,
                        held.actor,
                        base_id=root.base_id,
                        payload={
                            "root": root.id,
                            "generation": generation,
                            "mode": root.mode,
                            "counts": applied_counts,
                        },
                    )


def _checkpoint(conn: Connection, root: SyncRoot, generation: int, owner: str, diff: Diff, pending: int) -> None:
    """Move the cursor by compare-and-swap, in the transaction of the last change it covers."""
    state = json.dumps({"counts": diff.counts(), "files": diff.files_seen}, sort_keys=True)
    now = time.time()
    moved = conn.execute(
        update(sync_roots)
        .where(
            and_(
                sync_roots.c.id == root.id,
                sync_roots.c.cursor_generation == root.cursor_generation,
                sync_roots.c.scan_generation == generation,
                sync_roots.c.scan_owner == owner,
            )
        )
        .values(
            cursor_generation=generation,
            cursor_state=state,
            scan_owner=None,
            last_synced_at=now,
            pending_count=pending,
            last_error=None,
            updated_at=now,
        )
    ).rowcount
    if moved != 1:
        raise StoodDown("the cursor moved under this reconcile")


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


def _apply_added(conn: Connection, b: _Batch, c: Change) -> bool:
    if _live_at(conn, b.tree_root_id, c.relative) is not None:
        return False  # applied by an earlier, interrupted reconcile
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
    tree.reconcile_above(conn, [i for i in b.touched if tree.load_item(conn, i) is not None])
    if b.removed:
        gone = (tree.load_item(conn, i) for i in b.removed)
        parents = {r.parent_id for r in gone if r is not None and r.parent_id is not None}
        for p in parents:
            tree.reconcile_container(conn, p)
        tree.reconcile_above(conn, list(parents))


# -- review mode -------------------------------------------------------------------------------


def _review(held: Claim, diff: Diff, outcome: Outcome, apply_review: bool) -> None:
    root, writer = held.root, held.writer
    with held.quire.db.read() as conn:
        listed = {
            r.relative_path: (r.status, r.fingerprint)
            for r in conn.execute(select(sync_pending).where(sync_pending.c.root_id == root.id)).all()
        }
    current = [
        c
        for c in diff.applicable
        if listed.get(c.relative, ("", ""))[0] != "dismissed" or listed[c.relative][1] != c.fingerprint
    ]
    if apply_review:
        chosen = [c for c in current if listed.get(c.relative) == ("pending", c.fingerprint)]
        rest = [c for c in current if c not in chosen]
        _apply_all(held, chosen, diff, outcome, pending_after=len(rest))
        _write_pending(writer, root, rest)
        outcome.pending = len(rest)
        return
    with writer() as conn:
        held.check(conn)
        _replace_pending(conn, root.id, current)
        conn.execute(
            update(sync_roots)
            .where(sync_roots.c.id == root.id)
            .values(pending_count=len(current), scan_owner=None, updated_at=time.time())
        )
    outcome.pending = len(current)


def _replace_pending(conn: Connection, root_id: int, current: Sequence[Change]) -> None:
    """Pending rows become what this scan found; dismissals of files that did not change stay."""
    now = time.time()
    conn.execute(
        delete(sync_pending).where(and_(sync_pending.c.root_id == root_id, sync_pending.c.status == "pending"))
    )
    for c in current:
        conn.execute(
            delete(sync_pending).where(
                and_(sync_pending.c.root_id == root_id, sync_pending.c.relative_path == c.relative)
            )
        )
        conn.execute(
            sync_pending.insert().values(
                root_id=root_id,
                relative_path=c.relative,
                kind=c.kind,
                fingerprint=c.fingerprint,
                detail=json.dumps({"moved_from": c.moved_from, "is_dir": c.is_dir}),
                status="pending",
                updated_at=now,
            )
        )


def _write_pending(writer: Writer, root: SyncRoot, rest: Sequence[Change]) -> None:
    with writer() as conn:
        _replace_pending(conn, root.id, rest)
        conn.execute(update(sync_roots).where(sync_roots.c.id == root.id).values(pending_count=len(rest)))


def list_pending(quire: Quire, root_ids: Sequence[int]) -> list[dict[str, Any]]:
    with quire.db.read() as conn:
        rows = conn.execute(
            select(sync_pending)
            .where(and_(sync_pending.c.root_id.in_(list(root_ids)), sync_pending.c.status == "pending"))
            .order_by(sync_pending.c.root_id, sync_pending.c.relative_path)
            .limit(10_000)
        ).all()
    return [
        {"root_id": r.root_id, "path": r.relative_path, "kind": r.kind, **json.loads(r.detail or "{}")} for r in rows
    ]


def page_pending(quire: Quire, root_ids: Sequence[int], *, limit: int, after_id: int = 0) -> list[dict[str, Any]]:
    """One page of the roots' pending changes by id (``after_id``: the last id of the page before)."""
    with quire.db.read() as conn:
        rows = conn.execute(
            select(sync_pending)
            .where(
                and_(
                    sync_pending.c.root_id.in_(list(root_ids)),
                    sync_pending.c.status == "pending",
                    sync_pending.c.id > after_id,
                )
            )
            .order_by(sync_pending.c.id)
            .limit(limit)
        ).all()
    return [
        {"id": r.id, "root_id": r.root_id, "path": r.relative_path, "kind": r.kind, **json.loads(r.detail or "{}")}
        for r in rows
    ]


def dismiss(quire: Quire, root_id: int, paths: Sequence[str], actor: str) -> int:
    """Dismiss pending changes; each stays dismissed until its file changes again (its fingerprint)."""
    require_person("dismiss sync changes")
    with quire.db.write() as conn:
        found = conn.execute(
            update(sync_pending)
            .where(
                and_(
                    sync_pending.c.root_id == root_id,
                    sync_pending.c.relative_path.in_(list(paths)),
                    sync_pending.c.status == "pending",
                )
            )
            .values(status="dismissed", updated_at=time.time())
        ).rowcount
        left = conn.execute(
            select(sync_pending.c.id).where(and_(sync_pending.c.root_id == root_id, sync_pending.c.status == "pending"))
        ).all()
        conn.execute(update(sync_roots).where(sync_roots.c.id == root_id).values(pending_count=len(left)))
        root = load_root(conn, root_id)
        if found and root is not None:
            audit.append(
                conn, audit.SYNC_DISMISSED, actor, base_id=root.base_id, payload={"root": root_id, "count": found}
            )
    return int(found)


def apply_pending(quire: Quire, root_id: int, actor: str) -> Outcome:
    """A person's Apply on a review root: apply its pending changes still current (the window's button)."""
    return reconcile(quire, root_id, quire.db.write, apply_review=True, actor=actor)
