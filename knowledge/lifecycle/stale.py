"""Stale material: completed items whose parser, chunker or model stamp is not today's.

``stale`` is derived, not a status: an item is stale when it is ``completed`` and its stamps
(``items.parser_version``, ``chunker_version``, ``model_fingerprint``) differ from what this process would
stamp now (``knowledge.sources.PARSER_VERSIONS``, ``chunking.chunker_version()``,
``models.model_stamp(base)`` — which includes the hash of the weights file). Reuse already refuses stale
material (identical bytes, vectors by chunk hash, cached vectors are all matched on the stamps); here it
is listed (``quire items --stale``, the tree's marker) and re-derived (``quire reindex --stale``, the
window's "Reindex stale" action), through the ordinary reindex, whose generation fence keeps a late
worker from overwriting newer material.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, not_, or_, select

from knowledge.ingest.chunking import chunker_version
from knowledge.ingest.models import model_stamp
from knowledge.library import agent_hidden, tree
from knowledge.library.bases import Base, resolve_base
from knowledge.lifecycle.operations import Changes, reindex_items
from knowledge.principal import require_person
from knowledge.sources import PARSER_VERSIONS
from knowledge.store.schema import items

if TYPE_CHECKING:
    from knowledge.runtime import Quire

PAGE = 1000


@dataclass(frozen=True)
class Stamps:
    """Today's stamps for one base; :meth:`stale` is pure (the window asks it for every row it draws)."""

    parsers: dict[str, str]
    chunker: str
    model: str

    def stale(self, item: tree.Item) -> bool:
        """Whether a completed item's material was made by another parser, chunker or model than today's."""
        if item.status != "completed" or item.type == "directory":
            return False
        if item.parser is not None and self.parsers.get(item.parser) != item.parser_version:
            return True
        return item.chunker_version != self.chunker or item.model_fingerprint != self.model


def stamps_for(base: Base) -> Stamps:
    """Today's stamps (the first call of a process hashes the weights: call it off the GUI thread)."""
    return Stamps(dict(PARSER_VERSIONS), chunker_version(), model_stamp(base))


def current_stamps(quire: Quire, base_id: int) -> Stamps:
    with quire.db.read() as conn:
        base = resolve_base(conn, base_id)
    return stamps_for(base)


def is_stale(item: tree.Item, base: Base) -> bool:
    return stamps_for(base).stale(item)


def _stale_condition(base: Base) -> Any:
    parser_current = or_(
        items.c.parser.is_(None),
        *(and_(items.c.parser == p, items.c.parser_version == v) for p, v in PARSER_VERSIONS.items()),
    )
    return and_(
        items.c.base_id == base.id,
        items.c.status == "completed",
        items.c.type != "directory",
        or_(
            not_(parser_current),
            items.c.chunker_version.is_distinct_from(chunker_version()),
            items.c.model_fingerprint.is_distinct_from(model_stamp(base)),
        ),
    )


def stale_items(quire: Quire, base_ref: str | int, *, after_id: int = 0, limit: int | None = None) -> list[tree.Item]:
    """The stale items of the base in id order after ``after_id`` (all of them, or ``limit``), read a page
    at a time."""
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
    condition = _stale_condition(base)  # today's stamps, computed outside the reads
    found: list[tree.Item] = []
    after = after_id
    while limit is None or len(found) < limit:
        page = PAGE if limit is None else min(PAGE, limit - len(found))
        query = select(items).where(and_(condition, items.c.id > after)).order_by(items.c.id).limit(page)
        with quire.db.read() as conn:
            rows = conn.execute(agent_hidden.leave_out(query, base.id)).all()  # nothing kept from agents reaches one
        if not rows:
            break
        found.extend(tree.Item.from_row(r) for r in rows)
        after = rows[-1].id
    return found


def reindex_stale(quire: Quire, base_ref: str | int) -> Changes:
    """Re-derive exactly the stale items of a base (one reindex of those items; nothing else is touched)."""
    require_person("reindex stale items")
    stale = stale_items(quire, base_ref)
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
    if not stale:
        changes = Changes(base.id)
        changes.noop = True
        return changes
    return reindex_items(quire, base.id, [i.id for i in stale])
