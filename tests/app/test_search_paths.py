"""The search results' Document column tells documents of one name apart: two changelog.txt in different
sub-folders of a folder run read as their paths below the run's folder, not twice as "changelog.txt"."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.search_results import SOURCE
from knowledge import folder_runs
from knowledge.compose import open_quire
from tests.app.conftest import WORKER_TIMEOUT_MS, WindowFactory, create_base
from tests.folder_runs.helpers import PERSON, drain
from tests.folder_runs.test_folder_tree import CHANGELOGS, NESTED_TREE, WORD
from tests.support.files import write_tree


def test_two_hits_of_one_name_in_different_folders_read_differently(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    create_base(data_dir, "kb")
    folder = write_tree(tmp_path / "doc", NESTED_TREE)
    quire = open_quire(data_dir)
    try:
        folder_runs.start_run(quire, PERSON, "kb", folder, key="tree")
        drain(quire)
    finally:
        quire.close()

    window = open_window()
    panel = window.search_panel
    panel.mode.setCurrentText("keyword")
    panel.query.setText(WORD)
    with qtbot.waitSignal(panel.searched, timeout=WORKER_TIMEOUT_MS) as blocker:
        panel.run_search()
    assert {h.item_name for h in blocker.args[0]} == {"changelog.txt"}
    shown = [panel.results.index(row, SOURCE).data() for row in range(panel.results.rowCount())]
    assert sorted(shown) == sorted(CHANGELOGS)  # the same name, told apart by where it lies
