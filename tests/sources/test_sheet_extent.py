"""A far-off spreadsheet cell is refused as too large before calamine allocates the sheet's whole grid.

calamine aborts the process on the allocation (a Rust abort, not an exception), so the parse runs in a child
interpreter here: on code that lets calamine read such a sheet the child dies instead of answering.
"""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import xlsxwriter

from knowledge.sources import parse_source, spreadsheet

from .conftest import Writer, rejected, segment_at
from .office_builders import make_ods, make_xlsx

_PARSE = (
    "import resource, sys\n"
    "if int(sys.argv[2]):\n"
    "    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))\n"
    "from knowledge.sources import SourceRejected, parse_source\n"
    "try:\n"
    "    parse_source(sys.argv[1])\n"
    "    print('parsed')\n"
    "except SourceRejected as exc:\n"
    "    print(exc.code)\n"
)


def _corners(top: tuple[int, int], bottom: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    workbook = xlsxwriter.Workbook(buffer, {"in_memory": True})
    sheet = workbook.add_worksheet("Far")
    sheet.write(*top, "near")
    sheet.write(*bottom, "corner")
    workbook.close()
    return buffer.getvalue()


def _parsed_in_child(path: Path, memory_bytes: int = 0) -> str:
    """The parse's answer in a child interpreter, under an address-space limit as the parse process has."""
    done = subprocess.run(
        [sys.executable, "-c", _PARSE, str(path), str(memory_bytes)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"the parse process died ({done.returncode}): {done.stderr[-300:]}"
    return done.stdout.strip()


def test_a_cell_at_xfd1048576_is_too_large_not_a_crash(write: Writer) -> None:
    far = write("far.xlsx", _corners((0, 0), (1_048_575, 16_383)))
    assert _parsed_in_child(far) == "too_large"
    error = rejected(far)
    assert error.code == "too_large" and "cells" in error.reason


def test_cells_without_references_are_placed_as_calamine_places_them(
    write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = "".join("<row><c t='inlineStr'><is><t>x</t></is></c></row>" for _ in range(3))
    row = "<row r='4'>" + "<c t='inlineStr'><is><t>y</t></is></c>" * 5 + "</row>"
    sheet = f"<worksheet><sheetData>{rows}{row}</sheetData></worksheet>".encode()
    data = _replace_part(make_xlsx([("S", [["a"]])]), "xl/worksheets/sheet1.xml", sheet)
    parsed = parse_source(write("plain.xlsx", data))
    assert "y" in parsed.text
    monkeypatch.setattr(spreadsheet, "MAX_CELLS", 19)  # 4 rows x 5 columns = 20 cells
    assert rejected(write("plain2.xlsx", data)).code == "too_large"


def test_a_declared_huge_dimension_alone_is_read(write: Writer) -> None:
    data = make_xlsx([("Small", [["Name", "Role"], ["Grace", "auditor"]])])
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        sheet = zf.read("xl/worksheets/sheet1.xml").replace(
            b'<dimension ref="A1:B2"/>', b'<dimension ref="A1:XFD1048576"/>'
        )
    assert b"XFD1048576" in sheet
    parsed = parse_source(write("declared.xlsx", _replace_part(data, "xl/worksheets/sheet1.xml", sheet)))
    assert segment_at(parsed, "Grace").line_start == 2


def _replace_part(data: bytes, name: str, content: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, content if info.filename == name else zin.read(info.filename))
    return out.getvalue()


def _ods_with_rows(rows: str) -> bytes:
    data = make_ods([("Sheet", [["Name", "Role"], ["Grace", "auditor"]])])
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        content = zf.read("content.xml").decode()
    end = content.rindex("</table:table-row>") + len("</table:table-row>")
    return _replace_part(data, "content.xml", (content[:end] + rows + content[end:]).encode())


def test_an_ods_of_repeated_value_cells_is_too_large_not_a_crash(write: Writer) -> None:
    # 1.5 KB describing 90 million cells: calamine allocates them all (several GB) and the process aborts
    cell = '<table:table-cell table:number-columns-repeated="90" office:value-type="float" office:value="1"/>'
    bomb = write(
        "bomb.ods", _ods_with_rows(f'<table:table-row table:number-rows-repeated="1000000">{cell}</table:table-row>')
    )
    assert _parsed_in_child(bomb, memory_bytes=2 << 30) == "too_large"
    assert rejected(bomb).code == "too_large"


def test_an_ods_padded_to_the_sheet_end_with_empty_cells_is_read(write: Writer) -> None:
    # what LibreOffice writes after the last row: empty, styled cells repeated to the end of the sheet
    padding = (
        '<table:table-row table:number-rows-repeated="1048574">'
        '<table:table-cell table:style-name="ce1" table:number-columns-repeated="1024"/></table:table-row>'
    )
    parsed = parse_source(write("padded.ods", _ods_with_rows(padding)))
    assert segment_at(parsed, "Grace").line_start == 2
