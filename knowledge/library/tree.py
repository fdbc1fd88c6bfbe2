"""Item rows and the tree: loading, outermost-selection collapse, subtrees, status writes, reconciliation.

Every function that writes takes a connection inside the caller's write transaction. Subtree
membership is always resolved inside that same transaction (never precomputed before it), so a
concurrent create or delete cannot leave descendants behind or reconcile against stale membership.

Container reconciliation: a container's status follows its children, ignoring ``deleting`` ones —
active while any child is active, ``completed`` when all are completed or ``skipped`` (or it has
none), ``failed`` when none is active and some failed. ``skipped`` (a file Quire does not read by
design) counts as done: it never fails its folder. A container still ``preparing`` belongs to its prepare-root job
and is left alone. Any non-delete status write reconciles the containers above what it wrote.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Integer, and_, bindparam, cast, delete, func, insert, select, text, update

from jobs.queue import JobId
from jobs.sanitize import sanitize_optional, sanitize_reason
from knowledge.errors import NotFound
from knowledge.library import index, links
from knowledge.library.ids import ItemId
from knowledge.library.item import FileStat as FileStat
from knowledge.library.item import Indexed as Indexed
from knowledge.library.item import Item as Item
from knowledge.library.item import NewItem as NewItem
from knowledge.library.item import Reason as Reason
from knowledge.library.item import terminal_status_for as terminal_status_for
from knowledge.store.schema import ACTIVE_STATUSES, chunks, items

# -- loading -----------------------------------------------------------------------------------


def load_item(conn: Connection, item_id: int) -> Item | None:
    row = conn.execute(select(items).where(items.c.id == item_id)).first()
    return None if row is None else Item.from_row(row)


def load_in_base(conn: Connection, base_id: int, item_id: int) -> Item:
    item = load_item(conn, item_id)
    if item is None or item.base_id != base_id:
        raise NotFound(f"item {item_id} not found in this knowledge base")
    return item


def outermost_selected(conn: Connection, base_id: int, item_ids: Iterable[int]) -> list[Item]:
    """De-duplicate, load, reject foreign ids, and drop selected items whose ancestor is selected too."""
    unique = sorted(set(int(i) for i in item_ids))
    loaded = {i: load_in_base(conn, base_id, i) for i in unique}
    roots: list[Item] = []
    for item in loaded.values():
        if not any(a in loaded for a in ancestor_ids(conn, item.id)):
            roots.append(item)
    return roots


def ancestor_ids(conn: Connection, item_id: int) -> list[int]:
    """Parent first, up to the top-level root."""
    rows = conn.execute(
        text(
            "WITH RECURSIVE up(id, parent_id, depth) AS ("
            " SELECT id, parent_id, 0 FROM items WHERE id = :id"
            " UNION ALL SELECT i.id, i.parent_id, up.depth + 1 FROM items i JOIN up ON i.id = up.parent_id)"
            " SELECT id FROM up WHERE depth > 0 ORDER BY depth"
        ),
        {"id": item_id},
    ).all()
    return [r[0] for r in rows]


def subtree_ids(conn: Connection, root_ids: Sequence[int]) -> list[ItemId]:
    """Every item in the subtrees of ``root_ids``, roots included (resolve inside the write transaction)."""
    if not root_ids:
        return []
    rows = conn.execute(
        text(
            "WITH RECURSIVE down(id) AS (SELECT id FROM items WHERE id IN :roots"
            " UNION SELECT i.id FROM items i JOIN down ON i.parent_id = down.id) SELECT id FROM down"
        ).bindparams(bindparam("roots", expanding=True)),
        {"roots": list(root_ids)},
    ).all()
    return [ItemId(r[0]) for r in rows]


def subtree_items(conn: Connection, root_ids: Sequence[int]) -> list[Item]:
    ids = subtree_ids(conn, root_ids)
    found: list[Item] = []
    for start in range(0, len(ids), 500):
        rows = conn.execute(select(items).where(items.c.id.in_(ids[start : start + 500]))).all()
        found.extend(Item.from_row(r) for r in rows)
    return found


# -- status writes -----------------------------------------------------------------------------


def _update_in_pages(conn: Connection, ids: Sequence[int], values: dict[str, Any], *where: Any) -> None:
    """One UPDATE per 500 ids (recovery and deletes write thousands at once; the bound ids stay few)."""
    for start in range(0, len(ids), 500):
        conn.execute(update(items).where(items.c.id.in_(ids[start : start + 500]), *where).values(**values))


def _update_statuses(conn: Connection, ids: Sequence[int], values: dict[str, Any]) -> None:
    """Write a status to ids, never touching rows that are ``deleting`` (delete owns them)."""
    _update_in_pages(conn, ids, {**values, "updated_at": time.time()}, items.c.status != "deleting")


def set_status(
    conn: Connection,
    item_ids: Sequence[int],
    status: str,
    *,
    error_code: str | None = None,
    error_message: str | None = None,
    reconcile: bool = True,
) -> None:
    """Set these items' status (not their subtrees) and reconcile the containers above them."""
    if not item_ids:
        return
    message = sanitize_optional(error_message)
    _update_statuses(conn, item_ids, {"status": status, "error_code": error_code, "error_message": message})
    if reconcile:
        reconcile_above(conn, item_ids)


