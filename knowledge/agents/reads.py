"""What an agent reads, bounded: the MCP tools' answers built on the same reads the window uses.

Every answer here obeys the window's visibility rule: ``deleting`` items (and everything under them)
do not exist for a reader — asking for one answers "not found", exactly like an id that never existed. Nor do
the items a person kept from agents (:mod:`knowledge.library.agent_hidden`), in any answer or count.
Failed bases refuse search and reading of chunks with their reason (``bases``' runtime guard); locked
bases are read-only, so every read works on them. Sizes are capped (``LIMITS``) so one call can never
return an unbounded answer. Each chunk carries a citation id that stays the same across calls and
searches: ``quire:<base id>:<item id>:<ordinal>``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, select

from knowledge.errors import GuardRejected, InvalidInput, NotFound
from knowledge.library import agent_hidden, blobs, tree
from knowledge.library.bases import Base, assert_base_can_run_runtime_operation, base_summary, list_bases, resolve_base
from knowledge.library.chunk_view import ChunkView
from knowledge.lifecycle import operations
from knowledge.lifecycle.progress import base_progress
from knowledge.lifecycle.tree_pages import SortKey, children_page, sort_key
from knowledge.search import MODES, Passage, answer, check_query, related
from knowledge.store.schema import chunks, items

if TYPE_CHECKING:
    from knowledge.runtime import Quire


@dataclass(frozen=True)
class Limits:
    search_results: int = 25
    chunk_chars: int = 4000  # text of one chunk in an answer
    neighbours: int = 3  # chunks on each side of a chunk that is read
    page_chars: int = 8000  # one page of a whole item's text
    list_page: int = 100  # children per page
    failed_items: int = 50  # failed items listed by ``status``


LIMITS = Limits()


def citation(base_id: int, item_id: int, ordinal: int) -> str:
    return f"quire:{base_id}:{item_id}:{ordinal}"


def _clip(text: str, limit: int) -> dict[str, Any]:
    return {"text": text[:limit], "truncated": len(text) > limit}


def base_view(base: Base) -> dict[str, Any]:
    return {
        "id": base.id,
        "name": base.name,
        "status": base.status,
        "reason": base.status_reason,
        "locked": base.locked,
        "model": base.model_id,
        "uri": f"quire://bases/{base.id}",
    }


def bases_overview(quire: Quire) -> list[dict[str, Any]]:
    return [
        {**base_view(b), "items": {k: v for k, v in base_summary(quire.db, b.id).items() if k != "deleting"}}
        for b in list_bases(quire.db)
    ]


def base_resource(quire: Quire, base_ref: str | int) -> dict[str, Any]:
    base = _base(quire, base_ref)
    summary = {k: v for k, v in base_summary(quire.db, base.id).items() if k != "deleting"}
    return {**base_view(base), "items": summary}


def item_resource(quire: Quire, base_ref: str | int, item_id: int) -> dict[str, Any]:
    base = _base(quire, base_ref)
    return {"base": base_view(base), "item": item_view(base, visible_item(quire, base, item_id))}


def _base(quire: Quire, base_ref: str | int) -> Base:
    with quire.db.read() as conn:
        return resolve_base(conn, base_ref)


def visible_item(quire: Quire, base: Base, item_id: int) -> tree.Item:
    """The item, unless it is in another base, does not exist, or is being deleted (all: not found)."""
    with quire.db.read() as conn:
        item = tree.load_item(conn, item_id)
        hidden = agent_hidden.hidden_ids(conn, base.id)  # kept from agents: as if it never existed
    if item is None or item.base_id != base.id or item.status == "deleting" or item.id in hidden:
        raise NotFound(f"item {item_id} not found in knowledge base {base.name!r}")
    return item


def item_view(base: Base, item: tree.Item) -> dict[str, Any]:
    return {
        "id": item.id,
        "base": base.id,
        "parent": item.parent_id,
        "type": item.type,
        "name": item.name,
        "status": item.status,
        "reason": None if item.error_code is None else {"code": item.error_code, "message": item.error_message},
        "source_path": item.source_path,
        "relative_path": item.relative_path,
        "chunks": item.chunk_count,
        "size": item.size,
        "uri": f"quire://items/{base.id}/{item.id}",
    }


# -- search ---------------------------------------------------------------------------------------


def search_base(
    quire: Quire, base_ref: str | int, query: str, *, mode: str = "hybrid", limit: int = 10, subtree: int | None = None
) -> dict[str, Any]:
    if mode not in MODES:
        raise InvalidInput(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    if not 1 <= limit <= LIMITS.search_results:
        raise InvalidInput(f"limit must be between 1 and {LIMITS.search_results}")
    check_query(query)  # refused before the base is even looked up
    base = _base(quire, base_ref)
    if subtree is not None:
        visible_item(quire, base, subtree)
    found = answer(quire, base.id, query, mode=mode, limit=limit, subtree=subtree)
    hits = found.hits
    return {
        "base": base_view(base),
        "query": query,
        "mode": found.mode,  # "filter": filters alone, the documents they match, newest first
        # meaning search unavailable: keyword results, and why ({"mode", "code", "message"})
        **({} if found.degraded is None else {"degraded": found.degraded.as_dict()}),
        "hits": [
            {
                "citation": citation(base.id, h.item_id, h.ordinal),
                "chunk_id": h.chunk_id,
                "uri": f"quire://chunks/{base.id}/{h.chunk_id}",
                "item": {
                    "id": h.item_id,
                    "name": h.item_name,
                    "path": h.path or h.item_name,  # below the top of its tree: two READMEs read apart
                    "uri": f"quire://items/{base.id}/{h.item_id}",
                },
                "source_path": h.source_path,
                "location": {"page": h.page, "line_start": h.line_start, "line_end": h.line_end},
                "score": h.score,
                "linked_from": [{"id": b.item_id, "name": b.name} for b in h.linked_from],
                **_clip(h.text, LIMITS.chunk_chars),
            }
            for h in hits
        ],
    }


def related_documents(
    quire: Quire, base_ref: str | int, item_id: int, *, limit: int = 10, subtree: int | None = None
) -> dict[str, Any]:
    """The documents nearest in meaning to an item (:func:`knowledge.search.related`: what search would show this
    reader, never the item or anything inside it), each with its best matching pair of passages as citations."""
    if not 1 <= limit <= LIMITS.search_results:
        raise InvalidInput(f"limit must be between 1 and {LIMITS.search_results}")
    base = _base(quire, base_ref)
    item = visible_item(quire, base, item_id)
    if subtree is not None:
        visible_item(quire, base, subtree)
    found = related(quire, base.id, item.id, limit=limit, subtree=subtree)
    return {
        "base": base_view(base),
        "item": item_view(base, item),
        "related": [
            {
                "item": {
                    "id": r.item_id,
                    "name": r.name,
                    "path": r.path,
                    "uri": f"quire://items/{base.id}/{r.item_id}",
                },
                "source_path": r.source_path,
                "score": r.score,
                "why": {
                    "similarity": r.similarity,
                    "item_passage": _passage(base, r.mine),
                    "related_passage": _passage(base, r.theirs),
                },
            }
            for r in found
        ],
    }


def _passage(base: Base, passage: Passage) -> dict[str, Any]:
    return {
        "citation": citation(base.id, passage.item_id, passage.ordinal),
        "chunk_id": passage.chunk_id,
        "uri": f"quire://chunks/{base.id}/{passage.chunk_id}",
        "location": passage.location.as_dict(),
        "snippet": passage.snippet,
    }


# -- reading chunks and items -------------------------------------------------------------------


def _chunk_view(base: Base, item: tree.Item, row: Any) -> dict[str, Any]:
    """An agent's view of a chunk (its own JSON shape: a citation and a URI, the text clipped)."""
    view = ChunkView.of(row, item)
    return {
        "citation": citation(base.id, item.id, view.ordinal),
        "chunk_id": view.chunk_id,
        "uri": f"quire://chunks/{base.id}/{view.chunk_id}",
        "ordinal": view.ordinal,
        "location": {"page": view.page, "line_start": view.line_start, "line_end": view.line_end},
        **_clip(view.text, LIMITS.chunk_chars),
    }


