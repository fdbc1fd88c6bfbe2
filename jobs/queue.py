"""The ``jobs`` table's one writer: enqueue inside the caller's transaction, read, cancel, claim, and the verbs
the worker (``jobs.runtime``) and recovery (``jobs.recovery``) change a job's state by.

Contract: ``JobQueue.enqueue(conn, ...)`` must be called with a connection inside an open write
transaction (``Database.write()``). It writes the ``jobs`` row and the huey wake-up through that same
connection, so the caller's commit makes both durable and a rollback leaves neither. An enqueue whose
idempotency key names a live (pending/running) job returns that job instead of creating another.

The verbs that end or hand back an attempt (``record_progress``, ``finish``, ``retry_later``, ``hand_back``)
write by job id only: the caller runs them inside ``JobContext.write()``, whose transaction first re-checks
``(id, attempt, status='running')``, so a superseded attempt never reaches them.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sqlalchemy import Connection, and_, insert, or_, select, text, true, update

from jobs.errors import EnqueueError, JobNotFound
from jobs.record import JobId, JobRecord
from jobs.registry import Registry
from jobs.sanitize import sanitize_optional, sanitize_reason
from jobs.schema import LIVE_STATUSES, jobs
from jobs.sessions import Session
from jobs.transport import WakeTransport

__all__ = [
    "ABANDONED_ERROR",
    "EXHAUSTED_ERROR",
    "CancelAnswer",
    "DatabaseLike",
    "Enqueued",
    "JobId",
    "JobQueue",
    "JobRecord",
    "cancel_abandoned",
    "claim_job",
    "claimable_here",
    "fail_exhausted",
    "finish",
    "hand_back",
    "record_progress",
    "renew_leases",
    "requeue",
    "requeue_expired",
    "retry_later",
]


class DatabaseLike(Protocol):
    """What the job layer needs from the store (knowledge.store.Database satisfies it)."""

    def write(self, *, store_lock: bool = True) -> Any: ...  # a Connection in BEGIN IMMEDIATE (or row locks)
    def read(self) -> Any: ...  # context manager yielding a Connection in a read snapshot


CancelAnswer = Literal["requested", "already_requested", "cancelled", "not_live"]


@dataclass(frozen=True)
class Enqueued:
    job_id: JobId
    created: bool  # False: an existing live job with the same key was returned


class JobQueue:
    """The job layer's front door for one database: enqueue, read, cancel."""

    def __init__(self, db: DatabaseLike, transport: WakeTransport, registry: Registry, session: Session) -> None:
        self.db = db
        self.transport = transport
        self.registry = registry
        self.session = session
        # Called in the enqueuing transaction after a job becomes runnable; the composition root uses it to
        # ring the worker's doorbell once that transaction commits (jobs/doorbell.py).
        self.on_enqueue: Callable[[Connection], None] | None = None

    def ensure_session(self, conn: Connection) -> None:
        """This process's session row, in the caller's transaction. Looked up every time (one read by key), never
        remembered: a transaction that registered it may roll back, and a claim naming a session whose row is
        gone would be refused by the database's key on every try."""
        self.session.register(conn)

    def enqueue(
        self,
        conn: Connection,
        job_type: str,
        payload: dict[str, Any],
        *,
        base_id: int | None = None,
        key: str | None = None,
        available_at: float = 0.0,
    ) -> Enqueued:
        """Write a job and its wake-up in the caller's open write transaction."""
        spec = self.registry.get(job_type)
        if key is not None:
            existing = conn.execute(
                select(jobs.c.id).where(and_(jobs.c.idempotency_key == key, jobs.c.status.in_(LIVE_STATUSES)))
            ).first()
            if existing is not None:
                return Enqueued(existing.id, created=False)
        self.ensure_session(conn)
        now = time.time()
        try:
            job_id = conn.execute(
                insert(jobs).values(
                    type=job_type,
                    base_id=base_id,
                    payload=json.dumps(payload, sort_keys=True),
                    idempotency_key=key,
                    status="pending",
                    recovery=spec.recovery,
                    max_attempts=spec.max_attempts,
                    available_at=available_at,
                    enqueued_by=self.session.id,
                    host=self.session.host if spec.pinned and conn.dialect.name == "postgresql" else None,
                    created_at=now,
                    updated_at=now,
                )
            ).inserted_primary_key
            assert job_id is not None
            job_id = job_id[0]
            self.transport.wake(conn, int(job_id))
            self._announce(conn)
        except Exception as exc:  # the caller decides: roll back or compensate
            raise EnqueueError(f"could not enqueue {job_type}: {exc}") from exc
        return Enqueued(JobId(int(job_id)), created=True)

    def _announce(self, conn: Connection) -> None:
        if self.on_enqueue is not None:
            self.on_enqueue(conn)

    # -- reading ------------------------------------------------------------------------------

    def get(self, job_id: int) -> JobRecord:
        with self.db.read() as conn:
            row = conn.execute(select(jobs).where(jobs.c.id == job_id)).first()
        if row is None:
            raise JobNotFound(f"job {job_id} not found")
        return JobRecord.from_row(row)

    def list(
        self, *, status: str | None = None, base_id: int | None = None, limit: int = 200, after_id: int = 0
    ) -> list[JobRecord]:
        query = select(jobs).where(jobs.c.id > after_id).order_by(jobs.c.id).limit(limit)
        if status is not None:
            query = query.where(jobs.c.status == status)
        if base_id is not None:
            query = query.where(jobs.c.base_id == base_id)
        with self.db.read() as conn:
            return [JobRecord.from_row(r) for r in conn.execute(query).all()]

    def iter_all(self, *, status: str | None = None, page: int = 500) -> Iterator[JobRecord]:
        after = 0
        while batch := self.list(status=status, limit=page, after_id=after):
            yield from batch
            after = batch[-1].id

    def live_count(self, base_id: int | None = None) -> int:
        from sqlalchemy import func

        query = select(func.count()).select_from(jobs).where(jobs.c.status.in_(LIVE_STATUSES))
        if base_id is not None:
            query = query.where(jobs.c.base_id == base_id)
        with self.db.read() as conn:
            return int(conn.execute(query).scalar_one())

    # -- cancellation -------------------------------------------------------------------------

    def cancel(self, conn: Connection, job_ids: Sequence[int]) -> builtins.list[int]:
        """Cancel jobs in the caller's transaction: pending ones at once, running ones cooperatively.

        A running job's handler sees ``cancel_requested`` between steps and stops; its attempt is also
        fenced out because the status leaves ``running``, so nothing it writes afterwards lands.
        """
        now = time.time()
        live = conn.execute(
            select(jobs.c.id).where(and_(jobs.c.id.in_(list(job_ids)), jobs.c.status.in_(LIVE_STATUSES)))
        ).all()
        ids = [r.id for r in live]
        if ids:
            conn.execute(
                update(jobs)
                .where(jobs.c.id.in_(ids))
                .values(status="cancelled", cancel_requested=1, finished_at=now, updated_at=now)
            )
        return ids

    def request_cancel(self, conn: Connection, job_id: int) -> CancelAnswer:
        """Ask ``job_id`` to stop, in the caller's transaction. A running job keeps its status, only
        ``cancel_requested`` is raised: its attempt still owns the job and writes what stopping takes
        (``JobContext.write(unless_cancelled=True)``/``check_cancelled`` raise ``Cancelled``, then the worker
        ends it ``cancelled``). A pending job has no handler to ask: it is cancelled at once."""
        row = conn.execute(select(jobs.c.status, jobs.c.cancel_requested).where(jobs.c.id == job_id)).first()
        if row is None or row.status not in LIVE_STATUSES:
            return "not_live"
        if row.status == "pending":
            self.cancel(conn, [job_id])
            return "cancelled"
        if row.cancel_requested:
            return "already_requested"
        conn.execute(update(jobs).where(jobs.c.id == job_id).values(cancel_requested=1, updated_at=time.time()))
        return "requested"

    def cancel_base(self, conn: Connection, base_id: int, *, except_types: Sequence[str] = ()) -> builtins.list[int]:
        query = select(jobs.c.id).where(and_(jobs.c.base_id == base_id, jobs.c.status.in_(LIVE_STATUSES)))
        if except_types:
            query = query.where(jobs.c.type.not_in(list(except_types)))
        return self.cancel(conn, [r.id for r in conn.execute(query).all()])


