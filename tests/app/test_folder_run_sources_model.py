"""The run panel's sources table stays responsive at any size: a run of 1,200 sources is paged in (first
page when shown, the next when the view scrolls to the end), a settled source changes its row in place
(``dataChanged``, never a reset), an outcome for a row not paged in yet shows when its page arrives, and
the columns are never resized to their contents."""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtWidgets import QHeaderView
from pytestqt.qtbot import QtBot
from sqlalchemy import select

from app.run_sources_model import PAGE, SourcesModel
from app.run_tables import read_only_view
from knowledge import folder_runs
from knowledge.folder_runs import Principal
from knowledge.runtime import Quire
from knowledge.store.schema_runs import folder_run_sources
from tests.app.conftest import create_base
from tests.support.files import write_tree

SOURCES = 1200


def _settle(quire: Quire, run_id: int, ordinal: int, reason: str) -> None:
    """What the run's worker files when a source is refused (the test stands in for the worker)."""
    with quire.db.write() as conn:
        source_id = conn.execute(
            select(folder_run_sources.c.id).where(
                folder_run_sources.c.run_id == run_id, folder_run_sources.c.ordinal == ordinal
            )
        ).scalar_one()
        folder_runs.add_outcome(
            conn,
            run_id=run_id,
            source_id=source_id,
            disposition="rejected",
            reason=reason,
            attempt=1,
            settled_at=time.time(),
        )


def test_sources_page_in_and_settle_in_place(qtbot: QtBot, data_dir: Path, tmp_path: Path, quire: Quire) -> None:
    base = create_base(data_dir, "big")
    folder = write_tree(tmp_path / "big", {f"d{n // 100:02d}/n{n:04d}.txt": f"note {n}\n" for n in range(SOURCES)})
    folder_runs.set_descendant_cap(quire, 2 * SOURCES)
    run_id = folder_runs.start_run(quire, Principal.person("ada"), base.id, folder, key="big").run_id

    model = SourcesModel()
    view = read_only_view(model, 1)
    qtbot.addWidget(view)
    view.resize(700, 300)
    view.show()
    model.show_run(quire, run_id)
    qtbot.waitUntil(lambda: model.rowCount() == PAGE, timeout=10_000)
    assert not model.loaded_all and model.cursor == 0
    assert [model.data(model.index(0, c)) for c in range(5)] == ["1", "d00/n0000.txt", "7 B", "pending", ""]
    modes = {view.horizontalHeader().sectionResizeMode(c) for c in range(model.columnCount())}
    assert QHeaderView.ResizeMode.ResizeToContents not in modes

    resets: list[int] = []
    changed: list[tuple[int, int]] = []
    model.modelReset.connect(lambda: resets.append(1))
    model.dataChanged.connect(lambda top, bottom, _roles=(): changed.append((top.row(), bottom.row())))

    # scrolling to the end brings the next page, appended
    view.scrollToBottom()
    qtbot.waitUntil(lambda: model.rowCount() == 2 * PAGE, timeout=10_000)

    # a loaded row settles: only it changes; a row not paged in yet settles: its page shows it
    _settle(quire, run_id, 5, "not text")
    _settle(quire, run_id, SOURCES - 1, "too large")
    with qtbot.waitSignal(model.settled, timeout=10_000, check_params_cb=lambda n: n == 2):
        model.poll()
    assert changed == [(5, 5)]
    assert model.data(model.index(5, 3)) == "rejected" and model.data(model.index(5, 4)) == "not text"
    while not model.loaded_all:
        count = model.rowCount()
        model.fetchMore(model.index(-1, -1))
        qtbot.waitUntil(lambda: model.rowCount() > count or model.loaded_all, timeout=10_000)  # noqa: B023
    assert model.rowCount() == SOURCES
    last = model.rowCount() - 1
    assert [model.data(model.index(last, c)) for c in (1, 3, 4)] == ["d11/n1199.txt", "rejected", "too large"]

    # nothing new settled: a poll changes nothing
    changed.clear()
    with qtbot.waitSignal(model.settled, timeout=10_000, check_params_cb=lambda n: n == 0):
        model.poll()
    assert changed == [] and resets == []
