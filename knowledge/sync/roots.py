"""Synced roots: turning sync on and off for a folder item, their status, the sync settings. The only writer
of ``sync_roots``: a reconcile's claim, release and cursor move are verbs here (``take_claim``,
``release_claim``, ``move_cursor``, ``set_pending_count``)."""

from __future__ import annotations

import json
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Connection, and_, delete, select, update

from jobs.sanitize import sanitize_optional
from jobs.schema import LIVE_STATUSES, jobs
from jobs.sessions import this_host
from knowledge.errors import GuardRejected, InvalidInput, NotFound
from knowledge.library import audit, tree
from knowledge.library.bases import assert_base_writable, resolve_base
from knowledge.principal import require_person
from knowledge.store import machine_folders, settings
from knowledge.store.database import Database
from knowledge.store.schema_sync import SYNC_MODES, sync_roots
from knowledge.sync import pending

if TYPE_CHECKING:
    from knowledge.runtime import Quire

SYNC_ROOT = "knowledge.sync-root"

# Settings (the ``settings`` table) and their defaults.
FULL_RECONCILE_SECONDS = ("sync.full_reconcile_seconds", 600.0)  # the periodic full reconcile
POLL_SECONDS = ("sync.poll_seconds", 30.0)  # a root the watcher cannot watch is reconciled this often
QUIET_SECONDS = ("sync.quiet_seconds", 0.5)  # a file must hold still this long to be read
APPLY_BATCH = ("sync.apply_batch", 200.0)  # changes per write transaction of a reconcile


# ``last_error`` of a root whose base is locked or failed starts with this code: it waits, it did not fail.
WAITING_FOR_BASE = "base_unavailable"


class Writer(Protocol):
    def __call__(self) -> AbstractContextManager[Connection]: ...


def setting(db: Database, spec: tuple[str, float]) -> float:
    key, default = spec
    with db.read() as conn:
        return settings.get_float(conn, key, default)


def set_setting(db: Database, spec: tuple[str, float], value: float) -> None:
    require_person("change a sync setting")
    if value <= 0:
        raise InvalidInput(f"{spec[0]} must be positive")
    with db.write() as conn:
        settings.put(conn, spec[0], str(value))


@dataclass(frozen=True)
class SyncRoot:
    id: int
    item_id: int
    base_id: int
    mode: str
    cursor_generation: int
    cursor_state: dict[str, Any]
    scan_generation: int
    scan_owner: str | None
    scan_started_at: float | None
    watcher_state: str
    watcher_reason: str | None
    dirty_seq: int
    last_synced_at: float | None
    pending_count: int
    last_error: str | None
    host: str | None = None  # the machine that keeps it in sync; None: made before roots carried one

    @classmethod
    def from_row(cls, row: Any) -> SyncRoot:
        m = row._mapping
        return cls(
            id=m["id"],
            item_id=m["item_id"],
            base_id=m["base_id"],
            mode=m["mode"],
            cursor_generation=m["cursor_generation"],
            cursor_state=json.loads(m["cursor_state"] or "{}"),
            scan_generation=m["scan_generation"],
            scan_owner=m["scan_owner"],
            scan_started_at=m["scan_started_at"],
            watcher_state=m["watcher_state"],
            watcher_reason=m["watcher_reason"],
            dirty_seq=m["dirty_seq"],
            last_synced_at=m["last_synced_at"],
            pending_count=m["pending_count"],
            last_error=m["last_error"],
            host=m.get("host"),
        )

    @property
    def reconciling(self) -> bool:
        return self.scan_owner is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "item_id": self.item_id,
            "base_id": self.base_id,
            "mode": self.mode,
            "cursor": {"generation": self.cursor_generation, "state": self.cursor_state},
            "state": self.state,
            "watcher": self.watcher_state,
            "reason": self.watcher_reason,
            "reconciling": self.reconciling,
            "pending": self.pending_count,
            "last_synced_at": self.last_synced_at,
            "last_error": self.last_error,
            "waiting_for": self.waiting_for,
            "machine": self.host,
        }

    @property
    def waiting_for(self) -> str | None:
        """Why nothing is applied (its base is locked or failed), or None."""
        prefix = f"{WAITING_FOR_BASE}: "
        return self.last_error[len(prefix) :] if self.last_error and self.last_error.startswith(prefix) else None

    @property
    def state(self) -> str:
        """One word for the window: reconciling, waiting, pending, polling, watching or off."""
        if self.reconciling:
            return "reconciling"
        if self.waiting_for:
            return "waiting"
        if self.pending_count:
            return "pending"
        return self.watcher_state


