"""One chunk as every surface shows it: which chunk, of which document, its place in it, its text.

Search hits (:class:`knowledge.search.Hit`, a ``ChunkView`` with a score), chunk listings (the window's chunk
viewer, ``quire chunks``) and an agent's reads (the MCP tools) are built from this one value, each answering
in its own JSON shape (a surface's shape is its interface and does not change with the others).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knowledge.library.location import Location, read_by_ocr

if TYPE_CHECKING:
    from knowledge.library.item import Item


@dataclass
class ChunkView:
    chunk_id: int
    item_id: int
    item_name: str
    source_path: str | None
    ordinal: int
    text: str
    page: int | None
    line_start: int | None
    line_end: int | None
    start: int | None = None  # characters of the extracted text (not read for search hits)
    end: int | None = None
    token_count: int | None = None
    ocr: bool = False  # the chunk's text was read by OCR (a scanned page or an image)

    @staticmethod
    def fields(row: Any, item: Item | None = None) -> dict[str, Any]:
        """A view's fields from a chunk row joined to its item's ``name``, ``source_path`` and ``metadata`` (a
        search hit's row, a listing's), or from a bare chunk row and its ``item``; the characters and tokens
        when the row has them (a hit's row does not)."""
        named: Any = row if item is None else item
        columns = row._mapping
        return {
            "chunk_id": row.id,
            "item_id": row.item_id,
            "item_name": named.name,
            "source_path": named.source_path,
            "ordinal": row.ordinal,
            "text": row.text,
            "page": row.page,
            "line_start": row.line_start,
            "line_end": row.line_end,
            **{name: columns[name] for name in ("start", "end", "token_count") if name in columns},
            "ocr": read_by_ocr(named.metadata, row.page),
        }

    @classmethod
    def of(cls, row: Any, item: Item | None = None) -> ChunkView:
        """See :meth:`fields`."""
        return cls(**ChunkView.fields(row, item))

    @property
    def location(self) -> Location:
        return Location(self.page, self.line_start, self.line_end, self.start, self.end)

    def which(self) -> dict[str, Any]:
        """Which chunk of which document: the keys a listing's and a search hit's JSON both start with."""
        return {
            "chunk_id": self.chunk_id,
            "item_id": self.item_id,
            "item_name": self.item_name,
            "source_path": self.source_path,
            "ordinal": self.ordinal,
        }

    def as_listing(self) -> dict[str, Any]:
        """A chunk listing's entry (the window's chunk viewer and ``quire chunks`` read these keys)."""
        return {
            **self.which(),
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "page": self.page,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "token_count": self.token_count,
            "ocr": self.ocr,
        }
