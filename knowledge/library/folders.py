"""The folder items inside a tree: found, or made on demand, for a file that lands below its root.

A tree's folder items follow one convention, whoever makes them (a folder's walk, a file added inside a
folder, a folder run's commit): a ``directory`` item named after its folder, with ``parent_id`` the folder
above it (the root for a top-level one), ``root_id`` the tree's root, ``source_path`` its path on disk and
``relative_path`` its path below the root (``/``-separated). :func:`ensure_folders` finds a file's folders with
one indexed read (by source path) and makes the missing ones, outermost first, in the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, and_, bindparam, select

from knowledge.library.ids import ItemId
from knowledge.library.item import NewItem
from knowledge.library.tree import create_item
from knowledge.store.schema import items


@dataclass(frozen=True)
class TreeTop:
    """The root a tree's folder items hang from, and what they inherit from it."""

    base_id: int
    root_id: int
    folder: str  # the root's path on disk
    owner: str | None = None
    run_id: int | None = None


@dataclass(frozen=True)
class Placed:
    """Where a file goes: the folder item it hangs from, and the folder items made for it just now."""

    parent_id: ItemId
    created: list[ItemId]


_FOLDERS = select(items.c.id, items.c.relative_path).where(
    and_(
        items.c.base_id == bindparam("base_id"),  # with source_path: the items_base_source index
        items.c.source_path.in_(bindparam("paths", expanding=True)),
        items.c.root_id == bindparam("root_id"),
        items.c.type == "directory",
        items.c.status != "deleting",
    )
)


def ensure_folders(conn: Connection, top: TreeTop, relative_file: str, *, status: str = "processing") -> Placed:
    """The folder item that holds ``relative_file`` (a path below the root): the root itself for a file at the
    top, else the folder at its directory, made (with every folder between, ``status``) when the tree has none
    yet. One read, whatever the depth; one insert per folder made."""
    parts = relative_file.split("/")[:-1]
    if not parts:
        return Placed(ItemId(top.root_id), [])
    dirs = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    folder = Path(top.folder)
    paths = {str(folder / d): d for d in dirs}
    rows = conn.execute(_FOLDERS, {"base_id": top.base_id, "paths": list(paths), "root_id": top.root_id}).all()
    found = {str(r.relative_path): ItemId(int(r.id)) for r in rows}
    parent, created = ItemId(top.root_id), []
    for d in dirs:
        existing = found.get(d)
        if existing is None:
            existing = create_item(
                conn,
                NewItem(
                    top.base_id,
                    "directory",
                    d.rsplit("/", 1)[-1],
                    status,
                    parent_id=parent,
                    root_id=top.root_id,
                    source_path=str(folder / d),
                    relative_path=d,
                    owner=top.owner,
                    run_id=top.run_id,
                ),
            )
            created.append(existing)
        parent = existing
    return Placed(parent, created)
