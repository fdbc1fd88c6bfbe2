"""One PDF page at a time, rendered by pdfium with the passages on it located as rectangles.

Threading contract: every call runs off the main thread (the viewer's ``Op``s) and holds ``_PDFIUM``,
because pdfium is not thread-safe; the window is the only pdfium user in its process (OCR renders in
the parse worker's process). A page is rendered on demand, when it is shown, so opening a 300-page PDF
costs one page. The result carries a ``QImage`` (safe to build off the main thread, unlike a pixmap).

The document is the base's owned copy (``lifecycle.open_passages``), never a path from outside. A file
pdfium cannot open or a page it cannot render raises :class:`PdfUnreadable` with a sentence to show.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage

from app.passage_match import Folded, fold, match_on_page

log = logging.getLogger(__name__)

_PDFIUM = threading.Lock()
MAX_SIDE_PX = 4000  # a page larger than this (a poster, a map) is drawn smaller: memory stays bounded
Box = tuple[float, float, float, float]  # left, bottom, right, top in PDF points


class PdfUnreadable(Exception):
    """pdfium could not open the document or render a page; the message is for people."""


@dataclass(frozen=True)
class Wanted:
    """A passage to locate on a page: its text, whether it starts there (else it began on the page before),
    and whether it is the hit being shown."""

    text: str
    starts_here: bool
    current: bool


@dataclass(frozen=True)
class Highlight:
    current: bool
    rects: tuple[QRectF, ...]  # in image pixels
    boxes: tuple[Box, ...]  # the same, in PDF points


@dataclass(frozen=True)
class RenderedPage:
    index: int  # 0-based
    count: int
    image: QImage
    highlights: tuple[Highlight, ...]
    unlocated: int  # passages asked for that were not found on the page (a scan, another text order)


class PdfPages:
    def __init__(self, path: Path) -> None:
        with _PDFIUM:
            try:
                self._doc = pdfium.PdfDocument(str(path))
                self.count = len(self._doc)
            except (pdfium.PdfiumError, OSError, ValueError) as exc:
                log.info("pdfium cannot open a PDF for the viewer", exc_info=True)
                raise PdfUnreadable("This PDF cannot be shown: pdfium could not open it.") from exc
        if self.count == 0:
            raise PdfUnreadable("This PDF has no pages to show.")

    def close(self) -> None:
        with _PDFIUM:
            self._doc.close()

    def render(self, index: int, width_px: int, wanted: Sequence[Wanted] = ()) -> RenderedPage:
        """Page ``index`` drawn ``width_px`` wide, with each wanted passage located on it."""
        with _PDFIUM:
            try:
                return self._render(index, width_px, wanted)
            except pdfium.PdfiumError as exc:
                log.info("pdfium cannot render page %d for the viewer", index + 1, exc_info=True)
                shown = f"Page {index + 1} of this PDF cannot be shown: pdfium could not render it."
                raise PdfUnreadable(shown) from exc

    def _render(self, index: int, width_px: int, wanted: Sequence[Wanted]) -> RenderedPage:
        page = self._doc[index]
        width, height = page.get_size()
        scale = min(width_px / max(width, 1.0), MAX_SIDE_PX / max(width, height, 1.0))
        bitmap = page.render(scale=scale, prefer_bgrx=True, draw_annots=True)
        image = QImage(
            memoryview(bitmap.buffer).cast("B"), bitmap.width, bitmap.height, bitmap.stride, QImage.Format.Format_RGB32
        ).copy()  # own the pixels: the bitmap's buffer goes with it
        convert = bitmap.get_posconv(page)
        textpage = page.get_textpage()
        letters = fold(_page_chars(textpage))
        highlights: list[Highlight] = []
        unlocated = 0
        for passage in wanted:
            found = self._locate(index, letters, passage)
            if found is None:
                unlocated += 1
                continue
            boxes = _boxes(textpage, *found)
            rects = tuple(_to_pixels(convert, box) for box in boxes)
            highlights.append(Highlight(passage.current, rects, boxes))
        return RenderedPage(index, self.count, image, tuple(highlights), unlocated)

    def _locate(self, index: int, letters: Folded, passage: Wanted) -> tuple[int, int] | None:
        if passage.starts_here:
            match = match_on_page(letters, passage.text)
            return None if match is None else (match.first, match.last)
        if index == 0:
            return None
        before = match_on_page(fold(_page_chars(self._doc[index - 1].get_textpage())), passage.text)
        if before is None or not before.remainder:
            return None  # it ended on the page before
        match = match_on_page(letters, before.remainder, continued=True)
        return None if match is None else (match.first, match.last)


def _page_chars(textpage: pdfium.PdfTextPage) -> str:
    """The page's characters, one per pdfium character index (so a match indexes its boxes directly)."""
    out = []
    for i in range(textpage.count_chars()):
        code = pdfium_c.FPDFText_GetUnicode(textpage, i)
        out.append(chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else " ")
    return "".join(out)


def _boxes(textpage: pdfium.PdfTextPage, first: int, last: int) -> tuple[Box, ...]:
    """pdfium's text rectangles for characters ``first``..``last``, joined into one per line run."""
    count = textpage.count_rects(first, last - first + 1)
    return _join_lines([textpage.get_rect(i) for i in range(count)])


def _join_lines(boxes: list[Box]) -> tuple[Box, ...]:
    """pdfium gives a rectangle per text object, which for some writers is a glyph: join the ones that
    share a line (overlapping by half their height) and nearly touch (a gap under two line heights),
    so a highlight reads as a marker stroke per line, and never bridges two columns."""
    lines: list[list[Box]] = []
    for box in sorted(boxes, key=lambda b: -(b[1] + b[3])):
        line = lines[-1] if lines else None
        if line is not None and _same_line(line[0], box):
            line.append(box)
        else:
            lines.append([box])
    joined: list[Box] = []
    for line in lines:
        runs: list[Box] = []
        for box in sorted(line, key=lambda b: b[0]):
            if runs and box[0] - runs[-1][2] < 2 * (box[3] - box[1]):
                left, bottom, right, top = runs[-1]
                runs[-1] = (left, min(bottom, box[1]), max(right, box[2]), max(top, box[3]))
            else:
                runs.append(box)
        joined.extend(runs)
    return tuple(joined)


def _same_line(a: Box, b: Box) -> bool:
    overlap = min(a[3], b[3]) - max(a[1], b[1])
    return overlap > 0.5 * min(a[3] - a[1], b[3] - b[1])


def _to_pixels(convert: pdfium.PdfPosConv, box: Box) -> QRectF:
    left, bottom, right, top = box
    x1, y1 = convert.to_bitmap(left, top)
    x2, y2 = convert.to_bitmap(right, bottom)
    return QRectF(min(x1, x2), min(y1, y2), abs(x2 - x1), abs(y2 - y1))
