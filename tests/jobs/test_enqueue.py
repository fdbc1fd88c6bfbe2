"""Enqueue in the caller's transaction: the job row and huey's message commit or vanish together."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from jobs.errors import EnqueueError
from knowledge.runtime import Quire
from tests.support import jobtypes


@pytest.fixture
def q(quire: Quire) -> Quire:
    jobtypes.register(quire)
    with quire.db.write() as conn:
        conn.exec_driver_sql("CREATE TABLE marks (id INTEGER PRIMARY KEY, status TEXT)")
        conn.exec_driver_sql("INSERT INTO marks (id, status) VALUES (1, 'idle')")
    return quire


def counts(q: Quire) -> tuple[int, int, str]:
    with q.db.read() as conn:
        jobs = conn.execute(text("SELECT count(*) FROM jobs")).scalar_one()
        tasks = conn.execute(text("SELECT count(*) FROM task")).scalar_one()
        status = conn.execute(text("SELECT status FROM marks WHERE id = 1")).scalar_one()
    return jobs, tasks, status


def test_status_write_and_enqueue_commit_together(q: Quire) -> None:
    with q.db.write() as conn:
        conn.execute(text("UPDATE marks SET status = 'deleting' WHERE id = 1"))
        q.queue.enqueue(conn, "test.steps", {"steps": 1})
    assert counts(q) == (1, 1, "deleting")
    assert q.transport.next_job_id() == 1


def test_exception_before_commit_leaves_neither(q: Quire) -> None:
    with pytest.raises(RuntimeError), q.db.write() as conn:
        conn.execute(text("UPDATE marks SET status = 'deleting' WHERE id = 1"))
        q.queue.enqueue(conn, "test.steps", {"steps": 1})
        raise RuntimeError("crash before commit")
    assert counts(q) == (0, 0, "idle")


def test_live_idempotency_key_returns_the_existing_job(q: Quire) -> None:
    with q.db.write() as conn:
        first = q.queue.enqueue(conn, "test.steps", {"steps": 1}, key="k")
        second = q.queue.enqueue(conn, "test.steps", {"steps": 1}, key="k")
    assert first.created and not second.created
    assert second.job_id == first.job_id
    assert counts(q)[:2] == (1, 1)


def test_finished_key_can_be_used_again(q: Quire) -> None:
    with q.db.write() as conn:
        first = q.queue.enqueue(conn, "test.steps", {"steps": 1}, key="k")
    worker = q.make_worker(poll_interval=0.01)
    worker.run(until_idle=True, timeout=30)
    assert q.queue.get(first.job_id).status == "completed"
    with q.db.write() as conn:
        again = q.queue.enqueue(conn, "test.steps", {"steps": 1}, key="k")
    assert again.created and again.job_id != first.job_id


def test_unknown_job_type_is_refused_before_writing(q: Quire) -> None:
    from jobs.errors import UnknownJobType

    with pytest.raises(UnknownJobType), q.db.write() as conn:
        q.queue.enqueue(conn, "no.such.type", {})
    assert counts(q)[:2] == (0, 0)


def test_enqueue_failure_surfaces_as_enqueue_error(q: Quire) -> None:
    with q.db.write() as conn:
        conn.exec_driver_sql("CREATE TRIGGER refuse BEFORE INSERT ON task BEGIN SELECT RAISE(ABORT, 'queue full'); END")
    with pytest.raises(EnqueueError, match="queue full"), q.db.write() as conn:
        q.queue.enqueue(conn, "test.steps", {"steps": 1})
    assert counts(q)[:2] == (0, 0)


def test_worker_runs_a_job_and_records_progress(q: Quire) -> None:
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.steps", {"steps": 3})
    q.make_worker(poll_interval=0.01).run(until_idle=True, timeout=30)
    record = q.queue.get(job.job_id)
    assert (record.status, record.attempt, record.progress_done, record.progress_total) == ("completed", 1, 3, 3)
    assert record.result == {"steps": 3}


def test_a_lost_wakeup_does_not_strand_the_job(q: Quire) -> None:
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.steps", {"steps": 1})
        conn.execute(text("DELETE FROM task"))  # as if a dead worker had dequeued it
    q.make_worker(poll_interval=0.01).run(until_idle=True, timeout=30)
    assert q.queue.get(job.job_id).status == "completed"


def test_cancel_pending_job(q: Quire) -> None:
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.steps", {"steps": 1})
    with q.db.write() as conn:
        assert q.queue.cancel(conn, [job.job_id]) == [job.job_id]
    q.make_worker(poll_interval=0.01).run(until_idle=True, timeout=30)
    record = q.queue.get(job.job_id)
    assert record.status == "cancelled" and record.attempt == 0


def test_a_session_registered_in_a_rolled_back_transaction_is_registered_again(q: Quire) -> None:
    """The first enqueue of a process registers its session in the caller's transaction; when that transaction
    rolls back, the session row goes with it, and the next enqueue and the worker's claims must make it again
    (remembering "registered" made every claim fail on the key, retried for minutes as if the store were down)."""
    with q.db.read() as conn:
        assert conn.execute(text("SELECT count(*) FROM worker_sessions")).scalar_one() == 0
    with pytest.raises(RuntimeError), q.db.write() as conn:
        q.queue.enqueue(conn, "test.steps", {"steps": 1})
        raise RuntimeError("the caller's transaction fails after its enqueue")
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.steps", {"steps": 1}).job_id
    assert q.make_worker(poll_interval=0.01).run(until_idle=True, timeout=60) == 1
    assert q.queue.get(job).status == "completed"
