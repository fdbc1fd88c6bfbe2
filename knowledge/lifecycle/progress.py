"""Where indexing stands, for the window's status bar and progress line and the MCP ``status`` tool: items by
status, the live jobs, the chunks indexed, the latest failures and whether indexing is paused.

Each function is one bounded read snapshot (counts grouped by status, a ``limit`` on listings), cheap enough to
poll every half second; no worker ever signals the window, it reads these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Connection, and_, func, select

from jobs.schema import LIVE_STATUSES, jobs
from knowledge import preferences
from knowledge.library import agent_hidden
from knowledge.library.tree import Item
from knowledge.store.schema import ACTIVE_STATUSES, TERMINAL_STATUSES, chunks, items
from knowledge.store.schema_runs import folder_run_in_flight, folder_run_outcomes, folder_run_sources, folder_runs

LIVE_RUN_STATUSES = ("pending", "running")  # a folder run still to settle sources (its own rules: folder_runs/)
IN_HAND_STATUSES = ("reading", "embedding")

if TYPE_CHECKING:
    from knowledge.runtime import Quire


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
        query = (
            select(items.c.status, func.count())
            .where(and_(items.c.base_id == base_id, items.c.status != "deleting", items.c.type != "directory"))
            .group_by(items.c.status)
        )
        rows = conn.execute(agent_hidden.leave_out(query, base_id)).all()  # an agent counts only what it sees
        live = conn.execute(
            select(func.count())
            .select_from(jobs)
            .where(and_(jobs.c.base_id == base_id, jobs.c.status.in_(LIVE_STATUSES)))
        ).scalar_one()
    return BaseProgress(base_id, {str(s): int(n) for s, n in rows}, int(live))


@dataclass(frozen=True)
class WorkTotals:
    """Files over every base (leaves, ``deleting`` excluded) by where they stand, the live folder runs'
    sources, chunks indexed, and whether indexing is paused: the status bar's and ``quire worker``'s "done /
    total", rate and ETA come from these (:mod:`knowledge.lifecycle.work_rate`)."""

    waiting: int  # files still to index (an active status) and live folder runs' unsettled sources
    completed: int
    failed: int
    chunks: int
    paused: bool
    skipped: int = 0
    # live folder runs' sources settled without an item of their own (skipped, already covered, refused): a
    # run's committed source is counted once, as its completed item
    settled_in_runs: int = 0
    in_hand: str | None = None  # a file being read or embedded now, by its path below its root

    @property
    def settled(self) -> int:
        return self.completed + self.failed + self.skipped + self.settled_in_runs


def work_totals(quire: Quire) -> WorkTotals:
    with quire.db.read() as conn:
        rows = conn.execute(
            select(items.c.status, func.count())
            .where(and_(items.c.status != "deleting", items.c.type != "directory"))
            .group_by(items.c.status)
        ).all()
        chunk_count = conn.execute(select(func.count()).select_from(chunks)).scalar_one()
        runs = _live_runs(conn)
        in_hand = runs.in_hand or _item_in_hand(conn)
    counts = {str(s): int(n) for s, n in rows}
    waiting = sum(n for s, n in counts.items() if s in ACTIVE_STATUSES)
    return WorkTotals(
        waiting + runs.unsettled,
        counts.get("completed", 0),
        counts.get("failed", 0),
        int(chunk_count),
        preferences.is_paused(quire.db),
        skipped=counts.get("skipped", 0),
        settled_in_runs=runs.settled_without_item,
        in_hand=in_hand,
    )


@dataclass(frozen=True)
class _LiveRuns:
    unsettled: int
    settled_without_item: int
    in_hand: str | None


def _live_runs(conn: Connection) -> _LiveRuns:
    """The pending and running folder runs' sources: those not settled yet, those settled without an item,
    and the first one an attempt has in flight (one count per table over the live runs' ids)."""
    live = select(folder_runs.c.id).where(folder_runs.c.status.in_(LIVE_RUN_STATUSES)).scalar_subquery()
    sources = conn.execute(
        select(func.count()).select_from(folder_run_sources).where(folder_run_sources.c.run_id.in_(live))
    ).scalar_one()
    settled, with_item = conn.execute(
        select(func.count(), func.count(folder_run_outcomes.c.item_id)).where(folder_run_outcomes.c.run_id.in_(live))
    ).one()
    in_hand = conn.execute(
        select(folder_run_sources.c.relative_path)
        .join(folder_run_in_flight, folder_run_in_flight.c.source_id == folder_run_sources.c.id)
        .where(folder_run_in_flight.c.run_id.in_(live), folder_run_in_flight.c.attempt.is_not(None))
        .order_by(folder_run_sources.c.ordinal)
        .limit(1)
    ).scalar()
    return _LiveRuns(max(0, int(sources) - int(settled)), int(settled) - int(with_item), in_hand)


def _item_in_hand(conn: Connection) -> str | None:
    """A file an index job is reading or embedding now (the one that moved last)."""
    row = conn.execute(
        select(items.c.relative_path, items.c.name)
        .where(items.c.status.in_(IN_HAND_STATUSES), items.c.type != "directory")
        .order_by(items.c.updated_at.desc())
        .limit(1)
    ).first()
    return None if row is None else str(row.relative_path or row.name)


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
