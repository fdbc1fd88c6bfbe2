"""DOCX through python-docx: body paragraphs and tables in document order, and the core properties.

Paragraphs are separated by a blank line; a table keeps its headers: its first row names the columns and
every other row is one ``header: value; …`` line (:mod:`knowledge.sources.tables`), so a cell's value is
found together with its column name (a horizontally merged cell is written once; nested tables are
flattened into their cell).
Headers, footers, footnotes and comments are not part of the body and are not read. A DOCX has no
stable pages or lines, so the whole text is one segment.

Every field python-docx's ``CoreProperties`` exposes is declared in the census (stored or excluded);
a test fails if a python-docx upgrade adds one.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from docx import Document
from docx.document import Document as WordDocument
from docx.table import Table, _Cell, _Row
from docx.text.paragraph import Paragraph

from knowledge.sources.archive import check_package
from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument, SourceRejected, failing_as
from knowledge.sources.office import core_fields
from knowledge.sources.tables import HeaderedRows
from knowledge.sources.textutil import Block, document, join_blocks


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
    metadata.update(core_fields(properties))
    return document("docx", text, segments, metadata, fmt.mime)


def _blocks(container: WordDocument | _Cell) -> Iterator[str]:
    for item in container.iter_inner_content():
        yield item.text if isinstance(item, Paragraph) else _table_text(item)


def _table_text(table: Table) -> str:
    rows = HeaderedRows()
    lines = (rows.line(_row_cells(row)) for row in table.rows)
    return "\n".join(line for line in lines if line)


def _row_cells(row: _Row) -> list[str]:
    cells: list[str] = []
    previous: _Cell | None = None
    for cell in row.cells:
        if cell is previous:  # python-docx yields a merged cell once per grid column it spans
            continue
        previous = cell
        cells.append(" ".join(" ".join(_blocks(cell)).split()))
    return cells
