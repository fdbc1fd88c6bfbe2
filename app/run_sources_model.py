"""One run's sources as a lazy table model that follows the run while it executes, never reloaded.

* **Paged.** The first page of sources (``folder_runs.sources_page``, keyset by ordinal) is read when a
  run is shown; later pages when the view scrolls to the end (``canFetchMore``/``fetchMore``).
* **Updated in place.** ``poll`` reads the outcomes filed since the model's cursor
  (``folder_runs.settled_since``, a bounded read) and changes only those rows (``dataChanged``). The
  cursor starts at the run's newest outcome when the first page was read. A source settles once, so a
  settled row never goes back to ``pending``: an outcome read for a row not paged in yet is kept and laid
  over that row when its page arrives, whichever read was older.

Threading contract: main thread only; reads run in ``Op``s and come back here.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt, Signal

from app.ops import Op, report_failure
from app.run_reads import size_text
from knowledge import folder_runs
from knowledge.folder_runs import SettledSource, SourceOutcome, SourcesPage
from knowledge.runtime import Quire

PAGE = 200
SETTLED_LIMIT = 500  # outcomes read per poll; a poll that meets the limit reads on at once
HEADERS = ["#", "Path", "Size", "Disposition", "Reason"]

AnyIndex = QModelIndex | QPersistentModelIndex


def source_cell(s: SourceOutcome, column: int) -> str:
    if column == 0:
        return str(s.ordinal + 1)
    if column == 2:
        return size_text(s.size)
    return (s.relative_path if column == 1 else s.disposition if column == 3 else s.reason) or ""


class SourcesModel(QAbstractTableModel):
    """See the module docstring. ``settled`` fires after a poll's outcomes were applied."""

    settled = Signal(int)  # how many outcomes the poll brought

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._quire: Quire | None = None
        self.run_id: int | None = None
        self._session = 0
        self._reset_state()

    def _reset_state(self) -> None:
        self.rows: list[SourceOutcome] = []
        self._row_of: dict[int, int] = {}  # ordinal → row
        self._ahead: dict[int, SourceOutcome] = {}  # settled sources not paged in yet, by ordinal
        self.cursor: int | None = None  # newest outcome id applied; None until the first page
        self.loaded_all = False
        self._fetching = False
        self._polling = False

    def show_run(self, quire: Quire | None, run_id: int | None) -> None:
        """Show another run (or none): the only reset this model does."""
        if (quire, run_id) == (self._quire, self.run_id):
            return
        self.beginResetModel()
        self._session += 1
        self._quire, self.run_id = quire, run_id
        self._reset_state()
        self.loaded_all = run_id is None
        self.endResetModel()
        self.fetch_page()

    # -- Qt model API -------------------------------------------------------------------------

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(HEADERS)

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole) and index.isValid():
            return source_cell(self.rows[index.row()], index.column())
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return HEADERS[section]
        return None

    def canFetchMore(self, parent: AnyIndex) -> bool:
        return not parent.isValid() and self._quire is not None and not self.loaded_all and not self._fetching

    def fetchMore(self, parent: AnyIndex) -> None:
        if self.canFetchMore(parent):
            self.fetch_page()

    # -- pages --------------------------------------------------------------------------------

    def fetch_page(self) -> None:
        """Read the next page in an ``Op``; it is appended when it arrives."""
        if not self.canFetchMore(QModelIndex()) or self.run_id is None:
            return
        self._fetching = True
        after = self.rows[-1].ordinal if self.rows else -1
        session = self._session
        Op(folder_runs.sources_page, self._quire, self.run_id, after_ordinal=after, limit=PAGE).bound_to(
            self
        ).on_success(lambda page: self._page_arrived(session, page)).on_failure(
            lambda exc: self._page_failed(session, exc)
        ).run()

    def _page_arrived(self, session: int, page: SourcesPage) -> None:
        if session != self._session:
            return  # another run is shown by now
        self._fetching = False
        self.loaded_all = len(page.sources) < PAGE
        if self.cursor is None:
            self.cursor = page.cursor
        fresh = [self._ahead.pop(s.ordinal, s) if s.disposition == "pending" else s for s in page.sources]
        if fresh:
            first = len(self.rows)
            self.beginInsertRows(QModelIndex(), first, first + len(fresh) - 1)
            for row, source in enumerate(fresh, start=first):
                self._row_of[source.ordinal] = row
            self.rows.extend(fresh)
            self.endInsertRows()
        self._ahead = {o: s for o, s in self._ahead.items() if o not in self._row_of}

    def _page_failed(self, session: int, exc: BaseException) -> None:
        if session == self._session:
            self._fetching = False
            report_failure(exc)

    # -- updates ------------------------------------------------------------------------------

    def poll(self) -> None:
        """Read what settled since the cursor (one read in flight); rows change in place."""
        if self._quire is None or self.run_id is None or self.cursor is None or self._polling:
            return
        self._polling = True
        session = self._session
        Op(folder_runs.settled_since, self._quire, self.run_id, after_id=self.cursor, limit=SETTLED_LIMIT).bound_to(
            self
        ).on_success(lambda settled: self._settled_arrived(session, settled)).on_failure(
            lambda _exc: self._poll_failed(session)
        ).run()

    def _poll_failed(self, session: int) -> None:
        if session == self._session:
            self._polling = False

    def _settled_arrived(self, session: int, settled: list[SettledSource]) -> None:
        if session != self._session:
            return
        self._polling = False
        if not settled:
            self.settled.emit(0)
            return
        self.cursor = max(self.cursor or 0, settled[-1].outcome_id)
        self.apply(s.source for s in settled)
        self.settled.emit(len(settled))
        if len(settled) == SETTLED_LIMIT:
            self.poll()  # more settled than one read brings: catch up now

    def apply(self, sources: Any) -> None:
        """Settled sources: loaded rows change in place, one ``dataChanged`` over the span."""
        changed: list[int] = []
        for source in sources:
            row = self._row_of.get(source.ordinal)
            if row is None:
                self._ahead[source.ordinal] = source
            elif self.rows[row] != source:
                self.rows[row] = source
                changed.append(row)
        if changed:
            self.dataChanged.emit(self.index(min(changed), 0), self.index(max(changed), len(HEADERS) - 1))
