"""The search panel: search as you type, with filters, results grouped by document, and open-at-location.

Typing starts a search after a short pause (``DEBOUNCE_MS``); Enter searches at once. Filters: the
base, a folder subtree (the folder selected in the Items tab), the file type, the date and a tag (one of
the tags the base's documents carry, ``app.tag_filter``) — the same filters the typed syntax has (``type:``,
``in:``, ``after:``, ``tag:``; README "Search syntax"): the controls are turned into the search's ``Filters``
and narrowed with the typed ones inside the search, before its top-k cut. A query the syntax refuses is
answered on the status line. Hits are listed grouped by document (``app.search_results``). "Open at
location" opens a PDF at the hit's page and a text file at its line where
the platform allows (``app.open_at``); "Show in document" (or a double-click) opens the in-app document
viewer on the hit, where it stands (``app.document_viewer``).

Threading contract: main thread. Searches run in an ``Op`` (the first one loads the query encoder off the
main thread); one runs at a time, the latest typed query waits, and every request carries a sequence
number: a result whose number is not the latest issued is dropped, so a superseded query's results
never appear after newer ones. ``search_fn`` is the test hook (a test slows one query down with it).
When the GUI deletes items, their hits leave the list at once (``AppContext.changes_made``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.copies import PrivateCopies
from app.open_at import open_request, refusal
from app.ops import Op
from app.search_results import LOCATION, RELEVANCE, SNIPPET, SOURCE, HitRole, HtmlDelegate, SearchResultsModel
from app.tag_filter import TagFilter
from knowledge import lifecycle
from knowledge.errors import InvalidInput
from knowledge.library import Base
from knowledge.lifecycle import Changes
from knowledge.runtime import Quire
from knowledge.search import (
    FILTER_MODE,
    MODES,
    Answer,
    Filters,
    Hit,
    answer,
    answer_mode,
    check_query,
    parse,
    parse_type,
    tag_name,
)

FETCH = 60  # hits asked for, so that grouping by document still leaves a full page
DEBOUNCE_MS = 250
# each choice is what a person would type after type: (README "Search syntax")
FILE_TYPES: dict[str, tuple[str, ...]] = {
    "Any type": (),
    "PDF": ("pdf",),
    "Text and Markdown": ("text", "markdown"),
    "Web pages": ("html",),
    "Word and e-books": ("word", "epub"),
    "Code": ("code",),
    "Notes": ("note",),
    "Mail": ("mail",),  # .eml and .msg
}
SYNTAX_TIP = (
    'Type words to search. "exact phrase" must appear; -word leaves out documents with it; '
    'type:pdf, in:"folder name", tag:project, from:ana, after:2024-01 and before:2025 filter (alone, they list '
    "what they match, newest first); "
    "identifiers such as 10.1000/xyz123, ABC-1234, report_v2.pdf or parse_query are matched exactly. "
    'See "Search syntax" in the README.'
)
DATES = {
    "Any date": None,
    "Past day": 86_400,
    "Past week": 7 * 86_400,
    "Past month": 31 * 86_400,
    "Past year": 366 * 86_400,
}
SearchFn = Callable[..., Answer | list[Hit]]  # a plain list: hits in the mode asked for (a test's hook)


@dataclass(frozen=True)
class SearchRequest:
    seq: int
    base_id: int
    text: str
    mode: str
    subtree: int | None = None
    file_type: str = "Any type"
    max_age: int | None = None
    tag: str | None = None


def control_filters(file_type: str, max_age: int | None, now: float | None = None, tag: str | None = None) -> Filters:
    """The type, date and tag controls as the search's filters (what ``type:``, ``after:`` and ``tag:``
    would say)."""
    names = FILE_TYPES.get(file_type, ())
    types = frozenset().union(*(parse_type(name) for name in names)) if names else None
    after = None if max_age is None else (time.time() if now is None else now) - max_age
    return Filters(types=types, after=after, tags=(tag_name(tag),) if tag else ())


def run_request(quire: Quire, request: SearchRequest, search_fn: SearchFn) -> Answer:
    """The search with the controls' filters (applied inside it), off the main thread (in an ``Op``)."""
    found = search_fn(
        quire,
        request.base_id,
        request.text,
        mode=request.mode,
        limit=FETCH,
        subtree=request.subtree,
        filters=control_filters(request.file_type, request.max_age, tag=request.tag),
    )
    return found if isinstance(found, Answer) else Answer(found, answer_mode(request.text, request.mode))