# -- claims ----------------------------------------------------------------------------------
# Claiming a job: ``pending`` → ``running`` with ``attempt + 1`` (the fence token) and a lease, per engine.
#
# Both engines claim only from ``pending`` and only once ``available_at`` has come; the attempt bump is what
# fences out any earlier attempt (``JobContext.write`` re-checks ``(id, attempt, status='running')``).
#
# * SQLite: the caller's ``BEGIN IMMEDIATE`` is the one writer; pick the oldest runnable id (or the one a
#   wake-up named) and update it.
# * PostgreSQL: one statement, ``UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED) RETURNING *``, run
#   without the store's write lock (``db.write(store_lock=False)``): workers on many machines claim at
#   once, each skipping the rows another is claiming, and a claim never queues behind an indexing write.
#   That is safe because a claim changes only the row it locked and reads nothing else: every other writer
#   of a job row either changes it under a condition re-checked on the locked row (``WHERE attempt = …``,
#   ``status = 'pending'``) or treats ``pending`` and ``running`` alike (cancel).


def claim_job(
    conn: Connection,
    job_id: int | None,
    *,
    owner: str,
    now: float,
    lease_seconds: float,
    host: str = "",
    pinned_only: bool = False,
) -> Any:
    """Claim ``job_id`` (a wake-up's) or else the oldest runnable job; the claimed row, or ``None``.

    On a team store a job pinned to a host (``jobs.host``) is claimed only by that host's workers, and a
    ``pinned_only`` claim takes nothing else (``quire add`` walking its own folders). A data directory has
    one host: nothing is pinned there."""
    if conn.dialect.name == "postgresql":
        return _claim_postgres(
            conn, job_id, owner=owner, now=now, lease_seconds=lease_seconds, host=host, pinned_only=pinned_only
        )
    return _claim_sqlite(conn, job_id, owner=owner, now=now, lease_seconds=lease_seconds)


