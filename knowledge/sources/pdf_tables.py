"""Ruled tables in PDF pages, read by pdfplumber and written as ``header: value`` rows (``tables.py``).

pdfplumber lays a page out with pdfminer, which costs more than pypdf's whole text extraction of that page,
so only pages that draw a grid pay for it. :class:`RuleProbe` watches the path operators pypdf already
walks while extracting a page's text (no second parse of the content stream) and calls a page *ruled* when
it strokes or fills at least three distinct horizontal and three distinct vertical rules, the least a
table of two rows and two columns needs. Underlines, a frame around the page or code-block backgrounds
fall short of that, so a text PDF never opens pdfplumber.

A table is kept when it has at least two rows and two columns; its first row with a value names the
columns. Table extraction is a bonus on top of the page's text: a page pdfplumber cannot read keeps its
text and is logged, never failing the document; at most :data:`MAX_TABLE_PAGES` pages of one document are
examined, so a long printed spreadsheet stays within the parse limits.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence

from knowledge.sources.tables import HeaderedRows

log = logging.getLogger(__name__)

# pdfminer warns about every oddity of a sloppy file, as pypdf does
logging.getLogger("pdfminer").setLevel(logging.ERROR)

MAX_TABLE_PAGES = 100
_MIN_RULES = 3  # distinct positions each way: a 2 x 2 grid has three horizontal and three vertical rules
_MIN_RULE_LENGTH = 6.0  # points; shorter strokes are glyph parts or underscores, not table rules
_FLAT = 1.0  # points of slant still counted as a horizontal or vertical rule
_PATH_OPERATORS = frozenset({b"m", b"l", b"re"})

Matrix = Sequence[float]


class RuleProbe:
    """Collects the horizontal and vertical rules a page draws, from pypdf's operator visitor."""

    def __init__(self) -> None:
        self._rows: set[int] = set()  # y of horizontal rules, rounded to the point
        self._columns: set[int] = set()  # x of vertical rules
        self._point: tuple[float, float] | None = None

    def visit(self, operator: bytes, operands: Sequence[object], cm: Matrix, _tm: Matrix) -> None:
        """``visitor_operand_before`` of :meth:`pypdf.PageObject.extract_text`."""
        if operator not in _PATH_OPERATORS:
            return
        try:
            numbers = [float(value) for value in operands]  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return
        if operator == b"m" and len(numbers) == 2:
            self._point = _apply(cm, numbers[0], numbers[1])
        elif operator == b"l" and len(numbers) == 2:
            end = _apply(cm, numbers[0], numbers[1])
            if self._point is not None:
                self._edge(self._point, end)
            self._point = end
        elif operator == b"re" and len(numbers) == 4:
            x, y, width, height = numbers
            corners = [_apply(cm, x, y), _apply(cm, x + width, y), _apply(cm, x + width, y + height)]
            corners.append(_apply(cm, x, y + height))
            for start, end in zip(corners, corners[1:] + corners[:1], strict=True):
                self._edge(start, end)

    def ruled(self) -> bool:
        return len(self._rows) >= _MIN_RULES and len(self._columns) >= _MIN_RULES

    def _edge(self, start: tuple[float, float], end: tuple[float, float]) -> None:
        dx, dy = abs(end[0] - start[0]), abs(end[1] - start[1])
        if dy <= _FLAT and dx >= _MIN_RULE_LENGTH:
            self._rows.add(round(start[1]))
        elif dx <= _FLAT and dy >= _MIN_RULE_LENGTH:
            self._columns.add(round(start[0]))


def _apply(cm: Matrix, x: float, y: float) -> tuple[float, float]:
    a, b, c, d, e, f = (float(value) for value in cm[:6])
    return a * x + c * y + e, b * x + d * y + f


def page_tables(data: bytes, indexes: Sequence[int]) -> dict[int, list[str]]:
    """The ``header: value`` text of each table on the pages at ``indexes`` (0-based), by page index;
    pages without a table of two rows and two columns are left out."""
    if not indexes:
        return {}
    if len(indexes) > MAX_TABLE_PAGES:
        log.info("PDF has %d ruled pages; tables read on the first %d only", len(indexes), MAX_TABLE_PAGES)
    import pdfplumber

    found: dict[int, list[str]] = {}
    try:
        document = pdfplumber.open(
            io.BytesIO(data), pages=[index + 1 for index in indexes[:MAX_TABLE_PAGES]], raise_unicode_errors=False
        )
    except Exception:
        log.info("pdfplumber cannot open this PDF; its tables are read as plain page text", exc_info=True)
        return {}
    with document:
        for page in document.pages:
            try:
                texts = [text for table in page.find_tables() if (text := _table_text(table.extract()))]
            except Exception:
                log.info("PDF page %d: tables could not be read; page text kept", page.page_number, exc_info=True)
                texts = []
            finally:
                page.close()
            if texts:
                found[page.page_number - 1] = texts
    return found


def _table_text(rows: Sequence[Sequence[str | None]]) -> str:
    filled = [row for row in rows if any(cell and cell.strip() for cell in row)]
    if len(filled) < 2 or max(len(row) for row in filled) < 2:
        return ""
    table = HeaderedRows()
    lines = (table.line(row) for row in filled)
    return "\n".join(line for line in lines if line)