def _reset_values(status: str, *, error: Reason | None = None) -> dict[str, Any]:
    """What every reset of an item writes (reindex, prepare-root's re-expansion, a sync "changed"): the new
    status (or a terminal one for ``error``), no error, no chunks, no job, a fresh death count (the person
    or the file asked for a new start) and the next generation (which fences out any late job)."""
    return {
        "status": status if error is None else terminal_status_for(error.code),
        "error_code": None if error is None else error.code,
        "error_message": None if error is None else sanitize_reason(error.message),
        "chunk_count": 0,
        "job_id": None,
        "deaths": 0,
        "generation": items.c.generation + 1,
        "updated_at": time.time(),
    }


def mark_deleting(conn: Connection, root_ids: Sequence[int]) -> list[ItemId]:
    """Mark whole subtrees ``deleting`` (hidden at once). No reconciliation: delete owns them now."""
    ids = subtree_ids(conn, root_ids)
    _update_in_pages(conn, ids, {"status": "deleting", "updated_at": time.time()})
    return ids


def reset_leaves(
    conn: Connection,
    base_id: int,
    item_ids: Sequence[int],
    *,
    error: Reason | None = None,
    stat: FileStat | None = None,
) -> None:
    """Make these leaves ready to be indexed again: their material goes (vectors stashed by text hash, so
    unchanged chunks are not embedded twice) and each row is reset to ``processing`` (or born terminal
    for ``error``), with ``stat`` recorded when given. No reconciliation: the caller schedules them."""
    index.clear_items_material(conn, base_id, item_ids, keep_vectors=True)
    values = _reset_values("processing", error=error)
    if stat is not None:
        values.update(size=stat.size, mtime=stat.mtime)
    _update_in_pages(conn, item_ids, values)


def reset_container(conn: Connection, item_id: int) -> None:
    """Make a folder ``preparing`` again, for its prepare-root job to walk it anew."""
    conn.execute(update(items).where(items.c.id == item_id).values(**_reset_values("preparing")))


def mark_expanded(conn: Connection, root_id: int) -> None:
    """A folder's walk is done: it is ``processing`` now, and its children's statuses decide its own."""
    conn.execute(update(items).where(items.c.id == root_id).values(status="processing", updated_at=time.time()))


def attach_job(conn: Connection, item_ids: Sequence[int], job_id: JobId, *, status: str | None = None) -> None:
    """Record the job that will advance these items (in its enqueueing transaction), optionally with the
    status it takes them up in. An item's job is what recovery and the orphan scan judge it by."""
    values: dict[str, Any] = {"job_id": job_id} if status is None else {"job_id": job_id, "status": status}
    _update_in_pages(conn, item_ids, values)


