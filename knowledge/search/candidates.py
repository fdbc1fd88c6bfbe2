"""What a ranking finds and how it is made visible: chunk ids joined to their live rows in the searcher's
own snapshot. A derived index (the vector file, the keyword index) may hold chunks that are gone; this
join is what keeps them out of every answer, and chunks of ``deleting`` items with them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, text

from knowledge.search.scope import Scope


@dataclass(frozen=True, slots=True)
class Candidate:
    """A visible chunk a ranking found: its id and item (the text is read only for the hits returned)."""

    id: int
    item_id: int


Ranked = list[tuple[Candidate, float]]

# chunks by id, joined to their items; those of deleting items are never visible
_VISIBLE_CHUNKS = "FROM chunks c JOIN items i ON i.id = c.item_id WHERE c.id IN :ids AND i.status != 'deleting'"
_VISIBLE = text(f"SELECT c.id, c.item_id {_VISIBLE_CHUNKS}").bindparams(bindparam("ids", expanding=True))
# with what the document's path below its root is made of (its root's name, and its parent's place for a file
# inside a file, such as an archive's member, which has no path of its own): two lookups by id per hit
_HIT_ROWS = text(
    "SELECT c.id, c.item_id, c.ordinal, c.text, c.page, c.line_start, c.line_end, i.name, i.source_path, "
    "i.metadata, i.relative_path, i.root_id, i.parent_id, r.name AS root_name, p.name AS parent_name, "
    "p.relative_path AS parent_relative "
    "FROM chunks c JOIN items i ON i.id = c.item_id LEFT JOIN items r ON r.id = i.root_id "
    "LEFT JOIN items p ON p.id = i.parent_id WHERE c.id IN :ids AND i.status != 'deleting'"
).bindparams(bindparam("ids", expanding=True))


def visible(conn: Connection, chunk_ids: Sequence[int], scope: Scope | None) -> dict[int, Candidate]:
    """The chunks among ``chunk_ids`` that are live, not being deleted, and admitted by ``scope``."""
    if not chunk_ids:
        return {}
    rows = conn.execute(_VISIBLE, {"ids": list(chunk_ids)}).all()
    return {r[0]: Candidate(r[0], r[1]) for r in rows if scope is None or scope.admits(r[0], r[1])}


def hit_rows(conn: Connection, chunk_ids: Sequence[int]) -> dict[int, Any]:
    """The rows hits are made of (chunk text, location, item name), by chunk id; deleting items left out."""
    if not chunk_ids:
        return {}
    return {r.id: r for r in conn.execute(_HIT_ROWS, {"ids": list(chunk_ids)}).all()}


def path_below_root(row: Any) -> str:
    """A hit row's document as a person finds it in its tree: its path from the top item of its tree, that
    item's name included (``doc/python3/changelog.gz``, not ``changelog.gz``); a root's is its name."""
    if row.root_id is None or row.root_id == row.item_id or row.root_name is None:
        return str(row.name)
    if row.relative_path:
        return f"{row.root_name}/{row.relative_path}"
    if row.parent_id == row.root_id or row.parent_name is None:  # inside a file that is its tree's root
        return f"{row.root_name}/{row.name}"
    inside = row.parent_relative or row.parent_name  # inside a file of the tree (an archive's member)
    return f"{row.root_name}/{inside}/{row.name}"


def over_fetch(depth: int) -> int:
    """How many candidates to fetch for ``depth`` visible ones: a margin for hidden (deleting) chunks;
    if too many were hidden, the caller fetches again, four times as many."""
    return max(depth + depth // 4, 20)
