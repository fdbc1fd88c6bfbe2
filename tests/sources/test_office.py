"""Office formats: CSV, XLSX/ODS, PPTX, ODT, ODP and RTF, as real files built by the tests."""

from __future__ import annotations

import io
import zipfile

import pytest

from knowledge.sources import SourceRejected, archive, parse_bytes, parse_source, spreadsheet

from .conftest import Writer, assert_tiles, rejected, segment_at
from .office_builders import BUDGET, STAFF, make_odp, make_ods, make_odt, make_pptx, make_rtf, make_xlsx


def test_csv_rows_keep_their_headers_and_source_lines(write: Writer) -> None:
    data = b'Region,Amount,Note\nNorth,120,steady\n\n"South\nEast",75,"says ""hi"""\n,,\n'
    parsed = parse_source(write("sales.csv", data))
    assert parsed.text == (
        "columns: Region; Amount; Note\n"
        "Region: North; Amount: 120; Note: steady\n"
        'Region: South East; Amount: 75; Note: says "hi"'
    )
    south = segment_at(parsed, "South East")
    assert (south.page, south.line_start, south.line_end) == (None, 4, 5)  # a quoted value spans two lines
    assert parsed.metadata == {"encoding": "utf-8", "row_count": 3}
    assert (parsed.parser, parsed.mime) == ("csv", "text/csv")
    assert_tiles(parsed)


def test_semicolon_csv_and_tsv_and_blank_headers(write: Writer) -> None:
    assert parse_source(write("eu.csv", b"Stadt;Einwohner\nBonn;300000\n")).text.endswith(
        "Stadt: Bonn; Einwohner: 300000"
    )
    parsed = parse_source(write("t.tsv", b"Name\t\tRole\nGrace\tx\tauditor\n"))
    assert parsed.text.splitlines()[1] == "Name: Grace; B: x; Role: auditor"  # blank header: its column


def test_csv_with_only_empty_cells_is_no_text(write: Writer) -> None:
    assert rejected(write("blank.csv", b",,\n,,\n")).code == "no_text"


@pytest.mark.parametrize(("name", "build"), [("book.xlsx", make_xlsx), ("book.ods", make_ods)])
def test_workbook_sheets_and_rows_are_located(write: Writer, name: str, build: object) -> None:
    parsed = parse_source(write(name, build()))  # type: ignore[operator]
    assert parsed.text.splitlines() == [
        "[Budget] columns: Region; Amount; Owner",
        "[Budget] Region: North; Amount: 120; Owner: Ada",
        "[Budget] Region: South; Amount: 75.5; Owner: Zelmira",
        "[Staff] columns: Name; Role",
        "[Staff] Name: Grace; Role: auditor",
        "[Staff] Name: Linus; Role: quartermaster",
    ]
    linus = segment_at(parsed, "quartermaster")
    assert (linus.page, linus.line_start, linus.line_end) == (2, 3, 3)  # sheet 2, row 3
    assert parsed.metadata == {"sheet_count": 2, "sheets": "Budget, Staff", "row_count": 6}
    assert parsed.parser == "spreadsheet"
    assert_tiles(parsed)


def test_rows_below_blank_rows_keep_the_spreadsheet_row_number(write: Writer) -> None:
    parsed = parse_source(write("late.xlsx", make_xlsx([BUDGET], first_row=4)))
    assert segment_at(parsed, "Zelmira").line_start == 7  # header on row 5, South on row 7


