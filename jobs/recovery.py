"""Startup recovery: decide what happens to work that a dead process left behind.

Runs on every app or worker start, before the worker takes jobs.

* A job is *left behind* when it is ``running`` under a session that ended or is no longer alive (by its
  pid and start time on this host), or under another host's session whose lease ran out (a pid means
  nothing across machines: the lease decides there), or ``pending`` and enqueued by a worker-hosting process (the
  app, a worker — e.g. child jobs a handler scheduled) that died without ending its session. Jobs enqueued by
  a one-shot CLI command, or by a worker that stopped gracefully (it hands back what it ran:
  :func:`release_held`), wait for any worker: nothing was interrupted.
* ``abandon`` jobs left behind are cancelled and their type's ``on_abandon`` hook runs in the same
  transaction (the knowledge layer parks their items ``failed``). They never silently resume.
* ``retry`` jobs left running are handed back as ``pending`` with a fresh wake-up; the next claim bumps
  the attempt, which fences out anything the dead attempt might still try to write. One whose attempt
  already reached its ``max_attempts`` is failed instead (``attempts_exhausted``).
* Jobs whose lease is held by a live session in another process are never touched.
* Then each registered repair scan runs, bounded and paginated.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from sqlalchemy import Connection, and_, or_, select

from jobs.queue import JobQueue, JobRecord, cancel_abandoned, fail_exhausted, requeue, requeue_expired
from jobs.schema import jobs
from jobs.sessions import host_of, live_session_ids, this_host, worker_hosting_ids

log = logging.getLogger(__name__)

PAGE = 500


@dataclass
class RecoveryReport:
    cancelled: list[int] = field(default_factory=list)  # abandon jobs cancelled
    redelivered: list[int] = field(default_factory=list)  # retry jobs handed back
    exhausted: list[int] = field(default_factory=list)  # retry jobs that used their last attempt: failed
    repaired: int = 0  # what repair scans fixed: cleanups enqueued, runs settled, orphan files removed…
    hook_errors: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "cancelled": len(self.cancelled),
            "redelivered": len(self.redelivered),
            "exhausted": len(self.exhausted),
            "repaired": self.repaired,
            "hook_errors": self.hook_errors,
        }


def recover(queue: JobQueue, *, repair_limit: int = 1000) -> RecoveryReport:
    report = RecoveryReport()
    after = 0
    while True:
        batch_last = _recover_page(queue, after, report)
        if batch_last is None:
            break
        after = batch_last
    for scan in queue.registry.repair_scans:
        try:
            report.repaired += scan(queue, repair_limit)
        except Exception:  # logged, not retried in this session: the next start or period runs it again
            log.exception("repair scan %s failed", getattr(scan, "__name__", scan))
    if report.cancelled or report.redelivered or report.repaired:
        log.info("startup recovery: %s", report.as_dict())
    return report


def _recover_page(queue: JobQueue, after: int, report: RecoveryReport) -> int | None:
    """Recover one page of live jobs (id > after) in one write transaction; the last id seen."""
    now = time.time()
    with queue.db.write() as conn:
        live = live_session_ids(conn)
        worker_hosts = worker_hosting_ids(conn)
        rows = conn.execute(
            select(jobs)
            .where(and_(jobs.c.id > after, or_(jobs.c.status == "running", jobs.c.status == "pending")))
            .order_by(jobs.c.id)
            .limit(PAGE)
        ).all()
        if not rows:
            return None
        abandoned: list[JobRecord] = []
        for row in rows:
            record = JobRecord.from_row(row)
            if not _left_behind(record, live, worker_hosts, now):
                continue
            if record.recovery == "abandon":
                abandoned.append(record)
            elif record.status == "running" and record.attempt >= int(row.max_attempts):
                fail_exhausted(conn, record.id, record.attempt, now)  # crash redelivery honours max_attempts
                report.exhausted.append(record.id)
            elif record.status == "running":
                requeue(conn, record.id, record.attempt, now)
                queue.transport.wake(conn, record.id)
                report.redelivered.append(record.id)
        _cancel(conn, abandoned, now, report)
        _run_abandon_hooks(queue, conn, abandoned, report)
        return int(rows[-1].id)


def _left_behind(record: JobRecord, live: set[str], worker_hosts: set[str], now: float) -> bool:
    if record.status == "running":
        if record.lease_owner not in live:  # ended, or dead by its pid here / its heartbeat elsewhere
            return True
        if record.lease_owner is not None and host_of(record.lease_owner) != this_host():
            return record.lease_expires_at is None or record.lease_expires_at < now  # no pid to ask there
        return False  # a live worker here holds it even if its lease looks old
    # pending: only abandon jobs scheduled by a worker-hosting process that is gone are left behind
    if record.recovery != "abandon":
        return False
    return record.enqueued_by is not None and record.enqueued_by in worker_hosts and record.enqueued_by not in live


def _cancel(conn: Connection, records: list[JobRecord], now: float, report: RecoveryReport) -> None:
    """Cancel abandoned jobs (one statement for the page: they all get the same values)."""
    if not records:
        return
    cancel_abandoned(conn, [r.id for r in records], now)
    report.cancelled.extend(r.id for r in records)


def _run_abandon_hooks(queue: JobQueue, conn: Connection, records: list[JobRecord], report: RecoveryReport) -> None:
    """Each cancelled job's ``on_abandon`` hook, in this transaction; a type's batch hook where it has one."""
    by_type: dict[str, list[JobRecord]] = {}
    for record in records:
        by_type.setdefault(record.type, []).append(record)
    for type_name, group in by_type.items():
        spec = queue.registry.types.get(type_name)
        if spec is None:
            continue
        if spec.on_abandon_batch is not None:
            try:
                with conn.begin_nested():
                    spec.on_abandon_batch(conn, group)
                continue
            except Exception:
                log.exception(
                    "batch abandon hook for %d %s jobs failed; running them one by one", len(group), type_name
                )
        if spec.on_abandon is None:
            continue
        for record in group:
            try:
                with conn.begin_nested():
                    spec.on_abandon(conn, record)
            except Exception:
                report.hook_errors += 1
                log.exception("abandon hook for job %s (%s) failed", record.id, record.type)


def give_back(conn: Connection, queue: JobQueue, record: JobRecord) -> None:
    """Hand a running attempt back as ``pending`` in the caller's transaction, its attempt kept (the next claim
    fences it out), after its type's ``on_release`` hook; with a wake-up. No death is counted."""
    spec = queue.registry.types.get(record.type)
    if spec is not None and spec.on_release is not None:
        spec.on_release(conn, record)
    requeue(conn, record.id, record.attempt, time.time())
    queue.transport.wake(conn, record.id)


