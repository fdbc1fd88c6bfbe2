"""Items kept from agents: a person marks a document or a folder, and no agent principal sees it again.

Contract
* A mark is one row of ``agent_exclusions`` (this module is its one writer). A marked folder hides its whole
  subtree, items added below it later included: what is hidden is worked out at read time from the marks
  (:mod:`knowledge.library.agent_hidden`), never copied onto the items.
* Only a person marks or unmarks (:func:`exclude_from_agents`, :func:`include_for_agents`: ``Forbidden`` for an
  agent), audited as ``items.kept_from_agents`` / ``items.allowed_agents`` with counts only.
* :mod:`knowledge.library.agent_hidden` is the one place that decides what an agent may not see.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from sqlalchemy import Connection, and_, delete, insert, or_, select

from knowledge.errors import NotFound
from knowledge.library import audit, tree
from knowledge.library.agent_hidden import kept_select, marked_ids
from knowledge.library.bases import Base, resolve_base
from knowledge.principal import require_person
from knowledge.store.schema import agent_exclusions, items

if TYPE_CHECKING:
    from knowledge.runtime import Quire


def exclude_from_agents(quire: Quire, base_ref: str | int, item_id: int | str) -> bool:
    """Keep the item (a folder: its whole subtree) from agents (a person only); False when already kept."""
    return _mark(quire, base_ref, item_id, True)


def include_for_agents(quire: Quire, base_ref: str | int, item_id: int | str) -> bool:
    """Let agents see the item again (a person only); False when it was not marked. An item below a marked
    folder stays hidden while the folder is marked."""
    return _mark(quire, base_ref, item_id, False)


def resolve_item(conn: Connection, base: Base, ref: int | str) -> tree.Item:
    """The live item ``ref`` names: its id, or a path — the original's (absolute, or relative to the current
    folder) or the item's path below the top of its tree. Refused when no live item, or more than one, has it."""
    text = str(ref).strip()
    if text.isdigit():
        item = tree.load_in_base(conn, base.id, int(text))
    else:
        where = or_(items.c.source_path == os.path.abspath(text), items.c.relative_path == text.strip("/"))
        query = select(items.c.id).where(and_(items.c.base_id == base.id, items.c.status != "deleting", where))
        found = [int(r[0]) for r in conn.execute(query.limit(2))]
        if len(found) != 1:
            problem = "no item" if not found else "more than one item"
            raise NotFound(f"{problem} in knowledge base {base.name!r} has the path {text!r}; give the item's id")
        item = tree.load_in_base(conn, base.id, found[0])
    if item.status == "deleting":
        raise NotFound(f"item {item.id} not found in knowledge base {base.name!r}")
    return item


def _mark(quire: Quire, base_ref: str | int, ref: int | str, excluded: bool) -> bool:
    require_person("choose what agents may see")
    with quire.db.write() as conn:
        base = resolve_base(conn, base_ref)
        item = resolve_item(conn, base, ref)
        was = item.id in marked_ids(conn, base.id)
        if was == excluded:
            return False
        if excluded:
            conn.execute(insert(agent_exclusions).values(item_id=item.id, base_id=base.id, created_at=time.time()))
        else:
            conn.execute(delete(agent_exclusions).where(agent_exclusions.c.item_id == item.id))
        action = audit.AGENT_EXCLUDED if excluded else audit.AGENT_INCLUDED
        payload = {"items": 1, "container": item.is_container}
        audit.append(conn, action, audit.person_actor(conn), base_id=base.id, payload=payload)
        return True


def kept_from_agents(quire: Quire, base_ref: str | int) -> frozenset[int]:
    """Every item of the base kept from agents (marked, or below a marked folder): what a person is shown."""
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
        return frozenset(int(r[0]) for r in conn.execute(kept_select(base.id)))
