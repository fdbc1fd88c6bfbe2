"""The repair scan that settles runs whose job ended without settling them."""

from __future__ import annotations

import logging

from sqlalchemy import or_, select

from jobs.queue import JobQueue
from jobs.schema import LIVE_STATUSES, jobs
from knowledge.folder_runs.ledger import load_run, settle_failed
from knowledge.store.schema_runs import (
    folder_runs,
)

log = logging.getLogger(__name__)


# -- repair and registration -------------------------------------------------------------------


def repair_stranded_runs(queue: JobQueue, limit: int) -> int:
    """Runs left pending/running whose bound job is no longer live (e.g. cancelled) are settled failed."""
    settled = 0
    with queue.db.write() as conn:
        rows = conn.execute(
            select(folder_runs.c.id, jobs.c.attempt)
            .outerjoin(jobs, jobs.c.id == folder_runs.c.job_id)
            .where(folder_runs.c.status.in_(("pending", "running")))
            .where(or_(jobs.c.id.is_(None), jobs.c.status.not_in(LIVE_STATUSES)))
            .order_by(folder_runs.c.id)
            .limit(limit)
        ).all()
        for row in rows:
            run = load_run(conn, row.id)
            assert run is not None
            settle_failed(conn, run, row.attempt, "its job ended without settling the run")
            settled += 1
    return settled
