"""``knowledge.prepare-root`` (abandon): expand a folder into child items, keeping what an earlier
expansion already got right, adopting the roots added on their own that the folder now holds (one live
item per source), and schedule the leaves."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, func, select

from jobs.runtime import JobContext
from knowledge import preferences
from knowledge.ingest.chunking import chunker_version
from knowledge.ingest.models import model_stamp
from knowledge.ingest.walk import Entry, Walk, walk
from knowledge.library import blobs, index, tree
from knowledge.library.bases import Base, find_base
from knowledge.library.ids import ItemId
from knowledge.library.tree import NewItem, Reason, create_item
from knowledge.lifecycle.admission import Scheduled, schedule
from knowledge.lifecycle.changes import Changes
from knowledge.lifecycle.identity import is_stale
from knowledge.lifecycle.members import purge_members
from knowledge.lifecycle.scheduling import schedule_reindex
from knowledge.sources import PARSER_VERSIONS, is_supported, unsupported_reason
from knowledge.store import machine_folders
from knowledge.store.schema import items

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


# -- prepare-root ------------------------------------------------------------------------------


def prepare_root(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    """Expand a folder into child items, keeping what an earlier expansion already got right.

    A first expansion creates every child. A re-expansion (reindex, or a retry after a crash) matches
    the walk against the existing children by relative path: unchanged files (same size and mtime,
    current parser/chunker/model stamps, completed) are kept untouched and never read; changed or
    failed ones are reset (their vectors stashed for reuse) and rescheduled; new ones are created;
    children whose source vanished or is now excluded are purged (material, owned files, rows).
    """
    base_id, root_id = ctx.payload["base_id"], ctx.payload["item_id"]
    with quire.db.read() as conn:
        root = tree.load_item(conn, root_id)
        ignore = preferences.ignore_patterns(conn)
    base = find_base(quire.db, base_id)
    if root is None or root.status == "deleting" or base is None:
        return {"skipped": "missing or deleting"}
    if not machine_folders.may_read(quire.db, quire.data_dir, root.source_path):
        log.warning("prepare-root job %s refused: its folder was %s", ctx.job_id, machine_folders.NOT_ADDED_HERE)
        return {"refused": f"the folder was {machine_folders.NOT_ADDED_HERE}"}
    folder = Path(root.source_path or "")
    found = _walk_or_none(folder, quire.data_dir, ignore)
    if found is None:
        with ctx.write() as conn:
            tree.set_status(conn, [root_id], "failed", error_code="unreadable", error_message="folder cannot be read")
        return {"failed": "unreadable"}
    model_stamp(base)  # hash the weights (once per process) before the write transaction, not inside it
    with ctx.write() as conn:
        root = tree.load_item(conn, root_id)
        if root is None or root.status == "deleting":  # delete won the race: no children under it
            return {"skipped": "deleting"}
        plan = _expand(quire, conn, base, root, found)
        tree.mark_expanded(conn, root_id)
    changes = Changes(base_id)
    try:
        schedule(quire, base, plan.to_schedule, changes, sizes=plan.sizes)
    finally:
        with ctx.write() as conn:
            _reconcile_subtree(conn, root_id)
    return {**plan.counts(), "jobs": len(changes.job_ids)}


def _walk_or_none(folder: Path, data_dir: Path, ignore: list[str]) -> Walk | None:
    if not folder.is_dir():
        return None
    try:
        found = walk(folder, hidden=[data_dir], ignore=ignore)  # never index Quire's own data directory
    except OSError as exc:
        log.info("cannot walk %s: %s", folder, exc)
        return None
    return None if "." in found.unreadable_dirs else found


# Not read, by design or because something is wrong: ``create_item``/``tree.reset_leaves`` turn the code into
# ``skipped`` or ``failed`` (``items.terminal_status_for``): only the dangling link is a failure.
_KIND_FAILURES: dict[str, Reason] = {
    "link_to_dir": Reason("symlink_not_followed", "a link to a folder is not followed"),
    "link_outside": Reason("symlink_not_followed", "a link pointing outside the folder is not followed"),
    "dangling_link": Reason("unreadable", "file does not exist or cannot be read (broken link)"),
    "special": Reason("not_regular_file", "not a regular file (device, pipe or socket)"),
}


@dataclass
class _Expansion:
    to_schedule: list[Scheduled] = field(default_factory=list)
    sizes: dict[ItemId, int] = field(default_factory=dict)  # bytes of the scheduled files, as walked
    created: int = 0
    kept: int = 0
    reset: int = 0
    purged: int = 0
    elsewhere: list[tree.Item] = field(default_factory=list)  # files another item of the base stands for

    def counts(self) -> dict[str, int]:
        counts = {"created": self.created, "kept": self.kept, "reset": self.reset, "purged": self.purged}
        return {**counts, "held_elsewhere": len(self.elsewhere)}


def _failure_for(entry: Entry) -> Reason | None:
    if entry.excluded:  # an ignored file is listed as skipped with the rule's reason, never read
        return Reason("excluded", entry.excluded)
    failure = _KIND_FAILURES.get(entry.kind)
    if failure is None and not is_supported(entry.path):
        failure = Reason("unsupported_type", unsupported_reason(entry.path.name))
    return failure


def _unchanged(old: tree.Item, entry: Entry, base: Base) -> bool:
    """Completed, same size and mtime, and made by today's parser, chunker and model: nothing to redo."""
    return (
        old.status == "completed"
        and entry.mtime is not None
        and old.mtime == entry.mtime
        and old.size == entry.size
        and old.parser_version == PARSER_VERSIONS.get(old.parser or "")
        and old.chunker_version == chunker_version()
        and old.model_fingerprint == model_stamp(base)
        and old.metadata.get("ocr") in (None, base.ocr_language)  # OCR'd in another language: read again
    )


