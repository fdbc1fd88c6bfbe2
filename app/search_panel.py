"""The search panel: a query, a mode (hybrid / vector / keyword), and hits with a highlighted snippet.

Each hit shows its snippet (``Hit.snippet`` with ``Hit.highlights`` in bold), its source file, its page or
line range and its score. "Open source" opens the original file, or the base's own copy when the
original is gone; "Show in document" opens the chunk viewer on the hit's item at that chunk.

Threading contract: main thread. Searches run in an ``Op`` (the first one loads the query encoder,
i.e. imports torch, off the main thread); one search runs at a time and the latest query wins.
When the GUI deletes items, their hits leave the list at once (``AppContext.changes_made``).
"""

from __future__ import annotations

import html
import shutil
import tempfile
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSize, Qt, Signal
from PySide6.QtGui import QAbstractTextDocumentLayout, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.ops import Op
from knowledge import app_queries, lifecycle
from knowledge.library import Base
from knowledge.lifecycle import Changes
from knowledge.runtime import Quire
from knowledge.search import MODES, Hit, search

HitRole = Qt.ItemDataRole.UserRole + 1
HTML_ROLE = Qt.ItemDataRole.UserRole + 2
COLUMNS = ("Snippet", "Source", "Location", "Score")
SNIPPET, SOURCE, LOCATION, SCORE = range(len(COLUMNS))
LIMIT = 20
AnyIndex = QModelIndex | QPersistentModelIndex


def snippet_html(hit: Hit) -> str:
    """The snippet as HTML, the highlight spans in bold on a soft yellow; everything else escaped."""
    text, out, at = hit.snippet, [], 0
    for start, end in sorted(hit.highlights):
        if start < at or end > len(text):
            continue
        out.append(html.escape(text[at:start]))
        out.append(f'<b style="background-color:#fff1a8">{html.escape(text[start:end])}</b>')
        at = end
    out.append(html.escape(text[at:]))
    return "".join(out)


class SearchResultsModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self.hits: list[Hit] = []

    def set_hits(self, hits: Sequence[Hit]) -> None:
        self.beginResetModel()
        self.hits = list(hits)
        self.endResetModel()

    def remove_items(self, item_ids: Collection[int]) -> int:
        """Drop every hit of these items; returns how many went."""
        removed = 0
        for row in reversed(range(len(self.hits))):
            if self.hits[row].item_id in item_ids:
                self.beginRemoveRows(QModelIndex(), row, row)
                del self.hits[row]
                self.endRemoveRows()
                removed += 1
        return removed

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.hits)

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        hit = self.hits[index.row()]
        if role == HitRole:
            return hit
        if role == HTML_ROLE and index.column() == SNIPPET:
            return snippet_html(hit)
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(hit, index.column())
        if role == Qt.ItemDataRole.ToolTipRole:
            return hit.source_path or hit.item_name
        return None

    @staticmethod
    def _display(hit: Hit, column: int) -> str:
        if column == SNIPPET:
            return hit.snippet
        if column == SOURCE:
            return Path(hit.source_path).name if hit.source_path else f"{hit.item_name} (note)"
        if column == LOCATION:
            where = hit.location.describe() or f"chunk {hit.ordinal + 1}"
            return f"{where} · OCR" if hit.ocr else where  # read from a scan or an image
        return f"{hit.score:.4f}"


class HtmlDelegate(QStyledItemDelegate):
    """Draws ``HTML_ROLE`` rich text (the highlighted snippet), wrapped to the column width."""

    def _document(self, option: QStyleOptionViewItem, index: AnyIndex) -> QTextDocument:
        doc = QTextDocument()
        doc.setDefaultFont(option.font)
        doc.setHtml(str(index.data(HTML_ROLE) or ""))
        doc.setTextWidth(max(80, option.rect.width() - 8))
        return doc

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: AnyIndex) -> None:
        self.initStyleOption(option, index)
        doc = self._document(option, index)
        option.text = ""
        widget = option.widget
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, option, painter, widget)
        painter.save()
        rect = option.rect
        painter.translate(rect.left() + 4, rect.top() + 2)
        context = QAbstractTextDocumentLayout.PaintContext()
        if option.state & QStyle.StateFlag.State_Selected:
            context.palette.setColor(QPalette.ColorRole.Text, option.palette.highlightedText().color())
        doc.documentLayout().draw(painter, context)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: AnyIndex) -> QSize:
        self.initStyleOption(option, index)
        doc = self._document(option, index)
        return QSize(int(doc.idealWidth()), int(doc.size().height()) + 4)


def owned_copy_for(quire: Quire, base_id: int, item_id: int) -> Path | None:
    """The base's own copy of an item's bytes, under the item's name in a temp folder (so it opens in the
    right program); ``None`` for a note or when the base keeps no copy. Runs in an ``Op``."""
    item = lifecycle.get_item(quire, base_id, item_id)
    blob = app_queries.owned_copy_path(quire, item)
    if blob is None:
        return None
    target = Path(tempfile.gettempdir()) / "quire-copies" / str(item.id) / Path(item.name).name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(blob, target)
    return target


