"""What the in-app viewer needs to show search hits where they stand in their document (a read).

:func:`open_passages` answers, in one snapshot, for one item and the chunk ids of its hits: the item's
extracted text (the text every chunk's ``start``/``end`` indexes), for a PDF the base's own copy of the
original bytes (to render its pages), and each still-present passage with its location, in reading
order. Nothing handed in is trusted as a path: the copy is found by the item's recorded blob name
(``blobs.blob_path`` validates it).

Staleness: a hit names a chunk row. A deleted item (``deleting`` or gone) is :class:`NotFound`; an item
that is no longer ``completed`` (reset for reindex) or whose chunks were rebuilt since the search (the
hit's chunk ids are gone) is refused too, so the viewer never shows a passage over content it no longer
belongs to. A copy purged between this read and the caller's use surfaces there as a missing file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import and_, select

from knowledge.errors import GuardRejected, NotFound
from knowledge.library import blobs, tree
from knowledge.library.bases import assert_base_can_run_runtime_operation, resolve_base
from knowledge.library.location import Location, read_by_ocr
from knowledge.store.schema import chunks

if TYPE_CHECKING:
    from knowledge.runtime import Quire

MAX_PASSAGES = 200  # hits of one document a viewer steps through; a search returns far fewer
LINE_PARSERS = frozenset({"text", "markdown", "code", "csv"})  # their chunks name source lines


@dataclass(frozen=True)
class Passage:
    """One hit's chunk: where it lies in the extracted text (``start``/``end``) and in the source."""

    chunk_id: int
    ordinal: int
    text: str
    start: int
    end: int
    location: Location
    ocr: bool


@dataclass(frozen=True)
class DocumentPassages:
    item_id: int
    name: str
    parser: str | None
    kind: str  # "pdf": pages rendered from ``original``; "lines": text shown by line; "text": extracted text
    text: str  # the extracted text (a note's own text)
    original: Path | None  # the owned copy of a PDF's bytes (None for other kinds, or when none is kept)
    passages: tuple[Passage, ...]  # the hits still present, in reading order
    missing: int  # hits asked for that are no longer in the item


def open_passages(quire: Quire, base_ref: str | int, item_id: int, chunk_ids: list[int]) -> DocumentPassages:
    """The document of ``item_id`` with the passages among ``chunk_ids`` (see the module docstring)."""
    wanted = list(dict.fromkeys(int(c) for c in chunk_ids))[:MAX_PASSAGES]
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
        assert_base_can_run_runtime_operation(base)
        item = tree.load_item(conn, item_id)
        if item is None or item.base_id != base.id or item.status == "deleting":
            raise NotFound(f"item {item_id} was deleted; it is no longer in {base.name!r}")
        if item.is_container:
            raise GuardRejected(f"{item.name!r} is a folder; open one of its documents")
        if item.status != "completed":
            raise GuardRejected(f"{item.name!r} is {item.status}; search again when it is indexed")
        rows = conn.execute(
            select(chunks).where(and_(chunks.c.item_id == item.id, chunks.c.id.in_(wanted))).order_by(chunks.c.ordinal)
        ).all()
    if not rows:
        raise NotFound(f"{item.name!r} changed since this search (it was indexed again); search again")
    kind = "pdf" if item.parser == "pdf" else "lines" if item.parser in LINE_PARSERS else "text"
    passages = tuple(
        Passage(
            r.id,
            r.ordinal,
            r.text,
            r.start,
            r.end,
            Location(r.page, r.line_start, r.line_end, r.start, r.end),
            read_by_ocr(item.metadata, r.page),
        )
        for r in rows
    )
    return DocumentPassages(
        item.id,
        item.name,
        item.parser,
        kind,
        _extracted_text(quire, item),
        _original(quire, item) if kind == "pdf" else None,
        passages,
        len(wanted) - len(rows),
    )


def _extracted_text(quire: Quire, item: tree.Item) -> str:
    if item.note_text is not None:
        return item.note_text
    if not item.text_sha256:
        return ""
    try:
        return blobs.read(quire.blobs_dir, item.text_sha256).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise NotFound(f"{item.name!r} was deleted meanwhile; its text is gone") from None


def _original(quire: Quire, item: tree.Item) -> Path | None:
    if not item.blob_sha256:
        return None
    path = blobs.blob_path(quire.blobs_dir, item.blob_sha256)
    return path if path.is_file() else None
