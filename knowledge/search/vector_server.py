"""Vector search on a team store: in the server, through pgvector (``index_postgres.nearest``).

Why not the local engine's in-memory copy there: it reads every vector of a base into each searching process
(0.8 KB a chunk: 800 MB at a million, in the window too) and reads them again after every change another
machine makes. pgvector answers from the server: an exact scan while a base is small, its HNSW index once
one is built (:mod:`knowledge.library.vector_indexes`). Hits are joined to live rows by the caller, as on the
local engine, in the same snapshot.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from knowledge.library import index_postgres as pg
from knowledge.library.bases import Base
from knowledge.library.index import vec_table

__all__ = ["ServerVectors"]


class ServerVectors:
    """What ``Quire.vectors`` is on a team store: nothing held, every search asked of the server."""

    def nearest(self, conn: Connection, base: Base, vector: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The k nearest chunks as (chunk id, cosine distance), nearest first (deleted ones included)."""
        if k <= 0:
            return []
        return pg.nearest(conn, vec_table(base.id), vector, k)

    def held_count(self, base_id: int) -> int:
        return 0  # nothing is held in this process

    def forget(self, base_id: int) -> None:
        return None
