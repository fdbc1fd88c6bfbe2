"""Small read helpers the desktop app polls: pages of a tree level, what changed since a cursor, summaries.

Everything here is a read in one snapshot (``Database.read()``): nothing writes, nothing holds a lock
a writer waits on, and every function is bounded (pages, ``limit``s, chunked ``IN`` lists), so the GUI
can call them every half second from a background thread on a base of any size.

* ``children_page`` pages one tree level in a stable order (directories first, then by name, then id)
  with a keyset cursor, so rows created meanwhile never shift a page; the app's lazy model appends pages
  and places a new row by the same ``sort_key``.
* ``items_changed_since`` returns rows whose ``updated_at`` passed a cursor, ``deleting`` ones included
  (that is how a view learns to drop them). Timestamps are taken inside the write transaction that
  commits them and writers are serialised, so a cursor with a small overlap misses nothing.
* ``owned_copy_path`` is the base's own copy of an item's bytes (``knowledge.library.blobs``), for opening a
  source whose original has moved or gone.
* ``fitting_subfolders`` answers a folder-run preview refused for the cap: which sub-folders would each
  fit under it, walked with the very rules (and cap) a run over that sub-folder would use.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, case, func, select, tuple_

from jobs.schema import LIVE_STATUSES, jobs
from knowledge import preferences
from knowledge.ingest import walk
from knowledge.library import blobs
from knowledge.library.tree import Item
from knowledge.store.schema import ACTIVE_STATUSES, TERMINAL_STATUSES, chunks, items

if TYPE_CHECKING:
    from knowledge.runtime import Quire

SortKey = tuple[int, str, int]  # (0 for containers else 1, name, id)
CHUNK = 500


def sort_key(item: Item) -> SortKey:
    """The order of one tree level: containers first, then by name, then by id."""
    return (0 if item.is_container else 1, item.name, item.id)


def _key_columns() -> Any:
    return tuple_(case((items.c.type == "directory", 0), else_=1), items.c.name, items.c.id)


def children_page(
    quire: Quire,
    base_id: int,
    parent_id: int | None,
    after: SortKey | None,
    limit: int = 200,
    hidden_statuses: Sequence[str] = (),
) -> list[Item]:
    """The next ``limit`` visible children of ``parent_id`` (None: top level) after the cursor ``after``;
    ``hidden_statuses`` leaves rows out (the window's "Hide skipped"): the keyset cursor still holds."""
    query = select(items).where(and_(items.c.base_id == base_id, items.c.status != "deleting"))
    if hidden_statuses:
        query = query.where(items.c.status.not_in(list(hidden_statuses)))
    query = query.where(items.c.parent_id.is_(None) if parent_id is None else items.c.parent_id == parent_id)
    if after is not None:
        query = query.where(_key_columns() > tuple_(*after))
    order = (case((items.c.type == "directory", 0), else_=1), items.c.name, items.c.id)
    with quire.db.read() as conn:
        rows = conn.execute(query.order_by(*order).limit(limit)).all()
    return [Item.from_row(r) for r in rows]


@dataclass(frozen=True)
class ChangedItems:
    items: list[Item]
    cursor: float  # the largest ``updated_at`` seen (the next call's ``since``)
    complete: bool  # False when ``limit`` cut the answer short: call again from ``cursor``


def items_changed_since(quire: Quire, base_id: int, since: float, *, limit: int = 2000) -> ChangedItems:
    """Rows of the base updated after ``since`` (``deleting`` included), oldest change first."""
    query = (
        select(items)
        .where(and_(items.c.base_id == base_id, items.c.updated_at > since))
        .order_by(items.c.updated_at, items.c.id)
        .limit(limit)
    )
    with quire.db.read() as conn:
        found = [Item.from_row(r) for r in conn.execute(query).all()]
    cursor = max((i.updated_at for i in found), default=since)
    return ChangedItems(found, cursor, len(found) < limit)


def child_status_counts(quire: Quire, base_id: int, container_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """For each container of the base, how many of its direct (visible) children are in each status."""
    counts: dict[int, dict[str, int]] = {int(i): {} for i in container_ids}
    ids = list(counts)
    with quire.db.read() as conn:
        for start in range(0, len(ids), CHUNK):
            rows = conn.execute(
                select(items.c.parent_id, items.c.status, func.count())
                .where(
                    and_(
                        items.c.base_id == base_id,  # with parent_id: the items_base_parent index
                        items.c.parent_id.in_(ids[start : start + CHUNK]),
                        items.c.status != "deleting",
                    )
                )
                .group_by(items.c.parent_id, items.c.status)
            ).all()
            for parent_id, status, count in rows:
                counts[int(parent_id)][str(status)] = int(count)
    return counts


def existing_ids(quire: Quire, item_ids: Sequence[int]) -> set[int]:
    """Which of these items still exist and are visible (not ``deleting``)."""
    ids = list(item_ids)
    found: set[int] = set()
    with quire.db.read() as conn:
        for start in range(0, len(ids), CHUNK):
            rows = conn.execute(
                select(items.c.id).where(and_(items.c.id.in_(ids[start : start + CHUNK]), items.c.status != "deleting"))
            ).all()
            found.update(int(r.id) for r in rows)
    return found


@dataclass(frozen=True)
class JobProgress:
    job_id: int
    status: str
    done: int
    total: int
    label: str


def job_progress(quire: Quire, job_ids: Sequence[int]) -> dict[int, JobProgress]:
    """Progress columns of these jobs (the GUI polls them; no worker ever signals the GUI)."""
    ids = sorted(set(int(i) for i in job_ids))
    found: dict[int, JobProgress] = {}
    with quire.db.read() as conn:
        for start in range(0, len(ids), CHUNK):
            rows = conn.execute(
                select(
                    jobs.c.id, jobs.c.status, jobs.c.progress_done, jobs.c.progress_total, jobs.c.progress_label
                ).where(jobs.c.id.in_(ids[start : start + CHUNK]))
            ).all()
            for r in rows:
                found[int(r.id)] = JobProgress(int(r.id), str(r.status), int(r[2]), int(r[3]), str(r[4]))
    return found


@dataclass(frozen=True)
class BaseProgress:
    """Where a base stands: item counts by status (``deleting`` excluded) and its live jobs."""

    base_id: int
    statuses: dict[str, int] = field(default_factory=dict)
    live_jobs: int = 0

    @property
    def total(self) -> int:
        return sum(self.statuses.values())

    @property
    def active(self) -> int:
        return sum(n for s, n in self.statuses.items() if s in ACTIVE_STATUSES)

    @property
    def settled(self) -> int:
        return sum(self.statuses.get(s, 0) for s in TERMINAL_STATUSES)  # completed, failed, skipped


def base_progress(quire: Quire, base_id: int) -> BaseProgress:
    """Leaf items by status (containers only mirror their children) and the base's live job count."""
    with quire.db.read() as conn:
        rows = conn.execute(
            select(items.c.status, func.count())
            .where(and_(items.c.base_id == base_id, items.c.status != "deleting", items.c.type != "directory"))
            .group_by(items.c.status)
        ).all()
        live = conn.execute(
            select(func.count())
            .select_from(jobs)
            .where(and_(jobs.c.base_id == base_id, jobs.c.status.in_(LIVE_STATUSES)))
        ).scalar_one()
    return BaseProgress(base_id, {str(s): int(n) for s, n in rows}, int(live))


@dataclass(frozen=True)
class WorkTotals:
    """Files over every base (leaves, ``deleting`` excluded) by where they stand, chunks indexed, and
    whether indexing is paused: the status bar's "done / total", its rate and its ETA come from these."""

    waiting: int  # files still to index (an active status)
    completed: int
    failed: int
    chunks: int
    paused: bool


def work_totals(quire: Quire) -> WorkTotals:
    with quire.db.read() as conn:
        rows = conn.execute(
            select(items.c.status, func.count())
            .where(and_(items.c.status != "deleting", items.c.type != "directory"))
            .group_by(items.c.status)
        ).all()
        chunk_count = conn.execute(select(func.count()).select_from(chunks)).scalar_one()
    counts = {str(s): int(n) for s, n in rows}
    waiting = sum(n for s, n in counts.items() if s in ACTIVE_STATUSES)
    return WorkTotals(
        waiting, counts.get("completed", 0), counts.get("failed", 0), int(chunk_count), preferences.is_paused(quire.db)
    )


def recent_failures(quire: Quire, limit: int = 20) -> list[Item]:
    """Files whose indexing failed most recently, with their stored reasons (the jobs view lists them)."""
    with quire.db.read() as conn:
        rows = conn.execute(
            select(items)
            .where(and_(items.c.status == "failed", items.c.type != "directory"))
            .order_by(items.c.updated_at.desc())
            .limit(limit)
        ).all()
    return [Item.from_row(r) for r in rows]


def live_jobs_total(quire: Quire) -> int:
    """Pending and running jobs over every base (the status bar's "active jobs")."""
    return quire.queue.live_count()


def owned_copy_path(quire: Quire, item: Item) -> Path | None:
    """The base's own copy of the item's original bytes, when it has one and the file is there."""
    if not item.blob_sha256:
        return None
    path = blobs.blob_path(quire.blobs_dir, item.blob_sha256)
    return path if path.is_file() else None


@dataclass(frozen=True)
class FittingFolder:
    path: str  # absolute
    relative: str  # below the folder that was too large
    walked: int  # files and folders a run over it would walk


@dataclass(frozen=True)
class Split:
    """Where a too-large folder could be split: sub-folders that fit, and how far the search went."""

    folder: str
    cap: int
    fitting: list[FittingFolder]
    complete: bool  # False when ``max_walks`` stopped the search before every branch was judged


def fitting_subfolders(quire: Quire, folder: str | os.PathLike[str], *, max_walks: int = 64) -> Split:
    """Sub-folders of ``folder`` that a run could each take, breadth first, descending into those too large.

    Each candidate is walked as a run over it would walk it (``knowledge.ingest.walk`` with the cap setting and
    the data directory hidden), stopping at ``cap + 1``: bounded by ``max_walks`` walks of ``cap + 1``.
    """
    from knowledge import folder_runs  # the folder-run rules: cap setting, "folder not found"

    root = folder_runs.visible_folder(quire, folder)
    with quire.db.read() as conn:
        cap = folder_runs.descendant_cap(conn)
    pending: deque[Path] = deque([root])
    fitting: list[FittingFolder] = []
    walks = 0
    while pending and walks < max_walks:
        for child in _subfolders(pending.popleft(), quire.data_dir):
            if walks >= max_walks:
                break
            walks += 1
            try:
                found = walk.walk(child, cap=cap, hidden=[quire.data_dir])
            except walk.CapExceeded:
                pending.append(child)
                continue
            fitting.append(FittingFolder(str(child), child.relative_to(root).as_posix(), found.walked))
    return Split(str(root), cap, fitting, complete=not pending)


def _subfolders(directory: Path, data_dir: Path) -> list[Path]:
    """Real (not linked), readable sub-folders a run could be started on, by name."""
    hidden = Path(os.path.realpath(data_dir))
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        path = Path(entry.path)
        if entry.name in walk.SKIPPED_DIRS or not entry.is_dir(follow_symlinks=False):
            continue
        real = Path(os.path.realpath(path))
        if real == hidden or hidden in real.parents or not walk.is_readable_dir(path):
            continue
        found.append(path)
    return found


@dataclass(frozen=True)
class SyncState:
    """A synced folder as the window shows it: one line of state, and what a review root has pending."""

    root_id: int
    line: str  # "auto: watching; last synced …" (knowledge.sync.describe)
    pending: tuple[str, ...]  # "added notes/a.txt", at most 20


def sync_states(quire: Quire, base_id: int) -> dict[int, SyncState]:
    """Folder sync per synced folder item of a base (watching / polling with its reason / reconciling /
    pending N / last synced at), with the first pending changes of review roots."""
    from knowledge import sync

    roots = sync.list_roots(quire.db, base_id)
    pending: dict[int, list[str]] = {}
    for p in sync.list_pending(quire, [r.id for r in roots if r.pending_count])[:2000]:
        pending.setdefault(p["root_id"], []).append(f"{p['kind']} {p['path']}")
    return {
        r.item_id: SyncState(r.id, f"{r.mode}: {sync.describe(r)}", tuple(pending.get(r.id, [])[:20])) for r in roots
    }
