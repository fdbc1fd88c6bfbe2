"""Enqueue inside the caller's transaction, read and cancel jobs.

Contract: ``JobQueue.enqueue(conn, ...)`` must be called with a connection inside an open write
transaction (``Database.write()``). It writes the ``jobs`` row and the huey wake-up through that same
connection, so the caller's commit makes both durable and a rollback leaves neither. An enqueue whose
idempotency key names a live (pending/running) job returns that job instead of creating another.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NewType, Protocol

from sqlalchemy import Connection, and_, insert, or_, select, text, true, update

from jobs.errors import EnqueueError, JobNotFound
from jobs.registry import Registry
from jobs.schema import LIVE_STATUSES, jobs
from jobs.sessions import Session
from jobs.transport import WakeTransport


class DatabaseLike(Protocol):
    """What the job layer needs from the store (knowledge.store.Database satisfies it)."""

    def write(self, *, store_lock: bool = True) -> Any: ...  # a Connection in BEGIN IMMEDIATE (or row locks)
    def read(self) -> Any: ...  # context manager yielding a Connection in a read snapshot


JobId = NewType("JobId", int)  # a row of the jobs table


@dataclass(frozen=True)
class JobRecord:
    id: JobId
    type: str
    base_id: int | None
    payload: dict[str, Any]
    idempotency_key: str | None
    status: str
    attempt: int
    recovery: str
    lease_owner: str | None
    lease_expires_at: float | None
    cancel_requested: bool
    progress_done: int
    progress_total: int
    progress_label: str
    last_error: str | None
    result: Any
    enqueued_by: str | None
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None

    @classmethod
    def from_row(cls, row: Any) -> JobRecord:
        m = row._mapping
        return cls(
            id=m["id"],
            type=m["type"],
            base_id=m["base_id"],
            payload=json.loads(m["payload"] or "{}"),
            idempotency_key=m["idempotency_key"],
            status=m["status"],
            attempt=m["attempt"],
            recovery=m["recovery"],
            lease_owner=m["lease_owner"],
            lease_expires_at=m["lease_expires_at"],
            cancel_requested=bool(m["cancel_requested"]),
            progress_done=m["progress_done"],
            progress_total=m["progress_total"],
            progress_label=m["progress_label"],
            last_error=m["last_error"],
            result=json.loads(m["result"]) if m["result"] else None,
            enqueued_by=m["enqueued_by"],
            created_at=m["created_at"],
            updated_at=m["updated_at"],
            started_at=m["started_at"],
            finished_at=m["finished_at"],
        )

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


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
        self._session_registered = False
        # Called in the enqueuing transaction after a job becomes runnable; the composition root uses it to
        # ring the worker's doorbell once that transaction commits (jobs/doorbell.py).
        self.on_enqueue: Callable[[Connection], None] | None = None

    def ensure_session(self, conn: Connection) -> None:
        if not self._session_registered:
            self.session.register(conn)
            self._session_registered = True

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
