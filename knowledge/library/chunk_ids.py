"""Chunk ids are never reused: each is issued once, above every id ever issued, so "what was added since" is
exactly "ids above the last one seen" (the vector file and the keyword index rely on it).

The rule lives here once: the next id is the ``chunks.next_id`` counter or one above the highest stored chunk,
whichever is higher (an import or an older process may have written chunks past the counter). Issuing claims a
range under the write lock; reading answers where the next range would start.
"""

from __future__ import annotations

from sqlalchemy import Connection

from knowledge.store import settings

NEXT_CHUNK_ID = "chunks.next_id"
_ABOVE_STORED = "(SELECT coalesce(max(id), 0) + 1 FROM chunks)"


def issue(conn: Connection, count: int) -> int:
    """The first of ``count`` fresh chunk ids, now claimed (the caller holds the write lock)."""
    return settings.advance(conn, NEXT_CHUNK_ID, count, floor_sql=_ABOVE_STORED)


def next_unissued(conn: Connection) -> int:
    """The lowest chunk id not yet issued."""
    return settings.at_least(conn, NEXT_CHUNK_ID, floor_sql=_ABOVE_STORED)
