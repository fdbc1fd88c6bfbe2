"""Real worker processes killed with SIGKILL, then restarted: retry re-runs fenced, abandon is parked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.runtime import Quire
from tests.conftest import python_proc, wait_until
from tests.support import jobtypes


@pytest.fixture
def q(quire: Quire) -> Quire:
    jobtypes.register(quire)
    return quire


def writes(q: Quire, job_id: int) -> list[tuple[int, int, int]]:
    with q.db.read() as conn:
        rows = conn.execute(
            text("SELECT id, attempt, step FROM test_writes WHERE job_id = :j ORDER BY id"), {"j": job_id}
        ).all()
    return [tuple(r) for r in rows]


def hooks(q: Quire, job_id: int) -> int:
    with q.db.read() as conn:
        return int(conn.execute(text("SELECT count(*) FROM test_hooks WHERE job_id = :j"), {"j": job_id}).scalar_one())


def start_worker(data_dir: Path, *flags: str) -> subprocess.Popen[str]:
    return python_proc("-m", "tests.support.worker_proc", str(data_dir), *flags)


def kill_after_steps(q: Quire, data_dir: Path, job_id: int, steps: int) -> None:
    proc = start_worker(data_dir)
    try:
        wait_until(lambda: len(writes(q, job_id)) >= steps, timeout=60)
        assert q.queue.get(job_id).status == "running"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def finish(data_dir: Path) -> dict[str, object]:
    proc = start_worker(data_dir, "--until-idle")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.splitlines()[0])


def test_sigkill_mid_retry_job_runs_again_and_completes_once(q: Quire, data_dir: Path, tmp_path: Path) -> None:
    payload = {"steps": 6, "block_attempt": 1, "block_after": 3, "gate": str(tmp_path / "never")}
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.steps", payload).job_id
    kill_after_steps(q, data_dir, job, 3)

    report = finish(data_dir)

    assert report["recovery"]["redelivered"] == 1
    record = q.queue.get(job)
    assert (record.status, record.attempt) == ("completed", 2)
    rows = writes(q, job)
    first_of_new = min(r[0] for r in rows if r[1] == 2)
    assert [r for r in rows if r[1] == 1 and r[0] > first_of_new] == []  # nothing from the dead attempt after
    assert [r[2] for r in rows if r[1] == 2] == list(range(6))
    assert [r[2] for r in rows if r[1] == 1] == [0, 1, 2]


def test_crash_redelivery_of_a_retry_job_honours_max_attempts(q: Quire, data_dir: Path, tmp_path: Path) -> None:
    """A retry job whose worker dies on every attempt is failed at its max_attempts, not redelivered."""
    payload = {"steps": 3, "block_attempts": [1, 2], "block_after": 1, "gate": str(tmp_path / "never")}
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.fragile", payload).job_id
    kill_after_steps(q, data_dir, job, 1)  # attempt 1 dies
    proc = start_worker(data_dir)  # recovery hands it back; attempt 2 blocks too
    try:
        wait_until(lambda: any(r[1] == 2 for r in writes(q, job)), timeout=60)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    report = finish(data_dir)

    assert report["recovery"]["exhausted"] == 1 and report["recovery"]["redelivered"] == 0
    record = q.queue.get(job)
    assert (record.status, record.attempt) == ("failed", 2)
    assert (record.last_error or "").startswith("attempts_exhausted")
    assert not any(r[1] == 3 for r in writes(q, job))


def test_sigkill_mid_abandon_job_is_cancelled_and_hook_runs_once(q: Quire, data_dir: Path, tmp_path: Path) -> None:
    payload = {"steps": 6, "block_attempt": 1, "block_after": 2, "gate": str(tmp_path / "never")}
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.abandonable", payload).job_id
    kill_after_steps(q, data_dir, job, 2)

    report = finish(data_dir)
    finish(data_dir)  # a second start must not run the hook again

    assert report["cancelled"] == [job]
    record = q.queue.get(job)
    assert (record.status, record.attempt) == ("cancelled", 1)
    assert hooks(q, job) == 1
    assert [r[1] for r in writes(q, job)] == [1, 1]  # nothing re-ran


def test_recovery_leaves_a_live_workers_job_alone(q: Quire, data_dir: Path, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    payload = {"steps": 3, "block_attempt": 1, "block_after": 1, "gate": str(gate)}
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.abandonable", payload).job_id
        # the live worker's lease has even run out: liveness, not the lease clock, decides
    holder = start_worker(data_dir)
    try:
        wait_until(lambda: len(writes(q, job)) >= 1, timeout=60)
        with q.db.write() as conn:
            conn.execute(text("UPDATE jobs SET lease_expires_at = 0 WHERE id = :j"), {"j": job})

        other = start_worker(data_dir, "--recover-only")
        out, err = other.communicate(timeout=60)
        assert other.returncode == 0, err
        assert json.loads(out.splitlines()[0])["cancelled"] == []

        record = q.queue.get(job)
        assert (record.status, record.attempt) == ("running", 1)
        assert hooks(q, job) == 0
        gate.touch()
        wait_until(lambda: q.queue.get(job).status == "completed", timeout=60)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert [r[2] for r in writes(q, job)] == [0, 1, 2]


def test_pending_jobs_from_a_cli_enqueue_wait_for_a_worker(q: Quire, data_dir: Path) -> None:
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.abandonable", {"steps": 1}).job_id
    q.close()  # the enqueuing (non-worker) process goes away cleanly
    report = finish(data_dir)
    assert report["recovery"]["cancelled"] == 0
    assert q.queue.get(job).status == "completed"
