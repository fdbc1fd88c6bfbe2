"""DOCX through python-docx: body paragraphs and tables in document order, and the core properties.

Paragraphs are separated by a blank line; a table becomes one line per row with cells separated by a
tab (a horizontally merged cell is written once; nested tables are flattened into their cell).
Headers, footers, footnotes and comments are not part of the body and are not read. A DOCX has no
stable pages or lines, so the whole text is one segment.

Every field python-docx's ``CoreProperties`` exposes is declared in the census (stored or excluded);
a test fails if a python-docx upgrade adds one.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from datetime import datetime

from docx import Document
from docx.document import Document as WordDocument
from docx.opc.coreprops import CoreProperties
from docx.table import Table, _Cell, _Row
from docx.text.paragraph import Paragraph

from knowledge.sources.archive import check_package
from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.model import MetadataValue, ParsedDocument, SourceRejected, failing_as
from knowledge.sources.textutil import Block, clean_value, document, join_blocks

log = logging.getLogger(__name__)

# metadata key -> CoreProperties attribute, for the text fields the census stores.
_TEXT_PROPERTIES = {
    "title": "title", "author": "author", "subject": "subject", "keywords": "keywords",
    "category": "category", "description": "comments", "identifier": "identifier", "language": "language",
}  # fmt: skip
_DATE_PROPERTIES = {"created": "created", "modified": "modified"}


def parse_docx(data: bytes, fmt: Format) -> ParsedDocument:
    check_package(data, "DOCX")
    with failing_as("DOCX is damaged or not a Word document"):
        word = Document(io.BytesIO(data))
    with failing_as("DOCX content could not be read (unexpected structure)"):
        body = "\n\n".join(part.strip() for part in _blocks(word) if part.strip())
        properties = word.core_properties
    text, segments = join_blocks([Block(body)])
    if not text:
        raise SourceRejected("no_text", "document has no text")
    metadata = blank_metadata("docx")
    metadata.update(_core_fields(properties))
    return document("docx", text, segments, metadata, fmt.mime)


def _blocks(container: WordDocument | _Cell) -> Iterator[str]:
    for item in container.iter_inner_content():
        yield item.text if isinstance(item, Paragraph) else _table_text(item)


def _table_text(table: Table) -> str:
    return "\n".join(_row_text(row) for row in table.rows)


def _row_text(row: _Row) -> str:
    cells: list[str] = []
    previous: _Cell | None = None
    for cell in row.cells:
        if cell is previous:  # python-docx yields a merged cell once per grid column it spans
            continue
        previous = cell
        cells.append(" ".join(" ".join(_blocks(cell)).split()))
    return "\t".join(cells)


def _core_fields(props: CoreProperties) -> dict[str, MetadataValue]:
    fields: dict[str, MetadataValue] = {key: clean_value(_read(props, attr)) for key, attr in _TEXT_PROPERTIES.items()}
    for key, attr in _DATE_PROPERTIES.items():
        value = _read(props, attr)
        fields[key] = value.isoformat() if isinstance(value, datetime) else None
    return fields


def _read(props: CoreProperties, attr: str) -> object:
    """One property; a malformed value (python-docx parses dates lazily) is logged and left empty."""
    try:
        return getattr(props, attr)
    except Exception:
        log.info("DOCX core property %s unreadable; stored as empty", attr, exc_info=True)
        return None
