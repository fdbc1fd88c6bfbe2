"""The run panel's "Start one run per sub-folder": shown with the plan for a folder over the cap, off otherwise."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.folder_runs_panel import PreviewOutcome
from knowledge import folder_runs
from knowledge.compose import open_quire
from knowledge.folder_runs import SplitStart
from tests.app.conftest import WindowFactory, create_base
from tests.support.files import write_tree


def test_a_folder_over_the_cap_starts_one_run_per_sub_folder_in_one_go(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    create_base(data_dir, "capped")
    files: dict[str, bytes | str] = {f"big/part{n}/f{m}.txt": f"part {n}, {m}\n" for n in range(2) for m in range(2)}
    files.update({"small/a.txt": "a", "small/b.txt": "b", "top.txt": "t"})
    folder = write_tree(tmp_path / "tree", files)
    fits = write_tree(tmp_path / "fits", {"one.txt": "one"})
    quire = open_quire(data_dir)
    try:
        folder_runs.set_descendant_cap(quire, 4)
    finally:
        quire.close()
    window = open_window()
    panel = window.folder_runs_panel
    window.tabs.setCurrentWidget(panel)

    with qtbot.waitSignal(panel.previewed, timeout=30_000):
        panel.preview(fits)
    assert not panel.split_button.isEnabled() and panel.start_button.isEnabled()

    with qtbot.waitSignal(panel.previewed, timeout=30_000) as previewed:
        panel.preview(folder)
    outcome: PreviewOutcome = previewed.args[0]
    assert outcome.plan is not None and outcome.plan.over_cap
    labels = [". (its own files)", "big/part0", "big/part1", "small"]
    assert [r.label for r in outcome.plan.runs] == labels
    assert "Start one run per sub-folder: 4 runs of at most 4" in panel.summary.text()
    rows = [[panel.preview_model.data(panel.preview_model.index(r, c)) for c in (0, 3)] for r in range(4)]
    assert rows[1] == ["big/part0", "2 file(s), 2 walked"]
    assert panel.split_button.isEnabled() and not panel.start_button.isEnabled()

    started: list[SplitStart] = []
    panel.split_started.connect(started.append)
    for _ in range(2):  # the second press of a double click meets a disabled button
        qtbot.mouseClick(panel.split_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(started) == 1, timeout=30_000)
    assert [r.outcome for r in started[0].runs] == ["created"] * 4
    assert not panel.split_button.isEnabled() and panel.split_button.text() == "Runs started"
    quire = open_quire(data_dir)
    try:
        runs = folder_runs.list_runs(quire, base="capped")
        assert sorted(r.run.id for r in runs) == sorted(r.run_id for r in started[0].runs)
        assert sorted(r.run.declared_size for r in runs) == [1, 2, 2, 2]
    finally:
        quire.close()
