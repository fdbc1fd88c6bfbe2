"""One identity per source in a base (seed 003 rule 1): a live root is named by its canonical path.

The canonical path of a file or folder is its resolved absolute path (``os.path.realpath``), stored in
``items.source_key`` on the roots ``add_items`` creates. A partial unique index (migration
``items_source_identity``) allows one live root (``parent_id IS NULL``, status not ``deleting``) per
``(base_id, source_key)``; notes have no key and keep their own identity. The operation checks first,
inside its write transaction, so the index is the backstop a bug or a second process would hit, never
the path a person's re-add takes:

* ``created`` — nothing in the base stands for this path yet;
* ``already_present`` — a live root has this key (or, for roots made before the key existed and folder
  runs' containers, this ``source_path``): nothing is created; a terminal root that changed is refreshed
  through reindex (unchanged files cost nothing: prepare-root keeps unchanged children and reuse skips
  unchanged text), an active root that lost its job (a killed ``quire add``) is scheduled again;
* ``already_covered`` — the path lies inside a live folder root of the base: answered with that root.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import PurePath

from sqlalchemy import Connection, and_, or_, select

from jobs.schema import jobs
from knowledge.library import items as tree
from knowledge.library.ids import ItemId
from knowledge.store.schema import TERMINAL_STATUSES, items

CREATED = "created"
ALREADY_PRESENT = "already_present"
ALREADY_COVERED = "already_covered"


@dataclass(frozen=True)
class AddOutcome:
    """What adding one input did: ``created``, ``already_present`` or ``already_covered`` (with the item),
    and whether an existing root was ``refreshed`` (reindexed or scheduled again)."""

    input: str
    outcome: str
    item_id: ItemId
    refreshed: bool = False

    def as_dict(self) -> dict[str, object]:
        return {"input": self.input, "outcome": self.outcome, "item_id": self.item_id, "refreshed": self.refreshed}


def canonical_path(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.abspath(path))


def _live_roots(base_id: int) -> object:
    return and_(
        items.c.base_id == base_id,
        items.c.parent_id.is_(None),
        items.c.type.in_(("file", "directory")),
        items.c.status != "deleting",
    )


def find_live_root(conn: Connection, base_id: int, key: str) -> tree.Item | None:
    """The live root of this base that stands for ``key`` (the oldest, if legacy duplicates exist)."""
    row = conn.execute(
        select(items)
        .where(_live_roots(base_id))  # type: ignore[arg-type]
        .where(or_(items.c.source_key == key, items.c.source_path == key))
        .order_by(items.c.id)
        .limit(1)
    ).first()
    return None if row is None else tree.Item.from_row(row)


def find_covering_root(conn: Connection, base_id: int, key: str) -> tree.Item | None:
    """A live folder root of this base that holds ``key`` somewhere below it (the nearest one)."""
    ancestors = [str(p) for p in PurePath(key).parents][:64]
    if not ancestors:
        return None
    rows = conn.execute(
        select(items)
        .where(_live_roots(base_id))  # type: ignore[arg-type]
        .where(items.c.type == "directory")
        .where(or_(items.c.source_key.in_(ancestors), items.c.source_path.in_(ancestors)))
    ).all()
    found = [tree.Item.from_row(r) for r in rows]
    if not found:
        return None
    return max(found, key=lambda i: len(i.source_path or ""))


def has_changed(item: tree.Item) -> bool:
    """A folder is always re-walked (what is below it may have changed); a file when its size or mtime
    differ from what was indexed (or it never was)."""
    if item.type == "directory":
        return True
    try:
        st = os.stat(item.source_path or "")
    except OSError:
        return True  # gone or unreadable now: the refresh records that
    return item.size != st.st_size or item.mtime is None or abs(item.mtime - st.st_mtime) > 1e-6


def subtree_is_terminal(conn: Connection, root_id: int) -> bool:
    return all(i.status in TERMINAL_STATUSES for i in tree.subtree_items(conn, [root_id]))


def lost_its_job(conn: Connection, item: tree.Item) -> bool:
    """An active root with no live job to advance it (e.g. ``quire add`` killed between its commit and
    its scheduling)."""
    if item.status in TERMINAL_STATUSES:
        return False
    if item.job_id is None:
        return True
    row = conn.execute(select(jobs.c.status).where(jobs.c.id == item.job_id)).first()
    return row is None or row.status not in ("pending", "running")
