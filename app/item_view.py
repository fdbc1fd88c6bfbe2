"""The item tree's view: a progress column drawn as a bar, and files or folders dropped from outside.

Threading contract: main thread only. A drop only emits ``paths_dropped``; the window decides what to
do (add to the selected base through an ``Op``, or say why it cannot).
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, QTimer, Signal
from PySide6.QtGui import QColor, QDragEnterEvent, QDragMoveEvent, QDropEvent, QPainter, QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHeaderView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionProgressBar,
    QStyleOptionViewItem,
    QTreeView,
    QWidget,
)

from app.drops import accept_paths, take_paths
from app.item_model import ItemTreeModel
from app.item_rows import DETAILS, NAME, PROGRESS, STATUS, ProgressRole, StatusRole


class ProgressDelegate(QStyledItemDelegate):
    """Draws ``ProgressRole`` as a progress bar; a failed row's bar is full and says so."""

    def paint(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        value = index.data(ProgressRole)
        if value is None:
            super().paint(painter, option, index)
            return
        bar = QStyleOptionProgressBar()
        bar.rect = option.rect.adjusted(3, 3, -3, -3)
        bar.minimum, bar.maximum = 0, 100
        bar.progress = round(float(value) * 100)
        status = index.data(StatusRole)
        failed, skipped = status == "failed", status == "skipped"
        bar.text = status if failed or skipped else f"{bar.progress}%"
        bar.textVisible = True
        bar.state = option.state
        bar.palette = QPalette(option.palette)
        if failed:
            bar.palette.setColor(QPalette.ColorRole.Highlight, QColor("#d9534f"))
        elif skipped:  # quiet: not read by design
            bar.palette.setColor(QPalette.ColorRole.Highlight, QColor("#bdbdbd"))
        elif bar.progress >= 100:
            bar.palette.setColor(QPalette.ColorRole.Highlight, QColor("#4caf50"))
        style = option.widget.style() if option.widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ProgressBar, bar, painter)


class ItemTreeView(QTreeView):
    """The item tree; accepts files and folders dragged in from the desktop."""

    paths_dropped = Signal(list)  # list[Path]

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        self.setDragDropMode(QAbstractItemView.DragDropMode.DropOnly)
        self.setDropIndicatorShown(False)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setUniformRowHeights(True)  # cheap layout for long lists
        self.setAlternatingRowColors(True)
        self.setItemDelegateForColumn(PROGRESS, ProgressDelegate(self))
        self._more_timer = QTimer(self)
        self._more_timer.setSingleShot(True)
        self._more_timer.setInterval(30)
        self._more_timer.timeout.connect(self.fetch_visible_levels)
        self.verticalScrollBar().valueChanged.connect(lambda _v: self._more_timer.start())
        self.verticalScrollBar().rangeChanged.connect(lambda _a, _b: self._more_timer.start())
        self.expanded.connect(lambda _index: self._more_timer.start())

    def setModel(self, model: QAbstractItemModel | None) -> None:
        super().setModel(model)
        if model is not None:
            model.rowsInserted.connect(lambda *_: self._more_timer.start())
            model.modelReset.connect(self._more_timer.start)

    def fetch_visible_levels(self) -> None:
        """Page on every loaded level whose last row is in sight (the lazy model's "scrolled to the end")."""
        model = self.model()
        if not isinstance(model, ItemTreeModel):
            return
        area = self.viewport().rect()
        for parent in model.partial_levels():
            if parent.isValid() and not self.isExpanded(parent):
                continue
            last = model.index(model.rowCount(parent) - 1, 0, parent)
            if area.intersects(self.visualRect(last)):
                model.fetch_page(parent)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._more_timer.start()

    def configure_columns(self) -> None:
        header = self.header()
        header.setStretchLastSection(True)
        header.setSectionResizeMode(NAME, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(NAME, 280)
        header.resizeSection(STATUS, 90)
        header.resizeSection(PROGRESS, 110)
        header.resizeSection(DETAILS, 240)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        accept_paths(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        accept_paths(event)

    def dropEvent(self, event: QDropEvent) -> None:
        paths = take_paths(event)
        if paths:
            self.paths_dropped.emit(paths)


__all__ = ["DETAILS", "STATUS", "ItemTreeView", "ProgressDelegate"]