def _expand(quire: Quire, conn: Connection, base: Base, root: tree.Item, found: Walk) -> _Expansion:
    adopt_roots_below(conn, root, found)
    elsewhere = files_held_elsewhere(conn, root)
    existing = {
        i.relative_path: i
        for i in tree.subtree_items(conn, [root.id])
        if i.id != root.id and i.status != "deleting" and i.relative_path is not None
    }
    plan = _Expansion()
    parents: dict[str, ItemId] = {"": root.id}
    seen: set[int] = set()
    excluded_dirs: list[str] = []
    for entry in found.entries:
        if any(entry.relative.startswith(d + "/") for d in excluded_dirs):
            continue
        if entry.excluded and entry.kind == "dir":
            excluded_dirs.append(entry.relative)  # an ignored folder is not walked, so nothing below is listed
            continue
        parent_rel = entry.relative.rsplit("/", 1)[0] if "/" in entry.relative else ""
        parent_id = parents.get(parent_rel, root.id)
        old = existing.get(entry.relative)
        if entry.kind == "dir":
            if old is not None and old.is_container:
                seen.add(old.id)
                parents[entry.relative] = old.id
                if old.parent_id != parent_id:
                    tree.set_parent(conn, old.id, parent_id)
            else:
                parents[entry.relative] = _create_child(conn, root, entry, "directory", parent_id, None)
                plan.created += 1
            continue
        if (old is None or old.is_container) and (other := elsewhere.get(str(entry.path))) is not None:
            plan.elsewhere.append(other)  # a run's item stands for it: the run holds it, not this folder
            continue
        failure = _failure_for(entry)
        if old is not None and not old.is_container:
            seen.add(old.id)
            if old.parent_id != parent_id:  # adopted (or its folder was re-created): hang it where it lies
                tree.set_parent(conn, old.id, parent_id)
            if failure is None and _unchanged(old, entry, base):
                plan.kept += 1
                continue
            tree.reset_leaves(conn, base.id, [old.id], error=failure)
            plan.reset += 1
            item_id = old.id
        else:
            item_id = _create_child(conn, root, entry, "file", parent_id, failure)
            plan.created += 1
        if failure is None:
            plan.to_schedule.append(Scheduled(item_id, "file", None))
            if entry.size is not None:
                plan.sizes[item_id] = entry.size
    plan.purged = _purge_children(quire, conn, base.id, [i for i in existing.values() if i.id not in seen])
    stale = [i.id for i in plan.elsewhere if is_stale(i)]
    if stale:  # read again where they are, in this transaction
        schedule_reindex(quire.queue, conn, base.id, stale)
    return plan


