"""What a handler gets (``JobContext``): its job, a fenced write transaction, progress, cancellation checks.

Every write an attempt makes goes through :meth:`JobContext.write`, which re-checks ``(id, attempt,
status='running')`` inside the write transaction before yielding (the threading contract is in
``jobs/runtime.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

from sqlalchemy import Connection, and_, select

from jobs.errors import Cancelled, Superseded
from jobs.queue import DatabaseLike, JobQueue, JobRecord, record_progress
from jobs.schema import jobs
from jobs.sessions import Session


class Runner(Protocol):
    """What a context uses of the worker that runs its job (``jobs.runtime.Worker``, which builds the context:
    named here, not imported, so the two modules import each other without a cycle)."""

    queue: JobQueue
    session: Session


class JobContext:
    """What a handler gets: its job, a fenced write transaction, progress, cancellation checks."""

    def __init__(self, worker: Runner, record: JobRecord) -> None:
        self.worker = worker
        self.queue: JobQueue = worker.queue
        self.db: DatabaseLike = worker.queue.db
        self.job = record
        self.job_id = record.id
        self.attempt = record.attempt
        self.payload = record.payload
        self.base_id = record.base_id

    def owns_job(self, conn: Connection) -> bool:
        return self._ownership(conn) is not None

    def _ownership(self, conn: Connection) -> Any:
        """The job's row (its ``cancel_requested``) while this attempt runs it, else None."""
        return conn.execute(
            select(jobs.c.cancel_requested).where(
                and_(jobs.c.id == self.job_id, jobs.c.attempt == self.attempt, jobs.c.status == "running")
            )
        ).first()

    @contextlib.contextmanager
    def write(self, *, unless_cancelled: bool = False) -> Iterator[Connection]:
        """A write transaction that only commits while this attempt still owns the job. ``unless_cancelled``:
        a cancel request raises ``Cancelled`` before anything is written (a step that starts with its own
        write checks there instead of in a read of its own, :meth:`check_cancelled`)."""
        with self.db.write() as conn:
            owned = self._ownership(conn)
            if owned is None:
                raise Superseded(f"job {self.job_id} attempt {self.attempt} no longer owns the job")
            if unless_cancelled and owned.cancel_requested:
                raise Cancelled(f"job {self.job_id} was cancelled")
            yield conn

    def check_cancelled(self) -> None:
        """Raise ``Cancelled``/``Superseded`` between steps when the job was cancelled or taken over."""
        with self.db.read() as conn:
            row = conn.execute(
                select(jobs.c.status, jobs.c.attempt, jobs.c.cancel_requested).where(jobs.c.id == self.job_id)
            ).first()
        if row is None or row.cancel_requested:
            raise Cancelled(f"job {self.job_id} was cancelled")
        if row.attempt != self.attempt or row.status != "running":
            raise Superseded(f"job {self.job_id} attempt {self.attempt} was superseded")

    def progress(self, done: int, total: int, label: str = "") -> None:
        """Record progress (fenced). The GUI polls this column; no signal crosses threads."""
        with self.write() as conn:
            record_progress(conn, self.job_id, done, total, label)
