"""PDF: page segments, metadata, and the damaged/encrypted/scanned refusals."""

from __future__ import annotations

import logging
import random

import pytest

from knowledge.sources import parse_bytes, parse_source

from .builders import encrypt_pdf, make_pdf, ruled_table
from .conftest import Writer, assert_tiles, rejected, segment_at

PAGES = [["Alpha page one", "continues here"], ["Beta (page two)"], [], ["Delta on page \\ four"]]
INFO = {
    "Title": "Field Guide", "Author": "Ann Author", "Subject": "Birds", "Keywords": "heron, egret",
    "CreationDate": "D:20240102030405+01'00'", "ModDate": "D:20240203", "Producer": "HandWriter 1.0",
    "Creator": "Editor", "Trapped": "False",
}  # fmt: skip


def test_pages_become_segments_with_page_numbers(write: Writer) -> None:
    parsed = parse_source(write("guide.pdf", make_pdf(PAGES, INFO)))
    assert (parsed.parser, parsed.parser_version, parsed.mime) == ("pdf", "pdf-3", "application/pdf")
    assert "Alpha page one\ncontinues here" in parsed.text
    assert segment_at(parsed, "Alpha").page == 1
    assert segment_at(parsed, "continues").page == 1
    assert segment_at(parsed, "Beta (page two)").page == 2
    assert segment_at(parsed, "Delta on page \\ four").page == 4  # the blank page 3 has no segment
    assert [s.page for s in parsed.segments] == [1, 2, 4]
    assert all(s.line_start is None for s in parsed.segments)
    assert_tiles(parsed)


def test_metadata_fields(write: Writer) -> None:
    parsed = parse_source(write("guide.pdf", make_pdf(PAGES, INFO)))
    assert parsed.metadata == {
        "title": "Field Guide", "author": "Ann Author", "subject": "Birds", "keywords": "heron, egret",
        "created": "2024-01-02T03:04:05+01:00", "modified": "2024-02-03T00:00:00", "page_count": 4,
        "ocr": None, "ocr_pages": None,  # the blank page 3 was OCR'd and held nothing
    }  # fmt: skip


def test_no_info_dictionary_and_malformed_date() -> None:
    bare = parse_bytes(make_pdf([["text"]]), name="a.pdf")
    assert bare.metadata["title"] is None and bare.metadata["page_count"] == 1
    odd = parse_bytes(make_pdf([["text"]], {"CreationDate": "last tuesday", "Title": "Kept"}), name="b.pdf")
    assert odd.metadata["created"] is None and odd.metadata["title"] == "Kept"


def test_truncated_pdf_is_parse_error(write: Writer) -> None:
    data = make_pdf(PAGES, INFO)
    error = rejected(write("cut.pdf", data[: len(data) // 2]))
    assert error.code == "parse_error"
    assert error.reason.startswith("PDF is damaged or truncated")


def test_random_bytes_named_pdf_is_parse_error(write: Writer) -> None:
    noise = random.Random(7).randbytes(4096)
    assert rejected(write("noise.pdf", noise)).code == "parse_error"
    header_then_noise = b"%PDF-1.7\n" + noise
    assert rejected(write("noise2.pdf", header_then_noise)).code == "parse_error"


def test_encrypted_pdf_needing_a_password(write: Writer) -> None:
    error = rejected(write("locked.pdf", encrypt_pdf(make_pdf([["secret text"]]), "pw")))
    assert (error.code, error.reason) == ("parse_error", "PDF is encrypted (a password is needed to open it)")


def test_encrypted_pdf_with_empty_user_password_is_read() -> None:
    parsed = parse_bytes(encrypt_pdf(make_pdf([["open to all"]]), ""), name="restricted.pdf")
    assert parsed.text == "open to all"


def test_pdf_without_text_is_no_text(write: Writer) -> None:
    error = rejected(write("scan.pdf", make_pdf([[], []])))
    assert error.code == "no_text"


def test_pypdf_noise_is_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    # A wrong startxref offset makes pypdf log warnings while it rebuilds the table, then succeed.
    sloppy = make_pdf([["recovered text"]]).replace(b"startxref\n", b"startxref\n9")
    with caplog.at_level(logging.DEBUG):
        assert parse_bytes(sloppy, name="x.pdf").text == "recovered text"
    assert not [record for record in caplog.records if record.name.startswith("pypdf")]


_HEADER = ["Region", "Amount", "Manager"]
_ROWS = [["North", "120", "Ada"], ["Glimbardy", "75", "Zorvek"]]


def test_ruled_table_rows_keep_their_headers_on_their_page(write: Writer) -> None:
    table_page = ruled_table(_HEADER, _ROWS, above=["Sales by region"])
    parsed = parse_source(write("sales.pdf", make_pdf([["Quarterly summary"], table_page, ["Appendix"]])))
    row = "Region: Glimbardy; Amount: 75; Manager: Zorvek"
    assert "columns: Region; Amount; Manager\nRegion: North; Amount: 120; Manager: Ada\n" + row in parsed.text
    assert segment_at(parsed, row).page == 2
    assert segment_at(parsed, "Sales by region").page == 2  # the page's own text is kept before its table
    assert segment_at(parsed, "Appendix").page == 3
    assert_tiles(parsed)


def test_encrypted_pdf_tables_are_read_with_the_empty_password() -> None:
    data = encrypt_pdf(make_pdf([ruled_table(_HEADER, _ROWS)]), "")
    assert "Region: North; Amount: 120; Manager: Ada" in parse_bytes(data, name="restricted.pdf").text


def test_only_pages_that_draw_a_grid_are_given_to_pdfplumber(monkeypatch: pytest.MonkeyPatch) -> None:
    import pdfplumber

    opened: list[list[int]] = []
    real_open = pdfplumber.open

    def spy(*args: object, pages: list[int], **kwargs: object) -> object:
        opened.append(pages)
        return real_open(*args, pages=pages, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pdfplumber, "open", spy)
    framed = b"36 36 540 720 re S\n72 690 m 300 690 l S\nBT /F1 12 Tf 72 700 Td (Framed and underlined) Tj ET"
    rules_only = b"".join(b"72 %d m 400 %d l S\n" % (y, y) for y in (600, 580, 560, 540))  # no vertical rules
    plain = make_pdf([["Just prose"], framed, rules_only + b"BT /F1 12 Tf 72 700 Td (Lines) Tj ET"])
    assert "Framed and underlined" in parse_bytes(plain, name="plain.pdf").text
    assert opened == []
    parse_bytes(make_pdf([["Prose"], ruled_table(_HEADER, _ROWS)]), name="table.pdf")
    assert opened == [[2]]
