"""Warming what a base's first search waits for, ahead of it: the window does this while it appears.

A process's first search of a base pays for its query encoder (a child process that loads the model:
seconds), the base's vector file mapped and its sign bits read from disk, its keyword index opened and the
fusion data loaded; the searches after it pay none of that. :func:`start_query_encoder` spawns the encoder's
process without waiting (it loads while the caller opens the data directory and recovers), and
:func:`warm_search` runs one throwaway search, which waits for the rest — so a person's first query, typed
while the window appears, finds everything ready. A base on a remote endpoint is never asked anything here:
its encoder is called only for a person's query, so only its keyword side is warmed.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from knowledge.ingest.query_process import QueryEncoderProcess
from knowledge.library.bases import Base
from knowledge.library.index import vectors_version
from knowledge.search.query import search

if TYPE_CHECKING:
    from knowledge.runtime import Quire

WARM_QUERY = "warm up"


def start_query_encoder(quire: Quire, base: Base) -> None:
    """Spawn ``base``'s query encoder process now, without waiting for its model (local models only, and
    only for a base that holds something to search)."""
    if base.embedder is not None or not _has_material(quire, base):
        return
    encoder = quire.query_encoder(base)
    if isinstance(encoder, QueryEncoderProcess):
        encoder.start()


def warm_search(quire: Quire, base: Base) -> float:
    """One throwaway search of ``base`` (hybrid; keyword on a remote endpoint); returns its seconds (0 for a
    base that never held a chunk: there is nothing its first search would wait for but the model)."""
    if not _has_material(quire, base):
        return 0.0
    started = time.perf_counter()
    search(quire, base.id, WARM_QUERY, mode="hybrid" if base.embedder is None else "keyword", limit=1)
    return time.perf_counter() - started


def _has_material(quire: Quire, base: Base) -> bool:
    with quire.db.read() as conn:
        return vectors_version(conn, base.id) > 0  # bumped by every write of the base's chunks
