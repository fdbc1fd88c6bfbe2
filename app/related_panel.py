"""Related documents ("see also") in the window: "Related documents…" in the item tree's context menu opens a
dialog listing the documents nearest in meaning to the selected item (a folder: its documents together), best
first, each with its score and the best matching pair of passages (the item's and the document's).

The documents come from :func:`knowledge.search.related` (through the search room's face), run in an ``Op`` off
the main thread and bound to the dialog, so a closed dialog never receives a late answer. An item with nothing
indexed yet, or one the base cannot search, is answered in the dialog with the refusal's own words.

Threading contract: main thread; the search runs on the ``Op`` pool.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.ops import Op
from knowledge.errors import KnowledgeError
from knowledge.library import Item
from knowledge.search import Passage, Related, related

LIMIT = 20
COLUMNS = ("Document", "Score", "Matching passages")


class RelatedDocuments:
    """The context-menu action of the item tree (``tree``), enabled for exactly one selected item."""

    def __init__(self, ctx: AppContext, tree: QTreeView, selected: Callable[[], list[Item]], parent: QWidget) -> None:
        self.ctx, self.selected, self.parent = ctx, selected, parent
        self.action = QAction("Related documents…", parent)
        self.action.setToolTip("The documents nearest in meaning to the selected item, with the passages that match")
        self.action.triggered.connect(self.open)
        self.action.setEnabled(False)
        self.dialog: RelatedDialog | None = None
        tree.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        tree.addAction(self.action)
        tree.selectionModel().selectionChanged.connect(lambda *_: self.action.setEnabled(len(self.selected()) == 1))

    def open(self) -> RelatedDialog | None:
        chosen, base = self.selected(), self.ctx.base
        if len(chosen) != 1 or base is None or self.ctx.quire is None:
            return None
        self.dialog = RelatedDialog(self.ctx, base.id, chosen[0], self.parent)
        self.dialog.show()
        self.dialog.look_up()
        return self.dialog


class RelatedDialog(QDialog):
    """The related documents of one item; ``shown`` carries them once they are listed."""

    shown = Signal(list)

    def __init__(self, ctx: AppContext, base_id: int, item: Item, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("relatedDialog")
        self.setWindowTitle(f"Related to {item.name}")
        self.ctx, self.base_id, self.item = ctx, base_id, item
        self.found: list[Related] = []
        self.status = QLabel("Finding related documents…")
        self.status.setObjectName("relatedStatus")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("relatedTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(True)
        self.table.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.setAccessibleName(f"Documents related to {item.name}")
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 1)
        self.resize(900, 480)

    def look_up(self) -> None:
        quire = self.ctx.quire
        if quire is None:
            return
        Op(related, quire, self.base_id, self.item.id, LIMIT).bound_to(self).on_success(self.show_found).on_failure(
            self.show_failure
        ).run()

    def show_found(self, found: list[Related]) -> None:
        self.found = found
        self.table.setRowCount(len(found))
        for row, r in enumerate(found):
            cells = (r.path or r.name, f"{r.score:.3f}", f"{_passage('This', r.mine)}\n{_passage('That', r.theirs)}")
            for column, value in enumerate(cells):
                cell = QTableWidgetItem(value)
                cell.setToolTip(value)
                self.table.setItem(row, column, cell)
        self.table.resizeRowsToContents()
        self.status.setText(f"{len(found)} related document(s), nearest first" if found else "No related documents")
        self.shown.emit(found)

    def show_failure(self, exc: BaseException) -> None:
        if isinstance(exc, KnowledgeError):  # a refusal (nothing indexed yet, a failed base): its words are the answer
            self.status.setText(str(exc))
            return
        self.status.setText("Quire could not find related documents.")
        self.ctx.fail(exc)


def _passage(label: str, passage: Passage) -> str:
    where = passage.location.describe()
    return f"{label}{f' ({where})' if where else ''}: {passage.snippet}"
