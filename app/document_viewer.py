"""The document viewer: a search hit shown where it stands, with the document's other hits a step away.

Opened from a search hit ("Show in document", a double-click). What it shows depends on the document:

* a PDF: the hit's page, rendered by pdfium from the base's own copy, the passage painted over its
  text (``app.pdf_pages``, located by ``app.passage_match``); the pages before and after on request;
* text, Markdown, code, CSV: the text scrolled to the hit's lines, which are selected;
* anything else (Word, EPUB, HTML, slides…) and notes: the extracted text with the passage selected.

The other hits of the same document are highlighted too; "Previous hit"/"Next hit" step through them in
reading order. "Open in default app" hands the source to the desktop as the search panel does.

Threading contract: main thread. One ``Op`` (:func:`open_document`) reads the hits
(``lifecycle.open_passages``, which refuses a deleted or re-indexed item) and, for a PDF, opens it and
renders the hit's page; every other page is rendered by an ``Op`` when it is shown, and a page that
arrives after another was asked for is dropped (sequence numbers). When the GUI deletes the item, the
viewer drops what it shows at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPaintEvent, QPen, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.ops import Op, describe_error
from app.pdf_pages import PdfPages, PdfUnreadable, RenderedPage, Wanted
from knowledge import lifecycle
from knowledge.lifecycle import Changes, DocumentPassages, Passage
from knowledge.runtime import Quire
from knowledge.search import Hit

CURRENT_FILL = QColor(255, 200, 0, 110)
OTHER_FILL = QColor(255, 241, 168, 90)
CURRENT_EDGE = QColor(214, 120, 0)
PAGE_WIDTH_PX = 900  # the viewer's first width: a letter page at about 110 dpi
MIN_PAGE_WIDTH_PX = 400
EXCERPT_CHARS = 60_000  # text shown on each side of a hit in a long document (see _set_window)
_KEEP = QTextCursor.MoveMode.KeepAnchor


class PageCanvas(QWidget):
    """One rendered page with its passages painted over it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.page: RenderedPage | None = None

    def set_page(self, page: RenderedPage | None) -> None:
        self.page = page
        self.setFixedSize(page.image.size() if page is not None else QSize(0, 0))
        self.update()

    def current_rects(self) -> list[QRectF]:
        return [r for h in self.page.highlights if h.current for r in h.rects] if self.page else []

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.page is None:
            return
        painter = QPainter(self)
        painter.drawImage(0, 0, self.page.image)
        others = QPainterPath()  # one filled shape: where two hits overlap, the colour is not doubled
        others.setFillRule(Qt.FillRule.WindingFill)
        for highlight in self.page.highlights:
            for rect in highlight.rects:
                if not highlight.current:
                    others.addRect(rect.adjusted(-2, -2, 2, 2))
        painter.fillPath(others.simplified(), OTHER_FILL)
        painter.setPen(QPen(CURRENT_EDGE, 1.5))
        painter.setBrush(CURRENT_FILL)
        for rect in self.current_rects():
            painter.drawRect(rect.adjusted(-2, -2, 2, 2))
        painter.end()


@dataclass(frozen=True)
class Shown:
    """What the viewer shows now (tests read it): the PDF page, or the text selection."""

    kind: str  # "pdf", "lines", "text", or "message"
    page: int | None = None  # 1-based
    selection: tuple[int, int] | None = None  # positions in the text view's document


