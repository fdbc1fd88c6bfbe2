"""A server may restart at any moment: a worker waits an outage out, and never ends normally on a lost link.

On SQLite the servers are stand-ins: a wake-up transport whose reads fail as Redis's do when it is down, and
a store whose transactions fail as PostgreSQL's do when it restarts (a psycopg ``OperationalError``). The
real servers are stopped and restarted in tests/engines/test_outages.py.

* The queue away: the executor backs off the queue (one warning per outage), keeps scanning the ``jobs``
  table, and jobs still complete; the queue back, wake-ups are read again.
* The store away mid-job: the outcome is recorded once it is back (the attempt is not lost, not repeated).
* A claim that committed but whose answer the outage lost is handed back once the store returns (not left
  running under this worker's renewed lease).
* A handler whose connection died hands its job back (it runs again), never fails it.
* The store away past the budget: ``run()`` raises ``OutageTooLong`` (``quire worker`` exits 75), never
  returns as after a clean stop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import redis
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from jobs.outage import EXIT_TEMPFAIL, Link, OutageTooLong, backoff_delay, is_link_error
from jobs.queue import JobQueue
from jobs.registry import JobType
from jobs.runtime import JobContext, Worker
from knowledge.runtime import Quire
from tests.conftest import wait_until


def lost_connection() -> sa_exc.OperationalError:
    """What SQLAlchemy raises when PostgreSQL went away under a connection."""
    return sa_exc.OperationalError(
        "SELECT 1", {}, psycopg.OperationalError("server closed the connection unexpectedly")
    )


class SwitchedStore:
    """The store behind a switch: while down, every transaction fails as a lost PostgreSQL connection does;
    ``up_after`` failed calls bring it back."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.down = False
        self.up_after: int | None = None
        self.failures = 0
        self.lose_a_claims_answer = False

    def _check(self) -> None:
        if not self.down:
            return
        self.failures += 1
        if self.up_after is not None and self.failures >= self.up_after:
            self.down = False
        raise lost_connection()

    @contextlib.contextmanager
    def write(self, *, store_lock: bool = True) -> Iterator[Any]:
        self._check()
        with self.db.write(store_lock=store_lock) as conn:
            yield conn
        if not store_lock and self.lose_a_claims_answer:  # a claim (jobs.queue.claim_job) committed, but
            self.lose_a_claims_answer = False  # the server went away before its answer reached the worker
            raise lost_connection()

    @contextlib.contextmanager
    def read(self) -> Iterator[Any]:
        self._check()
        with self.db.read() as conn:
            yield conn


