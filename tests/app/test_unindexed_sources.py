"""The items page's "Run sources" filter: a folder run's failed and skipped files, which have no item and so no
row in the tree, are listed below it with their reasons when failed or skipped is chosen."""

from __future__ import annotations

import random
from pathlib import Path

from pytestqt.qtbot import QtBot

from app.window import MainWindow
from knowledge import folder_runs
from knowledge.compose import open_quire
from tests.app.conftest import WindowFactory, create_base
from tests.folder_runs.helpers import PERSON, doc_text, drain
from tests.support.files import write_tree


def _rows(window: MainWindow) -> list[list[str]]:
    shown = window.unindexed.list
    rows = [shown.topLevelItem(r) for r in range(shown.topLevelItemCount())]
    return [[row.text(c) for c in range(4)] for row in rows if row is not None]


def _choose(qtbot: QtBot, window: MainWindow, status: str | None) -> None:
    choice = window.unindexed.choice
    if status is None:
        choice.setCurrentIndex(choice.findData(None))
        return
    with qtbot.waitSignal(window.unindexed.loaded, timeout=30_000):
        choice.setCurrentIndex(choice.findData(status))


def test_the_filter_lists_a_runs_failed_and_skipped_sources_with_reasons(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    create_base(data_dir, "kb")
    folder = write_tree(
        tmp_path / "papers",
        {"good.txt": doc_text(2), "empty.txt": "", "broken.pdf": random.Random(7).randbytes(4096)},
    )
    quire = open_quire(data_dir)
    try:
        run_id = folder_runs.start_run(quire, PERSON, "kb", folder, key="k").run_id
        drain(quire)
    finally:
        quire.close()

    window = open_window()
    assert window.unindexed.list.isHidden()  # nothing chosen: the page is the tree and the filter
    _choose(qtbot, window, "failed")
    assert not window.unindexed.list.isHidden()
    [failed] = _rows(window)
    assert failed[:3] == ["broken.pdf", str(run_id), "rejected"] and "PDF" in failed[3]
    assert str(tmp_path) not in failed[3]
    assert "failed with no item: 1" in window.unindexed.title.text()

    _choose(qtbot, window, "skipped")
    assert _rows(window) == [["empty.txt", str(run_id), "skipped", "empty: file is empty"]]
    _choose(qtbot, window, None)
    assert window.unindexed.list.isHidden()
