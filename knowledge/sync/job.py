"""``knowledge.sync-root`` (retry): reconcile one synced root until no watcher event arrived meanwhile."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobs.runtime import JobContext
from knowledge.sync.claim import new_owner
from knowledge.sync.reconcile import reconcile
from knowledge.sync.roots import load_root

if TYPE_CHECKING:
    from knowledge.runtime import Quire

MAX_PASSES = 5  # events during a pass make another pass; a steady stream hands over to the next event


def sync_root(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    root_id = int(ctx.payload["root_id"])
    # One owner per attempt: a retried attempt in another process takes over a dead one's claim.
    owner = new_owner(quire, f"job{ctx.job_id}a{ctx.attempt}")
    result: dict[str, Any] = {}
    for _pass in range(MAX_PASSES):
        ctx.check_cancelled()
        with quire.db.read() as conn:
            root = load_root(conn, root_id)
        if root is None:
            return {"skipped": "not synced"}
        outcome = reconcile(quire, root_id, ctx.write, owner=owner)
        result = {k: v for k, v in outcome.as_dict().items() if k != "changes"}
        if outcome.stood_down:
            break
        with quire.db.read() as conn:
            after = load_root(conn, root_id)
        if after is None or after.dirty_seq == root.dirty_seq:
            break
    return result
