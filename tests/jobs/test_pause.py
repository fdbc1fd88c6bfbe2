"""Pause / resume with real worker processes: a pause lets the running job finish, claims nothing new,
survives a worker restart, and ``quire jobs resume`` lets the waiting jobs run."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from knowledge.runtime import Quire
from tests.conftest import python_proc, quire_cli, wait_until
from tests.support import jobtypes


@pytest.fixture
def q(quire: Quire) -> Quire:
    jobtypes.register(quire)
    return quire


class Worker:
    """A real worker process whose stderr (its log) is collected line by line."""

    def __init__(self, data_dir: Path) -> None:
        self.proc: subprocess.Popen[str] = python_proc("-m", "tests.support.worker_proc", str(data_dir))
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def said(self, text: str) -> bool:
        return any(text in line for line in self.log)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=30)


def statuses(q: Quire, job_ids: list[int]) -> list[str]:
    return [q.queue.get(j).status for j in job_ids]


def test_pause_lets_the_running_job_finish_claims_nothing_new_and_survives_a_restart(
    q: Quire, data_dir: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    with q.db.write() as conn:
        running = q.queue.enqueue(
            conn, "test.steps", {"steps": 3, "block_attempt": 1, "block_after": 1, "gate": str(gate)}
        ).job_id
        waiting = [q.queue.enqueue(conn, "test.steps", {"steps": 1}).job_id for _ in range(3)]
    worker = Worker(data_dir)
    try:
        wait_until(lambda: q.queue.get(running).status == "running", timeout=60)
        paused = quire_cli("jobs", "pause", data_dir=data_dir, timeout=60)
        assert paused.returncode == 0, paused.stderr
        assert "paused" in paused.stdout

        gate.touch()  # the current job goes on to the end
        wait_until(lambda: q.queue.get(running).status == "completed", timeout=60)
        wait_until(lambda: worker.said("indexing paused"), timeout=30)  # the claim loop has seen the pause
        assert statuses(q, waiting) == ["pending"] * 3
    finally:
        worker.stop()

    restarted = Worker(data_dir)  # a restart keeps the pause: the flag is in the database
    try:
        wait_until(lambda: restarted.said("indexing paused"), timeout=60)
        assert statuses(q, waiting) == ["pending"] * 3
        listed = quire_cli("jobs", "--status", "pending", data_dir=data_dir, timeout=60)
        assert listed.returncode == 0 and listed.stdout.count("test.steps") == 3

        resumed = quire_cli("jobs", "resume", data_dir=data_dir, timeout=60)
        assert resumed.returncode == 0, resumed.stderr
        wait_until(lambda: statuses(q, waiting) == ["completed"] * 3, timeout=60)
        assert restarted.said("indexing resumed")
    finally:
        restarted.stop()


def test_a_paused_worker_until_idle_exits_without_claiming(q: Quire, data_dir: Path) -> None:
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.steps", {"steps": 1}).job_id
    assert quire_cli("jobs", "pause", data_dir=data_dir, timeout=60).returncode == 0
    proc = python_proc("-m", "tests.support.worker_proc", str(data_dir), "--until-idle")
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "indexing paused" in err
    assert q.queue.get(job).status == "pending"
