"""The metadata census (SPEC §5, seed 003 item 14): stored or excluded with a reason, and enforced."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest
from docx.opc.coreprops import CoreProperties

from knowledge.sources import PARSER_VERSIONS, ParsedDocument, dispatch, parse_bytes, parse_note
from knowledge.sources.census import (
    CENSUS,
    Excluded,
    ParserCensus,
    Stored,
    UndeclaredMetadata,
    assert_declared,
    excluded,
    stored,
)
from knowledge.sources.formats import Format

from .builders import image_bytes, make_docx, make_epub, make_pdf, zip_of
from .office_builders import make_eml, make_msg, make_odp, make_odt, make_pptx, make_rtf, make_xlsx

FIXTURES: dict[str, Callable[[], ParsedDocument]] = {
    "text": lambda: parse_bytes(b"plain words\n", name="a.txt"),
    "markdown": lambda: parse_bytes(b"---\ntitle: T\nlayout: post\n---\n# H\n", name="a.md"),
    "code": lambda: parse_bytes(b"fn main() {}\n", name="a.rs"),
    "html": lambda: parse_bytes(b"<title>T</title><p>Body</p>", name="a.html"),
    "pdf": lambda: parse_bytes(make_pdf([["page"]], {"Title": "T", "Producer": "P"}), name="a.pdf"),
    "docx": lambda: parse_bytes(make_docx(), name="a.docx"),
    "epub": lambda: parse_bytes(make_epub(), name="a.epub"),
    "image": lambda: parse_bytes(image_bytes(["Census of a picture"]), name="a.png"),
    "note": lambda: parse_note("a note", title="T"),
    "csv": lambda: parse_bytes(b"a,b\n1,2\n", name="a.csv"),
    "spreadsheet": lambda: parse_bytes(make_xlsx(), name="a.xlsx"),
    "slides": lambda: parse_bytes(make_pptx([("T", "body", "notes")]), name="a.pptx"),
    "odt": lambda: parse_bytes(make_odt(["body"], title="T"), name="a.odt"),
    "odp": lambda: parse_bytes(make_odp([("T", "body", "notes")], title="T"), name="a.odp"),
    "rtf": lambda: parse_bytes(make_rtf(["body"]), name="a.rtf"),
    "mail": lambda: parse_bytes(make_eml("S", plain="body"), name="a.eml"),
    "outlook": lambda: parse_bytes(make_msg("S", plain="body"), name="a.msg"),
    "container": lambda: parse_bytes(zip_of({"a.txt": b"words"}), name="a.zip"),
    "roff": lambda: parse_bytes(b'.TH A 1 "2024" "a 1.0"\n.SH NAME\na \\- words\n', name="a.1"),
}

PDF_INFO_KEYS = [
    "/Title", "/Author", "/Subject", "/Keywords", "/Creator", "/Producer", "/CreationDate", "/ModDate",
    "/Trapped",
]  # fmt: skip


def test_every_parser_has_a_census_and_a_fixture() -> None:
    assert set(CENSUS) == set(PARSER_VERSIONS) == set(FIXTURES)


@pytest.mark.parametrize("parser", sorted(FIXTURES))
def test_parser_output_has_exactly_the_declared_stored_fields(parser: str) -> None:
    parsed = FIXTURES[parser]()
    assert parsed.parser == parser
    assert set(parsed.metadata) == CENSUS[parser].stored_keys  # nothing undeclared, nothing stale
    assert all(value is None or isinstance(value, str | int) for value in parsed.metadata.values())


def test_undeclared_field_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    real_parse, label = dispatch._PARSERS["text"]

    def leaky(data: bytes, fmt: Format) -> ParsedDocument:
        parsed = real_parse(data, fmt)
        parsed.metadata["owner_uid"] = 1000
        return parsed

    monkeypatch.setitem(dispatch._PARSERS, "text", (leaky, label))
    with pytest.raises(UndeclaredMetadata, match="owner_uid"):
        parse_bytes(b"hello", name="a.txt")  # not swallowed into a SourceRejected: it is our bug


def test_assert_declared_directly() -> None:
    assert_declared("pdf", {"title": "x", "page_count": 3})
    with pytest.raises(UndeclaredMetadata, match="producer"):
        assert_declared("pdf", {"title": "x", "producer": "Acrobat"})  # excluded is not stored
    with pytest.raises(UndeclaredMetadata):
        assert_declared("no-such-parser", {})


def test_excluded_reasons_are_never_blank() -> None:
    for census in CENSUS.values():
        for field in census.excluded:
            assert field.reason.strip(), (census.parser, field.source)
    for blank in ("", "   ", "\n\t"):
        with pytest.raises(ValueError, match="reason"):
            excluded("/Producer", blank)
        with pytest.raises(ValueError, match="reason"):
            Excluded("/Producer", blank)  # the dataclass itself refuses, not only the helper


def test_census_refuses_a_field_declared_twice_or_unnamed() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        ParserCensus("x", (stored("/Title", "title"),), (excluded("/Title", "because"),))
    with pytest.raises(ValueError):
        Stored("", "title")


def test_every_docx_core_property_is_declared() -> None:
    names = [name for name, value in inspect.getmembers(CoreProperties) if isinstance(value, property)]
    assert len(names) >= 15  # sanity: python-docx 1.x exposes 15
    missing = [name for name in names if f"core_properties.{name}" not in CENSUS["docx"].sources]
    assert not missing, f"python-docx CoreProperties fields neither stored nor excluded: {missing}"


def test_every_pptx_core_property_is_declared() -> None:
    from pptx.opc.package import XmlPart
    from pptx.parts.coreprops import CorePropertiesPart

    names = [  # the part's own plumbing (blob, partname) is not a property of the deck
        name
        for name, value in inspect.getmembers(CorePropertiesPart)
        if isinstance(value, property) and not hasattr(XmlPart, name)
    ]
    assert len(names) >= 15
    missing = [name for name in names if f"core_properties.{name}" not in CENSUS["slides"].sources]
    assert not missing, f"python-pptx core properties neither stored nor excluded: {missing}"


def test_every_standard_pdf_info_key_is_declared() -> None:
    missing = [key for key in PDF_INFO_KEYS if key not in CENSUS["pdf"].sources]
    assert not missing, f"PDF document-information keys neither stored nor excluded: {missing}"


def test_pypdf_document_information_properties_are_covered() -> None:
    # pypdf exposes the info dictionary as properties (title, title_raw, ...): a property it adds in an
    # upgrade is a field we now see and must declare.
    from pypdf import DocumentInformation

    declared_as = {
        "title": "/Title", "author": "/Author", "subject": "/Subject", "keywords": "/Keywords",
        "creator": "/Creator", "producer": "/Producer", "creation_date": "/CreationDate",
        "modification_date": "/ModDate", "xmp_metadata": "XMP metadata stream",
    }  # fmt: skip
    exposed = {
        name.removesuffix("_raw")
        for name, value in inspect.getmembers(DocumentInformation)
        if isinstance(value, property)
    }
    assert exposed <= set(declared_as), f"pypdf exposes new fields: {exposed - set(declared_as)}"
    assert set(declared_as.values()) <= CENSUS["pdf"].sources