def read_chunk(quire: Quire, base_ref: str | int, chunk_id: int, *, neighbours: int = 1) -> dict[str, Any]:
    """A chunk and up to ``neighbours`` chunks on each side of it in the same item (by ordinal)."""
    if not 0 <= neighbours <= LIMITS.neighbours:
        raise InvalidInput(f"neighbours must be between 0 and {LIMITS.neighbours}")
    base = _base(quire, base_ref)
    assert_base_can_run_runtime_operation(base)
    with quire.db.read() as conn:
        row = conn.execute(
            select(chunks.c.item_id, chunks.c.ordinal)
            .join(items, items.c.id == chunks.c.item_id)
            .where(and_(chunks.c.id == chunk_id, chunks.c.base_id == base.id, items.c.status != "deleting"))
        ).first()
        if row is None or int(row.item_id) in agent_hidden.hidden_ids(conn, base.id):
            raise NotFound(f"chunk {chunk_id} not found in knowledge base {base.name!r}")
        item = tree.load_in_base(conn, base.id, int(row.item_id))
        rows = conn.execute(
            select(chunks)
            .where(
                and_(
                    chunks.c.item_id == item.id,
                    chunks.c.ordinal >= row.ordinal - neighbours,
                    chunks.c.ordinal <= row.ordinal + neighbours,
                )
            )
            .order_by(chunks.c.ordinal)
        ).all()
    views = [_chunk_view(base, item, r) for r in rows]
    return {
        "base": base_view(base),
        "item": item_view(base, item),
        "chunk": next(v for v in views if v["chunk_id"] == chunk_id),
        "before": [v for v in views if v["ordinal"] < row.ordinal],
        "after": [v for v in views if v["ordinal"] > row.ordinal],
    }


