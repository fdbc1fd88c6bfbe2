"""How each synced root stands, as people see it: ``quire sync status``'s line per root (which base and folder
it is, and how it stands) and the window's state per synced folder item (one line, and the first changes a
review root has pending)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select

from jobs.sessions import host_of, live_session_ids, worker_hosting_ids
from knowledge.store.database import Database
from knowledge.store.schema import bases, items
from knowledge.store.schema_sync import sync_roots
from knowledge.sync.pending import list_pending
from knowledge.sync.roots import SyncRoot, list_roots
from knowledge.sync.watcher import describe

if TYPE_CHECKING:
    from knowledge.runtime import Quire


@dataclass(frozen=True)
class RootStatus:
    root: SyncRoot
    base_name: str
    folder: str | None  # the folder item's source path

    def as_dict(self) -> dict[str, Any]:
        return {**self.root.as_dict(), "base": {"id": self.root.base_id, "name": self.base_name}, "folder": self.folder}

    def line(self) -> str:
        """One line for people: base, folder, mode, watcher, last sync, pending (and any trouble)."""
        r = self.root
        watcher = f"watcher {r.watcher_state}" + (f" ({r.watcher_reason})" if r.watcher_reason else "")
        synced = "last synced " + _when(r.last_synced_at) if r.last_synced_at else "not synced yet"
        parts = [f"mode {r.mode}", watcher, synced, f"{r.pending_count} pending"]
        parts += [f"machine {r.host}"] if r.host else []
        parts += ["reconciling"] if r.reconciling else []
        if r.waiting_for:  # its base is locked or failed: nothing is applied until it can take writes
            parts.append(f"waiting: {r.waiting_for}")
        elif r.last_error:
            parts.append(f"error: {r.last_error}")
        return f"{r.item_id:>6} {self.base_name}  {self.folder or '(folder unknown)'}  " + " · ".join(parts)


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def root_statuses(
    db: Database, base_id: int | None = None, *, limit: int | None = None, after_id: int = 0
) -> list[RootStatus]:
    """Every synced root (of one base, or all), with its base's name and its folder, in one snapshot; or one
    page of them by id (``limit`` rows after ``after_id``, the last id of the page before)."""
    query = (
        select(sync_roots, bases.c.name.label("base_name"), items.c.source_path.label("folder"))
        .join(bases, bases.c.id == sync_roots.c.base_id)
        .outerjoin(items, items.c.id == sync_roots.c.item_id)
        .where(sync_roots.c.id > after_id)
        .order_by(sync_roots.c.id)
        .limit(limit)
    )
    if base_id is not None:
        query = query.where(sync_roots.c.base_id == base_id)
    with db.read() as conn:
        rows = conn.execute(query).all()
        found = [(SyncRoot.from_row(r), str(r._mapping["base_name"]), r._mapping["folder"]) for r in rows]
        hosts = worker_hosts(conn)
    return [RootStatus(as_watched(db, root, hosts), base, folder) for root, base, folder in found]


def worker_hosts(conn: Connection) -> set[str]:
    """The machines a worker runs on now (a live session that hosts one): only a running worker watches."""
    running = worker_hosting_ids(conn) & live_session_ids(conn)
    return {host_of(session_id) for session_id in running}


def as_watched(db: Database, root: SyncRoot, hosts: set[str]) -> SyncRoot:
    """``root`` as it stands: its watcher state is what the last worker recorded, and that worker may have
    stopped since; with no worker on its machine (any machine, for a data directory) nobody watches it."""
    watched = root.host in hosts if db.shared_by_machines else bool(hosts)
    return root if watched else replace(root, watcher_state="off", watcher_reason=None)


@dataclass(frozen=True)
class SyncState:
    """A synced folder as the window shows it: one line of state, and what a review root has pending."""

    root_id: int
    line: str  # "auto: watching; last synced …" (``describe``)
    pending: tuple[str, ...]  # "added notes/a.txt", at most 20


def states_by_item(quire: Quire, base_id: int) -> dict[int, SyncState]:
    """Folder sync per synced folder item of a base (watching / polling with its reason / reconciling /
    pending N / last synced at), with the first pending changes of review roots."""
    with quire.db.read() as conn:
        hosts = worker_hosts(conn)
    roots = [as_watched(quire.db, root, hosts) for root in list_roots(quire.db, base_id)]
    pending: dict[int, list[str]] = {}
    for p in list_pending(quire, [r.id for r in roots if r.pending_count])[:2000]:
        pending.setdefault(p["root_id"], []).append(f"{p['kind']} {p['path']}")
    return {r.item_id: SyncState(r.id, f"{r.mode}: {describe(r)}", tuple(pending.get(r.id, [])[:20])) for r in roots}
