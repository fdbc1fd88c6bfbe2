"""The search panel's result list: hits grouped by document, the passage drawn with its highlights.

Hits come back grouped by document (the best document first, at most ``PASSAGES_PER_DOCUMENT`` passages
each); relevance is shown as the document's rank and a bar relative to the best hit — fusion scores mean
nothing to a person. The tooltip of a document says where it is and which notes link to it.

Threading contract: main thread (Qt models and delegates).
"""

from __future__ import annotations

import html
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSize, Qt
from PySide6.QtGui import QAbstractTextDocumentLayout, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from knowledge.search import Hit

HitRole = Qt.ItemDataRole.UserRole + 1
HTML_ROLE = Qt.ItemDataRole.UserRole + 2
COLUMNS = ("Passage", "Document", "Location", "Relevance")
SNIPPET, SOURCE, LOCATION, RELEVANCE = range(len(COLUMNS))
SCORE = RELEVANCE
LIMIT = 20
PASSAGES_PER_DOCUMENT = 3


@dataclass(frozen=True)
class Row:
    """One row of the grouped results: a passage, with its document's rank and relevance."""

    hit: Hit
    rank: int  # the document's rank, 1 = best
    first: bool  # the document's first (best) passage
    relevance: float  # 0..1, relative to the best hit


def hit_tooltip(hit: Hit) -> str:
    """Where the hit's document is, and which notes link to it ([[wiki links]])."""
    where = hit.source_path or hit.item_name
    if not hit.linked_from:
        return where
    return f"{where}\nLinked from: {', '.join(b.name for b in hit.linked_from)}"


def document_text(hit: Hit) -> str:
    """The Document cell: the document's path below the top of its tree (``doc/python3/changelog.gz``), so
    two files of one name in different folders read differently; a note says it is one."""
    inside = bool(hit.path) and hit.path != hit.item_name  # below a root (a folder's file, an archive's member)
    if not hit.source_path and not inside:
        return f"{hit.item_name} (note)"
    return hit.path or Path(hit.source_path or hit.item_name).name


def relevance_bar(fraction: float, width: int = 8) -> str:
    filled = max(1, round(fraction * width)) if fraction > 0 else 0
    return "\u2588" * filled + "\u2591" * (width - filled)


def group_by_document(hits: Sequence[Hit], limit: int = LIMIT) -> list[Row]:
    """Documents in the order of their best hit, each with up to ``PASSAGES_PER_DOCUMENT`` passages."""
    order: dict[int, list[Hit]] = {}
    for hit in hits:
        order.setdefault(hit.item_id, []).append(hit)
    top = max((h.score for h in hits), default=0.0) or 1.0
    rows: list[Row] = []
    for rank, passages in enumerate(order.values(), start=1):
        for n, hit in enumerate(passages[:PASSAGES_PER_DOCUMENT]):
            rows.append(Row(hit, rank, n == 0, max(0.0, hit.score / top)))
        if len(rows) >= limit:
            break
    return rows


AnyIndex = QModelIndex | QPersistentModelIndex


def snippet_html(hit: Hit) -> str:
    """The snippet as HTML, the highlight spans in bold on a soft yellow; everything else escaped."""
    text, out, at = hit.snippet, [], 0
    for start, end in sorted(hit.highlights):
        if start < at or end > len(text):
            continue
        out.append(html.escape(text[at:start]))
        out.append(f'<b style="background-color:#fff1a8;color:#1a1a1a">{html.escape(text[start:end])}</b>')
        at = end
    out.append(html.escape(text[at:]))
    return "".join(out)


class SearchResultsModel(QAbstractTableModel):
    """The grouped rows: each document's best passages under its rank (``hits`` in row order)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[Row] = []

    @property
    def hits(self) -> list[Hit]:
        return [row.hit for row in self.rows]

    def set_hits(self, hits: Sequence[Hit]) -> None:
        self.beginResetModel()
        self.rows = group_by_document(hits)
        self.endResetModel()

    def remove_items(self, item_ids: Collection[int]) -> int:
        """Drop every hit of these items; returns how many went."""
        removed = 0
        for row in reversed(range(len(self.rows))):
            if self.rows[row].hit.item_id in item_ids:
                self.beginRemoveRows(QModelIndex(), row, row)
                del self.rows[row]
                self.endRemoveRows()
                removed += 1
        return removed

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row = self.rows[index.row()]
        if role == HitRole:
            return row.hit
        if role == HTML_ROLE and index.column() == SNIPPET:
            return snippet_html(row.hit)
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(row, index.column())
        if role == Qt.ItemDataRole.ToolTipRole:
            if index.column() == RELEVANCE:
                return (
                    f"Document ranked {row.rank}; this passage {round(row.relevance * 100)} % as relevant as the best"
                )
            return hit_tooltip(row.hit)
        return None

    @staticmethod
    def _display(row: Row, column: int) -> str:
        hit = row.hit
        if column == SNIPPET:
            return hit.snippet
        if column == SOURCE:
            return document_text(hit) if row.first else "\u21b3 same document"
        if column == LOCATION:
            where = hit.location.describe() or f"chunk {hit.ordinal + 1}"
            return f"{where} · OCR" if hit.ocr else where  # read from a scan or an image
        return f"#{row.rank} {relevance_bar(row.relevance)}"


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
