"""GUI test fixtures: a scripted prompter (no modal dialog ever blocks), windows on real data directories.

Everything is real: the database, the queue, and — where a test asks for it — the worker process the
window starts (``python -m app.cli worker``) with the real embedding model.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QModelIndex, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from app import ops
from app.item_model import ItemTreeModel
from app.window import MainWindow
from knowledge.compose import open_quire
from knowledge.library import bases
from knowledge.library.bases import Base
from knowledge.library.tree import Item
from knowledge.store.database import Database
from tests.conftest import REPO
from tests.support.prompters import ScriptedPrompter

SAMPLE = REPO / "resources" / "sample"
WORKER_TIMEOUT_MS = 120_000


@pytest.fixture(autouse=True)
def main_thread_never_writes() -> Iterator[None]:
    """Every GUI test runs with the store refusing a write that ``app/`` code opens on the Qt main thread.

    The window's writes belong in ``app.ops.Op`` worker threads; the test body may still set up data on
    the main thread (its calls do not pass through ``app.``). A refusal raises in the GUI code and is
    recorded, so one swallowed by a broad ``except`` (the Op bridge logs callback errors) fails here.
    """
    refused_before = len(Database.refused_writes())
    Database.forbid_writes_on(threading.main_thread(), called_from="app.")
    try:
        yield
    finally:
        Database.forbid_writes_on(None)
    refused = Database.refused_writes()[refused_before:]
    assert not refused, "the GUI opened a write on the main thread:\n" + "\n---\n".join(refused)


@pytest.fixture
def prompter() -> ScriptedPrompter:
    return ScriptedPrompter()


def create_base(data_dir: Path, name: str = "notes") -> Base:
    """A base made the way the app makes one, before any window opens (fp32: no torch import here)."""
    from knowledge.ingest.embedding import DEFAULT_MODEL_ID
    from knowledge.ingest.models import model_spec

    quire = open_quire(data_dir)
    try:
        spec = model_spec(DEFAULT_MODEL_ID)
        return bases.create_base(quire.db, name, model_id=spec.model_id, dimension=spec.dimension, precision="fp32")
    finally:
        quire.close()


WindowFactory = Callable[..., MainWindow]


@pytest.fixture
def open_window(qtbot: QtBot, data_dir: Path, prompter: ScriptedPrompter) -> Iterator[WindowFactory]:
    """Open a window on ``data_dir`` and wait until its background start-up (open + recovery) is done."""
    windows: list[MainWindow] = []

    def factory(*, start_worker: bool = False, directory: Path | None = None, poll_ms: int = 150) -> MainWindow:
        window = MainWindow(directory or data_dir, prompter=prompter, start_worker=start_worker, poll_ms=poll_ms)
        qtbot.addWidget(window)
        windows.append(window)
        window.show()
        with qtbot.waitSignal(window.started, timeout=30_000):
            window.start()
        return window

    yield factory
    for window in windows:
        window.shutdown()
        window.close()
    ops.wait_for_ops(10_000)


def copy_sample(target: Path) -> Path:
    shutil.copytree(SAMPLE, target)
    return target


def drop_paths(widget: QWidget, paths: list[Path]) -> None:
    """A drag of file URLs entering the widget (a view's viewport, or a drop zone) and dropped there.

    Qt only delivers a drop to a widget that accepted the drag's enter event, as a real drag does.
    """
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    point = widget.rect().center()
    buttons, modifiers = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(point, Qt.DropAction.CopyAction, mime, buttons, modifiers)
    QApplication.sendEvent(widget, enter)
    assert enter.isAccepted(), "the widget refused the drag"
    move = QDragMoveEvent(point, Qt.DropAction.CopyAction, mime, buttons, modifiers)
    QApplication.sendEvent(widget, move)
    drop = QDropEvent(QPointF(point), Qt.DropAction.CopyAction, mime, buttons, modifiers)
    QApplication.sendEvent(widget, drop)


def load_all(qtbot: QtBot, model: ItemTreeModel, parent: QModelIndex | None = None) -> None:
    """Page in every row of the tree (the view would do this on scroll and expand)."""
    parent = parent or QModelIndex()
    while model.can_fetch_page(parent) or model.fetching(parent):
        if model.can_fetch_page(parent):
            model.fetch_page(parent)
        qtbot.waitUntil(lambda: not model.fetching(parent), timeout=10_000)
    for row in range(model.rowCount(parent)):
        child = model.index(row, 0, parent)
        item = model.item_at(child)
        if item is not None and item.is_container:
            load_all(qtbot, model, child)


def tree_items(model: ItemTreeModel, parent: QModelIndex | None = None) -> list[Item]:
    parent = parent or QModelIndex()
    found: list[Item] = []
    for row in range(model.rowCount(parent)):
        child = model.index(row, 0, parent)
        item = model.item_at(child)
        if item is not None:
            found.append(item)
            found.extend(tree_items(model, child))
    return found


def row_text(model: ItemTreeModel, item_id: int) -> list[str]:
    """What the four columns of an item's row show."""
    return [str(model.index_for_id(item_id, column).data() or "") for column in range(model.columnCount())]


def select_ids(window: MainWindow, item_ids: list[int]) -> None:
    from PySide6.QtCore import QItemSelectionModel

    selection = window.tree.selectionModel()
    selection.clearSelection()
    for item_id in item_ids:
        index = window.model.index_for_id(item_id)
        assert index.isValid(), f"item {item_id} is not in the tree"
        selection.select(index, QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows)


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
