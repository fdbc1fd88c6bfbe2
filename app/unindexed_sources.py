"""Files folder runs did not make items of, where items are looked for: the items page's "Run sources" filter.

A source a run skipped (by design, with why) or failed on (rejected, quarantined) has no item, so the item tree
has no row for it. Choosing *failed* or *skipped* in the filter shows those sources of the selected base in a
list below the tree: path in the run's folder, run, outcome and reason (``folder_runs.list_unindexed_sources``:
each source's latest run, so one a later run committed is gone). It follows the base and the poll.

Threading contract: main thread only; the read runs in an ``Op``.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from app.context import AppContext
from app.ops import Op
from knowledge import folder_runs
from knowledge.folder_runs import UnindexedSource

log = logging.getLogger(__name__)

CHOICES = (("Run sources: hidden", None), ("Run sources: failed", "failed"), ("Run sources: skipped", "skipped"))
PAGE = 500  # the list is for reading, not an archive: more than a page says how to see the rest
COLUMNS = ("File", "Run", "Outcome", "Reason")


class UnindexedSources(QWidget):
    """The filter (``choice``, a row below the tree) and the list it shows, hidden while nothing is chosen."""

    loaded = Signal(list)  # list[UnindexedSource], after each list was shown

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.choice = QComboBox()
        for text, status in CHOICES:
            self.choice.addItem(text, status)
        self.choice.setToolTip("List the files folder runs made no item of: failed (what went wrong) or skipped (why)")
        self.choice.setAccessibleName("Run sources filter")
        self.title = QLabel()
        self.list = QTreeWidget()
        self.list.setObjectName("unindexedSources")
        self.list.setAccessibleName("Folder-run sources with no item")
        self.list.setHeaderLabels(list(COLUMNS))
        self.list.setRootIsDecorated(False)
        self.list.setColumnWidth(0, 260)
        row = QHBoxLayout()
        row.addWidget(self.choice)
        row.addWidget(self.title, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.list)
        self.list.setHidden(True)
        self._loading = False
        self._again = False
        self.choice.currentIndexChanged.connect(lambda _i: self.reload())
        ctx.base_changed.connect(lambda _base: self.reload())

    @property
    def status(self) -> str | None:
        data = self.choice.currentData()
        return None if data is None else str(data)

    def refresh(self) -> None:
        """Read again when the list is shown (the poll calls this: runs settle sources in the worker)."""
        if self.status is not None:
            self.reload()

    def reload(self) -> None:
        status, quire, base = self.status, self.ctx.quire, self.ctx.base
        self.list.setHidden(status is None)
        if status is None or quire is None or base is None:
            self.list.clear()
            self.title.clear()
            return
        if self._loading:  # one read at a time; the newest choice is read when it ends
            self._again = True
            return
        self._loading = True
        Op(folder_runs.list_unindexed_sources, quire, base.id, status, limit=PAGE).bound_to(self).on_success(
            lambda rows: self._show(status, base.id, rows)
        ).on_failure(self._failed).run()

    def _show(self, status: str, base_id: int, rows: list[UnindexedSource]) -> None:
        self._loading = False
        base = self.ctx.base
        if self._again or status != self.status or base is None or base.id != base_id:
            self._again = False
            self.reload()
            return
        self.list.clear()
        for row in rows:
            item = QTreeWidgetItem([row.relative_path, str(row.run_id), row.disposition, row.reason or ""])
            item.setToolTip(3, row.reason or "")
            self.list.addTopLevelItem(item)
        self.title.setText(_title(status, len(rows)))
        self.loaded.emit(rows)

    def _failed(self, exc: BaseException) -> None:
        self._loading = False
        self._again = False
        self.ctx.fail(exc)


def _title(status: str, count: int) -> str:
    if count == 0:
        return f"No folder-run source is {status} without an item."
    more = f" (the first {PAGE}; quire items --status {status} lists them all)" if count >= PAGE else ""
    return f"Folder-run sources {status} with no item: {count}{more}"