def kept_here(db: Database, root: SyncRoot) -> bool:
    """Whether this machine keeps ``root`` in sync: the only machine that may watch and scan its folder. A
    team store's root belongs to the machine a person turned sync on at (another machine's folder at the same
    path is another folder), and a root made before roots carried one to none; a data directory's roots are
    all its own (only this machine's person writes that store, even if the machine was renamed since)."""
    return not db.shared_by_machines or root.host == this_host()


def elsewhere(root: SyncRoot) -> str:
    """Why this machine leaves ``root`` alone, for people."""
    if root.host is None:
        return "no machine keeps this folder in sync yet: turn sync on again on the machine that has it"
    return f"kept in sync by the machine {root.host!r}"


def load_root(conn: Connection, root_id: int) -> SyncRoot | None:
    row = conn.execute(select(sync_roots).where(sync_roots.c.id == root_id)).first()
    return None if row is None else SyncRoot.from_row(row)


def root_for_item(conn: Connection, item_id: int) -> SyncRoot | None:
    row = conn.execute(select(sync_roots).where(sync_roots.c.item_id == item_id)).first()
    return None if row is None else SyncRoot.from_row(row)


def list_roots(db: Database, base_id: int | None = None) -> list[SyncRoot]:
    query = select(sync_roots).order_by(sync_roots.c.id)
    if base_id is not None:
        query = query.where(sync_roots.c.base_id == base_id)
    with db.read() as conn:
        return [SyncRoot.from_row(r) for r in conn.execute(query).all()]


def enable_sync(quire: Quire, base_ref: str | int, item_id: int, *, mode: str = "auto") -> SyncRoot:
    """Mark a folder item synced (idempotent; a second call may change the mode) and schedule a first
    reconcile in the same transaction."""
    require_person("turn on folder sync")
    if mode not in SYNC_MODES:
        raise InvalidInput(f"mode must be one of {', '.join(SYNC_MODES)}")
    with quire.db.write() as conn:
        base = resolve_base(conn, base_ref)
        assert_base_writable(base)
        item = tree.load_in_base(conn, base.id, item_id)
        if item.status == "deleting":
            raise NotFound(f"item {item_id} not found in this knowledge base")
        if not item.is_container or not item.source_path:
            raise GuardRejected(f"only a folder added from disk can be kept in sync; {item.name!r} is not one")
        if item.source_unverified:  # imported: its path is the export's word, never walked before a person vouches
            raise GuardRejected(
                f"{item.name!r} was imported and its original folder is not verified on this machine; "
                "point the base at it with `quire base relocate` first"
            )
        machine_folders.record_for(quire.db, quire.data_dir, [item.source_path])  # a person here vouches for it
        now, host = time.time(), this_host()
        existing = root_for_item(conn, item.id)
        if existing is None:
            conn.execute(
                sync_roots.insert().values(
                    item_id=item.id, base_id=base.id, mode=mode, host=host, created_at=now, updated_at=now
                )
            )
        else:
            if existing.host is not None and not kept_here(quire.db, existing):
                raise GuardRejected(f"{item.name!r} is {elsewhere(existing)}; turn its sync off there first")
            conn.execute(
                update(sync_roots).where(sync_roots.c.id == existing.id).values(mode=mode, host=host, updated_at=now)
            )
        root = root_for_item(conn, item.id)
        assert root is not None
        schedule_reconcile(quire, conn, root)
        payload = {"root": root.id, "mode": mode, "host": host}
        audit.append(conn, audit.SYNC_ENABLED, audit.person_actor(conn), base_id=base.id, payload=payload)
    return root


def disable_sync(quire: Quire, base_ref: str | int, item_id: int) -> bool:
    """Stop syncing a folder; its items stay as they are. Returns whether it was synced."""
    require_person("turn off folder sync")
    with quire.db.write() as conn:
        base = resolve_base(conn, base_ref)
        tree.load_in_base(conn, base.id, item_id)
        root = root_for_item(conn, item_id)
        if root is None:
            return False
        pending.forget_root(conn, root.id)
        conn.execute(delete(sync_roots).where(sync_roots.c.id == root.id))
        audit.append(conn, audit.SYNC_DISABLED, audit.person_actor(conn), base_id=base.id, payload={"root": root.id})
        return True


def resolve_root(conn: Connection, base_ref: str | int, item_id: int) -> SyncRoot:
    base = resolve_base(conn, base_ref)
    tree.load_in_base(conn, base.id, item_id)
    root = root_for_item(conn, item_id)
    if root is None:
        raise NotFound(f"item {item_id} is not kept in sync")
    return root


def schedule_reconcile(quire: Quire, conn: Connection, root: SyncRoot, *, delay: float = 0.0, tag: str = "") -> int:
    """Enqueue a reconcile of ``root`` in the caller's transaction; a burst of calls coalesces into the
    one pending job (the idempotency key)."""
    key = f"sync:{root.id}{':' + tag if tag else ''}"
    job = quire.queue.enqueue(
        conn,
        SYNC_ROOT,
        {"root_id": root.id, "base_id": root.base_id},
        base_id=root.base_id,
        key=key,
        available_at=time.time() + delay if delay else 0.0,
    )
    return int(job.job_id)


