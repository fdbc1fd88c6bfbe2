"""Backlinks: which notes of a base link to a document through ``[[wiki links]]`` (a read; no table of its own).

The Markdown reader keeps a note's link targets in its metadata (``links``: targets without ``|alias`` or
``#heading``, joined by `` | ``). A target names a document the way Obsidian resolves it, compared without
case:

* by name: ``[[Harbour plan]]`` names ``Harbour plan.md``; ``[[diagram.png]]`` names ``diagram.png``;
  a Quire note (no file) is named by its title;
* by path: ``[[projects/Harbour plan]]`` names the document whose path below its added folder ends with
  ``projects/Harbour plan(.md)``.

A link names every document that answers to it (two ``Harbour plan.md`` in different folders both count),
never the linking note itself. Deleting items link to nothing and are linked from nothing.

Cost: one pass over the base's items that have links (a ``LIKE`` on the stored JSON picks them out, then
their JSON is read) per call, so a search asks once for all its hits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, text

LINK_SEPARATOR = " | "
_MARKDOWN_SUFFIXES = (".md", ".markdown")

# a cheap first cut on the stored JSON; the JSON itself decides (a null or absent value links nothing)
_LINKING = text(
    "SELECT id, name, relative_path, metadata FROM items WHERE base_id = :b AND status != 'deleting' "
    "AND type != 'directory' AND metadata LIKE '%\"links\"%'"
)
_TARGETS = text(
    "SELECT id, name, relative_path FROM items WHERE id IN :ids AND base_id = :b AND status != 'deleting'"
).bindparams(bindparam("ids", expanding=True))


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
    names: dict[str, set[int]] = {}
    paths: list[tuple[str, int]] = []
    for item_id, name, relative_path in conn.execute(_TARGETS, {"ids": wanted, "b": base_id}).all():
        for key in _names_of(name):
            names.setdefault(key, set()).add(item_id)
        if relative_path:
            paths.extend((key, item_id) for key in _names_of(relative_path.replace("\\", "/")))
    for source_id, source_name, _path, metadata in conn.execute(_LINKING, {"b": base_id}).all():
        for target_id in _resolved(_targets(metadata), names, paths):
            if target_id != source_id and all(b.item_id != source_id for b in found[target_id]):
                found[target_id].append(Backlink(source_id, source_name))
    for links in found.values():
        links.sort(key=lambda b: (b.name.casefold(), b.item_id))
    return found


def _names_of(name: str) -> tuple[str, ...]:
    """The keys a link may use for a document called ``name``: the name, and without a Markdown suffix."""
    folded = name.strip("/").casefold()
    for suffix in _MARKDOWN_SUFFIXES:
        if folded.endswith(suffix):
            return (folded, folded[: -len(suffix)])
    return (folded,)


def _targets(metadata: str | None) -> list[str]:
    try:
        fields = json.loads(metadata) if metadata else {}
    except ValueError:
        return []
    links = fields.get("links") if isinstance(fields, dict) else None
    if not isinstance(links, str):
        return []
    return [t.strip().replace("\\", "/").strip("/").casefold() for t in links.split(LINK_SEPARATOR) if t.strip()]


def _resolved(targets: list[str], names: dict[str, set[int]], paths: list[tuple[str, int]]) -> set[int]:
    hit: set[int] = set()
    for target in targets:
        if "/" not in target:
            hit |= names.get(target, set())
            continue
        hit |= {item_id for path, item_id in paths if path == target or path.endswith("/" + target)}
    return hit