def claimable_here(conn: Connection, host: str, *, pinned_only: bool = False) -> Any:
    """The condition a pending job meets to be claimed by a worker of ``host`` (see :func:`claim_job`)."""
    if conn.dialect.name != "postgresql":
        return true()
    if pinned_only:
        return jobs.c.host == host
    return or_(jobs.c.host.is_(None), jobs.c.host == host)


def _claim_sqlite(conn: Connection, job_id: int | None, *, owner: str, now: float, lease_seconds: float) -> Any:
    if job_id is None:
        job_id = conn.execute(
            select(jobs.c.id)
            .where(and_(jobs.c.status == "pending", jobs.c.available_at <= now))
            .order_by(jobs.c.id)
            .limit(1)
        ).scalar()
        if job_id is None:
            return None
    claimed = conn.execute(
        update(jobs)
        .where(and_(jobs.c.id == job_id, jobs.c.status == "pending", jobs.c.available_at <= now))
        .values(
            status="running",
            attempt=jobs.c.attempt + 1,
            lease_owner=owner,
            lease_expires_at=now + lease_seconds,
            started_at=now,
            updated_at=now,
        )
    ).rowcount
    if claimed != 1:
        return None
    return conn.execute(select(jobs).where(jobs.c.id == job_id)).one()


_CLAIM_POSTGRES = """
UPDATE jobs SET status = 'running', attempt = attempt + 1, lease_owner = :owner,
       lease_expires_at = :expires, started_at = :now, updated_at = :now
 WHERE id = (SELECT id FROM jobs
              WHERE status = 'pending' AND available_at <= :now {only} {where}
              ORDER BY id LIMIT 1
                FOR UPDATE SKIP LOCKED)
   AND status = 'pending'
RETURNING *
"""


def _claim_postgres(
    conn: Connection,
    job_id: int | None,
    *,
    owner: str,
    now: float,
    lease_seconds: float,
    host: str,
    pinned_only: bool,
) -> Any:
    params: dict[str, Any] = {"owner": owner, "expires": now + lease_seconds, "now": now, "host": host}
    only = ""
    if job_id is not None:
        only, params["id"] = "AND id = :id", int(job_id)
    where = "AND host = :host" if pinned_only else "AND (host IS NULL OR host = :host)"
    return conn.execute(text(_CLAIM_POSTGRES.format(only=only, where=where)), params).first()


# -- an attempt's progress and end (inside ``JobContext.write()``: the attempt is re-checked there) -----------


