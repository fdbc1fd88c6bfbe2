"""EPUB through ebooklib: spine documents in reading order, each one segment (a chapter, page ``None``).

The navigation document (the table of contents) is skipped even when it sits in the spine: its text is
the chapter titles again. A chapter whose bytes do not decode cleanly is read as UTF-8 with replacement
characters rather than failing the whole book. Metadata comes from the package's Dublin Core fields.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import ebooklib
from ebooklib import epub

from knowledge.sources.archive import check_package
from knowledge.sources.census import blank_metadata
from knowledge.sources.decoding import declared_encoding, decode_text
from knowledge.sources.formats import Format
from knowledge.sources.html_page import make_soup, visible_text
from knowledge.sources.model import MetadataValue, ParsedDocument, SourceRejected, failing_as
from knowledge.sources.textutil import Block, clean_value, document, join_blocks

# metadata key -> (Dublin Core element, separator when the book states several values or None for first)
_DUBLIN_CORE: dict[str, tuple[str, str | None]] = {
    "title": ("title", None), "author": ("creator", "; "), "language": ("language", None),
    "date": ("date", None), "publisher": ("publisher", None), "identifier": ("identifier", None),
    "description": ("description", None), "subject": ("subject", "; "),
}  # fmt: skip


def parse_epub(data: bytes, fmt: Format) -> ParsedDocument:
    check_package(data, "EPUB")
    with failing_as("EPUB is damaged or not an e-book (cannot read its package)"):
        book = epub.read_epub(io.BytesIO(data), {"ignore_ncx": True})
    with failing_as("EPUB content could not be read (unexpected structure)"):
        chapters = [Block(text) for text in _chapter_texts(book)]
        found = _dublin_core(book)
    text, segments = join_blocks(chapters)
    if not text:
        raise SourceRejected("no_text", "e-book has no text")
    metadata = blank_metadata("epub")
    metadata.update(found, chapter_count=len(segments))
    return document("epub", text, segments, metadata, fmt.mime)


def _chapter_texts(book: Any) -> Iterator[str]:
    for entry in book.spine:
        idref = entry[0] if isinstance(entry, tuple) else entry
        item = book.get_item_with_id(idref)
        if item is None or isinstance(item, epub.EpubNav) or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        yield visible_text(make_soup(_markup(bytes(item.get_content()))))


def _markup(raw: bytes) -> str:
    try:
        return decode_text(raw, declared_encoding(raw)).text
    except SourceRejected:
        return raw.decode("utf-8", errors="replace")  # one odd chapter should not cost the whole book


def _dublin_core(book: Any) -> dict[str, MetadataValue]:
    fields: dict[str, MetadataValue] = {}
    for key, (element, separator) in _DUBLIN_CORE.items():
        values = [value for value, _attrs in book.get_metadata("DC", element) if isinstance(value, str)]
        values = [value for value in values if value.strip()]
        joined = separator.join(values) if separator else (values[0] if values else None)
        fields[key] = clean_value(joined)
    if isinstance(fields["description"], str) and "<" in fields["description"]:
        fields["description"] = clean_value(make_soup(fields["description"]).get_text(" "))
    return fields
