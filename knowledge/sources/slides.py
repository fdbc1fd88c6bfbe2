"""Slide decks (``.pptx``) through python-pptx: one segment per slide, with the speaker notes.

A slide's text is its shapes' text in the order the slide lists them (group shapes opened, tables
written as ``header: value`` rows), then its speaker notes after a ``Notes:`` line, since what a
presenter says is often the only prose in a deck. ``page`` is the slide number (1-based), so a hit's
location is its slide. Hidden slides are read like the others: they are part of the file's content.
Core properties are the same Office fields as DOCX (census).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any

from pptx import Presentation
from pptx.shapes.group import GroupShape

from knowledge.sources.archive import check_package
from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument, SourceRejected, failing_as
from knowledge.sources.office import core_fields
from knowledge.sources.tables import HeaderedRows
from knowledge.sources.textutil import Block, document, join_blocks


def parse_pptx(data: bytes, fmt: Format) -> ParsedDocument:
    check_package(data, "PPTX")
    with failing_as("PPTX is damaged or not a slide deck"):
        deck = Presentation(io.BytesIO(data))
    with failing_as("PPTX content could not be read (unexpected structure)"):
        blocks = [Block(_slide_text(slide), page=number) for number, slide in enumerate(deck.slides, 1)]
        found = core_fields(deck.core_properties)
    text, segments = join_blocks(blocks)
    if not text:
        raise SourceRejected("no_text", "slide deck has no text")
    metadata = blank_metadata("slides")
    metadata.update(found, slide_count=len(blocks))
    return document("slides", text, segments, metadata, fmt.mime)


def _slide_text(slide: Any) -> str:
    parts = list(_shape_texts(slide.shapes))
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame
        if notes is not None and notes.text.strip():
            parts.append("Notes: " + notes.text.strip())
    return "\n".join(part for part in parts if part.strip())


def _shape_texts(shapes: Iterable[Any]) -> Iterator[str]:
    stack = [iter(shapes)]
    while stack:  # explicit stack: groups nest, and a crafted deck can nest them deeply
        shape = next(stack[-1], None)
        if shape is None:
            stack.pop()
        elif isinstance(shape, GroupShape):
            stack.append(iter(shape.shapes))
        elif getattr(shape, "has_table", False):
            yield _table_text(shape.table)
        elif getattr(shape, "has_text_frame", False):
            yield shape.text_frame.text


def _table_text(table: Any) -> str:
    rows = HeaderedRows()
    lines = (rows.line([cell.text for cell in row.cells]) for row in table.rows)
    return "\n".join(line for line in lines if line)
