"""``knowledge.reindex-subtree`` (abandon): skip if anything is deleting (at entry and again in the write),
clear, reset, reschedule."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from jobs.runtime import JobContext
from knowledge.library import tree
from knowledge.library.bases import find_base
from knowledge.lifecycle.admission import Scheduled, schedule
from knowledge.lifecycle.changes import Changes
from knowledge.store import machine_folders

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


# -- reindex-subtree ---------------------------------------------------------------------------


def _deleting_or_missing(conn: Connection, root_ids: Sequence[int]) -> bool:
    subtree = tree.subtree_items(conn, root_ids)
    present = {i.id for i in subtree}
    return any(r not in present for r in root_ids) or any(i.status == "deleting" for i in subtree)


def reindex_subtree(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    base_id, root_ids = ctx.payload["base_id"], list(ctx.payload["root_ids"])
    with quire.db.read() as conn:
        if _deleting_or_missing(conn, root_ids):  # first check: delete won before we started
            return {"skipped": "deleting"}
        unasked = _not_added_here(quire, conn, root_ids)
    if unasked:  # a reindex re-reads files of this machine: only those a person here added
        log.warning("reindex job %s refused: %d item(s) %s", ctx.job_id, unasked, machine_folders.NOT_ADDED_HERE)
        return {"refused": f"{unasked} item(s) {machine_folders.NOT_ADDED_HERE}"}
    with ctx.write() as conn:
        if _deleting_or_missing(conn, root_ids):  # second check, under the write lock
            return {"skipped": "deleting"}
        roots = _reindex_roots(conn, [r for r in (tree.load_item(conn, i) for i in root_ids) if r is not None])
        accepted = _reset_roots(conn, base_id, roots)
    base = find_base(quire.db, base_id)
    if base is None:
        return {"skipped": "base deleted"}
    changes = Changes(base_id)
    sizes = {r.id: r.size for r in roots if r.size is not None}
    schedule(quire, base, accepted, changes, sizes=sizes)
    return {"roots": len(accepted), "jobs": len(changes.job_ids)}


def _not_added_here(quire: Quire, conn: Connection, root_ids: Sequence[int]) -> int:
    """How many of the roots name a path on disk that no person on this machine added."""
    roots = (tree.load_item(conn, i) for i in root_ids)
    paths = [r.source_path for r in roots if r is not None and r.source_path]
    return sum(not machine_folders.may_read(quire.db, quire.data_dir, p) for p in paths)


def _reindex_roots(conn: Connection, roots: Sequence[tree.Item]) -> list[tree.Item]:
    """A folder run's container holds exactly the run's approved sources: reindex those, never re-walk
    the folder (which would add files nobody approved). So does an imported container whose location no
    person has verified (a crafted path must never make Quire walk a folder). Others are re-expanded."""
    expanded: list[tree.Item] = []
    for root in roots:
        if root.is_container and (root.run_id is not None or root.source_unverified):
            expanded.extend(i for i in tree.subtree_items(conn, [root.id]) if not i.is_container)
        else:
            expanded.append(root)
    return expanded


def _reset_roots(conn: Connection, base_id: int, roots: Sequence[tree.Item]) -> list[Scheduled]:
    # a reindex is the person's explicit retry: a quarantined item starts afresh
    tree.reset_leaves(conn, base_id, [r.id for r in roots if not r.is_container])
    for root in roots:
        if root.is_container:
            tree.reset_container(conn, root.id)
    tree.reconcile_above(conn, [r.id for r in roots])
    return [Scheduled(r.id, r.type, None) for r in roots]