def read_item_text(quire: Quire, base_ref: str | int, item_id: int, *, page: int = 0) -> dict[str, Any]:
    """A completed file's or note's extracted text, one page (``LIMITS.page_chars``) at a time."""
    base = _base(quire, base_ref)
    assert_base_can_run_runtime_operation(base)
    item = visible_item(quire, base, item_id)
    if item.is_container:
        raise GuardRejected(f"{item.name!r} is a folder; list its children with list_items, or read one of them")
    if item.status != "completed":
        raise GuardRejected(f"only a completed item can be read; {item.name!r} is {item.status}")
    if item.note_text is not None:
        body = item.note_text
    elif item.text_sha256:
        body = blobs.read(quire.blobs_dir, item.text_sha256).decode("utf-8", errors="replace")
    else:
        body = ""
    pages = max(1, -(-len(body) // LIMITS.page_chars))
    if not 0 <= page < pages:
        raise InvalidInput(f"page must be between 0 and {pages - 1}")
    start = page * LIMITS.page_chars
    return {
        "base": base_view(base),
        "item": item_view(base, item),
        "page": page,
        "pages": pages,
        "text": body[start : start + LIMITS.page_chars],
    }


# -- listing and status ---------------------------------------------------------------------------


def _encode_cursor(key: SortKey) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode("utf-8")).decode("ascii")


def _decode_cursor(cursor: str) -> SortKey:
    try:
        kind, name, item_id = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        return (int(kind), str(name), int(item_id))
    except Exception:
        raise InvalidInput("the cursor is not one this server handed out") from None


def list_children(
    quire: Quire, base_ref: str | int, *, folder: int | None = None, cursor: str | None = None, limit: int = 50
) -> dict[str, Any]:
    """One page of a folder's children (None: the base's top level), folders first, then by name."""
    if not 1 <= limit <= LIMITS.list_page:
        raise InvalidInput(f"limit must be between 1 and {LIMITS.list_page}")
    base = _base(quire, base_ref)
    if folder is not None:
        visible_item(quire, base, folder)
    after = None if cursor is None else _decode_cursor(cursor)
    page = children_page(quire, base.id, folder, after, limit + 1)
    more = len(page) > limit
    page = page[:limit]
    return {
        "base": base_view(base),
        "folder": folder,
        "items": [item_view(base, i) for i in page],
        "next_cursor": _encode_cursor(sort_key(page[-1])) if more and page else None,
    }


def status(quire: Quire, base_ref: str | int | None = None) -> dict[str, Any]:
    """Jobs in flight, items by status and failed items with reasons, per base (sync: none yet)."""
    chosen = list_bases(quire.db) if base_ref is None else [_base(quire, base_ref)]
    report = []
    for base in chosen:
        progress = base_progress(quire, base.id)
        failed = operations.list_items(quire, base.id, status="failed", flat=True)
        report.append(
            {
                **base_view(base),
                "jobs_in_flight": progress.live_jobs,
                "items": progress.statuses,
                "failed_items": [
                    {"id": i.id, "name": i.name, "code": i.error_code, "message": i.error_message}
                    for i in failed[: LIMITS.failed_items]
                ],
                "failed_items_total": len(failed),
                "skipped_items_total": progress.statuses.get("skipped", 0),  # not read by design, not failures
                "sync": None,  # folder sync does not exist yet
            }
        )
    return {"jobs_in_flight": quire.queue.live_count(), "bases": report}
