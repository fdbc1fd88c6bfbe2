"""Retry what failed, in bulk: reindex exactly the failed items of a base, or of some subtrees.

What is retried: failed leaves, and failed containers whose own expansion failed (a folder that could not
be read, an interrupted prepare-root). A container that is failed only because children failed
(``children_failed``) is not itself re-walked: its failed children are retried and it follows them.
``skipped`` items are never picked (they were not read by design; a plain reindex re-judges them).

It is :func:`~knowledge.lifecycle.operations.reindex_items` on the failed items found, so the same guards
hold (a person, a base that is ok and writable, nothing active in the chosen subtrees) and it writes no
status itself. The search runs in one read snapshot; reindex re-reads everything under its write lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import and_, or_, select

from knowledge.library import tree
from knowledge.library.bases import resolve_base
from knowledge.lifecycle.operations import Changes, reindex_items
from knowledge.principal import require_person
from knowledge.store.schema import items

if TYPE_CHECKING:
    from knowledge.runtime import Quire

CHILDREN_FAILED = "children_failed"  # the code reconciliation gives a container with failed children


def failed_item_ids(quire: Quire, base_id: int, within: Sequence[int] = ()) -> list[int]:
    """The failed items to retry, in the base or in the subtrees of ``within``."""
    own_failure = or_(items.c.type != "directory", items.c.error_code.is_(None), items.c.error_code != CHILDREN_FAILED)
    query = select(items.c.id).where(and_(items.c.base_id == base_id, items.c.status == "failed", own_failure))
    with quire.db.read() as conn:
        if within:
            scope = [i.id for i in tree.outermost_selected(conn, base_id, within)]
            ids = tree.subtree_ids(conn, scope)
            found: list[int] = []
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                found.extend(r.id for r in conn.execute(query.where(items.c.id.in_(chunk))).all())
            return sorted(found)
        return sorted(r.id for r in conn.execute(query).all())


@dataclass(frozen=True)
class Retried:
    changes: Changes
    item_ids: list[int]  # the failed items picked (their subtrees collapsed by reindex)


def reindex_failed(quire: Quire, base_ref: str | int, within: Sequence[int] = ()) -> Retried:
    """Reindex the failed items (only failed: not skipped) of the base, or under ``within``."""
    require_person("retry failed items")
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
    failed = failed_item_ids(quire, base.id, within)
    if not failed:
        return Retried(Changes(base.id, noop=True), [])
    return Retried(reindex_items(quire, base.id, failed), failed)