class DocumentViewer(QDialog):
    def __init__(
        self,
        ctx: AppContext,
        base_id: int,
        hits: Sequence[Hit],
        current_chunk_id: int,
        open_external: Callable[[Hit], None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("documentViewer")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.ctx, self.base_id = ctx, base_id
        self.hits = {hit.chunk_id: hit for hit in hits}
        self.item_id = hits[0].item_id
        self.current_chunk_id = current_chunk_id
        self.open_external = open_external
        self.document: DocumentPassages | None = None
        self.pdf: PdfPages | None = None
        self.current = 0  # index into document.passages
        self.page_index = 0  # 0-based, the page shown (PDF)
        self._page_seq = 0
        self._shown_seq = 0  # the request whose page is on screen
        self.loaded = False  # the document (or the reason it cannot be shown) has arrived
        self.shown = Shown("message")
        self._window = (0, 0)  # the part of the extracted text the text view holds
        self._excerpt = ""
        self.first_line = 1  # the text view's first line, counted in the extracted text
        self.setWindowTitle(f"{hits[0].item_name} — Quire")
        self._build()
        ctx.changes_made.connect(self._changes_made)

    def _build(self) -> None:
        self.header = QLabel("Opening the document…")
        self.header.setObjectName("viewerHeader")
        self.header.setWordWrap(True)
        self.message = QLabel("")
        self.message.setObjectName("viewerMessage")
        self.message.setWordWrap(True)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.canvas = PageCanvas()
        self.page_area = QScrollArea()
        self.page_area.setWidget(self.canvas)
        self.page_area.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        self.text = QPlainTextEdit()
        self.text.setObjectName("viewerText")
        self.text.setReadOnly(True)
        self.stack = QStackedWidget()
        for widget in (self.message, self.page_area, self.text):
            self.stack.addWidget(widget)
        self.prev_hit = QPushButton("Previous hit")
        self.next_hit = QPushButton("Next hit")
        self.prev_page = QPushButton("Previous page")
        self.next_page = QPushButton("Next page")
        self.open_button = QPushButton("Open in default app")
        self.prev_hit.clicked.connect(lambda: self.go_to_hit(self.current - 1))
        self.next_hit.clicked.connect(lambda: self.go_to_hit(self.current + 1))
        self.prev_page.clicked.connect(lambda: self.go_to_page(self.page_index - 1))
        self.next_page.clicked.connect(lambda: self.go_to_page(self.page_index + 1))
        self.open_button.clicked.connect(self._open_external)
        bar = QHBoxLayout()
        for button, name in (
            (self.prev_hit, "Previous hit in this document"),
            (self.next_hit, "Next hit in this document"),
            (self.prev_page, "Previous page"),
            (self.next_page, "Next page"),
            (self.open_button, "Open the source in its default application"),
        ):
            button.setAccessibleName(name)
            bar.addWidget(button)
        bar.insertStretch(2, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.stack, 1)
        layout.addLayout(bar)
        self.resize(PAGE_WIDTH_PX + 80, 860)
        self._update_controls()

    # -- loading ------------------------------------------------------------------------------

    def load(self) -> None:
        quire = self.ctx.quire
        if quire is None:
            return
        width = self._page_width()
        Op(open_document, quire, self.base_id, self.item_id, list(self.hits), self.current_chunk_id, width).bound_to(
            self
        ).on_success(self._opened).on_failure(self._refused).run()

    def _opened(self, opened: Opened) -> None:
        self.document, self.current = opened.document, opened.current
        if opened.unreadable is not None:
            self._unreadable(PdfUnreadable(opened.unreadable))
        elif opened.pdf is not None and opened.first_page is not None:
            self.pdf, self.page_index = opened.pdf, opened.first_page.index
            self._page_seq += 1
            self._page_rendered(self._page_seq, opened.first_page)
            self._update_controls()
        else:
            self._show_text(opened.document)

    def _refused(self, exc: BaseException) -> None:
        self._show_message(describe_error(exc))

    def _unreadable(self, exc: BaseException) -> None:
        """pdfium cannot show this PDF: say so, and show the passage as text instead."""
        reason = str(exc) if isinstance(exc, PdfUnreadable) else describe_error(exc)
        document = self.document
        if document is None:
            self._show_message(reason)
            return
        self._show_text(document)
        self.header.setText(f"{reason} Its text is shown instead. · {self._hit_label()}")

    def _show_message(self, text: str) -> None:
        self.loaded = True
        self.document, self.shown = None, Shown("message")
        self._release_pdf()
        self.canvas.set_page(None)
        self.text.clear()
        self._window, self._excerpt = (0, 0), ""
        self.message.setText(text)
        self.header.setText(text)
        self.stack.setCurrentWidget(self.message)
        self._update_controls()

    # -- passages -----------------------------------------------------------------------------

    @property
    def rendering(self) -> bool:
        """A page was asked for and has not been shown yet."""
        return self.pdf is not None and self._shown_seq != self._page_seq

    def passage(self) -> Passage | None:
        document = self.document
        return document.passages[self.current] if document and document.passages else None

    def go_to_hit(self, index: int) -> None:
        document = self.document
        if document is None or not 0 <= index < len(document.passages):
            return
        self.current = index
        passage = document.passages[index]
        if self.pdf is not None:
            self.go_to_page((passage.location.page or 1) - 1)
        else:
            self._select(passage)
        self._update_controls()

    def go_to_page(self, index: int) -> None:
        pdf = self.pdf
        if pdf is None or not 0 <= index < pdf.count:
            return
        self.page_index = index
        self._page_seq += 1
        seq = self._page_seq
        Op(pdf.render, index, self._page_width(), self._wanted(index)).bound_to(self).on_success(
            lambda page: self._page_rendered(seq, page)
        ).on_failure(self._unreadable).run()
        self._update_controls()

    def _wanted(self, index: int) -> list[Wanted]:
        passages = self.document.passages if self.document else ()
        return wanted_on(passages, index, self.passage())

    def _page_width(self) -> int:
        return max(MIN_PAGE_WIDTH_PX, self.page_area.viewport().width() - 8)  # the view's width: no sideways scroll

    def _page_rendered(self, seq: int, page: RenderedPage) -> None:
        if seq != self._page_seq or self.pdf is None:
            return  # another page was asked for meanwhile
        self.loaded, self._shown_seq = True, seq
        self.canvas.set_page(page)
        self.stack.setCurrentWidget(self.page_area)
        self.shown = Shown("pdf", page=page.index + 1)
        rects = self.canvas.current_rects()
        if rects:
            top = min(r.top() for r in rects)
            self.page_area.ensureVisible(int(rects[0].left()), int(top), 40, 120)
        else:
            self.page_area.verticalScrollBar().setValue(0)
        note = f" · {page.unlocated} passage(s) not located on this page's text" if page.unlocated else ""
        self.header.setText(f"{self._hit_label()} · page {page.index + 1} of {page.count}{note}")

    def _show_text(self, document: DocumentPassages) -> None:
        self.loaded = True
        self.stack.setCurrentWidget(self.text)
        self._window = (0, 0)
        if document.passages:
            self._select(document.passages[self.current])
        else:
            self._set_window(document, 0, 0)
        self._update_controls()

    def _set_window(self, document: DocumentPassages, start: int, end: int) -> None:
        """Show the text around ``start``..``end``: at most ``EXCERPT_CHARS`` on each side, cut at line
        breaks. Setting text costs the main thread about 0.2 ms per kilobyte (measured: 515 ms for
        2.3 MB under load), so a long document is shown as an excerpt around the hit."""
        text = document.text
        low = 0 if start <= EXCERPT_CHARS else text.rfind("\n", 0, start - EXCERPT_CHARS) + 1
        high = len(text) if len(text) - end <= EXCERPT_CHARS else text.find("\n", end + EXCERPT_CHARS)
        high = len(text) if high < 0 else high
        if (low, high) == self._window:
            return
        self._window = (low, high)
        self._excerpt = text[low:high]
        self.text.setPlainText(self._excerpt)
        self.first_line = text.count("\n", 0, low) + 1
        marks = []
        for passage in document.passages:  # every hit in a soft colour; the current one is the selection
            if low <= passage.start and passage.end <= high:
                mark = QTextEdit.ExtraSelection()
                mark.format = QTextCharFormat()
                mark.format.setBackground(OTHER_FILL)
                mark.cursor = self._cursor(document, passage)
                marks.append(mark)
        self.text.setExtraSelections(marks)

    def _select(self, passage: Passage) -> None:
        document = self.document
        if document is None:
            return
        self._set_window(document, passage.start, passage.end)
        cursor = self._cursor(document, passage)
        self.text.setTextCursor(cursor)
        self.text.centerCursor()
        kind = "text" if document.kind == "pdf" else document.kind  # a PDF shown as text: pdfium failed
        self.shown = Shown(kind, selection=(cursor.selectionStart(), cursor.selectionEnd()))
        low, high = self._window
        excerpt = "" if (low, high) == (0, len(document.text)) else " · an excerpt around it"
        self.header.setText(f"{self._hit_label()} · {passage.location.describe() or 'in the text'}{excerpt}")

    def _cursor(self, document: DocumentPassages, passage: Passage) -> QTextCursor:
        """The passage as a selection in the shown excerpt; a line-based document's is its whole lines."""
        low = self._window[0]
        excerpt = self._excerpt
        cursor = QTextCursor(self.text.document())
        cursor.setPosition(_utf16(excerpt, passage.start - low))
        if document.kind == "lines":
            cursor.movePosition(QTextCursor.MoveOperation.StartOfBlock)
            cursor.setPosition(_utf16(excerpt, max(passage.start, passage.end - 1) - low), _KEEP)
            cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, _KEEP)
        else:
            cursor.setPosition(_utf16(excerpt, passage.end - low), _KEEP)
        return cursor

    def _hit_label(self) -> str:
        document = self.document
        if document is None or not document.passages:
            return ""
        gone = f" ({document.missing} no longer in it)" if document.missing else ""
        return f"{document.name} · hit {self.current + 1} of {len(document.passages)}{gone}"

    def _update_controls(self) -> None:
        document, pdf = self.document, self.pdf
        count = len(document.passages) if document else 0
        self.prev_hit.setEnabled(self.current > 0 and count > 0)
        self.next_hit.setEnabled(self.current < count - 1)
        self.prev_page.setVisible(pdf is not None)
        self.next_page.setVisible(pdf is not None)
        self.prev_page.setEnabled(pdf is not None and self.page_index > 0)
        self.next_page.setEnabled(pdf is not None and self.page_index < pdf.count - 1)
        self.open_button.setEnabled(self.open_external is not None and document is not None)

    def _open_external(self) -> None:
        passage = self.passage()
        hit = self.hits.get(passage.chunk_id) if passage else None
        if hit is not None and self.open_external is not None:
            self.open_external(hit)

    # -- life ---------------------------------------------------------------------------------

    def _changes_made(self, changes: Changes) -> None:
        if any(int(item) == self.item_id and status == "deleting" for item, status in changes.statuses.items()):
            self._show_message("This document was deleted; nothing of it is shown any more.")

    def _release_pdf(self) -> None:
        pdf, self.pdf = self.pdf, None
        self._page_seq += 1  # a render in flight is dropped when it arrives
        if pdf is not None:
            Op(pdf.close).run()  # off the main thread: a render may hold pdfium's lock

    def done(self, result: int) -> None:
        self._release_pdf()
        super().done(result)


@dataclass(frozen=True)
class Opened:
    """What the first trip off the main thread brings: the hits, and for a PDF its hit's page."""

    document: DocumentPassages
    current: int  # index of the chosen hit in ``document.passages``
    pdf: PdfPages | None = None
    first_page: RenderedPage | None = None
    unreadable: str | None = None  # why pdfium cannot show the PDF (its text is shown instead)


def open_document(
    quire: Quire, base_id: int, item_id: int, chunk_ids: list[int], current_chunk_id: int, width: int
) -> Opened:
    """In an ``Op``: read the hits, and for a PDF open it and render the chosen hit's page, in one trip
    (each hop back through the main thread's queue costs a frame or more on a busy machine)."""
    document = lifecycle.open_passages(quire, base_id, item_id, chunk_ids)
    ids = [p.chunk_id for p in document.passages]
    current = ids.index(current_chunk_id) if current_chunk_id in ids else 0
    if document.kind != "pdf" or document.original is None or not document.passages:
        return Opened(document, current)
    try:
        pdf = PdfPages(document.original)
    except PdfUnreadable as exc:
        return Opened(document, current, unreadable=str(exc))
    passage = document.passages[current]
    index = min(max((passage.location.page or 1) - 1, 0), pdf.count - 1)
    try:
        page = pdf.render(index, width, wanted_on(document.passages, index, passage))
    except PdfUnreadable as exc:
        pdf.close()
        return Opened(document, current, unreadable=str(exc))
    return Opened(document, current, pdf, page)


def wanted_on(passages: Sequence[Passage], index: int, current: Passage | None) -> list[Wanted]:
    """The hits that start on page ``index`` (0-based) or run on to it from the page before."""
    chosen = None if current is None else current.chunk_id
    return [
        Wanted(p.text, p.location.page == index + 1, p.chunk_id == chosen)
        for p in passages
        if p.location.page in (index + 1, index)
    ]


def _utf16(text: str, index: int) -> int:
    """A Python string index as a Qt text position (Qt counts UTF-16 code units)."""
    return len(text[: max(0, min(index, len(text)))].encode("utf-16-le")) // 2
