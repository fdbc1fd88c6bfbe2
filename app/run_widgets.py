"""Widgets of the folder-run panel that know nothing of runs: the drop zone and the tables' headers."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

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


PREVIEW_HEADERS = ["Path", "Size", "Eligible", "Reason"]
RUN_HEADERS = ["Run", "Folder", "Base", "Status", "Created", "Started", "Finished", "Progress", "Dispositions"]
AUDIT_HEADERS = ["Time", "Action", "Actor", "Attempt", "Details"]
