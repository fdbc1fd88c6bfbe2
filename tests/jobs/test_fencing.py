"""Two attempts of one job at once: only the owner's writes land; the stale attempt stands down."""

from __future__ import annotations

import threading
import time

from sqlalchemy import text

from jobs.errors import Superseded
from jobs.registry import JobType
from jobs.runtime import JobContext, Worker
from knowledge.compose import open_quire
from knowledge.runtime import Quire
from tests.conftest import wait_until
from tests.support import jobtypes


def test_stale_attempt_stands_down(quire: Quire) -> None:
    jobtypes.register(quire)
    first_started = threading.Event()
    second_done = threading.Event()
    outcomes: dict[int, str] = {}

    def handler(ctx: JobContext) -> None:
        try:
            for step in range(3):
                if ctx.attempt == 1 and step == 1:
                    first_started.set()
                    assert second_done.wait(30)  # the first attempt is slow: its lease runs out meanwhile
                with ctx.write() as conn:
                    conn.execute(
                        text("INSERT INTO test_writes (job_id, attempt, step) VALUES (:j, :a, :s)"),
                        {"j": ctx.job_id, "a": ctx.attempt, "s": step},
                    )
            outcomes[ctx.attempt] = "finished"
        except Superseded:
            outcomes[ctx.attempt] = "stood down"
            raise

    quire.registry.register(JobType("test.slow", handler, "retry"))
    with quire.db.write() as conn:
        job = quire.queue.enqueue(conn, "test.slow", {}).job_id

    slow = Worker(quire.queue, lease_seconds=0.3, poll_interval=0.01, renew_leases=False)
    slow_thread = threading.Thread(target=slow.run, kwargs={"until_idle": True, "timeout": 60})
    slow_thread.start()
    assert first_started.wait(30)
    wait_until(lambda: (quire.queue.get(job).lease_expires_at or 0) < time.time())

    other_session_queue = open_quire(quire.data_dir)  # another worker, another session
    other_session_queue.registry.register(JobType("test.slow", handler, "retry"))
    fresh = Worker(other_session_queue.queue, lease_seconds=30, poll_interval=0.01)
    # whichever worker's heartbeat sees the expired lease first hands the job back to the queue
    wait_until(lambda: fresh.redeliver_stale_claims() or quire.queue.get(job).status == "pending")
    fresh.run(until_idle=True, timeout=60)
    second_done.set()
    slow_thread.join(60)
    other_session_queue.close()

    assert outcomes == {1: "stood down", 2: "finished"}
    record = quire.queue.get(job)
    assert (record.status, record.attempt) == ("completed", 2)
    with quire.db.read() as conn:
        rows = conn.execute(
            text("SELECT attempt, step FROM test_writes WHERE job_id = :j ORDER BY id"), {"j": job}
        ).all()
    assert [tuple(r) for r in rows] == [(1, 0), (2, 0), (2, 1), (2, 2)]
    assert slow.completed == 0 and fresh.completed == 1


def test_cancelled_running_job_is_fenced(quire: Quire) -> None:
    jobtypes.register(quire)
    started = threading.Event()
    proceed = threading.Event()
    seen: list[str] = []

    def handler(ctx: JobContext) -> None:
        started.set()
        assert proceed.wait(30)
        try:
            ctx.check_cancelled()
        except Exception as exc:
            seen.append(type(exc).__name__)
            raise

    quire.registry.register(JobType("test.cancel", handler, "abandon"))
    with quire.db.write() as conn:
        job = quire.queue.enqueue(conn, "test.cancel", {}).job_id
    worker = Worker(quire.queue, poll_interval=0.01)
    t = threading.Thread(target=worker.run, kwargs={"until_idle": True, "timeout": 60})
    t.start()
    assert started.wait(30)
    with quire.db.write() as conn:
        quire.queue.cancel(conn, [job])
    proceed.set()
    t.join(60)
    assert seen == ["Cancelled"]
    assert quire.queue.get(job).status == "cancelled"
