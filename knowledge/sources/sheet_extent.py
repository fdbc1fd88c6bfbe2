"""The cell range an XLSX or ODS sheet spans, found from its XML before calamine reads it.

calamine builds each sheet as a dense grid from its first to its last value cell, allocating the whole
grid at once: a sheet holding ``A1`` and ``XFD1048576`` asks for 17 billion cells (hundreds of GB) and
the process aborts, a crash no Python code can catch. So every part of the package is scanned first, in
bounded chunks, following calamine's own rules for cell positions (a ``<c r="…">`` sets the cell's place;
a cell without ``r`` takes the next column of its row; a row without ``r`` follows the one before). A sheet
whose grid would exceed the cell limit is refused as ``too_large`` before calamine sees it.

The count is cautious: any ``<c>`` with content counts as a value (an empty one calamine drops), so a
refused sheet may be a little smaller than counted, never larger.

An ODS sheet is judged from ``content.xml`` the same way (:class:`_OdsWalked`): a row or cell may stand
for many (``number-rows-repeated``, ``number-columns-repeated``), so 1.5 KB can describe 90 million cells
that calamine would allocate; a cell with a value type or content is a value, an empty ``<table-cell/>``
(LibreOffice's padding to the sheet's end) is not.
"""

from __future__ import annotations

import io
import re
import zipfile

from knowledge.sources.model import SourceRejected, failing_as

_CHUNK = 1024 * 1024
_MAX_TAG = 1024 * 1024  # a row or cell tag longer than this is no spreadsheet's
# A start, end or empty row/cell tag, with or without a namespace prefix (``<x:c>``); ``<c:chart>`` is not one.
_TAG = re.compile(rb"<(/?)(?:[\w.-]+:)?(row|c)(?=[\s/>])([^>]*)>")
_REF = re.compile(rb"""(?<![\w:.-])r\s*=\s*["']([A-Za-z]*)([0-9]+)["']""")
# A cell tag that names its place, and whether it is empty (``/>``).
_REFERENCED = re.compile(rb"""<c\s[^>]*?(?<=\s)r\s*=\s*["']([A-Z]{1,3})([0-9]{1,7})["'][^>]*?(/?)>""")
_TAG_ENDS = (b" ", b">", b"/", b"\t", b"\n", b"\r")
_PREFIXED = re.compile(rb"<[\w.-]+:c[\s/>]")
# A sheet's start or end, a row's start or end, a cell's start (a cell's end says nothing: not matched).
_ODS_TAG = re.compile(
    rb"<(?:(/)(?:[\w.-]+:)?(table|table-row)|(?:[\w.-]+:)?(table|table-row|(?:covered-)?table-cell))(?=[\s/>])([^>]*)>"
)
_ROWS_REPEATED = re.compile(rb"number-rows-repeated\s*=\s*[\"']([0-9]+)")
_COLUMNS_REPEATED = re.compile(rb"number-columns-repeated\s*=\s*[\"']([0-9]+)")


class _Corners:
    """The corners of the value cells seen so far, and how many there were."""

    def __init__(self) -> None:
        self.cells = 0
        self.top = self.left = 1 << 62
        self.bottom = self.right = -1

    def add(self, rows: list[int], columns: list[int]) -> None:
        if rows:
            self.cells += len(rows)
            self.top, self.bottom = min(self.top, min(rows)), max(self.bottom, max(rows))
            self.left, self.right = min(self.left, min(columns)), max(self.right, max(columns))

    def size(self) -> int:
        if self.bottom < 0:
            return 0
        return max(self.cells, (self.bottom - self.top + 1) * (self.right - self.left + 1))


class _Referenced(_Corners):
    """The usual sheet, every cell of which names its place (``<c r="B7">``): its refs alone give the corners.

    ``feed`` answers False on a cell with no ``r`` or a prefixed tag (``<x:c>``): the sheet is then walked
    as calamine walks it (:class:`_Walked`)."""

    def feed(self, text: bytes) -> bool:
        found = _REFERENCED.findall(text)
        if len(found) != sum(text.count(b"<c" + end) for end in _TAG_ENDS) or _PREFIXED.search(text):
            return False
        kept = [(letters, digits) for letters, digits, empty in found if not empty]
        columns = {letters: _column(letters, 0) for letters, _ in kept}
        self.add([int(digits) - 1 for _, digits in kept], [columns[letters] for letters, _ in kept])
        return True


