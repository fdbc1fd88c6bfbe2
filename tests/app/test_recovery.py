"""After a crash: a real ``quire worker`` killed with SIGKILL mid-job; the app's start-up recovery parks what
the job left active, the notice says how many, and its action reindexes them through the app's worker."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from pytestqt.qtbot import QtBot

from knowledge.compose import open_quire
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.store.schema import ACTIVE_STATUSES
from tests.app.conftest import WORKER_TIMEOUT_MS, WindowFactory, copy_sample, create_base, load_all
from tests.conftest import python_proc


def crash_a_worker_mid_job(qtbot: QtBot, data_dir: Path, files: list[Path]) -> list[int]:
    """Add files, start a real worker, SIGKILL it while their index job runs; the items stay active."""
    base = create_base(data_dir, "crashed")
    quire = open_quire(data_dir)
    try:
        changes = operations.add_items(quire, base.id, [PathInput(p) for p in files])
        job_id = changes.job_ids[0]
        worker = python_proc("-m", "app.cli", "--data-dir", str(data_dir), "worker")
        try:
            qtbot.waitUntil(lambda: quire.queue.get(job_id).status == "running", timeout=60_000)
        finally:
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
        assert worker.returncode == -signal.SIGKILL
        left = [operations.get_item(quire, base.id, i).status for i in changes.created]
        assert all(s in ACTIVE_STATUSES for s in left), left
        return changes.created
    finally:
        quire.close()


def test_after_a_crash_the_interrupted_batch_is_retried_without_a_notice(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    """Issue 10: an interrupted index batch goes back to the queue at start-up (its items were in flight
    once, below the quarantine limit), so the window's worker completes it and nothing is parked."""
    sample = copy_sample(tmp_path / "sample")
    files = sorted(sample.iterdir())[:3]
    created = crash_a_worker_mid_job(qtbot, data_dir, files)

    window = open_window(start_worker=True)
    assert window.startup_result is not None and len(window.startup_result.report.cancelled) == 1
    assert window.startup_result.parked_count == 0
    load_all(qtbot, window.model)
    qtbot.waitUntil(
        lambda: {window.model.item_for_id(i).status for i in created} == {"completed"},  # type: ignore[union-attr]
        timeout=WORKER_TIMEOUT_MS,
    )
    assert {window.model.item_for_id(i).error_code for i in created} == {None}  # type: ignore[union-attr]
    assert "interrupted" not in window.recovery_notice.text()
