"""What an agent principal may not see: the items a person kept from agents and everything below them.

This is the one place that decides it (the marks are written by :mod:`knowledge.library.agent_exclusions`).
Every read an agent can reach asks here: search's scope (before ranking and limits), backlinks, item and chunk
reads, listings and counts. For a person (no agent acting, :func:`knowledge.principal.acting_principal`)
nothing is hidden; :func:`marked_ids` shows a person the marks. A folder's mark covers what is added below it
later, since the subtree is walked at read time.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import Connection, Select, select

from knowledge.errors import NotFound
from knowledge.principal import acting_principal
from knowledge.store.schema import agent_exclusions, items


def agent_acting() -> bool:
    """Whether the code runs for an agent principal (the MCP server's tools, ``--as-agent``)."""
    who = acting_principal()
    return who is not None and who.is_agent


def marked_ids(conn: Connection, base_id: int) -> set[int]:
    """The items of the base a person marked (not their subtrees)."""
    return {
        int(r[0]) for r in conn.execute(select(agent_exclusions.c.item_id).where(agent_exclusions.c.base_id == base_id))
    }


def hidden_select(base_id: int) -> Select[Any] | None:
    """A query of the ids hidden from the acting agent (the marked items and everything below them), to use as
    ``items.c.id.not_in(...)``; None for a person."""
    return kept_select(base_id) if agent_acting() else None


def kept_select(base_id: int) -> Select[Any]:
    """A query of the ids kept from agents, whoever asks: the marked items and everything below them."""
    down = select(agent_exclusions.c.item_id.label("id")).where(agent_exclusions.c.base_id == base_id)
    hidden = down.cte("agent_hidden", recursive=True)
    hidden = hidden.union(select(items.c.id).join(hidden, items.c.parent_id == hidden.c.id))
    return select(hidden.c.id)


def hidden_ids(conn: Connection, base_id: int) -> frozenset[int]:
    """The ids hidden from the acting agent; empty for a person."""
    query = hidden_select(base_id)
    return frozenset() if query is None else frozenset(int(r[0]) for r in conn.execute(query))


def check_visible(conn: Connection, base_id: int, item_id: int) -> None:
    """Refuse (``NotFound``, as for an id that never existed) an item hidden from the acting agent."""
    if item_id in hidden_ids(conn, base_id):
        raise NotFound(f"item {item_id} not found in this knowledge base")


Q = TypeVar("Q", bound=Select[Any])


def leave_out(query: Q, base_id: int) -> Q:
    """``query`` over ``items`` without the rows hidden from the acting agent (unchanged for a person)."""
    hidden = hidden_select(base_id)
    return query if hidden is None else query.where(items.c.id.not_in(hidden))
