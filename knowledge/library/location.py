"""Where a chunk lies in its source, as one value: the page (PDF), the line range (text), else the
character range of the extracted text. The window, the CLI and search hits all describe it through here.

Some sources set both: a spreadsheet row has its sheet as ``page`` and its row number as the line, a
deck's slide is its ``page``; both are then shown ("page 2, lines 14-20")."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Location:
    page: int | None = None
    line_start: int | None = None
    line_end: int | None = None
    start: int | None = None  # characters of the extracted text
    end: int | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Location:
        """From a chunk row or a chunk/hit dictionary (missing keys are None)."""
        return cls(**{name: row.get(name) for name in ("page", "line_start", "line_end", "start", "end")})

    def describe(self) -> str:
        """``page 3``, ``lines 10-24`` or ``characters 0-812`` (empty when nothing is known)."""
        if self.page is not None and self.line_start is not None:
            return f"page {self.page}, lines {self.line_start}-{self.line_end}"
        if self.page is not None:
            return f"page {self.page}"
        if self.line_start is not None:
            return f"lines {self.line_start}-{self.line_end}"
        if self.start is not None:
            return f"characters {self.start}-{self.end}"
        return ""

    def short(self) -> str:
        """``p.3`` or ``l.10-24`` for one-line listings (empty otherwise)."""
        if self.page is not None and self.line_start is not None:
            return f"p.{self.page} l.{self.line_start}-{self.line_end}"
        if self.page is not None:
            return f"p.{self.page}"
        if self.line_start is not None:
            return f"l.{self.line_start}-{self.line_end}"
        return ""

    def as_dict(self) -> dict[str, int | None]:
        """The JSON a search hit has always carried: page and line range."""
        return {"page": self.page, "line_start": self.line_start, "line_end": self.line_end}


def read_by_ocr(metadata: Mapping[str, Any] | str | None, page: int | None) -> bool:
    """Whether a chunk on ``page`` holds OCR'd text, by its item's metadata: ``ocr`` (the language, set
    only when OCR found text) and ``ocr_pages`` (``1-3,7``, the pages whose text came from OCR)."""
    if isinstance(metadata, str):
        metadata = json.loads(metadata) if metadata else None
    if not metadata or not metadata.get("ocr"):
        return False
    pages = str(metadata.get("ocr_pages") or "")
    if page is None:
        return bool(pages)
    for run in pages.split(","):
        first, _, last = run.partition("-")
        if first.strip().isdigit() and int(first) <= page <= int(last or first):
            return True
    return False