def count_death(conn: Connection, item_ids: Sequence[int]) -> None:
    """These items were in flight when a worker died: one more death each (two quarantine an item)."""
    _update_in_pages(conn, item_ids, {"deaths": items.c.deaths + 1})


def clear_deaths(conn: Connection, item_ids: Sequence[int]) -> None:
    """The worker survived these items: their death count starts over."""
    _update_in_pages(conn, item_ids, {"deaths": 0})


_STAMPS = [field.name for field in dataclasses.fields(Indexed)]  # each stamp is written to its column
_MARK_INDEXED = (
    update(items)
    .where(items.c.id == bindparam("m_item_id"))
    .values(
        status="completed",
        error_code=None,
        error_message=None,
        blob_sha256=bindparam("m_content_sha256"),
        updated_at=bindparam("m_now"),
        **{name: bindparam(f"m_{name}") for name in _STAMPS},
    )
)


def mark_indexed_many(
    conn: Connection, base_id: int, made: Sequence[tuple[int, Indexed]], now: float, *, new_items: bool = False
) -> None:
    """Leaves of one base whose material is written: ``completed``, no error, stamped (one multi-row update).
    ``new_items``: created in this transaction, so they have no links to replace."""
    stamps = [{f"m_{name}": getattr(m, name) for name in _STAMPS} | {"m_item_id": item_id} for item_id, m in made]
    for row in stamps:
        row.update(m_metadata=json.dumps(row["m_metadata"], sort_keys=True, default=str), m_now=now)
    if stamps:
        conn.execute(_MARK_INDEXED, stamps)
    links.replace_links(conn, base_id, [(i, m.metadata) for i, m in made], new_items=new_items)  # beside the metadata


def relocate_sources(conn: Connection, base_id: int, old: str, new: str, sep: str) -> int:
    """Point the items whose source is ``old`` or lies under ``old + sep`` at the same place under ``new``;
    a person named where these originals are now, so they are no longer unverified. Returns how many."""
    n = len(old)
    under = (items.c.source_path == old) | (func.substr(items.c.source_path, 1, n + 1) == old + sep)
    result = conn.execute(
        update(items)
        .where(items.c.base_id == base_id, under)
        .values(source_path=new + func.substr(items.c.source_path, n + 1), source_unverified=0, updated_at=time.time())
    )
    return int(result.rowcount or 0)


def mark_sources_unverified(conn: Connection) -> int:
    """Every item's source path becomes someone else's word (a restored backup), as an import's are: reindex
    reads only the owned copy and sync never walks it until a person relocates it. Returns how many."""
    marked = update(items).where(items.c.source_path.is_not(None)).values(source_unverified=1)
    return int(conn.execute(marked).rowcount or 0)


def remove_base_rows(conn: Connection, base_id: int) -> None:
    """Delete every item of a base being deleted (its material and owned files are the caller's)."""
    conn.execute(delete(items).where(items.c.base_id == base_id))


def set_file_stat(conn: Connection, item_id: int, stat: FileStat) -> None:
    """Record a file's size and mtime as seen now (its bytes, and so its index, unchanged)."""
    conn.execute(update(items).where(items.c.id == item_id).values(size=stat.size, mtime=stat.mtime))


def record_upload(conn: Connection, item_id: int, sha: str, stat: FileStat) -> str | None:
    """A team store: the bytes the item's machine read and uploaded are the copy its worker will read (its
    size and mtime as read). Returns the copy it named before, when that was another one."""
    before = conn.execute(select(items.c.blob_sha256).where(items.c.id == item_id)).scalar()
    conn.execute(update(items).where(items.c.id == item_id).values(blob_sha256=sha, size=stat.size, mtime=stat.mtime))
    return before if before and before != sha else None


