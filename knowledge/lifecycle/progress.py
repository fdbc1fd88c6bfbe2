"""Where indexing stands, for the window's status bar and progress line and the MCP ``status`` tool: items by
status, the live jobs, the chunks indexed, the latest failures and whether indexing is paused.

Each function is one bounded read snapshot (counts grouped by status, a ``limit`` on listings), cheap enough to
poll every half second; no worker ever signals the window, it reads these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import and_, func, select

from jobs.schema import LIVE_STATUSES, jobs
from knowledge import preferences
from knowledge.library.tree import Item
from knowledge.store.schema import ACTIVE_STATUSES, TERMINAL_STATUSES, chunks, items

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
