"""Where a chunk came from: the page and line range of a text span, from the parser's segments.

The segment starts are indexed once per document and every chunk bisects into them, then walks only the
segments it covers: the whole document costs one pass plus the chunks' own lines. Rebuilding the starts for
every chunk was quadratic in a file's lines (a 12.7 MB PostScript manual, read as text: an estimated
80 minutes).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from knowledge.sources.model import Segment

Location = tuple[int | None, int | None, int | None]  # page, first line, last line


class Locator:
    """Locates spans of one document's text; build one per document, not per chunk."""

    def __init__(self, segments: Sequence[Segment]) -> None:
        self._segments = segments
        self._starts = [s.start for s in segments]

    def locate(self, start: int, end: int) -> Location:
        """Page and line range of the text span [start, end).

        The page is the first segment's; the line range counts only segments on that page, because some
        sources number lines per page (a spreadsheet's rows restart on every sheet)."""
        segments = self._segments
        page: int | None = None
        lines: list[int] = []
        # by index, not a slice: a slice would copy the rest of the document for every chunk
        for index in range(max(0, bisect.bisect_right(self._starts, start) - 1), len(segments)):
            seg = segments[index]
            if seg.start >= end and seg.start > start:
                break
            if seg.end <= start and seg.end != seg.start:
                continue
            if page is None:
                page = seg.page
            elif seg.page != page:
                break
            lines.extend(v for v in (seg.line_start, seg.line_end) if v is not None)
        return page, (min(lines) if lines else None), (max(lines) if lines else None)