def move(
    conn: Connection, item_id: int, *, parent_id: int, source_path: str, relative_path: str, stat: FileStat
) -> None:
    """A file or folder renamed or moved within its tree: its place changes, its index stays."""
    conn.execute(
        update(items)
        .where(items.c.id == item_id)
        .values(
            relative_path=relative_path,
            source_path=source_path,
            name=relative_path.rsplit("/", 1)[-1],
            parent_id=parent_id,
            size=stat.size,
            mtime=stat.mtime,
            updated_at=time.time(),
        )
    )


def set_parent(conn: Connection, item_id: int, parent_id: int) -> None:
    """Hang an item under another folder of the same tree (where a new walk found it)."""
    conn.execute(update(items).where(items.c.id == item_id).values(parent_id=parent_id))


def adopt_subtree(conn: Connection, adopted_id: int, root: Item, relative: str) -> None:
    """An earlier root of its own becomes a child of the folder ``root`` at ``relative``: its whole subtree
    joins ``root``'s tree (relative paths re-based on it) and it gives up its identity as a root."""
    for member in subtree_items(conn, [adopted_id]):
        rel = relative if member.id == adopted_id else f"{relative}/{member.relative_path}"
        conn.execute(update(items).where(items.c.id == member.id).values(root_id=root.id, relative_path=rel))
    conn.execute(update(items).where(items.c.id == adopted_id).values(parent_id=root.id, source_key=None))


def reconcile_above(conn: Connection, item_ids: Iterable[int]) -> None:
    """Recompute the containers above these items, deepest first, stopping where nothing changes."""
    ids = list(dict.fromkeys(item_ids))
    frontier: set[int] = set()
    for start in range(0, len(ids), 500):  # one lookup per 500 items (recovery parks thousands at once)
        rows = conn.execute(select(items.c.parent_id).distinct().where(items.c.id.in_(ids[start : start + 500]))).all()
        frontier.update(r.parent_id for r in rows if r.parent_id is not None)
    while frontier:
        next_frontier: set[int] = set()
        for container_id in frontier:
            parent = reconcile_container(conn, container_id)
            if parent is not None:
                next_frontier.add(parent)
        frontier = next_frontier


def reconcile_container(conn: Connection, container_id: int) -> int | None:
    """Recompute one container; return its parent id if its status changed (so the parent is next)."""
    row = conn.execute(select(items.c.status, items.c.parent_id).where(items.c.id == container_id)).first()
    if row is None or row.status in ("deleting", "preparing"):
        return None
    counts = conn.execute(
        select(
            # counted as integers: PostgreSQL has no sum() of booleans
            func.sum(cast(items.c.status.in_(ACTIVE_STATUSES), Integer)),
            func.sum(cast(items.c.status == "failed", Integer)),
        ).where(and_(items.c.parent_id == container_id, items.c.status != "deleting"))
    ).one()
    active, failed = int(counts[0] or 0), int(counts[1] or 0)
    new_status = "processing" if active else ("failed" if failed else "completed")
    if new_status == row.status:
        return None
    error = (
        {"error_code": "children_failed", "error_message": f"{failed} item(s) inside could not be indexed"}
        if new_status == "failed"
        else {"error_code": None, "error_message": None}
    )
    conn.execute(
        update(items).where(items.c.id == container_id).values(status=new_status, updated_at=time.time(), **error)
    )
    return row.parent_id  # type: ignore[no-any-return]


# -- creation ----------------------------------------------------------------------------------


def create_item(conn: Connection, new: NewItem) -> ItemId:
    """Insert ``new``; with an ``error`` it is born terminal: ``skipped`` for a by-design reason, else ``failed``."""
    return ItemId(_insert(conn, new, items.c.id).id)


def insert_item(conn: Connection, new: NewItem) -> Item:
    """:func:`create_item`, answering the row as stored (``RETURNING``: no read-back)."""
    item = Item.from_row(_insert(conn, new, *items.c))
    return item if new.root_id is not None else dataclasses.replace(item, root_id=item.id)


