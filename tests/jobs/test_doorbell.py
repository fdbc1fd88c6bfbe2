"""The doorbell: a committed job wakes an idle worker at once, from this process or another.

The workers here poll every 120 s, so a job finished within the 30 s deadline was woken by the bell.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import psutil
import pytest
from sqlalchemy import text

from jobs.doorbell import Doorbell, bell_address
from jobs.registry import JobType
from jobs.runtime import JobContext, Worker
from knowledge.library.bases import list_bases
from knowledge.runtime import Quire
from tests.conftest import quire_cli, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bell is a Linux abstract socket")

SLOW_POLL = 120.0


def test_a_ring_reaches_the_listener_and_nobody_else(tmp_path: Path) -> None:
    bell = Doorbell.for_directory(tmp_path / "a")
    assert not bell.ring()  # nobody listens yet: a failed send, no error
    listener = bell.listen()
    assert listener is not None
    try:
        assert Doorbell.for_directory(tmp_path / "a").listen() is None  # one holder per data directory
        assert not listener.wait(0.05)  # not rung
        assert Doorbell.for_directory(tmp_path / "b").ring() is False  # another directory's bell
        assert not listener.wait(0.05)
        for _ in range(5):
            assert bell.ring()
        assert listener.wait(5)  # a burst of rings is one wake
        assert not listener.wait(0.05)
    finally:
        listener.close()
    assert bell_address(tmp_path / "a") == bell_address(tmp_path / "x" / ".." / "a")  # the real path names it


def _count_runs(quire: Quire) -> list[int]:
    ran: list[int] = []

    def handler(ctx: JobContext) -> None:
        ran.append(ctx.job_id)

    quire.registry.register(JobType("test.note", handler, "retry"))
    return ran


def _running_worker(quire: Quire) -> tuple[Worker, threading.Thread]:
    worker = quire.make_worker(poll_interval=SLOW_POLL)
    runner = threading.Thread(target=worker.run, kwargs={"shutdown_wait": 1.0})
    runner.start()
    # the executor has looked once, found nothing and now sleeps for SLOW_POLL unless rung
    wait_until(lambda: worker.idle_looks >= 1, timeout=30)
    return worker, runner


def test_a_job_committed_in_this_process_wakes_the_idle_worker(quire: Quire) -> None:
    ran = _count_runs(quire)
    worker, runner = _running_worker(quire)
    try:
        with quire.db.write() as conn:
            first = quire.queue.enqueue(conn, "test.note", {}).job_id
            second = quire.queue.enqueue(conn, "test.note", {}).job_id
        wait_until(lambda: len(ran) == 2, timeout=30)
        assert ran == [first, second]
    finally:
        worker.stop(wait_seconds=1.0)
        runner.join(10)


def test_a_rolled_back_job_rings_nothing(quire: Quire) -> None:
    listener = Doorbell(quire.doorbell.address).listen()
    assert listener is not None
    try:
        with pytest.raises(RuntimeError), quire.db.write() as conn:
            quire.queue.enqueue(conn, "knowledge.delete-subtree", {"item_ids": []})
            raise RuntimeError("the caller changed its mind")
        assert not listener.wait(0.2)
        with quire.db.write() as conn:
            quire.queue.enqueue(conn, "knowledge.delete-subtree", {"item_ids": []})
        assert listener.wait(5)
    finally:
        listener.close()


def test_a_job_committed_by_another_process_wakes_the_idle_worker(quire: Quire, tmp_path: Path) -> None:
    worker, runner = _running_worker(quire)
    try:
        note = tmp_path / "note.txt"
        note.write_text("a doorbell rings across processes\n", encoding="utf-8")
        quire_cli("base", "create", "notes", data_dir=quire.data_dir).check_returncode()
        added = quire_cli("add", "notes", str(note), data_dir=quire.data_dir)
        assert added.returncode == 0, added.stderr

        def indexed() -> bool:
            with quire.db.read() as conn:
                status = conn.execute(text("SELECT status FROM items WHERE name = 'note.txt'")).scalar_one()
            return bool(status == "completed")

        wait_until(indexed, timeout=60)  # well before the executor's next poll
    finally:
        worker.stop(wait_seconds=1.0)
        runner.join(10)


def parse_processes() -> list[int]:
    """This process's spawned children (the parse processes), as the operating system lists them."""
    children = psutil.Process().children()
    return [c.pid for c in children if "spawn_main" in " ".join(c.cmdline())]


def test_a_warm_worker_has_its_model_and_parse_process_before_the_first_job(quire: Quire) -> None:
    quire_cli("base", "create", "notes", "--precision", "fp32", data_dir=quire.data_dir).check_returncode()
    worker = quire.make_worker(poll_interval=SLOW_POLL, warm=True)
    runner = threading.Thread(target=worker.run, kwargs={"shutdown_wait": 1.0})
    runner.start()
    try:
        encoder = quire.document_encoder(list_bases(quire.db)[0])
        wait_until(lambda: encoder.model is not None and parse_processes(), timeout=120)
        assert worker.completed == 0  # no job asked for either
    finally:
        worker.stop(wait_seconds=1.0)
        runner.join(10)


def test_a_cold_worker_loads_nothing_until_a_job_needs_it(quire: Quire) -> None:
    quire_cli("base", "create", "notes", "--precision", "fp32", data_dir=quire.data_dir).check_returncode()
    worker = quire.make_worker(poll_interval=SLOW_POLL)
    runner = threading.Thread(target=worker.run, kwargs={"shutdown_wait": 1.0})
    runner.start()
    try:
        wait_until(lambda: worker.idle_looks >= 1, timeout=30)
        assert parse_processes() == []
        assert quire.document_encoder(list_bases(quire.db)[0]).model is None
    finally:
        worker.stop(wait_seconds=1.0)
        runner.join(10)
