"""Spreadsheets (``.xlsx``, ``.xlsm``, ``.ods``) through python-calamine: every visible worksheet, row by row.

Each sheet's rows are written as ``[Sheet] header: value; …`` lines (:mod:`knowledge.sources.tables`);
the sheet name on every line lets a hit say which sheet it is from even mid-sheet. One segment per row:
``page`` is the sheet's position in the workbook (1-based) and ``line_start``/``line_end`` the row
number as the spreadsheet shows it, so a hit's location is "sheet 2, row 14".

Cell values are what the file stores (calamine reads cached formula results; formulas themselves are
not read). Hidden sheets and chart sheets are skipped. A sheet whose used range would exceed
``MAX_CELLS`` is refused as ``too_large`` before any row is built: one stray cell at XFD1048576 makes a
dense range of 17 billion cells. That is judged from the sheet XML before calamine reads it
(:mod:`knowledge.sources.sheet_extent`), since calamine allocates the whole range at once and aborts.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from python_calamine import CalamineSheet, CalamineWorkbook, SheetTypeEnum, SheetVisibleEnum

from knowledge.sources.archive import check_package
from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument, SourceRejected, failing_as
from knowledge.sources.sheet_extent import check_sheet_extents
from knowledge.sources.tables import HeaderedRows, Row, join_rows
from knowledge.sources.textutil import clean_value, document

MAX_CELLS = 5_000_000


def parse_spreadsheet(data: bytes, fmt: Format) -> ParsedDocument:
    label = "ODS" if fmt.mime.endswith("spreadsheet") else "XLSX"
    check_package(data, label)
    check_sheet_extents(data, label, MAX_CELLS)
    with failing_as(f"{label} is damaged or not a spreadsheet"):
        workbook = CalamineWorkbook.from_filelike(io.BytesIO(data))
        sheets = [
            meta.name
            for meta in workbook.sheets_metadata
            if meta.typ == SheetTypeEnum.WorkSheet and meta.visible == SheetVisibleEnum.Visible
        ]
    rows: list[Row] = []
    with failing_as(f"{label} content could not be read (unexpected structure)"):
        for position, name in enumerate(sheets, 1):
            rows.extend(_sheet_rows(workbook.get_sheet_by_name(name), position))
    text, segments = join_rows(rows)
    if not text:
        raise SourceRejected("no_text", "spreadsheet has no values")
    metadata = blank_metadata("spreadsheet")
    metadata.update(sheet_count=len(sheets), sheets=clean_value(", ".join(sheets)), row_count=len(rows))
    return document("spreadsheet", text, segments, metadata, fmt.mime)


def _sheet_rows(sheet: CalamineSheet, position: int) -> Iterator[Row]:
    end_row, end_column = sheet.end or (0, 0)
    if (end_row + 1) * (end_column + 1) > MAX_CELLS:
        raise SourceRejected("too_large", f"sheet {position} has more than {MAX_CELLS:,} cells")
    first_column = sheet.start[1] if sheet.start else 0
    table = HeaderedRows(prefix=f"[{clean_value(sheet.name) or position}] ", first_column=first_column)
    for number, values in enumerate(sheet.iter_rows(), 1):  # iter_rows starts at the sheet's first row
        line = table.line(values)
        if line is not None:
            yield Row(line, position, number, number)
