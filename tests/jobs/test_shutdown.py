"""Shutdown stops taking jobs and waits briefly; a job still running is handed back (``pending``, its attempt
kept, its type's release hook run), never cancelled and never counted as interrupted work."""

from __future__ import annotations

import os
import signal
import threading
import time

from sqlalchemy import text

from jobs.errors import Superseded
from jobs.registry import JobType
from jobs.runtime import JobContext, Worker
from knowledge.compose import open_quire
from knowledge.runtime import Quire
from tests.conftest import python_proc, wait_until
from tests.support import jobtypes


def test_stop_hands_the_running_job_back(quire: Quire) -> None:
    jobtypes.register(quire)
    started, gate = threading.Event(), threading.Event()
    fenced: list[BaseException | None] = []  # what the handler's write after the gate came to

    def handler(ctx: JobContext) -> None:
        started.set()
        gate.wait(60)
        try:
            with ctx.write() as conn:
                conn.execute(
                    text("INSERT INTO test_writes (job_id, attempt, step) VALUES (:j, :a, 0)"),
                    {"j": ctx.job_id, "a": ctx.attempt},
                )
        except BaseException as exc:
            fenced.append(exc)
            raise
        fenced.append(None)

    released: list[int] = []
    quire.registry.register(
        JobType(
            "test.long",
            handler,
            "abandon",
            on_abandon=jobtypes.abandon_hook,
            on_release=lambda conn, record: released.append(record.id),
        )
    )
    with quire.db.write() as conn:
        job = quire.queue.enqueue(conn, "test.long", {}).job_id
        later = quire.queue.enqueue(conn, "test.long", {}).job_id
    worker = Worker(quire.queue, poll_interval=0.01)
    runner = threading.Thread(target=worker.run, kwargs={"shutdown_wait": 0.2})
    runner.start()
    assert started.wait(30)
    t0 = time.monotonic()
    worker.stop(wait_seconds=0.2)
    runner.join(10)
    assert not runner.is_alive() and time.monotonic() - t0 < 5
    handed_back = quire.queue.get(job)
    assert (handed_back.status, handed_back.attempt, handed_back.lease_owner) == ("pending", 1, None)
    assert released == [job]  # its type's release hook ran, in the same transaction
    assert quire.queue.get(later).status == "pending"  # and nothing new was taken

    report = open_quire(quire.data_dir).recover()  # the next start: nothing was interrupted
    assert job not in report.cancelled and quire.queue.get(job).status == "pending"
    gate.set()  # the orphaned handler wakes up: its fenced write stands down
    wait_until(lambda: fenced, timeout=30)
    assert isinstance(fenced[0], Superseded), fenced  # refused by the fence, not committed
    with quire.db.read() as conn:
        assert conn.execute(text("SELECT count(*) FROM test_writes")).scalar_one() == 0
    done = Worker(quire.queue, poll_interval=0.01).run(until_idle=True, timeout=60)  # the next claim: attempt 2
    assert done == 2 and quire.queue.get(job).status == "completed" and quire.queue.get(job).attempt == 2


def test_quire_worker_exits_on_sigterm(tmp_path: object) -> None:
    from pathlib import Path

    data_dir = Path(str(tmp_path)) / "data"
    proc = python_proc("-m", "app.cli", "--data-dir", str(data_dir), "worker")
    quire = open_quire(data_dir)
    try:
        wait_until(lambda: None in _worker_sessions(quire), timeout=60)  # its session is live
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        quire.close()
    assert all(ended is not None for ended in _worker_sessions(quire))


def _worker_sessions(quire: Quire) -> list[float | None]:
    from sqlalchemy import select

    from jobs.schema import worker_sessions

    with quire.db.read() as conn:
        rows = conn.execute(select(worker_sessions.c.ended_at).where(worker_sessions.c.hosts_worker == 1)).all()
    return [r[0] for r in rows]
