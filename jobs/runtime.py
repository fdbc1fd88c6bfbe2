"""The worker runtime: claim with a lease, run the handler, fence every write of the attempt.

Threading contract
* A ``Worker`` runs ``threads`` executor threads plus one heartbeat thread. Each executor takes one
  job at a time: a huey wake-up names a job id; when the queue is empty the executor also scans the
  ``jobs`` table (the source of truth), so a lost message never strands a job.
* Claim (``jobs.queue.claim_job``): ``status='running', attempt=attempt+1, lease_owner=…`` in ``BEGIN
  IMMEDIATE``, only from ``pending`` (on PostgreSQL ``FOR UPDATE SKIP LOCKED``). The attempt number is the
  fence token. Every change of a job row is a verb of ``jobs.queue``, its one writer; this module decides
  which verb, and when.
* Every write an attempt makes goes through ``JobContext.write()``, which re-checks
  ``(id, attempt, status='running')`` inside the write transaction before yielding. A superseded or
  cancelled attempt gets ``Superseded`` and stands down without writing anything.
* The heartbeat thread renews the leases this worker holds (fenced the same way) and re-delivers
  ``retry`` jobs whose lease ran out under another owner (a stale claim), bumping the attempt.
* The heartbeat thread also runs recovery (``jobs.recovery.recover``: dead sessions' jobs, then the
  registered bounded, paginated repair scans) every ``repair_interval`` seconds, so work a crashed
  process stranded is parked or handed back while this worker runs, not only at the next start.
* ``stop()`` (and the end of ``run()``) stops taking jobs and waits briefly for running ones; a job still
  running then is handed back (``jobs.recovery.release_held``): ``pending`` with its attempt kept, so the next claim
  fences this one out, after its type's ``on_release`` hook. A graceful stop counts no death; only a
  process that ends without this (a crash, a kill) leaves its jobs to recovery on the next start.
* A server may restart at any moment (``jobs.outage``): no thread dies of a lost connection. The queue
  away, executors skip it and scan the ``jobs`` table; the store away, every thread waits with backoff
  (logged once per outage), an attempt that lost it is handed back as at a stop (or its outcome recorded)
  once it is back, and an outage past the budget ends ``run()`` with ``OutageTooLong``, never a normal return.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from sqlalchemy import and_, select

from jobs.backoff import full_jitter
from jobs.context import JobContext
from jobs.doorbell import Doorbell, Listener
from jobs.errors import Cancelled, ControlFlow, HandBack, Superseded
from jobs.outage import Link, OutageTooLong, is_link_error, outage_budget
from jobs.queue import (
    DatabaseLike,
    JobQueue,
    JobRecord,
    claim_job,
    claimable_here,
    finish,
    hand_back,
    renew_leases,
    retry_later,
)
from jobs.recovery import give_back, recover, redeliver_stale, release_held
from jobs.sanitize import sanitize_error
from jobs.schema import jobs
from jobs.sessions import live_session_ids

log = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_REPAIR_INTERVAL = 20.0
# A failed `retry` job waits full_jitter(attempt): uniform(0, min(60 s, 0.5 s · 2^attempt)).
RETRY_BASE_SECONDS = 0.5
RETRY_CAP_SECONDS = 60.0


class Worker:
    """Runs jobs from one database until stopped (or until idle)."""

    def __init__(
        self,
        queue: JobQueue,
        *,
        threads: int = 1,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        poll_interval: float = 0.5,
        renew_leases: bool = True,
        paused: Callable[[], bool] | None = None,
        repair_interval: float | None = DEFAULT_REPAIR_INTERVAL,
        doorbell: Doorbell | None = None,
        on_thread_start: Callable[[], None] | None = None,
        pinned_only: bool = False,
        outage_seconds: float | None = None,
    ) -> None:
        self.queue = queue
        # The servers as this worker sees them (jobs/outage.py): an outage is waited out, up to a budget.
        budget = outage_budget() if outage_seconds is None else outage_seconds
        self.store = Link("store", budget)
        self.wakes = Link("queue", budget)
        self.gave_up: OutageTooLong | None = None
        # Only the jobs pinned to this host (a team store's walks and scans of this machine's folders):
        # ``quire add`` runs its own folders' walks so that no other machine ever needs the folder.
        self.pinned_only = pinned_only
        # Rung after every job commit (jobs/doorbell.py): an idle executor wakes at once, not at its next poll.
        self.doorbell = doorbell
        self._listener: Listener | None = None
        # Run by each executor thread before its first claim (the composition root starts that thread's
        # parse process there, so the first job does not wait for it).
        self.on_thread_start = on_thread_start
        # Asked before every claim: while it answers True nothing new is claimed and running jobs
        # finish. The composition root passes a read of its own persisted flag (jobs/ knows no settings).
        self.paused = paused or (lambda: False)
        self.was_paused = False
        self.session = queue.session
        self.threads = threads
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.renew_leases = renew_leases
        self.repair_interval = repair_interval  # None: recovery only at start-up (by the caller)
        self.repairs = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._running: set[int] = set()  # the jobs this worker's executors run now
        self._busy_lock = threading.Lock()
        self._outages_swept = 0
        self._threads: list[threading.Thread] = []
        self.completed = 0
        self.idle_looks = 0  # times an executor found nothing runnable and went to wait (tests)

    # -- lifecycle ----------------------------------------------------------------------------

    def register(self) -> None:
        with self.queue.db.write() as conn:
            self.queue.ensure_session(conn)
            if self.pinned_only:
                return  # a one-shot command finishing its own walks: what they enqueue waits for a worker
            self.session.host_worker(conn)

    def start(self) -> None:
        """Run in background threads (the GUI's choice)."""
        self.register()
        self._listen_for_doorbell()
        for n in range(self.threads):
            t = threading.Thread(target=self._executor_loop, args=(False,), name=f"quire-worker-{n}", daemon=True)
            t.start()
            self._threads.append(t)
        hb = threading.Thread(target=self._heartbeat_loop, name="quire-heartbeat", daemon=True)
        hb.start()
        self._threads.append(hb)

    def run(self, *, until_idle: bool = False, timeout: float | None = None, shutdown_wait: float = 5.0) -> int:
        """Run in the foreground until stopped, idle (``until_idle``) or out of time; return jobs finished.

        The executors are daemon threads and this thread only supervises, so a stop request (a signal
        handler calling ``stop()``) ends the call within ``shutdown_wait`` seconds even while a long job
        runs. That job is not cancelled: its session ends, and the next start's recovery decides. A server
        away longer than the outage budget raises ``OutageTooLong`` (after the same ending).
        """
        self.register()
        self._listen_for_doorbell()
        deadline = None if timeout is None else time.monotonic() + timeout
        hb = threading.Thread(target=self._heartbeat_loop, name="quire-heartbeat", daemon=True)
        hb.start()
        executors = [
            threading.Thread(
                target=self._executor_loop, args=(until_idle, deadline), name=f"quire-worker-{n}", daemon=True
            )
            for n in range(self.threads)
        ]
        for t in executors:
            t.start()
        try:
            while any(t.is_alive() for t in executors) and not self._stop.wait(0.05):
                if deadline is not None and time.monotonic() > deadline:
                    break
            self._stop.set()
            self._wake.set()
            for t in executors:
                t.join(timeout=shutdown_wait)
        finally:
            self._stop.set()
            hb.join(timeout=5)
            self._close_doorbell()
            release_held(self.queue, self.session.id)
            self.end_session()
        if self.gave_up is not None:
            raise self.gave_up
        return self.completed

    def stop(self, wait_seconds: float = 5.0) -> None:
        """Stop taking jobs; wait briefly for running ones, then hand back what still runs; never cancel."""
        self._stop.set()
        self._wake.set()
        if not self._threads:  # run() supervises its executors: it waits, hands back and ends the session
            return
        for t in self._threads:
            t.join(timeout=wait_seconds)
        self._close_doorbell()
        release_held(self.queue, self.session.id)
        self.end_session()

    def end_session(self) -> None:
        with contextlib.suppress(Exception), self.queue.db.write() as conn:
            self.session.end(conn)

    def _listen_for_doorbell(self) -> None:
        self._listener = None if self.doorbell is None else self.doorbell.answer(self._wake, self._stop)

    def _close_doorbell(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()

    def poke(self) -> None:
        """Wake idle executor threads now (the GUI calls this after it enqueues)."""
        self._wake.set()

    # -- executor -----------------------------------------------------------------------------

    def _executor_loop(self, until_idle: bool, deadline: float | None = None) -> None:
        if self.on_thread_start is not None:
            try:
                self.on_thread_start()
            except Exception:  # a warm-up is an optimisation: the job does the same work on demand
                log.warning("executor warm-up failed", exc_info=True)
        while not self._stop.is_set():
            if deadline is not None and time.monotonic() > deadline:
                return
            try:
                record = None if self._pause_holds() else self._claim_next()
                if record is None and until_idle and (self.was_paused or self._idle()):  # paused: nothing runs
                    return
                self.store.restored()
            except Exception as exc:  # the store is away (or a fault): wait it out, never let the thread die
                self._wait_out(self.store, exc)
                continue
            if record is None:
                self.idle_looks += 1
                self._wake.wait(self.poll_interval)
                self._wake.clear()
                continue
            with self._busy_lock:
                self._running.add(record.id)
            try:
                self._execute(record)
            finally:
                with self._busy_lock:
                    self._running.discard(record.id)

    def _pause_holds(self) -> bool:
        try:
            paused = bool(self.paused())
        except Exception as exc:  # an unreadable flag must not stop the worker; log and carry on
            if is_link_error(exc):
                raise  # the store is away: the executor waits it out
            log.warning("could not read the pause flag", exc_info=True)
            paused = False
        if paused != self.was_paused:
            log.warning("indexing %s", "paused: claiming no new jobs" if paused else "resumed")
            self.was_paused = paused
        return paused

    def _idle(self) -> bool:
        with self._busy_lock:
            if self._running:
                return False
        with self.queue.db.read() as conn:
            runnable = conn.execute(
                select(jobs.c.id)
                .where(
                    and_(
                        jobs.c.status == "pending",
                        jobs.c.available_at <= time.time(),
                        claimable_here(conn, self.session.host, pinned_only=self.pinned_only),
                    )
                )
                .limit(1)
            ).first()
        return runnable is None

    def _claim_next(self) -> JobRecord | None:
        while (job_id := self._next_wake()) is not None:
            record = self._claim(job_id)
            if record is not None:
                return record
        return self._claim(None)  # the jobs table is the truth: a lost wake-up strands nothing

    def _next_wake(self) -> int | None:
        """The next wake-up's job id; None when there is none or the queue is away (skipped until its
        backoff runs out: meanwhile the jobs table is scanned, so no job waits for the queue)."""
        if not self.wakes.ready():
            return None
        try:
            job_id = self.queue.transport.next_job_id()
        except Exception as exc:
            self.wakes.failed(exc)
            return None
        self.wakes.restored()
        return job_id

    def _wait_out(self, link: Link, exc: BaseException) -> bool:
        """Wait ``link``'s backoff after a failure; False when the worker stops (given up, or asked to)."""
        delay = link.failed(exc)
        if link.over_budget():
            if self.gave_up is None:
                log.error("%s", link.give_up_message())
                self.gave_up = OutageTooLong(link.give_up_message())
            self._stop.set()
            self._wake.set()
            return False
        return not self._stop.wait(delay)

    def _settle(self, write: Callable[[], None]) -> None:
        """Record an attempt's outcome; through an outage of the store, again after each backoff until it is
        recorded or the worker stops (the job is then handed back by recovery or its lease)."""
        while True:
            try:
                write()
            except Exception as exc:
                if not is_link_error(exc):
                    raise
                if not self._wait_out(self.store, exc):
                    return
                continue
            self.store.restored()
            return

    def _claim(self, job_id: int | None) -> JobRecord | None:
        """Claim ``job_id`` or the oldest runnable job (``jobs.queue.claim_job``: per engine, the same fence)."""
        with self.queue.db.write(store_lock=False) as conn:
            row = claim_job(
                conn,
                job_id,
                owner=self.session.id,
                now=time.time(),
                lease_seconds=self.lease_seconds,
                host=self.session.host,
                pinned_only=self.pinned_only,
            )
        return None if row is None else JobRecord.from_row(row)

    def _execute(self, record: JobRecord) -> None:
        ctx = JobContext(self, record)
        try:
            spec = self.queue.registry.get(record.type)
            result = spec.handler(ctx)
        except Superseded:
            log.info("job %s attempt %s superseded; standing down", record.id, record.attempt)
        except Cancelled:
            self._settle(partial(self._finish, ctx, "cancelled", None, None))
        except HandBack as hb:
            self._settle(partial(self._hand_back, ctx, hb))
        except ControlFlow:
            log.exception("unexpected control flow in job %s", record.id)
        except Exception as exc:  # a handler fault: recorded on the job, never crashes the worker
            if is_link_error(exc):  # not the job's fault: it runs again once the server is back
                log.warning("job %s attempt %s lost its connection; handing it back", record.id, record.attempt)
                self._settle(partial(self._give_back, ctx))
                return
            log.warning("job %s (%s) attempt %s failed: %s", record.id, record.type, record.attempt, exc)
            self._settle(partial(self._fail, ctx, exc))
        else:
            self._settle(partial(self._finish, ctx, "completed", result, None))

    def _finish(self, ctx: JobContext, status: str, result: Any, error: str | None) -> None:
        try:
            with ctx.write() as conn:
                finish(conn, ctx.job_id, status, result, error)
            if status == "completed":
                self.completed += 1
        except Superseded:
            log.info("job %s attempt %s finished after losing ownership; result dropped", ctx.job_id, ctx.attempt)

    def _fail(self, ctx: JobContext, exc: Exception) -> None:
        error = sanitize_error(exc)
        spec = self.queue.registry.types.get(ctx.job.type)
        if spec is not None and spec.recovery == "retry" and ctx.attempt < spec.max_attempts:
            delay = full_jitter(ctx.attempt, base=RETRY_BASE_SECONDS, cap=RETRY_CAP_SECONDS)
            self._retry_later(ctx, error, delay=delay)
            return
        self._finish(ctx, "failed", None, error)

    def _retry_later(self, ctx: JobContext, error: str, delay: float) -> None:
        with contextlib.suppress(Superseded), ctx.write() as conn:
            retry_later(conn, ctx.job_id, error, delay)

    def _give_back(self, ctx: JobContext) -> None:
        """Hand an attempt back as a graceful stop does (``jobs.recovery.give_back``): it runs again."""
        with contextlib.suppress(Superseded), ctx.write() as conn:
            give_back(conn, self.queue, ctx.job)

    def _hand_back(self, ctx: JobContext, hb: HandBack) -> None:
        """Give the job back without consuming the attempt (the next claim re-bumps it)."""
        with contextlib.suppress(Superseded), ctx.write() as conn:
            hand_back(conn, ctx.job_id, hb.reason, hb.delay_seconds)

    # -- leases -------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        interval = max(0.05, self.lease_seconds / 3)
        if self.repair_interval is not None:
            interval = min(interval, max(0.05, self.repair_interval))
        next_repair = time.monotonic() + (self.repair_interval or 0.0)
        while not self._stop.wait(interval):
            try:
                self.heartbeat()
            except Exception as exc:  # a busy or absent store must not kill the heartbeat (logged once)
                self._wait_out(self.store, exc)
                continue
            self.store.restored()
            if self.store.outages > self._outages_swept:  # a claim whose answer the outage lost runs nowhere
                self._outages_swept = self.store.outages
                with self._busy_lock:
                    running = set(self._running)
                release_held(self.queue, self.session.id, keep=running)
            if self.repair_interval is not None and time.monotonic() >= next_repair:
                self.periodic_repair()
                next_repair = time.monotonic() + self.repair_interval

    def periodic_repair(self) -> None:
        """Recovery while running: a crashed process's jobs and stranded rows, without a restart."""
        try:
            report = recover(self.queue)
        except Exception:  # logged; the next period tries again
            log.warning("periodic repair failed", exc_info=True)
            return
        self.repairs += 1
        if report.redelivered:
            self._wake.set()

    def heartbeat(self) -> None:
        now = time.time()
        with self.queue.db.write() as conn:
            self.session.beat(conn, now)
            if self.renew_leases:
                renew_leases(conn, self.session.id, now + self.lease_seconds)
        self.redeliver_stale_claims()

    def redeliver_stale_claims(self) -> list[int]:
        """Hand ``retry`` jobs whose lease ran out back to the queue; the next claim fences the old attempt."""
        ids = redeliver_stale(self.queue)
        if ids:
            log.info("re-delivered stale claims %s", ids)
            self._wake.set()
        return ids


def live_owner_ids(db: DatabaseLike) -> set[str]:
    with db.read() as conn:
        return live_session_ids(conn)


__all__ = ["JobContext", "Worker", "live_owner_ids", "sanitize_error"]