def files_held_elsewhere(conn: Connection, root: tree.Item) -> dict[str, tree.Item]:
    """The live file items below this folder's path that hang outside its tree, by source: a folder run's
    items (a run's container has no key, so it is never adopted), or a root the walk does not hold. The
    folder makes no second item for them (one live item per source)."""
    prefix = (root.source_path or "").rstrip("/") + "/"
    rows = conn.execute(
        select(items).where(
            and_(
                items.c.base_id == root.base_id,
                items.c.type == "file",
                items.c.status != "deleting",
                items.c.root_id != root.id,
                items.c.source_path.like(_like_prefix(prefix), escape="\\"),
            )
        )
    ).all()
    found = [tree.Item.from_row(r) for r in rows]
    return {i.source_path: i for i in sorted(found, key=lambda i: -i.id) if i.source_path is not None}


def adopt_roots_below(conn: Connection, root: tree.Item, found: Walk) -> list[ItemId]:
    """Roots added on their own earlier (``add D/a.txt``, ``add D/sub``) that this folder's walk now holds
    become its children, chunks and vectors kept: one live item per source. An adopted
    folder brings its subtree (relative paths re-based on this root). A root the walk does not list
    (excluded, hidden) stays a root of its own: the folder does not hold it. Returns the adopted ids."""
    prefix = (root.source_path or "").rstrip("/") + "/"
    held = {e.relative for e in found.entries if e.kind in ("file", "dir") and not e.excluded}
    rows = conn.execute(
        select(items).where(
            and_(
                items.c.base_id == root.base_id,
                items.c.parent_id.is_(None),
                items.c.id != root.id,
                items.c.status != "deleting",
                items.c.source_key.like(_like_prefix(prefix), escape="\\"),
            )
        )
    ).all()
    adopted: list[ItemId] = []
    for row in sorted((tree.Item.from_row(r) for r in rows), key=lambda i: len(i.source_path or "")):
        relative = (row.source_path or "")[len(prefix) :]
        if relative not in held:
            continue
        current = tree.load_item(conn, row.id)
        if current is None or current.parent_id is not None:
            continue  # adopted already, with a folder adopted before it
        tree.adopt_subtree(conn, row.id, root, relative)
        adopted.append(row.id)
    if adopted:
        log.info("folder %s adopted %d root(s) it holds", root.id, len(adopted))
    return adopted


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _create_child(
    conn: Connection, root: tree.Item, entry: Entry, kind: str, parent_id: ItemId, failure: Reason | None
) -> ItemId:
    return create_item(
        conn,
        NewItem(
            root.base_id,
            kind,
            entry.path.name,
            "processing",
            parent_id=parent_id,
            root_id=root.id,
            source_path=str(entry.path),
            relative_path=entry.relative,
            owner=root.owner,
            run_id=root.run_id,
            error=failure,
        ),
    )


def _purge_children(quire: Quire, conn: Connection, base_id: int, gone: Sequence[tree.Item]) -> int:
    """Remove children whose source vanished: material, owned files, then rows (leaves first); an archive
    among them takes its members (which no walk lists) with it."""
    if not gone:
        return 0
    for item in gone:
        if not item.is_container:
            purge_members(conn, quire.blobs_dir, base_id, item.id)
    shas = blobs.shas_of_items(conn, [i.id for i in gone])
    index.clear_items_material(conn, base_id, [i.id for i in gone if not i.is_container])
    for item in sorted(gone, key=lambda i: i.is_container):
        if item.is_container:
            remaining = conn.execute(select(func.count()).select_from(items).where(items.c.parent_id == item.id))
            if remaining.scalar_one():
                continue  # something still below it (a deleting descendant, or a kept child that moved)
        tree.delete_rows(conn, [item.id])
    blobs.purge_unreferenced(conn, quire.blobs_dir, shas)
    return len(gone)


def _reconcile_subtree(conn: Connection, root_id: int) -> None:
    """Reconcile every container of a fresh expansion, deepest first (empty folders complete)."""
    containers = [i for i in tree.subtree_items(conn, [root_id]) if i.is_container and i.id != root_id]
    containers.sort(key=lambda i: (i.relative_path or "").count("/"), reverse=True)
    for container in containers:
        tree.reconcile_container(conn, container.id)
    tree.reconcile_container(conn, root_id)
    tree.reconcile_above(conn, [root_id])
