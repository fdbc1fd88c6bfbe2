"""What ``quire sync status`` shows of each synced root: which base and folder it is, and how it stands."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from knowledge.store.database import Database
from knowledge.store.schema import bases, items
from knowledge.store.schema_sync import sync_roots
from knowledge.sync.roots import SyncRoot


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
        return [
            RootStatus(SyncRoot.from_row(r), str(r._mapping["base_name"]), r._mapping["folder"])
            for r in conn.execute(query).all()
        ]
