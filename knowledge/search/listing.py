"""Filters alone (``tag:pottery``, ``type:pdf after:2024-01``): the documents they match, newest first, each
shown by its first chunk, so the answer reads like a search's hits without being ranked by relevance.

The documents are what the query's filters and the caller's subtree admit, worked out in one read snapshot
(:func:`knowledge.search.scope.build_scope`, which leaves ``deleting`` items out), less the excluded ones.
They are ordered by their date as ``after:`` and ``before:`` judge it (:func:`knowledge.search.scope.item_dates`),
newest first, the later-added item first on a tie; their first chunks are read in that same snapshot through
:func:`knowledge.search.candidates.hit_rows`, which hides deleting items too, so nothing whose delete has
committed is listed. A document without chunks (not indexed yet, failed, empty) has nothing to show and is
left out, as a search would leave it out. Every listed hit scores 1.0: each matches the filters fully.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, text

from knowledge.library.bases import Base
from knowledge.search.candidates import hit_rows
from knowledge.search.scope import build_scope, item_dates
from knowledge.search.syntax import ParsedQuery

FILTER_MODE = "filter"  # the mode an answer reports when it lists what filters match
_BATCH = 500
_FIRST_CHUNKS = text(
    "SELECT c.item_id, c.id FROM chunks c WHERE c.item_id IN :ids "
    "AND c.ordinal = (SELECT min(o.ordinal) FROM chunks o WHERE o.item_id = c.item_id)"
).bindparams(bindparam("ids", expanding=True))


def listed(
    conn: Connection, base: Base, parsed: ParsedQuery, subtree: int | None, limit: int
) -> list[tuple[Any, float]]:
    """Hit rows (with score 1.0) of the first chunk of the ``limit`` newest documents the filters admit."""
    scope = build_scope(conn, base, parsed, subtree)
    admitted = [i for i in scope.items or () if i not in scope.excluded]
    dates = item_dates(conn, admitted)
    newest = sorted(dates, key=lambda item: (-dates[item], -item))
    chunks: list[int] = []
    for start in range(0, len(newest), _BATCH):  # stop reading once enough documents have a chunk
        batch = newest[start : start + _BATCH]
        first = {int(r[0]): int(r[1]) for r in conn.execute(_FIRST_CHUNKS, {"ids": batch}).all()}
        chunks.extend(first[item] for item in batch if item in first)
        if len(chunks) >= limit:
            break
    rows = hit_rows(conn, chunks[:limit])
    return [(rows[c], 1.0) for c in chunks[:limit] if c in rows]
