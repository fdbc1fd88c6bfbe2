"""The changes a ``review`` root lists (``sync_pending``), and dismissals: the only writer of that table.

A pending row is what a review scan found and nobody applied yet; a dismissed row keeps the fingerprint of
the file as it was dismissed, so a dismissal sticks until the file changes again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, delete, select, update

from knowledge.store.schema_sync import sync_pending

if TYPE_CHECKING:
    from knowledge.runtime import Quire
    from knowledge.sync.scan import Change


def listed(conn: Connection, root_id: int) -> dict[str, tuple[str, str]]:
    """Every row of the root by relative path: its status and the fingerprint it was listed with."""
    rows = conn.execute(select(sync_pending).where(sync_pending.c.root_id == root_id)).all()
    return {r.relative_path: (r.status, r.fingerprint) for r in rows}


def replace(conn: Connection, root_id: int, current: Sequence[Change]) -> None:
    """Pending rows become ``current``; dismissals of files that did not change stay."""
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


def forget_root(conn: Connection, root_id: int) -> None:
    """Drop everything listed for a root that is no longer synced."""
    conn.execute(delete(sync_pending).where(sync_pending.c.root_id == root_id))


def dismiss_paths(conn: Connection, root_id: int, paths: Sequence[str]) -> int:
    """Mark the root's pending changes at ``paths`` dismissed; how many were."""
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
    return int(found)


def count_pending(conn: Connection, root_id: int) -> int:
    rows = conn.execute(
        select(sync_pending.c.id).where(and_(sync_pending.c.root_id == root_id, sync_pending.c.status == "pending"))
    ).all()
    return len(rows)


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