def owned_copy_for(quire: Quire, copies: PrivateCopies, base_id: int, item_id: int) -> Path | str | None:
    """The base's own copy of an item's bytes, under the item's name in the window's private copies
    folder (so it opens in the right program; ``app.copies``); the refusal instead when that name is not
    a document the desktop may open (nothing is copied then); ``None`` for a note or when the base keeps
    no copy. Runs in an ``Op``."""
    item = lifecycle.get_item(quire, base_id, item_id)
    blob = lifecycle.owned_copy_path(quire, item)
    if blob is None:
        return None
    refused = refusal(Path(Path(item.name).name), editor=True)
    if refused is not None:
        return refused
    return copies.write(item.name, blob)


class SearchPanel(QWidget):
    """See the module docstring. ``show_hits`` asks the window to open the document viewer."""

    show_hits = Signal(int, list, int)  # base id, the shown hits of one document, the chosen hit's chunk id
    searched = Signal(list)  # the hits just shown (tests and screenshots wait on it)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.copies = PrivateCopies()  # copies of documents whose original is gone (app.copies)
        self.search_fn: SearchFn = answer  # the test hook
        self.searching = False
        self._seq = 0
        self._pending: SearchRequest | None = None
        self._results_base: int | None = None
        self.subtree: tuple[int, str] | None = None  # (item id, name): the folder the Items tab selected
        self.query = QLineEdit(placeholderText='Search as you type… ("phrase", -word, type:pdf, in:"folder")')
        self.query.setToolTip(SYNTAX_TIP)
        self.query.setClearButtonEnabled(True)
        self.query.returnPressed.connect(self.run_search)
        self.query.textChanged.connect(self._typed)
        self.debounce = QTimer(self)
        self.debounce.setSingleShot(True)
        self.debounce.setInterval(DEBOUNCE_MS)
        self.debounce.timeout.connect(self.run_search)
        self.mode = QComboBox()
        self.mode.addItems(list(MODES))
        self.base_filter = QComboBox()
        self.base_filter.activated.connect(self._base_chosen)
        self.type_filter = QComboBox()
        self.type_filter.addItems(list(FILE_TYPES))
        self.date_filter = QComboBox()
        self.date_filter.addItems(list(DATES))
        self.tag_filter = TagFilter(ctx)
        self.folder_filter = QCheckBox("Only in the selected folder")
        self.folder_filter.setEnabled(False)
        for combo in (self.mode, self.type_filter, self.date_filter, self.tag_filter):
            combo.currentIndexChanged.connect(lambda _i: self._typed())
        self.folder_filter.toggled.connect(lambda _on: self._typed())
        self.search_button = QPushButton("Search")
        self.search_button.clicked.connect(self.run_search)
        self.status = QLabel("")
        self.status.setObjectName("searchStatus")
        self.degraded = QLabel("", wordWrap=True)  # above the results when meaning search is unavailable
        self.degraded.hide()
        self.results = SearchResultsModel()
        self.table = self._table()
        self.open_button = QPushButton("Open at location")
        self.open_button.clicked.connect(self.open_source)
        self.show_button = QPushButton("Show in document")
        self.show_button.clicked.connect(self.show_in_document)
        self._name_controls()
        self._layout()
        ctx.changes_made.connect(self._changes_made)
        ctx.base_changed.connect(self._base_changed)
        ctx.bases_changed.connect(lambda _bases: self._fill_bases())
        self._update_buttons()

    def _name_controls(self) -> None:
        for widget, name in (
            (self.query, "Search query"),
            (self.mode, "Search mode"),
            (self.base_filter, "Knowledge base to search"),
            (self.type_filter, "File type filter"),
            (self.date_filter, "Date filter"),
            (self.tag_filter, "Tag filter"),
            (self.folder_filter, "Only search the selected folder"),
            (self.search_button, "Search now"),
            (self.table, "Search results, grouped by document"),
            (self.open_button, "Open the source at the passage's page or line"),
            (self.show_button, "Show the passage in the document"),
            (self.status, "Search status"),
        ):
            widget.setAccessibleName(name)

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
        for column in (SOURCE, LOCATION, RELEVANCE):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        table.doubleClicked.connect(lambda _index: self.show_in_document())
        table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        return table

    def _layout(self) -> None:
        bar = QHBoxLayout()
        bar.addWidget(self.query, 1)
        bar.addWidget(self.mode)
        bar.addWidget(self.search_button)
        filters = QHBoxLayout()
        controls = (("Base", self.base_filter), ("Type", self.type_filter), ("Date", self.date_filter))
        for label, widget in (*controls, ("Tag", self.tag_filter)):
            caption = QLabel(label)
            caption.setBuddy(widget)
            filters.addWidget(caption)
            filters.addWidget(widget)
        filters.addWidget(self.folder_filter)
        filters.addStretch(1)
        actions = QHBoxLayout()
        actions.addWidget(self.status, 1)
        actions.addWidget(self.open_button)
        actions.addWidget(self.show_button)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addLayout(filters)
        layout.addWidget(self.degraded)
        layout.addWidget(self.table, 1)
        layout.addLayout(actions)

    # -- filters ------------------------------------------------------------------------------

    def _fill_bases(self) -> None:
        self.base_filter.blockSignals(True)
        self.base_filter.clear()
        for base in self.ctx.bases:
            self.base_filter.addItem(base.name, base.id)
        current = self.ctx.base
        if current is not None:
            self.base_filter.setCurrentIndex(max(0, self.base_filter.findData(current.id)))
        self.base_filter.blockSignals(False)

    def _base_chosen(self, index: int) -> None:
        base = self.ctx.base_by_id(int(self.base_filter.itemData(index)))
        if base is not None:
            self.ctx.select_base(base)

    def set_folder(self, folder: tuple[int, str] | None) -> None:
        """The folder selected in the Items tab (None: none), offered as the subtree filter."""
        self.subtree = folder
        self.folder_filter.setEnabled(folder is not None)
        self.folder_filter.setText(f"Only in {folder[1]!r}" if folder else "Only in the selected folder")
        if folder is None and self.folder_filter.isChecked():
            self.folder_filter.setChecked(False)

    # -- searching ----------------------------------------------------------------------------

    def _typed(self, _text: str = "") -> None:
        """Search as you type: restart the pause timer; the search runs when typing stops."""
        if self.query.text().strip():
            self.debounce.start()
        else:
            self.debounce.stop()

    def run_search(self) -> None:
        self.debounce.stop()
        base, quire = self.ctx.base, self.ctx.quire
        text = self.query.text().strip()
        if base is None or quire is None or not text:
            return
        try:
            check_query(text)  # over the bounds: say so, run nothing
            parse(text)  # a query the syntax refuses: say why, run nothing
        except InvalidInput as exc:
            self.status.setText(str(exc))
            return
        self._seq += 1
        subtree = self.subtree[0] if self.subtree is not None and self.folder_filter.isChecked() else None
        request = SearchRequest(
            self._seq,
            base.id,
            text,
            self.mode.currentText(),
            subtree,
            self.type_filter.currentText(),
            DATES.get(self.date_filter.currentText()),
            self.tag_filter.tag(),
        )
        if self.searching:
            self._pending = request  # replaces any older waiting query: it will never run
            return
        self._start(quire, request)

    def _start(self, quire: Quire, request: SearchRequest) -> None:
        self.searching = True
        self.status.setText("Searching…")
        Op(run_request, quire, request, self.search_fn).bound_to(self).on_success(
            lambda found: self._done(request, found)
        ).on_failure(lambda exc: self._failed(request, exc)).run()

    def _done(self, request: SearchRequest, found: Answer) -> None:
        self.searching = False
        if self._run_pending() or request.seq != self._seq:
            return  # superseded: a newer query's results come instead
        if self.ctx.base is None or self.ctx.base.id != request.base_id:
            return
        self.results.set_hits(found.hits)
        self.table.resizeRowsToContents()
        documents = len({row.hit.item_id for row in self.results.rows})
        self.degraded.setText("" if found.degraded is None else found.degraded.sentence)
        self.degraded.setVisible(found.degraded is not None)
        mode = "filters, newest first" if found.mode == FILTER_MODE else found.mode
        self.status.setText(f"{documents} document{'s' if documents != 1 else ''} for “{request.text}” ({mode})")
        if self.results.rows:
            self.table.selectRow(0)
        self._update_buttons()
        self.searched.emit(self.results.hits)

    def _failed(self, request: SearchRequest, exc: BaseException) -> None:
        self.searching = False
        if not self._run_pending() and request.seq == self._seq:
            if isinstance(exc, InvalidInput):  # the person's query: the message is the answer
                self.status.setText(str(exc))
                return
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
            self.set_folder(None)
            self._fill_bases()
            if self.query.text().strip():
                self._typed()
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
        hit = self.current_hit()
        if hit is not None:
            self.open_hit(hit)

    def open_hit(self, hit: Hit) -> None:
        """Open the hit's source at its page or line (``app.open_at``), or the base's copy when it is gone."""
        base, quire = self.ctx.base, self.ctx.quire
        if base is None or quire is None:
            return
        if hit.source_path and Path(hit.source_path).is_file():
            self._open_at(hit, Path(hit.source_path))
            return
        Op(owned_copy_for, quire, self.copies, base.id, hit.item_id).bound_to(self).on_success(
            lambda path: self._open_copy(hit, path)
        ).on_failure(self.ctx.fail).run()

    def _open_at(self, hit: Hit, path: Path) -> None:
        request = open_request(path, hit.location)
        if request.refused is not None:
            self.ctx.warn(request.refused)  # never handed over: it could run as a program
            return
        self.ctx.prompter.open_at(request)
        if request.clipboard:
            self.ctx.info(f"Opened {path.name}; the location ({request.clipboard}) is on the clipboard.")

    def _open_copy(self, hit: Hit, path: Path | str | None) -> None:
        if isinstance(path, str):
            self.ctx.warn(path)  # the item's name is no document the desktop may open: nothing was copied
            return
        if path is None:
            self.show_hit(hit)  # a note, or nothing kept: the viewer shows its text
            return
        self.ctx.info(f"The original of {hit.item_name!r} is gone; opening the copy the base keeps.")
        self._open_at(hit, path)

    def remove_copies(self) -> None:
        """The window is closing: the copies it handed to the desktop go with it."""
        self.copies.remove()

    def show_in_document(self) -> None:
        hit = self.current_hit()
        if hit is not None:
            self.show_hit(hit)

    def show_hit(self, hit: Hit) -> None:
        """Ask for the document viewer on ``hit``, with the listed hits of the same document beside it."""
        base = self.ctx.base
        if base is not None:
            same = [h for h in self.results.hits if h.item_id == hit.item_id] or [hit]
            self.show_hits.emit(base.id, same if hit in same else [hit, *same], hit.chunk_id)