def _insert(conn: Connection, new: NewItem, *returning: Any) -> Any:
    """The insert both answer through; an item given no root is a root, its own."""
    row = conn.execute(insert(items).values(_new_item_values(new)).returning(*returning)).one()
    if new.root_id is None:
        conn.execute(update(items).where(items.c.id == row.id).values(root_id=row.id))
    return row


def _new_item_values(new: NewItem) -> dict[str, object]:
    now = time.time()
    return {
        "base_id": new.base_id,
        "parent_id": new.parent_id,
        "root_id": new.root_id,
        "type": new.type,
        "name": new.name,
        "source_path": new.source_path,
        "source_key": new.source_key,
        "relative_path": new.relative_path,
        "note_text": new.note_text,
        "status": new.status if new.error is None else terminal_status_for(new.error.code),
        "error_code": None if new.error is None else new.error.code,
        "error_message": None if new.error is None else sanitize_reason(new.error.message),
        "owner": new.owner,
        "run_id": new.run_id,
        "created_at": now,
        "updated_at": now,
    }


def create_member(conn: Connection, container: Item, name: str, blob_sha: str | None, error: Reason | None) -> ItemId:
    """A file inside the container file ``container`` (an archive's member, a mailbox's message): a child
    with no path of its own — no ``source_path`` (its bytes are the owned copy ``blob_sha``) and no
    ``relative_path`` (so a folder's walk and sync's scan, which match files by that path, never take it
    for a file on disk). ``name`` is its safe name inside the container."""
    item_id = create_item(
        conn,
        NewItem(
            container.base_id,
            "file",
            name,
            "processing",
            parent_id=container.id,
            root_id=container.root_id,
            owner=container.owner,
            run_id=container.run_id,
            error=error,
        ),
    )
    if blob_sha is not None:
        conn.execute(update(items).where(items.c.id == item_id).values(blob_sha256=blob_sha))
    return item_id


def reserve_ids(conn: Connection, base_id: int, count: int, now: float) -> ItemId:
    """Reserve ``count`` consecutive item ids for rows that arrive later (an import's pages) and return the
    first: a placeholder row sits just past the range, and new rowids are max + 1, so no one else's row
    lands inside it meanwhile. :func:`release_reservation` removes the placeholder."""
    first = int(conn.execute(select(func.coalesce(func.max(items.c.id), 0))).scalar_one()) + 1
    placeholder = {"base_id": base_id, "type": "note", "name": ".import placeholder", "status": "failed"}
    conn.execute(insert(items).values(id=first + count, created_at=now, updated_at=now, **placeholder))
    return ItemId(first)


def release_reservation(conn: Connection, base_id: int, first: int, count: int) -> None:
    """The reserved range is filled: its placeholder goes."""
    conn.execute(delete(items).where(items.c.id == first + count, items.c.base_id == base_id))


def insert_rows(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert whole rows as they are (ids, statuses and stamps given): an import's page of items, already
    mapped into the reserved range and checked by the import's rules."""
    if rows:
        conn.execute(insert(items), list(rows))
    links.record_new_rows(conn, rows)


def park_incomplete(conn: Connection, error: Reason) -> int:
    """Completed leaves whose chunks are not all there any more become ``failed`` with ``error``, for a
    reindex to rebuild them. Returns how many."""
    present = select(func.count()).where(chunks.c.item_id == items.c.id).scalar_subquery()
    result = conn.execute(
        update(items)
        .where(items.c.status == "completed", items.c.type != "directory", items.c.chunk_count != present)
        .values(status="failed", error_code=error.code, error_message=error.message)
    )
    return int(result.rowcount or 0)


def delete_rows(conn: Connection, item_ids: Sequence[int]) -> None:
    """Delete item rows whose material the caller has already cleared."""
    for start in range(0, len(item_ids), 500):
        conn.execute(delete(items).where(items.c.id.in_(item_ids[start : start + 500])))