def request_reconcile(quire: Quire, root_id: int, *, tag: str = "") -> None:
    """A hint that ``root_id`` changed (the watcher, the timer): mark it dirty, enqueue a reconcile."""
    with quire.db.write() as conn:
        root = load_root(conn, root_id)
        if root is None:
            return
        conn.execute(update(sync_roots).where(sync_roots.c.id == root_id).values(dirty_seq=sync_roots.c.dirty_seq + 1))
        schedule_reconcile(quire, conn, root, tag=tag or _hint_tag(conn, root_id))


def _hint_tag(conn: Connection, root_id: int) -> str:
    """The key a watcher's hint is enqueued under. Never a reconcile that is already running: it may have
    taken its last look at ``dirty_seq`` and would end without this hint (the file deleted then would stay
    searchable until the full reconcile). Two keys alternate: join the one pending, else take a free one."""
    tags = ("", "again")
    keys = {f"sync:{root_id}{':' + t if t else ''}": t for t in tags}
    live = dict(
        conn.execute(
            select(jobs.c.idempotency_key, jobs.c.status).where(
                and_(jobs.c.idempotency_key.in_(list(keys)), jobs.c.status.in_(LIVE_STATUSES))
            )
        ).all()
    )
    for wanted in ("pending", None):
        for key, tag in keys.items():
            if live.get(key) == wanted:
                return tag
    return ""  # both running: the one holding the claim still looks at dirty_seq after its pass


def set_watcher_state(db: Database, root_ids: list[int], state: str, reason: str | None) -> None:
    if not root_ids:
        return
    with db.write() as conn:
        conn.execute(
            update(sync_roots)
            .where(and_(sync_roots.c.id.in_(root_ids)))
            .values(watcher_state=state, watcher_reason=sanitize_optional(reason), updated_at=time.time())
        )


def toggle_sync(quire: Quire, base_ref: str | int, item_id: int, *, mode: str = "auto") -> SyncRoot | None:
    """The window's "Keep in sync" toggle: turn sync on (returns the root) or off (returns None)."""
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
        synced = root_for_item(conn, item_id) is not None
    if synced:
        disable_sync(quire, base.id, item_id)
        return None
    return enable_sync(quire, base.id, item_id, mode=mode)


# -- a reconcile's claim and cursor (the contract: knowledge/sync/reconcile.py) ---------------------------


def take_claim(conn: Connection, root: SyncRoot, generation: int, owner: str) -> bool:
    """Claim ``root`` for one reconcile by compare-and-swap on the generation it was read at; whether it won."""
    won = conn.execute(
        update(sync_roots)
        .where(and_(sync_roots.c.id == root.id, sync_roots.c.scan_generation == root.scan_generation))
        .values(scan_generation=generation, scan_owner=owner, scan_started_at=time.time())
    ).rowcount
    return bool(won == 1)


def release_claim(conn: Connection, root_id: int, owner: str, error: str | None = None) -> None:
    """Give ``owner``'s claim back without moving the cursor, with the reason (or none) in ``last_error``."""
    conn.execute(
        update(sync_roots)
        .where(and_(sync_roots.c.id == root_id, sync_roots.c.scan_owner == owner))
        .values(scan_owner=None, last_error=sanitize_optional(error), updated_at=time.time())
    )


def move_cursor(conn: Connection, root: SyncRoot, generation: int, owner: str, state: str, pending: int) -> bool:
    """Move the cursor to ``generation`` by compare-and-swap on the old cursor and the claim, releasing the
    claim; whether it moved (False: another reconcile got there)."""
    now = time.time()
    moved = conn.execute(
        update(sync_roots)
        .where(
            and_(
                sync_roots.c.id == root.id,
                sync_roots.c.cursor_generation == root.cursor_generation,
                sync_roots.c.scan_generation == generation,
                sync_roots.c.scan_owner == owner,
            )
        )
        .values(
            cursor_generation=generation,
            cursor_state=state,
            scan_owner=None,
            last_synced_at=now,
            pending_count=pending,
            last_error=None,
            updated_at=now,
        )
    ).rowcount
    return bool(moved == 1)


def set_pending_count(conn: Connection, root_id: int, count: int, *, release: bool = False) -> None:
    """Record how many changes the root lists for review; ``release``: a review scan's end, which also gives
    the claim back (the caller re-checked it in this transaction)."""
    values: dict[str, Any] = {"pending_count": count}
    if release:
        values.update(scan_owner=None, updated_at=time.time())
    conn.execute(update(sync_roots).where(sync_roots.c.id == root_id).values(**values))
