"""DOCX and EPUB: real files made with python-docx and ebooklib."""

from __future__ import annotations

import io
import zipfile

import docx
import pytest

from knowledge.sources import SourceRejected, archive, parse_bytes, parse_source

from .builders import make_docx, make_epub
from .conftest import Writer, assert_tiles, rejected


def test_docx_paragraphs_and_table_in_order(write: Writer) -> None:
    parsed = parse_source(write("report.docx", make_docx()))
    assert parsed.text == (
        "Quarterly Report\n\n"
        "Revenue grew in every region.\n\n"
        "columns: Region; Q1; Q2\nRegion: North; Q1: steady\n\n"
        "Closing remarks after the table."
    )
    assert parsed.parser == "docx" and parsed.mime.endswith("wordprocessingml.document")
    assert len(parsed.segments) == 1
    assert_tiles(parsed)


def test_docx_core_properties(write: Writer) -> None:
    parsed = parse_source(write("report.docx", make_docx()))
    assert parsed.metadata == {
        "title": "Quarterly Report", "author": "Ada Lovelace", "subject": "Finance",
        "keywords": "revenue, regions", "category": "Reports", "description": "Internal summary",
        "identifier": "urn:quire:report:1", "language": "en-GB",
        "created": "2024-01-02T03:04:05+00:00", "modified": "2024-02-03T04:05:06+00:00",
    }  # fmt: skip
    assert "ada" not in parsed.metadata.values()  # last_modified_by is excluded (census)


def test_docx_without_text_is_no_text() -> None:
    buffer = io.BytesIO()
    docx.Document().save(buffer)
    with pytest.raises(SourceRejected) as info:
        parse_bytes(buffer.getvalue(), name="blank.docx")
    assert info.value.code == "no_text"


def test_broken_docx_and_epub(write: Writer) -> None:
    assert rejected(write("fake.docx", b"this is not a zip at all")).code == "parse_error"
    assert rejected(write("fake.epub", b"PK\x03\x04 but not really")).code == "parse_error"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("hello.txt", "a zip, but no Word document inside")
    assert rejected(write("zip.docx", buffer.getvalue())).code == "parse_error"
    assert rejected(write("zip.epub", buffer.getvalue())).code == "parse_error"
    assert rejected(write("half.docx", make_docx()[:4000])).code == "parse_error"


def test_zip_that_expands_too_far_is_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "MAX_UNPACKED_BYTES", 10_000)
    with pytest.raises(SourceRejected) as info:
        parse_bytes(make_docx(), name="bomb.docx")
    assert info.value.code == "too_large" and "unpacked" in info.value.reason


def test_epub_chapters_in_spine_order(write: Writer) -> None:
    parsed = parse_source(write("tale.epub", make_epub()))
    assert parsed.text == ("Chapter 1\n\nIt was the best of times.\n\nChapter 2\n\nIt was the worst of times.")
    assert len(parsed.segments) == 2  # the nav document is skipped; scripts are dropped
    assert parsed.text[parsed.segments[1].start :].startswith("Chapter 2")
    assert all(s.page is None and s.line_start is None for s in parsed.segments)
    assert (parsed.parser, parsed.mime) == ("epub", "application/epub+zip")
    assert_tiles(parsed)


def test_epub_metadata(write: Writer) -> None:
    parsed = parse_source(write("tale.epub", make_epub()))
    assert parsed.metadata == {
        "title": "A Tale of Two Chapters", "author": "Jane Doe; John Roe", "language": "en",
        "date": "2020-05-01", "publisher": "Quire Press", "identifier": "urn:isbn:9780000000001",
        "description": "Two short chapters.", "subject": None, "chapter_count": 2,
    }  # fmt: skip
