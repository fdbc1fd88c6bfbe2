"""What a row of the item tree shows, column by column and role by role: the Qt side of
:mod:`app.item_text` (which words a row reads; this module, which column and role carries them, with the
row's icon, colour and tooltip). Pure functions of an item, its children's counts and today's stamps."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor

from app.item_text import ACTIVE_COLOR, STATUS_COLORS, details_text, progress_of, summary_text
from app.resources import icon, icon_name_for
from knowledge import lifecycle
from knowledge.library import Item

COLUMNS = ("Name", "Status", "Progress", "Details")
NAME, STATUS, PROGRESS, DETAILS = range(len(COLUMNS))
ItemRole = Qt.ItemDataRole.UserRole + 1  # the Item
ProgressRole = Qt.ItemDataRole.UserRole + 2  # float 0..1, or None (not known yet)
StatusRole = Qt.ItemDataRole.UserRole + 3  # the raw status string
ROW_FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsDropEnabled


def row_data(item: Item, summary: dict[str, int], stamps: lifecycle.Stamps | None, column: int, role: int) -> Any:
    """What ``data()`` answers for one cell of an item's row; ``summary`` counts a container's children by
    status, ``stamps`` (today's parser, chunker and model, once read) mark a stale row."""
    if role == ItemRole:
        return item
    if role == StatusRole:
        return item.status
    if role == ProgressRole:
        return progress_of(item, summary)
    if role == Qt.ItemDataRole.DisplayRole:
        return _display(item, summary, stamps, column)
    if role == Qt.ItemDataRole.DecorationRole and column == NAME:
        return icon(icon_name_for(item))
    if role == Qt.ItemDataRole.ForegroundRole and column in (STATUS, DETAILS):
        return QBrush(QColor(STATUS_COLORS.get(item.status, ACTIVE_COLOR)))
    if role == Qt.ItemDataRole.ToolTipRole:
        return _tooltip(item, summary)
    return None


def _display(item: Item, summary: dict[str, int], stamps: lifecycle.Stamps | None, column: int) -> str | None:
    if column == NAME:
        return item.name
    if column == STATUS:
        return item.status
    if column == PROGRESS:
        value = progress_of(item, summary)
        return None if value is None else f"{round(value * 100)}%"
    return details_text(item, summary, stale=stamps is not None and stamps.stale(item))


def _tooltip(item: Item, summary: dict[str, int]) -> str:
    lines = [item.source_path or item.name]
    if item.error_message:
        lines.append(f"{item.error_code}: {item.error_message}")
    if item.is_container and summary:
        lines.append(summary_text(summary))
    return "\n".join(lines)
