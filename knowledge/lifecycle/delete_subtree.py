"""``knowledge.delete-subtree`` (retry): purge vectors, keyword entries and owned files, then rows, in
batches; on failure the rows stay ``deleting`` and the job is retried."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from jobs.runtime import JobContext
from knowledge.library import blobs, index, tree

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


DELETE_BATCH = 500
# -- delete-subtree ----------------------------------------------------------------------------


def delete_subtree(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    base_id, root_ids = ctx.payload["base_id"], list(ctx.payload["root_ids"])
    with quire.db.read() as conn:
        parents = {
            r.parent_id
            for r in (tree.load_item(conn, i) for i in root_ids)
            if r is not None and r.parent_id is not None
        }
        total = len(tree.subtree_ids(conn, root_ids))
    removed = 0
    while True:
        ctx.check_cancelled()
        with ctx.write() as conn:
            batch = _delete_batch(quire, conn, base_id, root_ids)
        if batch == 0:
            break
        removed += batch
        ctx.progress(min(removed, total), total, "deleting")
    with ctx.write() as conn:
        live_parents = [p for p in parents if p is not None and tree.load_item(conn, p) is not None]
        for parent in live_parents:
            tree.reconcile_container(conn, parent)
        tree.reconcile_above(conn, live_parents)
    return {"removed": removed}


def _delete_batch(quire: Quire, conn: Connection, base_id: int, root_ids: Sequence[int]) -> int:
    """Purge one batch: leaves first (material, owned files, rows), then what has children — an archive's
    members before the archive (its row would take theirs with it, leaving their material), folders last."""
    subtree = tree.subtree_items(conn, root_ids)
    parents = {i.parent_id for i in subtree}
    depth = _depths(subtree)
    files = sorted((i for i in subtree if not i.is_container), key=lambda i: (i.id in parents, -depth[i.id]))
    leaves = files[:DELETE_BATCH]
    batch = leaves or [i for i in subtree if i.is_container]
    if not batch:
        return 0
    ids = [i.id for i in batch]
    shas = blobs.shas_of_items(conn, ids)
    index.clear_items_material(conn, base_id, [i.id for i in leaves])
    tree.delete_rows(conn, ids)
    blobs.purge_unreferenced(conn, quire.blobs_dir, shas)
    return len(ids)


def _depths(subtree: Sequence[tree.Item]) -> dict[int, int]:
    """How deep each item lies in ``subtree`` (a message's attachment that is an archive holds files too)."""
    parent = {i.id: i.parent_id for i in subtree}
    depth: dict[int, int] = {}
    for item_id in parent:
        steps, at = 0, parent[item_id]
        while at in parent and steps < 64:
            steps, at = steps + 1, parent[at]
        depth[item_id] = steps
    return depth