def release_held(queue: JobQueue, session_id: str, *, keep: Collection[int] = ()) -> int:
    """A stopping worker hands back every job it still runs (a graceful stop, never a crash): its type's
    ``on_release`` hook, then ``pending`` with the attempt kept (the thread still running it can no longer
    write) and a wake-up; no death is counted. If this fails, the jobs stay running under an ended session
    and recovery takes them on the next start, as after a crash. The number handed back. ``keep``: jobs still
    running here (after an outage, only a claim whose commit's answer was lost is handed back)."""
    try:
        with queue.db.write() as conn:
            held = conn.execute(
                select(jobs).where(
                    and_(jobs.c.status == "running", jobs.c.lease_owner == session_id, jobs.c.id.not_in(list(keep)))
                )
            ).all()
            for row in held:
                give_back(conn, queue, JobRecord.from_row(row))
    except Exception:
        log.warning("could not hand back running jobs; recovery takes them over", exc_info=True)
        return 0
    if held:
        log.info("handed back %d running job(s)", len(held))
    return len(held)


def redeliver_stale(queue: JobQueue) -> list[int]:
    """Hand ``retry`` jobs whose lease ran out back to the queue (a running worker's heartbeat; the next claim
    fences the old attempt); one whose attempts are used up is failed. The ids handed back."""
    now = time.time()
    with queue.db.write() as conn:
        stale = conn.execute(
            select(jobs.c.id, jobs.c.lease_owner, jobs.c.attempt, jobs.c.max_attempts).where(
                and_(jobs.c.status == "running", jobs.c.recovery == "retry", jobs.c.lease_expires_at < now)
            )
        ).all()
        for r in stale:
            if r.attempt >= r.max_attempts:  # redelivery honours max_attempts
                fail_exhausted(conn, r.id, r.attempt, now)
        ids = [r.id for r in stale if r.attempt < r.max_attempts]
        if ids:
            requeue_expired(conn, ids, now)
            for job_id in ids:
                queue.transport.wake(conn, job_id)
    return ids