class DeadQueue:
    """A wake-up transport whose queue is away (reads raise Redis's ConnectionError) until ``healthy``."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.healthy = False
        self.reads = 0

    def wake(self, conn: Any, job_id: int) -> None:
        self.transport.wake(conn, job_id)

    def wake_now(self, job_id: int) -> None:
        self.transport.wake_now(job_id)

    def next_job_id(self) -> int | None:
        self.reads += 1
        if not self.healthy:
            raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        return self.transport.next_job_id()  # type: ignore[no-any-return]

    def pending_messages(self) -> int:
        return 0

    def close(self) -> None:
        return None


def count_handler(ctx: JobContext) -> dict[str, int]:
    with ctx.write() as conn:
        conn.execute(
            text("INSERT INTO outage_writes (job_id, attempt) VALUES (:j, :a)"), {"j": ctx.job_id, "a": ctx.attempt}
        )
    return {"n": int(ctx.payload["n"])}


def prepared(quire: Quire, store: Any | None = None) -> JobQueue:
    with quire.db.write() as conn:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS outage_writes (job_id INT, attempt INT)")
    quire.registry.register(JobType("test.count", count_handler, "abandon"))
    if store is None:
        return quire.queue
    return JobQueue(store, quire.transport, quire.registry, quire.queue.session)


def enqueue(quire: Quire, count: int, start: int = 0, job_type: str = "test.count") -> list[int]:
    with quire.db.write() as conn:
        return [int(quire.queue.enqueue(conn, job_type, {"n": n}).job_id) for n in range(start, start + count)]


def rows(quire: Quire, sql: str) -> list[Any]:
    with quire.db.read() as conn:
        return list(conn.execute(text(sql)).all())


def warnings_saying(caplog: pytest.LogCaptureFixture, words: str) -> int:
    return sum(1 for r in caplog.records if r.levelno >= logging.WARNING and words in r.getMessage())


def test_with_the_queue_away_the_worker_polls_the_table_and_logs_the_outage_once(
    quire: Quire, caplog: pytest.LogCaptureFixture
) -> None:
    queue = prepared(quire)
    dead = DeadQueue(quire.transport)
    queue.transport = dead
    worker = Worker(queue, poll_interval=0.01, repair_interval=None, outage_seconds=600)
    caplog.set_level(logging.WARNING)
    worker.start()
    try:
        first = enqueue(quire, 3)
        wait_until(lambda: len(rows(quire, "SELECT * FROM jobs WHERE status = 'completed'")) == 3, timeout=30,
                   what="the first jobs to complete with the queue away")  # fmt: skip
        wait_until(lambda: dead.reads >= 4, timeout=30, what="the executor to try the queue again after backoffs")
        assert warnings_saying(caplog, "lost the queue (") == 1  # once per outage, not per retry
        dead.healthy = True
        wait_until(lambda: not worker.wakes.down, timeout=30, what="the executor to read the queue again")
        later = enqueue(quire, 2, start=3)
        wait_until(lambda: len(rows(quire, "SELECT * FROM jobs WHERE status = 'completed'")) == 5, timeout=30,
                   what="the later jobs to complete")  # fmt: skip
    finally:
        worker.stop()
    assert warnings_saying(caplog, "the queue is back") == 1
    writes = rows(quire, "SELECT job_id, attempt FROM outage_writes ORDER BY job_id")
    assert [(r.job_id, r.attempt) for r in writes] == [(j, 1) for j in first + later]  # each once


def test_an_outcome_waits_for_the_store_to_come_back(quire: Quire, caplog: pytest.LogCaptureFixture) -> None:
    store = SwitchedStore(quire.db)
    queue = prepared(quire, store)

    def vanishing(ctx: JobContext) -> dict[str, int]:
        answer = count_handler(ctx)
        store.down, store.up_after = True, 4  # the store restarts before the outcome is written
        return answer

    quire.registry.register(JobType("test.vanishing", vanishing, "abandon"))
    (job,) = enqueue(quire, 1, job_type="test.vanishing")
    after = enqueue(quire, 2, start=1)
    caplog.set_level(logging.WARNING)
    worker = Worker(queue, poll_interval=0.01, repair_interval=None, outage_seconds=600)
    assert worker.run(until_idle=True, timeout=60) == 3
    assert [(r.id, r.status, r.attempt) for r in rows(quire, "SELECT id, status, attempt FROM jobs ORDER BY id")] == [
        (j, "completed", 1) for j in [job, *after]
    ]
    assert store.failures == 4 and worker.store.outages == 1
    assert warnings_saying(caplog, "lost the store") == 1 and warnings_saying(caplog, "the store is back") == 1


def test_a_claim_whose_answer_the_outage_lost_is_handed_back_once_the_store_returns(quire: Quire) -> None:
    store = SwitchedStore(quire.db)
    queue = prepared(quire, store)
    store.lose_a_claims_answer = True
    (job,) = enqueue(quire, 1)
    worker = Worker(queue, poll_interval=0.01, repair_interval=None, lease_seconds=0.3, outage_seconds=600)
    worker.start()
    try:
        wait_until(lambda: rows(quire, f"SELECT id FROM jobs WHERE id = {job} AND status = 'completed'"), timeout=30,
                   what="the job no executor ran to be handed back and completed")  # fmt: skip
    finally:
        worker.stop()
    (row,) = rows(quire, f"SELECT attempt FROM jobs WHERE id = {job}")
    assert row.attempt == 2 and worker.store.outages == 1  # the lost claim is fenced out
    assert [tuple(r) for r in rows(quire, "SELECT job_id, attempt FROM outage_writes")] == [(job, 2)]


def test_a_job_whose_connection_died_is_handed_back_and_runs_again(quire: Quire) -> None:
    queue = prepared(quire)

    def cut_off(ctx: JobContext) -> dict[str, int]:
        if ctx.attempt == 1:
            raise lost_connection()  # the handler's own statement met a restarting server
        return count_handler(ctx)

    quire.registry.register(JobType("test.cut-off", cut_off, "abandon"))
    (job,) = enqueue(quire, 1, job_type="test.cut-off")
    assert Worker(queue, poll_interval=0.01, repair_interval=None).run(until_idle=True, timeout=60) == 1
    (row,) = rows(quire, f"SELECT status, attempt FROM jobs WHERE id = {job}")
    assert (row.status, row.attempt) == ("completed", 2)  # not failed: the lost link was not the job's fault
    assert [tuple(r) for r in rows(quire, "SELECT job_id, attempt FROM outage_writes")] == [(job, 2)]


def test_a_store_away_past_the_budget_ends_the_worker_with_an_error(quire: Quire) -> None:
    store = SwitchedStore(quire.db)
    queue = prepared(quire, store)

    def vanishing(ctx: JobContext) -> None:
        store.down = True  # and it never comes back

    quire.registry.register(JobType("test.vanishing", vanishing, "abandon"))
    enqueue(quire, 1, job_type="test.vanishing")
    worker = Worker(queue, poll_interval=0.01, repair_interval=None, outage_seconds=0.5)
    with pytest.raises(OutageTooLong, match="store stayed unreachable"):
        worker.run(timeout=60)  # never a normal return: `quire worker` turns this into exit 75
    assert EXIT_TEMPFAIL == 75
    store.down = False
    (row,) = rows(quire, "SELECT status, lease_owner FROM jobs")
    assert row.status == "running"  # left to recovery, by its lease or the next start


def test_backoff_doubles_to_its_cap_with_jitter_and_link_errors_are_told_apart() -> None:
    import random

    rng = random.Random(3)
    assert 0.1 <= backoff_delay(0, rng) <= 0.2 and 0.2 <= backoff_delay(1, rng) <= 0.4
    assert all(5.0 <= backoff_delay(n, rng) <= 10.0 for n in range(6, 80))
    assert len({backoff_delay(4, rng) for _ in range(20)}) > 10  # spread, not in lockstep
    assert is_link_error(lost_connection())
    assert is_link_error(redis.exceptions.ConnectionError("refused"))
    assert not is_link_error(sa_exc.OperationalError("x", {}, Exception("database is locked")))
    assert not is_link_error(RuntimeError("a handler fault"))
    now = [0.0]
    link = Link("store", budget=5.0, clock=lambda: now[0])
    link.failed(RuntimeError("x"))
    now[0] = 4.0
    assert link.down and not link.over_budget()
    now[0] = 6.0
    assert link.over_budget()
    link.restored()
    assert not link.down and link.ready()
