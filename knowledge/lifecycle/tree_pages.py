"""The pages of a base's tree that a view polls: one level by keyset, what changed since a cursor, how many
children of each container stand in each status, which items still exist.

Every function is one read snapshot (``Database.read()``), writes nothing, holds no lock a writer waits on and
is bounded (pages, ``limit``s, chunked ``IN`` lists), so the window can call them every half second from a
background thread on a base of any size, and the MCP server can page a folder with the same cursor.

* ``children_page`` pages one tree level in a stable order (directories first, then by name, then id)
  with a keyset cursor, so rows created meanwhile never shift a page; the window's lazy model appends pages
  and places a new row by the same ``sort_key``.
* ``items_changed_since`` returns rows whose ``updated_at`` passed a cursor, ``deleting`` ones included
  (that is how a view learns to drop them). Timestamps are taken inside the write transaction that
  commits them and writers are serialised, so a cursor with a small overlap misses nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, case, func, select, tuple_

from knowledge.library import agent_hidden
from knowledge.library.tree import Item
from knowledge.store.schema import items

if TYPE_CHECKING:
    from knowledge.runtime import Quire

SortKey = tuple[int, str, int]  # (0 for containers else 1, name, id)
CHUNK = 500  # ids per IN list


def sort_key(item: Item) -> SortKey:
    """The order of one tree level: containers first, then by name, then by id."""
    return (0 if item.is_container else 1, item.name, item.id)


def _key_columns() -> Any:
    return tuple_(case((items.c.type == "directory", 0), else_=1), items.c.name, items.c.id)


def children_page(
    quire: Quire,
    base_id: int,
    parent_id: int | None,
    after: SortKey | None,
    limit: int = 200,
    hidden_statuses: Sequence[str] = (),
) -> list[Item]:
    """The next ``limit`` visible children of ``parent_id`` (None: top level) after the cursor ``after``;
    ``hidden_statuses`` leaves rows out (the window's "Hide skipped"): the keyset cursor still holds."""
    query = select(items).where(and_(items.c.base_id == base_id, items.c.status != "deleting"))
    query = agent_hidden.leave_out(query, base_id)  # nothing kept from agents reaches one
    if hidden_statuses:
        query = query.where(items.c.status.not_in(list(hidden_statuses)))
    query = query.where(items.c.parent_id.is_(None) if parent_id is None else items.c.parent_id == parent_id)
    if after is not None:
        query = query.where(_key_columns() > tuple_(*after))
    order = (case((items.c.type == "directory", 0), else_=1), items.c.name, items.c.id)
    with quire.db.read() as conn:
        rows = conn.execute(query.order_by(*order).limit(limit)).all()
    return [Item.from_row(r) for r in rows]


@dataclass(frozen=True)
class ChangedItems:
    items: list[Item]
    cursor: float  # the largest ``updated_at`` seen (the next call's ``since``)
    complete: bool  # False when ``limit`` cut the answer short: call again from ``cursor``


def items_changed_since(quire: Quire, base_id: int, since: float, *, limit: int = 2000) -> ChangedItems:
    """Rows of the base updated after ``since`` (``deleting`` included), oldest change first."""
    query = (
        select(items)
        .where(and_(items.c.base_id == base_id, items.c.updated_at > since))
        .order_by(items.c.updated_at, items.c.id)
        .limit(limit)
    )
    with quire.db.read() as conn:
        found = [Item.from_row(r) for r in conn.execute(query).all()]
    cursor = max((i.updated_at for i in found), default=since)
    return ChangedItems(found, cursor, len(found) < limit)


def child_status_counts(quire: Quire, base_id: int, container_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """For each container of the base, how many of its direct (visible) children are in each status."""
    counts: dict[int, dict[str, int]] = {int(i): {} for i in container_ids}
    ids = list(counts)
    with quire.db.read() as conn:
        for start in range(0, len(ids), CHUNK):
            rows = conn.execute(
                select(items.c.parent_id, items.c.status, func.count())
                .where(
                    and_(
                        items.c.base_id == base_id,  # with parent_id: the items_base_parent index
                        items.c.parent_id.in_(ids[start : start + CHUNK]),
                        items.c.status != "deleting",
                    )
                )
                .group_by(items.c.parent_id, items.c.status)
            ).all()
            for parent_id, status, count in rows:
                counts[int(parent_id)][str(status)] = int(count)
    return counts


def existing_ids(quire: Quire, item_ids: Sequence[int]) -> set[int]:
    """Which of these items still exist and are visible (not ``deleting``)."""
    ids = list(item_ids)
    found: set[int] = set()
    with quire.db.read() as conn:
        for start in range(0, len(ids), CHUNK):
            rows = conn.execute(
                select(items.c.id).where(and_(items.c.id.in_(ids[start : start + CHUNK]), items.c.status != "deleting"))
            ).all()
            found.update(int(r.id) for r in rows)
    return found