def record_progress(conn: Connection, job_id: int, done: int, total: int, label: str) -> None:
    conn.execute(
        update(jobs)
        .where(jobs.c.id == job_id)
        .values(progress_done=done, progress_total=total, progress_label=label[:200], updated_at=time.time())
    )


def finish(conn: Connection, job_id: int, status: str, result: Any, error: str | None) -> None:
    """End the attempt ``completed``, ``failed`` or ``cancelled``, with its result or its reason."""
    now = time.time()
    conn.execute(
        update(jobs)
        .where(jobs.c.id == job_id)
        .values(
            status=status,
            result=None if result is None else json.dumps(result, default=str),
            last_error=sanitize_optional(error),
            lease_owner=None,
            lease_expires_at=None,
            finished_at=now,
            updated_at=now,
        )
    )


def retry_later(conn: Connection, job_id: int, error: str, delay: float) -> None:
    """Back to ``pending`` after ``delay`` seconds; the attempt is spent (the next claim bumps it again)."""
    now = time.time()
    conn.execute(
        update(jobs)
        .where(jobs.c.id == job_id)
        .values(
            status="pending",
            last_error=sanitize_reason(error),
            lease_owner=None,
            lease_expires_at=None,
            available_at=now + delay,
            updated_at=now,
        )
    )


def hand_back(conn: Connection, job_id: int, reason: str, delay: float) -> None:
    """Back to ``pending`` without consuming the attempt (the next claim re-bumps it)."""
    now = time.time()
    conn.execute(
        update(jobs)
        .where(jobs.c.id == job_id)
        .values(
            status="pending",
            attempt=jobs.c.attempt - 1,
            last_error=sanitize_reason(reason),
            lease_owner=None,
            lease_expires_at=None,
            available_at=now + delay,
            updated_at=now,
        )
    )


# -- leases and recovery --------------------------------------------------------------------------------


def renew_leases(conn: Connection, owner: str, until: float) -> None:
    """Extend every lease ``owner`` holds on a running job (a live worker's heartbeat)."""
    conn.execute(
        update(jobs).where(and_(jobs.c.lease_owner == owner, jobs.c.status == "running")).values(lease_expires_at=until)
    )


def requeue(conn: Connection, job_id: int, attempt: int, now: float) -> None:
    """Hand a dead process's running attempt back as ``pending`` (only that attempt: ``WHERE attempt = …``);
    the next claim bumps the attempt, which fences out anything the dead one might still write."""
    conn.execute(
        update(jobs)
        .where(and_(jobs.c.id == job_id, jobs.c.attempt == attempt, jobs.c.status == "running"))
        .values(status="pending", lease_owner=None, lease_expires_at=None, updated_at=now)
    )


def requeue_expired(conn: Connection, job_ids: Sequence[int], now: float) -> None:
    """Hand ``retry`` jobs whose lease ran out back as ``pending`` (read in this transaction by the caller)."""
    conn.execute(
        update(jobs)
        .where(jobs.c.id.in_(list(job_ids)))
        .values(status="pending", lease_owner=None, lease_expires_at=None, updated_at=now)
    )


EXHAUSTED_ERROR = "attempts_exhausted: the process running it stopped on its last allowed attempt; not retried"
ABANDONED_ERROR = "interrupted: the process running it stopped; not resumed (recovery: abandon)"


def fail_exhausted(conn: Connection, job_id: int, attempt: int, now: float) -> None:
    """A ``retry`` job whose attempt reached ``max_attempts`` ends ``failed`` instead of being redelivered
    (a job that kills its worker every time must not be handed back for ever)."""
    conn.execute(
        update(jobs)
        .where(and_(jobs.c.id == job_id, jobs.c.attempt == attempt))
        .values(
            status="failed",
            last_error=EXHAUSTED_ERROR,
            lease_owner=None,
            lease_expires_at=None,
            finished_at=now,
            updated_at=now,
        )
    )


def cancel_abandoned(conn: Connection, job_ids: Sequence[int], now: float) -> None:
    """Cancel ``abandon`` jobs a dead process left behind (one statement: they all get the same values)."""
    conn.execute(
        update(jobs)
        .where(jobs.c.id.in_(list(job_ids)))
        .values(
            status="cancelled",
            last_error=ABANDONED_ERROR,
            lease_owner=None,
            lease_expires_at=None,
            finished_at=now,
            updated_at=now,
        )
    )