class SearchPanel(QWidget):
    """See the module docstring. ``show_chunk`` asks the window to open the chunk viewer."""

    show_chunk = Signal(int, int, str, int)  # base id, item id, title, chunk id
    searched = Signal(list)  # the hits just shown (tests and screenshots wait on it)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.searching = False
        self._pending: tuple[int, str, str] | None = None
        self._results_base: int | None = None
        self.query = QLineEdit(placeholderText="Search this knowledge base…")
        self.query.returnPressed.connect(self.run_search)
        self.mode = QComboBox()
        self.mode.addItems(list(MODES))
        self.search_button = QPushButton("Search")
        self.search_button.clicked.connect(self.run_search)
        self.status = QLabel("")
        self.status.setObjectName("searchStatus")
        self.results = SearchResultsModel()
        self.table = self._table()
        self.open_button = QPushButton("Open source")
        self.open_button.clicked.connect(self.open_source)
        self.show_button = QPushButton("Show in document")
        self.show_button.clicked.connect(self.show_in_document)
        self._layout()
        ctx.changes_made.connect(self._changes_made)
        ctx.base_changed.connect(self._base_changed)
        self._update_buttons()

    def _table(self) -> QTableView:
        table = QTableView()
        table.setModel(self.results)
        table.setItemDelegateForColumn(SNIPPET, HtmlDelegate(table))
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.verticalHeader().hide()
        table.setWordWrap(True)
        header = table.horizontalHeader()
        header.setSectionResizeMode(SNIPPET, QHeaderView.ResizeMode.Stretch)
        for column in (SOURCE, LOCATION, SCORE):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        table.doubleClicked.connect(lambda _index: self.show_in_document())
        table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        return table

    def _layout(self) -> None:
        bar = QHBoxLayout()
        bar.addWidget(self.query, 1)
        bar.addWidget(self.mode)
        bar.addWidget(self.search_button)
        actions = QHBoxLayout()
        actions.addWidget(self.status, 1)
        actions.addWidget(self.open_button)
        actions.addWidget(self.show_button)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.table, 1)
        layout.addLayout(actions)

    # -- searching ----------------------------------------------------------------------------

    def run_search(self) -> None:
        base, quire = self.ctx.base, self.ctx.quire
        text = self.query.text().strip()
        if base is None or quire is None or not text:
            return
        request = (base.id, text, self.mode.currentText())
        if self.searching:
            self._pending = request
            return
        self._start(quire, request)

    def _start(self, quire: Quire, request: tuple[int, str, str]) -> None:
        self.searching = True
        self.status.setText("Searching…")
        base_id, text, mode = request
        Op(search, quire, base_id, text, mode=mode, limit=LIMIT).bound_to(self).on_success(
            lambda hits: self._done(request, hits)
        ).on_failure(self._failed).run()

    def _done(self, request: tuple[int, str, str], hits: list[Hit]) -> None:
        self.searching = False
        if self._run_pending():
            return
        if self.ctx.base is None or self.ctx.base.id != request[0]:
            return
        self.results.set_hits(hits)
        self.table.resizeRowsToContents()
        self.status.setText(f"{len(hits)} result{'s' if len(hits) != 1 else ''} for “{request[1]}” ({request[2]})")
        if hits:
            self.table.selectRow(0)
        self._update_buttons()
        self.searched.emit(hits)

    def _failed(self, exc: BaseException) -> None:
        self.searching = False
        if not self._run_pending():
            self.status.setText("Search failed.")
            self.ctx.fail(exc)

    def _run_pending(self) -> bool:
        pending, self._pending = self._pending, None
        if pending is None or self.ctx.quire is None:
            return False
        self._start(self.ctx.quire, pending)
        return True

    def _base_changed(self, base: Base | None) -> None:
        base_id = None if base is None else base.id
        if base_id != self._results_base:
            self.results.set_hits([])
            self.status.setText("")
            self._results_base = base_id
        self._update_buttons()

    def _changes_made(self, changes: Changes) -> None:
        gone = {item_id for item_id, status in changes.statuses.items() if status == "deleting"}
        if gone and self.results.remove_items(gone):
            self.status.setText(self.status.text() + " — deleted items removed")
            self._update_buttons()

    # -- hits ---------------------------------------------------------------------------------

    def current_hit(self) -> Hit | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        hit = self.results.data(rows[0], HitRole)
        return hit if isinstance(hit, Hit) else None

    def _update_buttons(self) -> None:
        has_hit = self.current_hit() is not None
        self.open_button.setEnabled(has_hit)
        self.show_button.setEnabled(has_hit)
        self.search_button.setEnabled(self.ctx.base is not None and self.ctx.base.status == "ok")

    def open_source(self) -> None:
        hit, base, quire = self.current_hit(), self.ctx.base, self.ctx.quire
        if hit is None or base is None or quire is None:
            return
        if hit.source_path and Path(hit.source_path).is_file():
            self.ctx.prompter.open_path(Path(hit.source_path))
            return
        Op(owned_copy_for, quire, base.id, hit.item_id).bound_to(self).on_success(
            lambda path: self._open_copy(hit, path)
        ).on_failure(self.ctx.fail).run()

    def _open_copy(self, hit: Hit, path: Path | None) -> None:
        if path is None:
            self.show_in_document()  # a note, or nothing kept: the chunk is the document
            return
        self.ctx.info(f"The original of {hit.item_name!r} is gone; opening the copy the base keeps.")
        self.ctx.prompter.open_path(path)

    def show_in_document(self) -> None:
        hit, base = self.current_hit(), self.ctx.base
        if hit is not None and base is not None:
            self.show_chunk.emit(base.id, hit.item_id, hit.item_name, hit.chunk_id)
