"""A reconcile's hold on its root: claiming it, the ``Claim`` value that rides through apply and review (every
write re-checks it), giving it back, and the ``Outcome`` a reconcile reports.

A claim moves ``scan_generation`` from ``s`` to ``s + 1`` with ``scan_owner`` stamped, by compare-and-swap
(``roots.take_claim``). A claim held by a live process (not stale) makes a newcomer stand down writing
nothing; one left by a dead process is taken over.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from jobs.sessions import live_session_ids
from knowledge.errors import Conflict, NotFound
from knowledge.library import tree
from knowledge.library.bases import failed_refusal, load_base, locked_refusal
from knowledge.store import machine_folders
from knowledge.sync.roots import (
    WAITING_FOR_BASE,
    SyncRoot,
    Writer,
    elsewhere,
    kept_here,
    load_root,
    release_claim,
    take_claim,
)
from knowledge.sync.scan import Target

if TYPE_CHECKING:
    from knowledge.runtime import Quire

STALE_CLAIM_SECONDS = 600.0  # a claim older than this is taken over even if its process lives


class StoodDown(Conflict):
    """Another reconcile holds (or took over) this root: this one writes nothing more."""

    code = "sync_stood_down"


class BaseUnavailable(StoodDown):
    """The root's base is locked or failed: nothing is written into it; the root waits."""

    code = WAITING_FOR_BASE


@dataclass
class Outcome:
    root_id: int
    generation: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    applied: int = 0
    pending: int = 0
    hashed: int = 0
    files_seen: int = 0
    stood_down: str | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def new_owner(quire: Quire, tag: str = "") -> str:
    """A claim's owner: this process's session id (for liveness) and a nonce."""
    return f"{quire.queue.session.id}|{tag or uuid.uuid4().hex[:10]}"


def _session_of(owner: str) -> str:
    return owner.split("|", 1)[0]


def claim(quire: Quire, writer: Writer, root_id: int, owner: str) -> tuple[SyncRoot, int]:
    """Claim the root for one reconcile; return it and the claimed generation, or raise ``StoodDown``."""
    with writer() as conn:
        quire.queue.ensure_session(conn)
        root = load_root(conn, root_id)
        if root is None:
            raise StoodDown("this folder is no longer kept in sync")
        if not kept_here(quire.db, root):  # its folder is on another machine: the path here is another folder
            raise StoodDown(elsewhere(root))
        folder = tree.load_item(conn, root.item_id)
        if not machine_folders.may_read(quire.db, quire.data_dir, folder.source_path if folder else None):
            raise StoodDown(f"this folder was {machine_folders.NOT_ADDED_HERE}")
        if root.scan_owner is not None and root.scan_owner != owner:
            fresh = root.scan_started_at is not None and time.time() - root.scan_started_at < STALE_CLAIM_SECONDS
            if fresh and _session_of(root.scan_owner) in live_session_ids(conn):
                raise StoodDown("another reconcile of this folder is running")
        generation = root.scan_generation + 1
        if not take_claim(conn, root, generation, owner):
            raise StoodDown("another reconcile of this folder claimed it first")
    return root, generation


@dataclass(frozen=True)
class Claim:
    """One reconcile's hold on its root: the root as claimed, the generation and owner that claimed it (every
    write re-checks both, :meth:`check`), the writer its transactions go through and the actor its audit
    entries name."""

    quire: Quire
    writer: Writer
    root: SyncRoot
    generation: int
    owner: str
    actor: str

    def check(self, conn: Connection) -> SyncRoot:
        """The root as it is now, or ``StoodDown`` if another reconcile took it over."""
        root = load_root(conn, self.root.id)
        if root is None or root.scan_generation != self.generation or root.scan_owner != self.owner:
            raise StoodDown("another reconcile took this folder over")
        return root


def release(quire: Quire, root_id: int, owner: str, error: str | None = None) -> None:
    """Give the claim back without moving the cursor (a review scan, a failure)."""
    with quire.db.write() as conn:
        release_claim(conn, root_id, owner, error)


def assert_base_takes_writes(conn: Connection, base_id: int) -> None:
    """Judged inside the batch's write transaction, so the verdict still holds when the batch commits."""
    try:
        base = load_base(conn, base_id)
    except NotFound:
        raise StoodDown("the base is gone") from None
    refusal = failed_refusal(base) or locked_refusal(base, "sync into it")
    if refusal:
        raise BaseUnavailable(refusal)


def target_of(quire: Quire, root: SyncRoot) -> Target | None:
    """The folder a root's scan walks, or None while its item is being prepared or deleted."""
    with quire.db.read() as conn:
        item = tree.load_item(conn, root.item_id)
    if item is None or item.status in ("deleting", "preparing") or not item.source_path:
        return None
    prefix = f"{item.relative_path}/" if item.relative_path else ""
    return Target(Path(item.source_path), item.root_id or item.id, prefix)