def test_oversized_sheet_range_and_bombs_are_refused(write: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    far = make_xlsx([("Far", [["corner"]])], first_row=1_048_575)  # one cell in the last row: a huge range
    assert segment_at(parse_source(write("far.xlsx", far)), "corner").line_start == 1_048_576
    wide = make_xlsx([("Wide", [["a"] * 200] * 1)], first_row=100_000)  # 100001 rows x 200 columns
    error = rejected(write("wide.xlsx", wide))
    assert error.code == "too_large" and "sheet 1" in error.reason
    monkeypatch.setattr(spreadsheet, "MAX_CELLS", 8)
    assert rejected(write("small.xlsx", make_xlsx([STAFF, BUDGET]))).code == "too_large"
    monkeypatch.setattr(archive, "MAX_UNPACKED_BYTES", 1000)
    assert rejected(write("big.ods", make_ods())).code == "too_large"


def test_broken_office_files_are_parse_errors(write: Writer) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("hello.txt", "a zip, but no office document inside")
    for name in ("a.xlsx", "a.ods", "a.pptx", "a.odt"):
        assert rejected(write(name, b"plain words, not a package")).code == "parse_error"
        assert rejected(write("zip" + name[1:], buffer.getvalue())).code == "parse_error"
    assert rejected(write("half.xlsx", make_xlsx()[:3000])).code == "parse_error"
    assert rejected(write("a.rtf", b"just text, no RTF header")).code == "parse_error"


def test_pptx_one_segment_per_slide_with_notes_and_tables(write: Writer) -> None:
    deck = make_pptx([("Roadmap", "Ship the widget", "Mention the pelorian budget"), ("Risks", "Late parts", "")])
    parsed = parse_source(write("deck.pptx", deck))
    assert parsed.text == (
        "Roadmap\nShip the widget\nNotes: Mention the pelorian budget\n\n"
        "Risks\nLate parts\n\n"
        "Figures\ncolumns: Metric; Value\nMetric: Churn; Value: 4 percent"
    )
    assert [s.page for s in parsed.segments] == [1, 2, 3]
    assert segment_at(parsed, "pelorian").page == 1 and segment_at(parsed, "Churn").page == 3
    assert parsed.metadata["title"] == "Quarterly Deck" and parsed.metadata["slide_count"] == 3
    assert_tiles(parsed)


def test_odt_paragraphs_table_and_meta(write: Writer) -> None:
    data = make_odt(["Hello café world."], [["City", "Population"], ["Oslo", "700000"]], title="Travel")
    parsed = parse_source(write("notes.odt", data))
    assert (
        parsed.text == "Field Notes\n\nHello café world.\n\ncolumns: City; Population\nCity: Oslo; Population: 700000"
    )
    assert parsed.metadata["title"] == "Travel" and parsed.metadata["author"] is None
    assert len(parsed.segments) == 1


def test_rtf_text_with_code_page_escapes_and_no_info_group(write: Writer) -> None:
    parsed = parse_source(write("letter.rtf", make_rtf(["Crème brûlée {recipe}", "Second line"])))
    assert parsed.text == "Crème brûlée {recipe}\nSecond line"
    assert "Hidden Info Title" not in parsed.text and parsed.metadata == {}
    with pytest.raises(SourceRejected) as info:
        parse_bytes(b"{\\rtf1\\ansi {\\fonttbl\\f0 Times;}}", name="empty.rtf")
    assert info.value.code == "no_text"


def test_odp_one_segment_per_slide_with_notes_and_tables(write: Writer) -> None:
    slides = [("Harbour plan", "Dredge the north basin", "Ask about the brindlemoss permit"), ("Budget", "Tight", "")]
    data = make_odp(slides, [["Vessel", "Berth"], ["Skua", "B4"]], title="Harbour")
    parsed = parse_source(write("harbour.odp", data))
    assert parsed.text == (
        "Harbour plan\nDredge the north basin\nNotes: Ask about the brindlemoss permit\n\n"
        "Budget\nTight\n\n"
        "columns: Vessel; Berth\nVessel: Skua; Berth: B4"
    )
    assert [s.page for s in parsed.segments] == [1, 2, 3]
    assert segment_at(parsed, "brindlemoss").page == 1 and segment_at(parsed, "Berth: B4").page == 3
    assert (parsed.parser, parsed.mime) == ("odp", "application/vnd.oasis.opendocument.presentation")
    assert parsed.metadata["title"] == "Harbour" and parsed.metadata["slide_count"] == 3
    assert_tiles(parsed)


def test_odp_that_is_not_a_presentation_or_has_no_text(write: Writer) -> None:
    assert rejected(write("text.odp", make_odt(["a text document under a slide name"]))).code == "parse_error"
    assert rejected(write("blank.odp", make_odp([("", "", "")]))).code == "no_text"
