"""The folder-run panel end to end, with the real worker: drop, preview with reasons, start (a double
click and a retry make one run), progress, dispositions, audit entries, revert; and the cap refusal."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTableView
from pytestqt.qtbot import QtBot

from app.folder_runs_panel import PreviewOutcome
from knowledge import folder_runs
from knowledge.compose import open_quire
from knowledge.folder_runs import StartResult
from knowledge.library import audit
from tests.app.conftest import (
    WORKER_TIMEOUT_MS,
    WindowFactory,
    create_base,
    drop_paths,
    load_all,
    tree_items,
)
from tests.support.files import write_tree
from tests.support.prompters import ScriptedPrompter


def _table(table: QTableView) -> list[list[str]]:
    m = table.model()
    return [[str(m.data(m.index(r, c))) for c in range(m.columnCount())] for r in range(m.rowCount())]


def test_folder_run_flow_drop_preview_start_once_progress_dispositions_audit_and_revert(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path, prompter: ScriptedPrompter
) -> None:
    base = create_base(data_dir, "projects")
    folder = write_tree(
        tmp_path / "project",
        {
            "readme.md": "# Project\n\nThe telescope mount needs a counterweight of four kilograms.\n",
            "docs/guide.txt": "Align the finder scope on a distant chimney during the day.\n",
            "logo.psd": b"8BPS\x00\x01....",  # a type Quire does not read (PNG is read by OCR now)
            "secret.txt": "not for the index\n",
            ".quireignore": "secret.txt\n",
        },
    )
    window = open_window(start_worker=True)
    panel = window.folder_runs_panel
    window.tabs.setCurrentWidget(panel)

    with qtbot.waitSignal(panel.previewed, timeout=30_000) as previewed:
        drop_paths(panel.drop_zone, [folder])
    outcome: PreviewOutcome = previewed.args[0]
    assert outcome.preview is not None
    assert sorted(e.relative for e in outcome.preview.eligible) == ["docs/guide.txt", "readme.md"]
    assert {e.relative: e.reason for e in outcome.preview.ineligible} == {
        "logo.psd": "unsupported file type .psd",
        "secret.txt": "excluded by .quireignore",
    }
    assert f"walked {outcome.preview.walked} of at most 200" in panel.summary.text()
    rows = _table(panel.preview_table)
    assert ["logo.psd", "10 B", "no", "unsupported file type .psd"] in rows
    assert sum(1 for r in rows if r[2] == "yes") == 2

    # a double click on Start, then a retry of the same approved preview: one run
    started: list[StartResult] = []
    panel.run_started.connect(started.append)
    seen: list[tuple[str, str]] = []  # (status, progress) of the history row, as polled
    panel.runs_shown.connect(lambda runs: seen.extend((r[3], r[7]) for r in _table(panel.runs_table)[:1]))
    for _ in range(2):  # the second press of a double click meets a disabled button
        qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    assert not panel.start_button.isEnabled()
    panel.start_run()  # a retry of the same approved preview goes through: with the same key
    qtbot.waitUntil(lambda: len(started) == 2, timeout=30_000)
    assert sorted(r.outcome for r in started) == ["created", "replayed"]
    assert started[0].run_id == started[1].run_id
    run_id = started[0].run_id
    assert not panel.start_button.isEnabled() and panel.start_button.text() == "Run started"

    # progress is polled until the run completes; then its dispositions and audit entries show
    qtbot.waitUntil(
        lambda: panel.selected_summary() is not None and panel.selected_summary().run.status == "completed",  # type: ignore[union-attr]
        timeout=WORKER_TIMEOUT_MS,
    )
    assert len(panel.runs) == 1
    assert any(status in ("pending", "running") for status, _progress in seen), seen  # progress was shown
    assert seen[-1] == ("completed", "2/2")
    history = _table(panel.runs_table)[0]
    assert history[0] == str(run_id) and history[3] == "completed"
    assert history[7] == "2/2" and history[8] == "2 committed · 0 skipped · 0 rejected"
    assert history[4] and history[5] and history[6]  # created, started, finished
    qtbot.waitUntil(lambda: panel.run_view is not None and panel.run_view.summary.run.status == "completed")
    sources = _table(panel.sources_table)
    assert sorted((r[1], r[3]) for r in sources) == [("docs/guide.txt", "committed"), ("readme.md", "committed")]
    actions = [r[1] for r in _table(panel.audit_table)]
    assert actions[0] == audit.RUN_CREATED and actions[-1] == audit.RUN_COMPLETED
    assert audit.RUN_STARTED in actions and actions.count(audit.BATCH_COMMITTED) == 2

    # what the run committed is in the item tree: page in again on every look, because a folder the poll
    # brings in after a page-in arrives collapsed, its children not yet read (as in the view)
    def committed_shown() -> bool:
        load_all(qtbot, window.model)
        return {i.name for i in tree_items(window.model)} >= {"readme.md", "guide.txt"}

    qtbot.waitUntil(committed_shown, timeout=10_000)

    # revert (after a confirmation): the run is reverted, its items leave the tree, the audit log says so
    assert panel.revert_button.isEnabled()
    prompter.confirm_answers = [True]
    panel.revert_selected()
    assert f"Revert folder run {run_id}" in prompter.asked[-1]
    qtbot.waitUntil(lambda: panel.selected_summary().run.status == "reverted", timeout=30_000)  # type: ignore[union-attr]
    qtbot.waitUntil(lambda: audit.RUN_REVERTED in [r[1] for r in _table(panel.audit_table)], timeout=10_000)
    qtbot.waitUntil(lambda: tree_items(window.model) == [], timeout=30_000)
    assert not panel.revert_button.isEnabled()

    quire = open_quire(data_dir)
    try:
        assert [r.run.id for r in folder_runs.list_runs(quire, base=base.id)] == [run_id]
    finally:
        quire.close()


def test_a_folder_over_the_cap_is_refused_with_the_sub_folders_that_would_fit(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    create_base(data_dir, "capped")
    files: dict[str, bytes | str] = {f"big/part{n}/f{m}.txt": "x" for n in range(2) for m in range(2)}
    files.update({"small/a.txt": "a", "small/b.txt": "b", "top.txt": "t"})
    files.update({f"huge/f{m}.txt": "y" for m in range(6)})
    folder = write_tree(tmp_path / "tree", files)
    quire = open_quire(data_dir)
    try:
        folder_runs.set_descendant_cap(quire, 4)
    finally:
        quire.close()
    window = open_window()
    panel = window.folder_runs_panel
    window.tabs.setCurrentWidget(panel)
    with qtbot.waitSignal(panel.previewed, timeout=30_000) as previewed:
        panel.preview(folder)
    outcome: PreviewOutcome = previewed.args[0]
    assert outcome.preview is None and outcome.split is not None
    assert [(f.relative, f.walked) for f in outcome.split.fitting] == [
        ("small", 2),
        ("big/part0", 2),
        ("big/part1", 2),
    ]
    text = panel.summary.text()
    assert "more than 4 files and folders" in text and "small (2), big/part0 (2), big/part1 (2)" in text
    assert not panel.start_button.isEnabled()
