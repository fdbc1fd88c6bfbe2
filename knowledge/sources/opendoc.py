"""OpenDocument text (``.odt``) and presentations (``.odp``) through odfpy.

An ODT's headings, paragraphs, lists and tables are read in document order, separated by a blank line; a
table keeps its headers (one ``header: value`` line per row, :mod:`knowledge.sources.tables`). Like DOCX,
an ODT has no stable pages, so the whole text is one segment.

An ODP is read like a PPTX: one segment per slide (``draw:page``, ``page`` its 1-based number), its frames'
text and tables in order, then its speaker notes (``presentation:notes``) after a ``Notes:`` line. Hidden
slides are read like the others; master pages and layouts are not (placeholder prompts, not content).

Metadata of both comes from ``meta.xml`` (census).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from odf import teletype
from odf.namespaces import DCNS, DRAWNS, METANS, OFFICENS, PRESENTATIONNS, TABLENS, TEXTNS
from odf.opendocument import load

from knowledge.sources.archive import check_package
from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.model import MetadataValue, ParsedDocument, SourceRejected, failing_as
from knowledge.sources.tables import HeaderedRows
from knowledge.sources.textutil import Block, clean_value, document, join_blocks

_PARAGRAPHS = {(TEXTNS, "p"), (TEXTNS, "h")}
_TABLE = (TABLENS, "table")
_ROW = (TABLENS, "table-row")
_CELL = (TABLENS, "table-cell")
_SLIDE = (DRAWNS, "page")
_NOTES = (PRESENTATIONNS, "notes")
_NOT_SLIDE_TEXT = frozenset({_NOTES, (OFFICENS, "annotation")})  # notes come after; reviewers' remarks never
# metadata key -> meta.xml element
_META = {
    "title": (DCNS, "title"), "author": (DCNS, "creator"), "subject": (DCNS, "subject"),
    "description": (DCNS, "description"), "language": (DCNS, "language"),
    "created": (METANS, "creation-date"), "modified": (DCNS, "date"),
}  # fmt: skip
_KEYWORD = (METANS, "keyword")


def parse_odt(data: bytes, fmt: Format) -> ParsedDocument:
    check_package(data, "ODT")
    with failing_as("ODT is damaged or not an OpenDocument text"):
        doc = load(io.BytesIO(data))
    with failing_as("ODT content could not be read (unexpected structure)"):
        body = "\n\n".join(part.strip() for part in _blocks(doc.text) if part.strip())
        found = _meta_fields(doc.meta)
    text, segments = join_blocks([Block(body)])
    if not text:
        raise SourceRejected("no_text", "document has no text")
    metadata = blank_metadata("odt")
    metadata.update(found)
    return document("odt", text, segments, metadata, fmt.mime)


def parse_odp(data: bytes, fmt: Format) -> ParsedDocument:
    check_package(data, "ODP")
    with failing_as("ODP is damaged or not an OpenDocument presentation"):
        doc = load(io.BytesIO(data))
    presentation = getattr(doc, "presentation", None)
    if presentation is None:
        raise SourceRejected("parse_error", "ODP is not an OpenDocument presentation")
    with failing_as("ODP content could not be read (unexpected structure)"):
        slides = [node for node in presentation.childNodes if getattr(node, "qname", None) == _SLIDE]
        blocks = [Block(_slide_text(slide), page=number) for number, slide in enumerate(slides, 1)]
        found = _meta_fields(doc.meta)
    text, segments = join_blocks(blocks)
    if not text:
        raise SourceRejected("no_text", "presentation has no text")
    metadata = blank_metadata("odp")
    metadata.update(found, slide_count=len(slides))
    return document("odp", text, segments, metadata, fmt.mime)


def _slide_text(slide: Any) -> str:
    parts = [part.strip() for part in _blocks(slide, _NOT_SLIDE_TEXT)]
    speaker = [child for child in slide.childNodes if getattr(child, "qname", None) == _NOTES]
    notes = [note.strip() for child in speaker for note in _blocks(child)]
    if any(notes):
        parts.append("Notes: " + "\n".join(note for note in notes if note))
    return "\n".join(part for part in parts if part)


def _blocks(root: Any, skip: frozenset[tuple[str, str]] = frozenset()) -> Iterator[str]:
    """Paragraphs, headings and tables under ``root`` in order, not looking inside ``skip`` elements."""
    stack = [iter(root.childNodes)]
    while stack:  # explicit stack: sections and lists nest, and a crafted file can nest them deeply
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
        elif getattr(node, "qname", None) in _PARAGRAPHS:
            yield teletype.extractText(node)
        elif getattr(node, "qname", None) == _TABLE:
            yield _table_text(node)
        elif getattr(node, "childNodes", None) and node.qname not in skip:
            stack.append(iter(node.childNodes))


def _table_text(table: Any) -> str:
    rows = HeaderedRows()
    lines = []
    for row in _descendants(table, _ROW):
        cells = [" ".join(teletype.extractText(cell).split()) for cell in row.childNodes if cell.qname == _CELL]
        line = rows.line(cells)
        if line:
            lines.append(line)
    return "\n".join(lines)


def _descendants(node: Any, qname: tuple[str, str]) -> Iterator[Any]:
    stack = list(reversed(node.childNodes))
    while stack:
        child = stack.pop()
        if getattr(child, "qname", None) == qname:
            yield child
        elif getattr(child, "qname", None) != _TABLE:  # a nested table's rows are not this table's
            stack.extend(reversed(child.childNodes))


def _meta_fields(meta: Any) -> dict[str, MetadataValue]:
    values: dict[tuple[str, str], list[str]] = {}
    for child in meta.childNodes:
        qname = getattr(child, "qname", None)
        if qname is not None:
            values.setdefault(qname, []).append(teletype.extractText(child))
    fields: dict[str, MetadataValue] = {key: clean_value(" ".join(values.get(q, []))) for key, q in _META.items()}
    fields["keywords"] = clean_value(", ".join(values.get(_KEYWORD, [])))
    return fields
