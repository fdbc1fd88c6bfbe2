"""One live item per source in a base, on every add path (two would answer a search twice and drift apart).

The canonical path of a file or folder is its resolved absolute path (``os.path.realpath``), stored in
``items.source_key`` on the roots ``add_items`` creates. A partial unique index (migration
``items_source_identity``) allows one live root (``parent_id IS NULL``, status not ``deleting``) per
``(base_id, source_key)``; notes have no key and keep their own identity. Children are held through their
folder; :func:`duplicate_sources` is the checked invariant over both (tests walk every add order against
it), and a second partial unique index keys every live file item by ``(base_id, source_path)``
(``store.schema_identity``, migration ``items_live_file_source``). The operation checks first, inside its
write transaction, so the indexes are the backstop a bug or a second process would hit, never the path a
person's re-add takes:

* ``created`` — nothing in the base stands for this path yet. A new folder root adopts the roots its walk
  lists when prepare-root expands it (``prepare_root.adopt_roots_below``): never a second copy;
* ``already_present`` — a live root has this key (or, for roots made before the key existed and folder
  runs' containers, this ``source_path``): nothing is created; a terminal root (completed, failed or
  skipped) that changed is refreshed through reindex (unchanged files cost nothing: prepare-root keeps
  unchanged children and reuse skips unchanged text), an active root that lost its job (a killed
  ``quire add``) is scheduled again;
* ``already_covered`` — the path lies inside a live folder root of the base (answered with that root):
  a held, current file is left alone; a held file that changed is reindexed, a new file the folder's walk
  lists becomes its child (:func:`create_covered_child`) and is scheduled, a folder inside is re-walked
  through the covering root. A path the folder does not list is added as a root of its own.

Folder runs keep the same rule for files (a run's container carries no key: it holds exactly the run's
approved sources, and a revert removes only what the run committed). Whatever came first, the item that
already stands for a file keeps standing for it, and the later gesture re-reads it if it changed:

* a run settles a source that already has a live file item (added on its own, a folder's child, an
  earlier run's) ``already_covered`` with that item, and reindexes it when its bytes differ from what the
  run read (:func:`find_live_file`, :func:`is_stale`): ``run D/sub`` after ``add D``, ``run D`` after
  ``add D/sub/b.txt``, ``run D`` twice;
* a folder's expansion makes no child for a file a run's item already stands for: the run holds it, and
  a changed one is reindexed where it is (``prepare_root``): ``add D`` after ``run D/sub``. Once the run is
  reverted, the folder's next walk takes the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from sqlalchemy import Connection, and_, func, or_, select

from jobs.schema import jobs
from knowledge.ingest.walk import EXCLUDED, VISIBLE, judge_path
from knowledge.library import tree
from knowledge.library.folders import TreeTop, ensure_folders
from knowledge.library.ids import ItemId
from knowledge.store.schema import TERMINAL_STATUSES, items

if TYPE_CHECKING:
    from knowledge.runtime import Quire

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


def find_live_file(conn: Connection, base_id: int, key: str) -> tree.Item | None:
    """The live file item of this base whose source is ``key`` wherever it hangs (a root, a folder's child, a
    run's item; the oldest, if legacy duplicates exist)."""
    row = conn.execute(
        select(items)
        .where(
            and_(
                items.c.base_id == base_id,
                items.c.type == "file",
                items.c.status != "deleting",
                items.c.source_path == key,
            )
        )
        .order_by(items.c.id)
        .limit(1)
    ).first()
    return None if row is None else tree.Item.from_row(row)


def is_stale(item: tree.Item, sha: str | None = None) -> bool:
    """A terminal file item whose source changed since it was read (size or mtime, or bytes other than
    ``sha``, the digest of what is on disk now): a reindex reads it again. An active one is being read."""
    if item.status not in TERMINAL_STATUSES:
        return False
    return has_changed(item) or (sha is not None and item.content_sha256 not in (None, sha))


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


def find_held_item(conn: Connection, covering: tree.Item, key: str) -> tree.Item | None:
    """The live item below ``covering`` whose source is ``key`` (children keep their walked path)."""
    row = conn.execute(
        select(items)
        .where(
            and_(
                items.c.base_id == covering.base_id,
                items.c.root_id == covering.id,
                items.c.id != covering.id,
                items.c.source_path == key,
                items.c.status != "deleting",
            )
        )
        .order_by(items.c.id)
        .limit(1)
    ).first()
    return None if row is None else tree.Item.from_row(row)


def relative_below(covering: tree.Item, key: str) -> str:
    return PurePath(key).relative_to(covering.source_path or "/").as_posix()


def walk_would_list(quire: Quire, conn: Connection, covering: tree.Item, key: str) -> bool:
    """Whether the covering folder's walk lists ``key`` (not hidden, not excluded, a real file or folder
    reached through real folders): only then does the folder hold it."""
    from knowledge import preferences

    judged = judge_path(
        Path(covering.source_path or "/"),
        relative_below(covering, key),
        hidden=[quire.data_dir],
        ignore=preferences.ignore_patterns(conn),
    )
    if os.path.isdir(key):  # judged as a file it is "unavailable"; only an ignore rule keeps a folder out
        return judged.verdict != EXCLUDED
    return judged.verdict == VISIBLE


def create_covered_child(
    conn: Connection, covering: tree.Item, key: str, name: str, invalid: tree.Reason | None
) -> ItemId:
    """A new file inside a covering folder becomes its child (with any folders between them that the folder
    does not hold yet), ``processing`` (or terminal for ``invalid``), for the caller to schedule."""
    relative = relative_below(covering, key)
    top = TreeTop(covering.base_id, covering.id, covering.source_path or "/", covering.owner, covering.run_id)
    parent_id = ensure_folders(conn, top, relative).parent_id
    child = _child(conn, covering, "file", Path(key), relative, parent_id, invalid)
    tree.reconcile_above(conn, [child])
    return child


def _child(
    conn: Connection,
    covering: tree.Item,
    kind: str,
    path: Path,
    relative: str,
    parent_id: ItemId,
    invalid: tree.Reason | None,
) -> ItemId:
    return tree.create_item(
        conn,
        tree.NewItem(
            covering.base_id, kind, path.name, "processing", parent_id=parent_id, root_id=covering.id,
            source_path=str(path), relative_path=relative, owner=covering.owner, run_id=covering.run_id,
            error=invalid,
        ),
    )  # fmt: skip


def duplicate_sources(conn: Connection, base_id: int) -> list[str]:
    """The checked invariant of this module: source paths that more than one live file item of the base
    stands for (empty when every source has one item). Tests walk every add order against it."""
    rows = conn.execute(
        select(items.c.source_path)
        .where(
            and_(
                items.c.base_id == base_id,
                items.c.type == "file",
                items.c.status != "deleting",
                items.c.source_path.is_not(None),
            )
        )
        .group_by(items.c.source_path)
        .having(func.count() > 1)
    ).all()
    return [r[0] for r in rows]
