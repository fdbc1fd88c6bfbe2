"""The caller-facing knowledge operations: add, delete, reindex, list chunks.

The operations deliberately do not share one validation pipeline: each keeps its own explicit flow
because their state transitions and enqueue-failure behaviour differ. They share small guards where the
semantics match (base guards, outermost-selection collapse, idempotency keys).

* ``add_items`` answers one outcome per input (``created``, ``already_present``, ``already_covered``:
  one identity per source, :mod:`knowledge.lifecycle.identity`), refuses a path it cannot see before
  creating anything, writes active statuses, commits, then schedules each accepted item. If an enqueue
  fails, items whose scheduling completed are left alone; the failing one and all later ones become
  ``failed``; the error reaches the caller. (No row is left active without a durable job.)
* ``delete_items`` marks whole subtrees ``deleting`` and enqueues ``delete-subtree`` in **one**
  transaction: if it fails nothing changed. Delete works on failed bases and preempts active work
  (a job that later reaches a deleting item drops its result).
* ``reindex_items`` only admits terminal subtrees and writes no status: the job does the resetting.
* Each of them files one audit entry for the person in its write transaction (``items.added``, ``items.deleted``,
  ``items.reindexed``: counts and the job, never item ids).
* Every operation returns a ``Changes`` value (:mod:`knowledge.lifecycle.changes`); views refresh from it
  instead of re-reading everything. What an accepted item is scheduled as, and what happens when an enqueue
  fails, is :mod:`knowledge.lifecycle.admission`'s.

The reads (``list_items``, ``get_item``, ``list_item_chunks``) live in :mod:`knowledge.lifecycle.reading`
and are re-exported here.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from knowledge.errors import GuardRejected, InvalidInput, NotFound
from knowledge.library import audit, tree
from knowledge.library.bases import (
    Base,
    assert_base_can_run_runtime_operation,
    assert_base_writable,
    assert_endpoint_confirmed,
    resolve_base,
)
from knowledge.library.ids import ItemId
from knowledge.library.tree import NewItem, Reason, create_item
from knowledge.lifecycle.admission import Scheduled, schedule
from knowledge.lifecycle.changes import Changes as Changes
from knowledge.lifecycle.identity import (
    ALREADY_COVERED,
    ALREADY_PRESENT,
    CREATED,
    AddOutcome,
    canonical_path,
    create_covered_child,
    find_covering_root,
    find_held_item,
    find_live_file,
    find_live_root,
    has_changed,
    is_stale,
    lost_its_job,
    subtree_is_terminal,
    walk_would_list,
)
from knowledge.lifecycle.reading import get_item as get_item
from knowledge.lifecycle.reading import list_item_chunks as list_item_chunks
from knowledge.lifecycle.reading import list_items as list_items
from knowledge.lifecycle.scheduling import DELETE_SUBTREE as DELETE_SUBTREE
from knowledge.lifecycle.scheduling import INDEX_BATCH as INDEX_BATCH
from knowledge.lifecycle.scheduling import INDEX_BATCH_BYTES as INDEX_BATCH_BYTES
from knowledge.lifecycle.scheduling import INDEX_DOCUMENTS as INDEX_DOCUMENTS
from knowledge.lifecycle.scheduling import INDEX_JOB_BYTES as INDEX_JOB_BYTES
from knowledge.lifecycle.scheduling import INDEX_JOB_LEAVES as INDEX_JOB_LEAVES
from knowledge.lifecycle.scheduling import PREPARE_ROOT as PREPARE_ROOT
from knowledge.lifecycle.scheduling import REINDEX_SUBTREE as REINDEX_SUBTREE
from knowledge.lifecycle.scheduling import UNKNOWN_SIZE as UNKNOWN_SIZE
from knowledge.lifecycle.scheduling import schedule_delete, schedule_reindex
from knowledge.principal import require_person
from knowledge.store import machine_folders
from knowledge.store.schema import TERMINAL_STATUSES

if TYPE_CHECKING:
    from knowledge.runtime import Quire


@dataclass(frozen=True)
class PathInput:
    path: Path


@dataclass(frozen=True)
class NoteInput:
    text: str
    title: str | None = None


ItemInput = PathInput | NoteInput


# -- add ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Planned:
    type: str
    name: str
    source_path: str | None
    note_text: str | None
    status: str
    invalid_reason: Reason | None  # → failed, no job
    size: int | None = None
    shown: str = ""  # the input as given, for the outcome (never stored)

    @property
    def source_key(self) -> str | None:
        return self.source_path  # canonical already (identity.canonical_path)


def _plan(inp: ItemInput) -> _Planned:
    if isinstance(inp, NoteInput):
        if not inp.text.strip():
            raise InvalidInput("a note needs some text")
        title = (inp.title or inp.text.strip().splitlines()[0])[:120]
        return _Planned("note", title, None, inp.text, "processing", None, len(inp.text.encode("utf-8")), title)
    shown = str(inp.path)
    given = Path(os.path.abspath(inp.path))
    try:
        st = os.lstat(given)
        if stat.S_ISLNK(st.st_mode):
            os.stat(given)  # a dangling link cannot be seen either
    except OSError:
        raise NotFound(f"{shown}: no such file or folder (or it cannot be seen); nothing was added") from None
    name = given.name or str(given)
    if stat.S_ISLNK(st.st_mode) and os.path.isdir(given):
        return _Planned(
            "file",
            name,
            str(given),
            None,
            "processing",
            Reason("symlink_not_followed", "a link to a folder is not followed"),
            shown=shown,
        )
    path = Path(canonical_path(given))
    if stat.S_ISDIR(st.st_mode):
        return _Planned("directory", name, str(path), None, "preparing", None, shown=shown)
    from knowledge.sources import is_supported, unsupported_reason

    if not is_supported(path):
        return _Planned(
            "file",
            name,
            str(path),
            None,
            "processing",
            Reason("unsupported_type", unsupported_reason(path.name)),
            shown=shown,
        )
    return _Planned("file", name, str(path), None, "processing", None, st.st_size, shown)


def add_items(quire: Quire, base_ref: str | int, inputs: Sequence[ItemInput], *, owner: str | None = None) -> Changes:
    """Add paths and notes; one outcome per input (``created``, ``already_present``, ``already_covered``).

    A path that does not exist or cannot be seen is refused (``NotFound``) before anything is created.
    See :mod:`knowledge.lifecycle.identity` for the identity rule and the refresh of an existing root.
    """
    require_person("add items")  # an agent proposes instead (knowledge.agents.proposals)
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
    assert_base_can_run_runtime_operation(base)
    assert_base_writable(base)
    assert_endpoint_confirmed(base)
    changes = Changes(base.id)
    if not inputs:
        changes.noop = True
        return changes
    plans = [_plan(i) for i in inputs]
    machine_folders.record_for(quire.db, quire.data_dir, [p.source_path for p in plans])  # asked for here
    created: list[tuple[ItemId, _Planned]] = []
    rescheduled: list[Scheduled] = []
    with quire.db.write() as conn:
        base = resolve_base(conn, base.id)  # re-judged under the write lock
        assert_base_can_run_runtime_operation(base)
        assert_base_writable(base)
        for plan in plans:
            if plan.source_key is not None and _answered_by_existing(quire, conn, base, plan, changes, rescheduled):
                continue
            item_id = create_item(
                conn,
                NewItem(
                    base.id,
                    plan.type,
                    plan.name,
                    plan.status,
                    source_path=plan.source_path,
                    note_text=plan.note_text,
                    owner=owner,
                    source_key=plan.source_key,
                ),
            )
            created.append((item_id, plan))
            changes.created.append(item_id)
            changes.statuses[item_id] = plan.status
            changes.outcomes.append(AddOutcome(plan.shown, CREATED, item_id))
        _audit_added(conn, base.id, changes)
    sizes = {i: p.size for i, p in created if p.size is not None}
    accepted = [Scheduled(i, p.type, p.invalid_reason) for i, p in created] + rescheduled
    schedule(quire, base, accepted, changes, sizes=sizes)
    return changes


def _audit_added(conn: Connection, base_id: int, changes: Changes) -> None:
    """One entry for the whole add, in its transaction: how many inputs came to each outcome."""
    counts: dict[str, int] = {}
    for outcome in changes.outcomes:
        key = f"{outcome.outcome}_refreshed" if outcome.refreshed else outcome.outcome
        counts[key] = counts.get(key, 0) + 1
    payload = {"counts": counts, "inputs": len(changes.outcomes)}
    audit.append(conn, audit.ITEMS_ADDED, audit.person_actor(conn), base_id=base_id, payload=payload)


def _answered_by_existing(
    quire: Quire, conn: Connection, base: Base, plan: _Planned, changes: Changes, rescheduled: list[Scheduled]
) -> bool:
    """Answer ``plan`` from what the base already holds (in the add's write transaction); False if nothing
    stands for its path yet."""
    assert plan.source_key is not None
    existing = find_live_root(conn, base.id, plan.source_key)
    if existing is None:
        covering = find_covering_root(conn, base.id, plan.source_key)
        if covering is not None and _answered_by_covering(quire, conn, base, plan, covering, changes, rescheduled):
            return True
        return _answered_by_live_file(quire, conn, base, plan, changes)
    refreshed = False
    if existing.id in changes.created:
        pass  # the same path twice in one call: the first made it, it is scheduled with the rest
    elif lost_its_job(conn, existing):
        rescheduled.append(Scheduled(existing.id, existing.type, None))
        refreshed = True
    elif existing.status in TERMINAL_STATUSES and has_changed(existing) and subtree_is_terminal(conn, existing.id):
        _refresh(quire, conn, base, existing.id, changes)  # completed, failed or skipped: a change is read again
        refreshed = True
    changes.outcomes.append(AddOutcome(plan.shown, ALREADY_PRESENT, existing.id, refreshed))
    return True


def _answered_by_live_file(quire: Quire, conn: Connection, base: Base, plan: _Planned, changes: Changes) -> bool:
    """A file about to become a root of its own that another live item already stands for (a folder's child
    below a folder run's container, say): that item keeps standing for it, read again if it changed, and the
    answer is ``already_covered`` with the tree that holds it. False if no item stands for the file."""
    assert plan.source_key is not None
    held = find_live_file(conn, base.id, plan.source_key) if plan.type == "file" else None
    if held is None:
        return False
    refreshed = is_stale(held)
    if refreshed:
        _refresh(quire, conn, base, held.id, changes)
    changes.outcomes.append(AddOutcome(plan.shown, ALREADY_COVERED, ItemId(held.root_id or held.id), refreshed))
    return True


def _refresh(quire: Quire, conn: Connection, base: Base, item_id: ItemId, changes: Changes) -> None:
    changes.job_ids.append(schedule_reindex(quire.queue, conn, base.id, [item_id]))


def _answered_by_covering(
    quire: Quire,
    conn: Connection,
    base: Base,
    plan: _Planned,
    covering: tree.Item,
    changes: Changes,
    rescheduled: list[Scheduled],
) -> bool:
    """A path inside a live folder root. ``already_covered`` is only true of what the folder holds and has
    current: a held file that changed is read again (reindex of that item), a folder inside is re-walked
    (reindex of the covering root), a new file the folder's walk would list becomes its child and is
    scheduled (unless the folder is still ``preparing``: its walk lists it). False (create it as a root of
    its own) when the folder's rules would not list it, or for a file a folder run's container does not
    hold (a run holds exactly its approved sources; a folder inside one is answered, never re-walked)."""
    assert plan.source_key is not None
    held = find_held_item(conn, covering, plan.source_key)
    refreshed = False
    if held is not None and held.status not in TERMINAL_STATUSES:
        pass  # being indexed right now
    elif held is not None and not held.is_container:
        if has_changed(held):
            _refresh(quire, conn, base, held.id, changes)
            refreshed = True
    elif not walk_would_list(quire, conn, covering, plan.source_key):
        return False
    elif covering.run_id is not None:
        if plan.type != "directory":
            return False  # a file the run did not ingest: a root of its own
        # a folder inside a run's container: the run holds exactly what it approved; never re-walked
    elif plan.type == "directory":
        if subtree_is_terminal(conn, covering.id):
            _refresh(quire, conn, base, covering.id, changes)  # unchanged files cost nothing
            refreshed = True
    elif covering.status == "preparing":
        pass  # its walk is still to come (or under way, under this lock): it lists the file
    else:
        child = create_covered_child(conn, covering, plan.source_key, plan.name, plan.invalid_reason)
        rescheduled.append(Scheduled(child, "file", plan.invalid_reason))
        changes.created.append(child)
        changes.statuses[child] = "processing"
        refreshed = True
    changes.outcomes.append(AddOutcome(plan.shown, ALREADY_COVERED, covering.id, refreshed))
    return True


# -- delete ------------------------------------------------------------------------------------


def delete_items(quire: Quire, base_ref: str | int, item_ids: Sequence[int]) -> Changes:
    """Delete is allowed at any time: on a failed base, and on a locked one too — a lock keeps a base
    from changing by accident, never keeps a person from removing what must go."""
    require_person("delete items")
    with quire.db.write() as conn:
        base = resolve_base(conn, base_ref)
        roots = tree.outermost_selected(conn, base.id, item_ids)
        changes = Changes(base.id)
        if not roots:
            changes.noop = True
            return changes
        root_ids = sorted(r.id for r in roots)
        marked, job_id = schedule_delete(quire.queue, conn, base.id, root_ids)
        changes.statuses = {i: "deleting" for i in marked}
        changes.job_ids.append(job_id)
        payload = {"counts": {"selected": len(root_ids), "deleting": len(marked)}, "job": int(job_id)}
        audit.append(conn, audit.ITEMS_DELETED, audit.person_actor(conn), base_id=base.id, payload=payload)
        return changes


# -- reindex -----------------------------------------------------------------------------------


def assert_subtrees_can_reindex(conn: Connection, roots: Sequence[tree.Item]) -> None:
    for item in tree.subtree_items(conn, [r.id for r in roots]):
        if item.status not in TERMINAL_STATUSES:  # completed, failed or skipped
            raise GuardRejected(
                f"cannot reindex while {item.name!r} is {item.status}; wait until it is completed, failed or skipped"
            )


def reindex_items(quire: Quire, base_ref: str | int, item_ids: Sequence[int]) -> Changes:
    require_person("reindex items")
    with quire.db.write() as conn:
        base = resolve_base(conn, base_ref)
        assert_base_can_run_runtime_operation(base)
        assert_base_writable(base)
        assert_endpoint_confirmed(base)
        roots = tree.outermost_selected(conn, base.id, item_ids)
        changes = Changes(base.id)
        if not roots:
            changes.noop = True
            return changes
        assert_subtrees_can_reindex(conn, roots)
        root_ids = sorted(r.id for r in roots)
        job_id = schedule_reindex(quire.queue, conn, base.id, root_ids)
        changes.job_ids.append(job_id)
        payload = {"counts": {"selected": len(root_ids)}, "job": int(job_id)}
        audit.append(conn, audit.ITEMS_REINDEXED, audit.person_actor(conn), base_id=base.id, payload=payload)
        return changes
