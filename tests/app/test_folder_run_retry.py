"""The run panel's Retry button retries a failed folder run as a new run, with the real worker process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot
from sqlalchemy import exc as sa_exc

from knowledge import folder_runs
from knowledge.compose import open_quire
from knowledge.folder_runs import Principal, execute
from knowledge.store import apsw_dbapi
from tests.app.conftest import WORKER_TIMEOUT_MS, WindowFactory, create_base
from tests.support.files import write_tree


def _failed_run(data_dir: Path, folder: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """A run whose second source's transaction met a busy database once: settled failed, one source in."""
    calls: list[int] = []
    real = execute.settle_source_in_tx

    def flaky(*args: Any, **kwargs: Any) -> str:
        calls.append(1)
        if len(calls) == 2:
            raise sa_exc.OperationalError("COMMIT", {}, apsw_dbapi.OperationalError("database is locked"))
        return real(*args, **kwargs)

    monkeypatch.setattr(execute, "settle_source_in_tx", flaky)
    quire = open_quire(data_dir)
    try:
        started = folder_runs.start_run(quire, Principal.person("ada"), "runs", folder, key="gui-retry")
        quire.make_worker(poll_interval=0.01).run(until_idle=True, timeout=300)
        assert folder_runs.list_runs(quire, folder=folder)[0].run.status == "failed"
    finally:
        quire.close()
        monkeypatch.undo()
    return started.run_id


def test_retry_button_starts_a_new_run_linked_to_the_failed_one(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_base(data_dir, "runs")
    folder = write_tree(tmp_path / "f", {f"n{k}.txt": f"Note {k} about the harbor number {k}.\n" for k in range(3)})
    run_id = _failed_run(data_dir, folder, monkeypatch)

    window = open_window(start_worker=True)
    panel = window.folder_runs_panel
    window.tabs.setCurrentWidget(panel)
    panel.scope.setCurrentIndex(1)  # runs into this base
    panel.select_run(run_id)
    qtbot.waitUntil(lambda: panel.selected_summary() is not None and panel.retry_button.isEnabled(), timeout=30_000)
    assert not panel.revert_button.isEnabled()  # a failed run is retried, not reverted

    qtbot.mouseClick(panel.retry_button, Qt.MouseButton.LeftButton)

    def retry_completed() -> bool:
        summary = panel.selected_summary()
        return summary is not None and summary.run.retry_of == run_id and summary.run.status == "completed"

    qtbot.waitUntil(retry_completed, timeout=WORKER_TIMEOUT_MS)
    summary = panel.selected_summary()
    assert summary is not None and summary.run.id != run_id
    assert (summary.counts["already_committed"], summary.counts["committed"]) == (1, 2)
    assert "1 already committed" in panel._run_row(summary)[-1]
    failed = next(r for r in panel.runs if r.run.id == run_id)
    assert failed.run.status == "failed" and failed.retried_by == summary.run.id
    panel.select_run(run_id)
    qtbot.waitUntil(lambda: panel.selected_summary() is not None and panel.selected_summary().run.id == run_id)  # type: ignore[union-attr]
    assert not panel.retry_button.isEnabled()  # retried once; a second press would only replay it
