"""Read-only tables of the folder-run panel as models updated in place: a row whose key is known is
changed where it stands (``dataChanged``), new keys at either end are inserted, and a whole reset happens
only when the table shows something else (another run, another preview). Column widths are set once, from
the first rows shown, then left to the person (never resized to contents on each update).

Threading contract: main thread only; rows are read elsewhere (``Op``) and handed in."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

AnyIndex = QModelIndex | QPersistentModelIndex


class RowsModel(QAbstractTableModel):
    """Rows of text keyed by something stable (a run id, an audit entry id)."""

    def __init__(self, headers: Sequence[str], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.headers = list(headers)
        self.rows: list[list[str]] = []
        self.keys: list[Hashable] = []

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.headers)

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole) and index.isValid():
            return self.rows[index.row()][index.column()]
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.headers[section]
        return None

    def key_at(self, row: int) -> Hashable | None:
        return self.keys[row] if 0 <= row < len(self.keys) else None

    def row_of(self, key: Hashable) -> int:
        return self.keys.index(key) if key in self.keys else -1

    def replace(self, rows: Sequence[list[str]], keys: Sequence[Hashable] | None = None) -> None:
        """Show other rows altogether (another preview, another run's entries)."""
        self.beginResetModel()
        self.rows, self.keys = [list(r) for r in rows], list(keys if keys is not None else range(len(rows)))
        self.endResetModel()

    def set_rows(self, rows: Sequence[list[str]], keys: Sequence[Hashable]) -> None:
        """The same table read again: rows change in place, new keys before or after the known ones are
        inserted; any other change of the keys is a reset (the scope changed)."""
        keys, old = list(keys), self.keys
        grown = len(keys) - len(old)
        if grown >= 0 and keys[grown:] == old:
            self._insert(0, rows[:grown], keys[:grown])
        elif grown >= 0 and keys[: len(old)] == old:
            self._insert(len(old), rows[len(old) :], keys[len(old) :])
        else:
            self.replace(rows, keys)
            return
        self._update(rows)

    def append(self, rows: Sequence[list[str]], keys: Sequence[Hashable]) -> None:
        self._insert(len(self.rows), rows, keys)

    def _insert(self, at: int, rows: Sequence[list[str]], keys: Sequence[Hashable]) -> None:
        if not rows:
            return
        self.beginInsertRows(QModelIndex(), at, at + len(rows) - 1)
        self.rows[at:at] = [list(r) for r in rows]
        self.keys[at:at] = list(keys)
        self.endInsertRows()

    def _update(self, rows: Sequence[list[str]]) -> None:
        changed = [r for r, values in enumerate(rows) if self.rows[r] != values]
        for r in changed:
            self.rows[r] = list(rows[r])
        if changed:  # one signal for the span: the view repaints what it shows of it
            self.dataChanged.emit(self.index(changed[0], 0), self.index(changed[-1], len(self.headers) - 1))


def read_only_view(model: QAbstractTableModel, stretch: int) -> QTableView:
    """A table over ``model``: whole-row single selection, no editing, interactive column widths with
    ``stretch`` taking the rest. Widths come from the first rows once (:func:`size_once`)."""
    table = QTableView()
    table.setModel(model)
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    table.verticalHeader().setDefaultSectionSize(24)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    header.setResizeContentsPrecision(0)  # fit to the rows in sight, not the first 1,000 (Qt's default)
    table.setProperty("sized", False)
    model.rowsInserted.connect(lambda *_args: size_once(table))
    model.modelReset.connect(lambda: size_once(table))
    return table


def size_once(table: QTableView) -> None:
    """Fit the columns to the first rows shown (only those the view lays out), once per table."""
    if table.property("sized") or table.model().rowCount() == 0:
        return
    table.setProperty("sized", True)
    header = table.horizontalHeader()
    for column in range(table.model().columnCount()):
        if header.sectionResizeMode(column) == QHeaderView.ResizeMode.Interactive:
            table.resizeColumnToContents(column)
