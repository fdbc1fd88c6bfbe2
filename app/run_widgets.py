"""Widgets of the folder-run panel that know nothing of runs: the drop zone and read-only tables."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from app.drops import accept_paths, take_paths


class DropZone(QFrame):
    """Where a folder is dropped (or chosen with the button) to preview a run over it."""

    dropped = Signal(list)  # list[Path]

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("dropZone")
        self.setAcceptDrops(True)
        self.setMinimumHeight(64)
        self.label = QLabel("Drop a folder here to preview a run over it")
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.choose_button = QPushButton("Choose folder…")
        layout = QHBoxLayout(self)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.choose_button)

    def _set_active(self, active: bool) -> None:
        self.setProperty("active", "true" if active else "false")
        self.style().unpolish(self)
        self.style().polish(self)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        self._set_active(accept_paths(event))

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        accept_paths(event)

    def dragLeaveEvent(self, event: Any) -> None:
        self._set_active(False)

    def dropEvent(self, event: QDropEvent) -> None:
        self._set_active(False)
        paths = take_paths(event)
        if paths:
            self.dropped.emit(paths)


def read_only_table(headers: list[str], stretch: int) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    table.verticalHeader().setDefaultSectionSize(24)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    return table


def fill_table(table: QTableWidget, rows: list[list[str]], data: list[Any] | None = None) -> None:
    table.setRowCount(len(rows))
    for r, values in enumerate(rows):
        for c, value in enumerate(values):
            cell = QTableWidgetItem(value)
            if data is not None and c == 0:
                cell.setData(Qt.ItemDataRole.UserRole, data[r])
            table.setItem(r, c, cell)


PREVIEW_HEADERS = ["Path", "Size", "Eligible", "Reason"]
RUN_HEADERS = ["Run", "Folder", "Base", "Status", "Created", "Started", "Finished", "Progress", "Dispositions"]
SOURCE_HEADERS = ["#", "Path", "Size", "Disposition", "Reason"]
AUDIT_HEADERS = ["Time", "Action", "Actor", "Attempt", "Details"]
