"""Backlinks: which notes of a base link to a document through ``[[wiki links]]``, and the ``item_links``
rows that answer it.

The Markdown reader keeps a note's link targets in its metadata (``links``: targets without ``|alias`` or
``#heading``, joined by `` | ``). A target names a document the way Obsidian resolves it, compared without
case:

* by name: ``[[Harbour plan]]`` names ``Harbour plan.md``; ``[[diagram.png]]`` names ``diagram.png``;
  a Quire note (no file) is named by its title;
* by path: ``[[projects/Harbour plan]]`` names the document whose path below its added folder ends with
  ``projects/Harbour plan(.md)``.

A link names every document that answers to it (two ``Harbour plan.md`` in different folders both count),
never the linking note itself. Deleting items link to nothing and are linked from nothing.

Stored: each item's targets, folded (:func:`link_targets`), are rows of ``item_links``, written whenever
the item row's metadata is (``tree.mark_indexed`` calls :func:`record_links`, ``tree.insert_rows``
:func:`record_new_rows`) and gone with the item row (``ON DELETE CASCADE``). A target is resolved only when
asked, against the documents' names and paths of that snapshot, so a rename or move of either side needs no
write here.

Cost: one indexed lookup per call — the keys the asked documents answer to (their names; every tail of
their paths that has a slash in it) looked up in ``item_links`` — so a search asks once for all its hits,
whatever the size of the base (a scan of every item's JSON took 120 ms a search at 1,000,000 chunks).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, text

from knowledge.store.schema import item_links, items

LINK_SEPARATOR = " | "
_MARKDOWN_SUFFIXES = (".md", ".markdown")
_LOOKUP_PAGE = 500  # keys bound per lookup query

# ``+base_id``: looked up by id; without the plus SQLite walks the base's index instead (every item of the
# base: 60-90 ms a search at 300,000 chunks)
_TARGETS = text(
    "SELECT id, name, relative_path FROM items WHERE id IN :ids AND +base_id = :b AND status != 'deleting'"
).bindparams(bindparam("ids", expanding=True))
_LINKING = text(
    "SELECT l.item_id, l.target, i.name FROM item_links l JOIN items i ON i.id = l.item_id "
    "WHERE l.base_id = :b AND l.target IN :keys AND i.status != 'deleting' AND i.type != 'directory'"
).bindparams(bindparam("keys", expanding=True))


@dataclass(frozen=True)
class Backlink:
    """A note that links to a document: its id and name."""

    item_id: int
    name: str

    def as_dict(self) -> dict[str, object]:
        return {"item_id": self.item_id, "name": self.name}


def backlinks(conn: Connection, base_id: int, item_ids: Iterable[int]) -> dict[int, list[Backlink]]:
    """For each of ``item_ids`` (documents of base ``base_id``), the notes linking to it, by name; every id
    asked for is a key (an empty list when nothing links to it or it is gone)."""
    wanted = list(dict.fromkeys(item_ids))
    found: dict[int, list[Backlink]] = {i: [] for i in wanted}
    if not wanted:
        return found
    answering: dict[str, set[int]] = {}  # a folded target -> the asked documents it names
    for item_id, name, relative_path in conn.execute(_TARGETS, {"ids": wanted, "b": base_id}).all():
        for key in _keys_of(name, relative_path):
            answering.setdefault(key, set()).add(item_id)
    keys = sorted(answering)
    for start in range(0, len(keys), _LOOKUP_PAGE):
        page = keys[start : start + _LOOKUP_PAGE]
        for source_id, target, source_name in conn.execute(_LINKING, {"b": base_id, "keys": page}).all():
            for target_id in answering[target]:
                if target_id != source_id and all(b.item_id != source_id for b in found[target_id]):
                    found[target_id].append(Backlink(source_id, source_name))
    for links in found.values():
        links.sort(key=lambda b: (b.name.casefold(), b.item_id))
    return found


def link_targets(metadata: Mapping[str, Any] | str | None) -> list[str]:
    """The folded targets of an item's metadata (a dict, or its stored JSON), each once, in order."""
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return []
    links = metadata.get("links") if isinstance(metadata, Mapping) else None
    if not isinstance(links, str):
        return []
    folded = (t.strip().replace("\\", "/").strip("/").casefold() for t in links.split(LINK_SEPARATOR))
    return list(dict.fromkeys(t for t in folded if t))


def record_links(conn: Connection, item_id: int, metadata: Mapping[str, Any] | str | None) -> None:
    """Replace an item's stored targets by its metadata's (in the transaction that writes the metadata)."""
    base_id = conn.execute(select(items.c.base_id).where(items.c.id == item_id)).scalar_one()
    replace_links(conn, int(base_id), [(item_id, metadata)])


def replace_links(
    conn: Connection,
    base_id: int,
    metadata_of: Sequence[tuple[int, Mapping[str, Any] | str | None]],
    *,
    new_items: bool = False,
) -> None:
    """Replace the stored targets of several items of one base by their metadata's: one delete, one insert.
    ``new_items``: created in this transaction, so there are none to delete."""
    item_ids = [] if new_items else [item_id for item_id, _metadata in metadata_of]
    for start in range(0, len(item_ids), 500):
        conn.execute(delete(item_links).where(item_links.c.item_id.in_(item_ids[start : start + 500])))
    values = [
        {"item_id": item_id, "target": t, "base_id": base_id}
        for item_id, metadata in metadata_of
        for t in link_targets(metadata)
    ]
    if values:
        conn.execute(insert(item_links), values)


def record_new_rows(conn: Connection, rows: Iterable[Mapping[str, Any]]) -> None:
    """Store the targets of item rows just inserted whole (``id``, ``base_id``, ``metadata`` given)."""
    values = [
        {"item_id": row["id"], "target": t, "base_id": row["base_id"]}
        for row in rows
        for t in link_targets(row.get("metadata"))
    ]
    if values:
        conn.execute(insert(item_links), values)


def rederive_all(conn: Connection) -> int:
    """Every item's stored targets again from its metadata (a salvaged database); returns how many."""
    conn.execute(delete(item_links))
    rows = conn.execute(
        select(items.c.id, items.c.base_id, items.c.metadata).where(
            items.c.metadata.like('%"links"%'), items.c.type != "directory"
        )
    ).all()
    values = [{"id": r.id, "base_id": r.base_id, "metadata": r.metadata} for r in rows]
    record_new_rows(conn, values)
    return sum(len(link_targets(v["metadata"])) for v in values)


def _keys_of(name: str, relative_path: str | None) -> set[str]:
    """The folded targets that name a document: its names (a target without a slash), and every tail of
    its path that holds a slash (``[[b/c]]`` names ``a/b/c.md``: the path ends with ``/b/c``)."""
    keys = {key for key in _names_of(name) if "/" not in key}
    if relative_path:
        for path in _names_of(relative_path.replace("\\", "/")):
            parts = path.split("/")
            keys.update(tail for tail in ("/".join(parts[n:]) for n in range(len(parts) - 1)) if "/" in tail)
    return keys


def _names_of(name: str) -> tuple[str, ...]:
    """The keys a link may use for a document called ``name``: the name, and without a Markdown suffix."""
    folded = name.strip("/").casefold()
    for suffix in _MARKDOWN_SUFFIXES:
        if folded.endswith(suffix):
            return (folded, folded[: -len(suffix)])
    return (folded,)
