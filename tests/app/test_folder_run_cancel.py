"""The run panel's Cancel button: it asks first, then cancels the selected pending run, which ends cancelled and
may then be reverted (no worker runs here: the run is pending, so the request ends it at once)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from knowledge import folder_runs
from knowledge.compose import open_quire
from knowledge.folder_runs import Principal
from knowledge.library import audit
from tests.app.conftest import WindowFactory, create_base
from tests.support.files import write_tree
from tests.support.prompters import ScriptedPrompter


def _status(data_dir: Path, run_id: int) -> str:
    quire = open_quire(data_dir)
    try:
        return folder_runs.show_run(quire, run_id).summary.run.status
    finally:
        quire.close()


def test_cancel_button_asks_then_cancels_the_selected_pending_run(
    qtbot: QtBot, open_window: WindowFactory, prompter: ScriptedPrompter, data_dir: Path, tmp_path: Path
) -> None:
    create_base(data_dir, "runs")
    folder = write_tree(tmp_path / "f", {f"n{k}.txt": f"Note {k} about the harbor number {k}.\n" for k in range(3)})
    quire = open_quire(data_dir)
    try:
        run_id = folder_runs.start_run(quire, Principal.person("ada"), "runs", folder, key="gui-cancel").run_id
    finally:
        quire.close()
    prompter.confirm_answers.extend([False, True])

    window = open_window()
    panel = window.folder_runs_panel
    window.tabs.setCurrentWidget(panel)
    panel.scope.setCurrentIndex(1)  # runs into this base
    panel.select_run(run_id)
    qtbot.waitUntil(lambda: panel.selected_summary() is not None and panel.cancel_button.isEnabled(), timeout=30_000)
    assert not panel.revert_button.isEnabled() and not panel.retry_button.isEnabled()

    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)  # "no": nothing is asked of the service
    assert prompter.asked[-1].startswith(f"Cancel folder run {run_id} ({folder}")
    assert _status(data_dir, run_id) == "pending" and panel.cancel_button.isEnabled()

    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)  # "yes"

    def cancelled() -> bool:
        summary = panel.selected_summary()
        return summary is not None and summary.run.status == "cancelled"

    qtbot.waitUntil(cancelled, timeout=30_000)
    assert len(prompter.asked) == 2 and _status(data_dir, run_id) == "cancelled"
    assert not panel.cancel_button.isEnabled() and panel.revert_button.isEnabled()  # ended, and revertible
    qtbot.waitUntil(
        lambda: panel.run_view is not None and panel.run_view.entries[-1].action == audit.RUN_CANCELLED,
        timeout=30_000,
    )
    actions = [panel.audit_model.rows[r][1] for r in range(panel.audit_model.rowCount())]
    assert actions == [audit.RUN_CREATED, audit.RUN_CANCEL_REQUESTED, audit.RUN_CANCELLED]