class _Walked(_Corners):
    """calamine's cursor over one sheet's XML: the place of a cell without ``r`` follows from the ones before."""

    def __init__(self) -> None:
        super().__init__()
        self.row = 0
        self.column = 0

    def feed(self, text: bytes) -> bool:
        rows: list[int] = []
        columns: list[int] = []
        for closing, name, attrs in _TAG.findall(text):
            if attrs.endswith(b"/"):
                continue  # an empty <row/> or <c/> holds no value (calamine skips it)
            ref = _REF.search(attrs)
            if name == b"row":
                if closing:
                    self.row, self.column = self.row + 1, 0
                elif ref is not None:
                    self.row = int(ref.group(2)) - 1
            elif not closing:
                row, column = self.row, self.column
                if ref is not None:
                    row, column = int(ref.group(2)) - 1, _column(ref.group(1), column)
                self.column = column + 1
                rows.append(row)
                columns.append(column)
        self.add(rows, columns)
        return True


class _OdsWalked(_Corners):
    """An ODS ``content.xml``: each sheet's rows and cells, repeats counted; the largest sheet's grid."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0
        self.row = self.column = 0
        self.repeat = 1

    def feed(self, text: bytes) -> bool:
        for closing, ended, started, attrs in _ODS_TAG.findall(text):
            name, empty = ended or started, attrs.endswith(b"/")
            if name == b"table":
                self.largest, self.row = self.size(), 0
                self.cells, self.top, self.left, self.bottom, self.right = 0, 1 << 62, 1 << 62, -1, -1
            elif name == b"table-row":
                if closing:
                    self.row += self.repeat
                elif empty:
                    self.row += _repeats(_ROWS_REPEATED, attrs)
                else:
                    self.repeat, self.column = _repeats(_ROWS_REPEATED, attrs), 0
            else:
                width = _repeats(_COLUMNS_REPEATED, attrs) if b"repeated" in attrs else 1
                if not empty or b"value-type" in attrs:
                    self.cells += width * self.repeat
                    self.top, self.bottom = min(self.top, self.row), max(self.bottom, self.row + self.repeat - 1)
                    self.left, self.right = min(self.left, self.column), max(self.right, self.column + width - 1)
                self.column += width
        return True

    def size(self) -> int:
        return max(self.largest, super().size())


def _repeats(pattern: re.Pattern[bytes], attrs: bytes) -> int:
    found = pattern.search(attrs)
    return max(1, int(found.group(1))) if found is not None else 1


def _column(letters: bytes, current: int) -> int:
    if not letters:
        return current
    number = 0
    for letter in letters.upper():
        number = number * 26 + letter - ord("A") + 1
    return number - 1


def check_sheet_extents(data: bytes, label: str, max_cells: int) -> None:
    """Refuse (``too_large``) a package any of whose parts lays out a sheet grid over ``max_cells``."""
    with failing_as(f"{label} is damaged (unreadable ZIP directory)"), zipfile.ZipFile(io.BytesIO(data)) as zf:
        for member in zf.infolist():
            if label == "ODS":  # calamine reads an ODS workbook's sheets from content.xml alone
                if member.filename == "content.xml" and (_scan(zf, member, _OdsWalked(), max_cells) or 0) > max_cells:
                    raise SourceRejected("too_large", f"a sheet spans more than {max_cells:,} cells")
            elif not member.is_dir() and _grid_size(zf, member, max_cells) > max_cells:
                raise SourceRejected("too_large", f"a sheet spans more than {max_cells:,} cells (a cell lies far off)")


def _grid_size(zf: zipfile.ZipFile, member: zipfile.ZipInfo, max_cells: int) -> int:
    referenced = _scan(zf, member, _Referenced(), max_cells)
    return referenced if referenced is not None else _scan(zf, member, _Walked(), max_cells) or 0


def _scan(
    zf: zipfile.ZipFile, member: zipfile.ZipInfo, corners: _Referenced | _Walked | _OdsWalked, max_cells: int
) -> int | None:
    carry = b""
    with zf.open(member) as stream:
        while chunk := stream.read(_CHUNK):
            text = carry + chunk
            cut = text.rfind(b"<")
            if cut == -1 or text.find(b">", cut) != -1:
                cut = len(text)
            if not corners.feed(text[:cut]):
                return None
            carry = text[cut:]
            if len(carry) > _MAX_TAG:
                raise SourceRejected("too_large", "a sheet has an XML tag over 1 MB")
            if corners.size() > max_cells:
                return corners.size()
    return corners.size() if corners.feed(carry) else None
