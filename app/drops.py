"""Drag and drop of local files and folders, the same for every drop target: a drag is accepted only
when it carries local paths, and a drop is taken as a copy (the originals are never moved)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent


def local_paths(mime: QMimeData) -> list[Path]:
    """The local files and folders a drag carries (anything else is ignored)."""
    if not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile() and url.toLocalFile()]


def accept_paths(event: QDragEnterEvent | QDragMoveEvent) -> bool:
    """Accept a drag that carries local paths, ignore any other; True when accepted."""
    if local_paths(event.mimeData()):
        event.acceptProposedAction()
        return True
    event.ignore()
    return False


def take_paths(event: QDropEvent) -> list[Path]:
    """The dropped local paths, the drop taken as a copy; an empty list (and the drop ignored) otherwise."""
    paths = local_paths(event.mimeData())
    if not paths:
        event.ignore()
        return []
    event.setDropAction(Qt.DropAction.CopyAction)
    event.accept()
    return paths
