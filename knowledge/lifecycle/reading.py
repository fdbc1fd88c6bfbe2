"""The read operations of the lifecycle: list a base's visible items, get one, list a completed item's chunks,
find the base's own copy of an item's bytes.

``deleting`` rows (and everything under them) are never shown; chunk listing refuses what has no settled chunks (a
failed base, a foreign or unfinished item, a container with something being deleted below it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, select, tuple_

from knowledge.errors import GuardRejected
from knowledge.library import agent_hidden, blobs, tree
from knowledge.library.bases import assert_base_can_run_runtime_operation, resolve_base
from knowledge.library.chunk_view import ChunkView
from knowledge.store.schema import chunks, items

if TYPE_CHECKING:
    from knowledge.runtime import Quire


def list_items(
    quire: Quire,
    base_ref: str | int,
    *,
    parent_id: int | None = None,
    status: str | None = None,
    flat: bool = False,
    after_id: int = 0,
    limit: int | None = None,
) -> list[tree.Item]:
    """Visible items (never ``deleting``): the children of ``parent_id``, or with ``flat`` every item.

    With ``limit``, one page in id order after ``after_id`` (a listing's keyset cursor)."""
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
        query = select(items).where(and_(items.c.base_id == base.id, items.c.status != "deleting"))
        query = agent_hidden.leave_out(query, base.id)  # nothing kept from agents reaches one
        if not flat:
            query = query.where(items.c.parent_id.is_(None) if parent_id is None else items.c.parent_id == parent_id)
        if status is not None:
            query = query.where(items.c.status == status)
        query = query.order_by(items.c.id) if flat else query.order_by(items.c.type.desc(), items.c.name, items.c.id)
        if limit is not None:
            query = query.where(items.c.id > after_id).order_by(None).order_by(items.c.id).limit(limit)
        return [tree.Item.from_row(r) for r in conn.execute(query).all()]


def get_item(quire: Quire, base_ref: str | int, item_id: int) -> tree.Item:
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
        agent_hidden.check_visible(conn, base.id, item_id)
        return tree.load_in_base(conn, base.id, item_id)


def list_item_chunks(
    quire: Quire, base_ref: str | int, item_id: int, *, after_id: int = 0, limit: int | None = None
) -> list[dict[str, Any]]:
    """The chunks of a completed item (of every file in a completed container), in (file, ordinal) order;
    with ``limit``, one page after the chunk ``after_id`` in that order."""
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
        assert_base_can_run_runtime_operation(base)
        agent_hidden.check_visible(conn, base.id, item_id)
        item = tree.load_in_base(conn, base.id, item_id)
        if item.status != "completed":
            raise GuardRejected(f"chunks can only be listed for a completed item; {item.name!r} is {item.status}")
        leaf_ids = [item.id]
        if item.is_container:
            subtree = tree.subtree_items(conn, [item.id])
            if any(i.status == "deleting" for i in subtree):
                raise GuardRejected(f"{item.name!r} has items being deleted; try again when the cleanup is done")
            leaf_ids = sorted(i.id for i in subtree if not i.is_container)
        rows: list[Any] = []
        after = conn.execute(select(chunks.c.item_id, chunks.c.ordinal).where(chunks.c.id == after_id)).first()
        for start in range(0, len(leaf_ids), 500):
            query = (
                select(chunks, items.c.name, items.c.source_path, items.c.metadata)
                .join(items, items.c.id == chunks.c.item_id)
                .where(chunks.c.item_id.in_(leaf_ids[start : start + 500]))
                .order_by(chunks.c.item_id, chunks.c.ordinal)
            )
            if after is not None:
                query = query.where(tuple_(chunks.c.item_id, chunks.c.ordinal) > tuple_(after.item_id, after.ordinal))
            if limit is not None:
                query = query.limit(limit - len(rows))
            rows.extend(conn.execute(query).all())
            if limit is not None and len(rows) >= limit:
                break
    return [ChunkView.of(r).as_listing() for r in rows]


def owned_copy_path(quire: Quire, item: tree.Item) -> Path | None:
    """The base's own copy of the item's original bytes, when it has one and the file is there (the window
    opens it when the original has moved or gone)."""
    if not item.blob_sha256:
        return None
    path = blobs.blob_path(quire.blobs_dir, item.blob_sha256)
    return path if path.is_file() else None
