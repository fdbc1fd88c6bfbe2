"""A team store's HNSW indexes: built once a base is large, after its rows are loaded.

Why after: pgvector builds an index over rows already there much faster than it grows one insert by insert,
and below ``index_postgres.HNSW_MIN_ROWS`` chunks an exact scan is quick and exact. So nothing is built
when a base is created; an index is built

* at the end of an import (``base import``, ``store migrate``): the bulk load is done, the build is part of it;
* by a worker, once a base it indexes has grown past the threshold: a repair scan (every repair period)
  finds such bases and starts :class:`VectorIndexBuilds`' thread, so jobs and heartbeats never wait for it.

``CREATE INDEX CONCURRENTLY``: writes and searches go on during a build, and search scans exactly until the
index is valid (the planner ignores an invalid one). Several workers: a session advisory lock per base, so
one builds and the others pass it by. A build cut short (the process killed, the connection lost, a close)
leaves an *invalid* index behind; the next builder drops it and starts again. A base deleted meanwhile
cancels its build first (``index_postgres.cancel_hnsw_builds``): ``DROP TABLE`` would otherwise wait for the build under
the store's write lock. The build's memory is the server's own ``maintenance_work_mem``: the graph of a
large base builds far faster when it fits (README, "A team store").
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from sqlalchemy import Connection, text

from knowledge.library import index_postgres as pg
from knowledge.library.bases import list_bases
from knowledge.library.index import fts_table, vec_table
from knowledge.store.database import Database
from knowledge.store.pg_term_counts import row_count

__all__ = ["VectorIndexBuilds", "build_if_due", "due_bases"]

log = logging.getLogger(__name__)

BUILD_LOCK_CLASS = 0x51564958  # the first key of pg_try_advisory_lock(int, int); the second is the base id
BUILD_THREAD_JOIN = 10.0  # seconds close() waits for a cancelled build to return


def due_bases(db: Database) -> list[int]:
    """Bases of a team store with ``HNSW_MIN_ROWS`` chunks or more and no valid HNSW index."""
    listed = list_bases(db)
    with db.read() as conn:
        return [base.id for base in listed if _is_due(conn, base.id)]


def _is_due(conn: Connection, base_id: int) -> bool:
    """Whether the base's tables are there (not being deleted), it has no valid index and holds enough chunks
    (its keyword counts' row count: a periodic scan reads no row of a base to size it)."""
    vec = vec_table(base_id)
    if conn.execute(text("SELECT to_regclass(:t)"), {"t": vec}).scalar() is None:
        return False
    return pg.hnsw_state(conn, vec) != "valid" and row_count(conn, fts_table(base_id)) >= pg.HNSW_MIN_ROWS


def build_if_due(db: Database, base_id: int, *, on_connection: Any = None) -> float | None:
    """Build the base's HNSW index if it is due and no one else is building it; the seconds it took, or None
    when nothing was built. ``on_connection`` is handed the DBAPI connection first (to cancel the build)."""
    engine = getattr(db, "engine", None)
    if engine is None or db.dialect_name != "postgresql":
        return None
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.exec_driver_sql(f"SET application_name = '{pg.hnsw_builder_name(base_id)}'")
        if on_connection is not None:
            on_connection(conn.connection.dbapi_connection)
        locked = conn.execute(text("SELECT pg_try_advisory_lock(:c, :b)"), {"c": BUILD_LOCK_CLASS, "b": base_id})
        if not locked.scalar():
            return None  # another process is building it
        try:
            return _build_locked(conn, base_id)
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:c, :b)"), {"c": BUILD_LOCK_CLASS, "b": base_id})


def _build_locked(conn: Connection, base_id: int) -> float | None:
    if not _is_due(conn, base_id):  # checked again under the lock: another builder may have finished
        return None
    vec = vec_table(base_id)
    if pg.hnsw_state(conn, vec) == "invalid":  # a build cut short: its leftover would make IF NOT EXISTS skip ours
        conn.exec_driver_sql(pg.drop_hnsw_sql(vec))
    started = time.monotonic()
    conn.exec_driver_sql(pg.create_hnsw_sql(vec))
    seconds = time.monotonic() - started
    log.info("built the HNSW index of %s in %.1f s", vec, seconds)
    return seconds


class VectorIndexBuilds:
    """One background thread per process that builds the indexes due (a worker's repair scan starts it)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._building: Any = None  # the DBAPI connection of the build under way
        self._closing = threading.Event()
        self.built: dict[int, float] = {}

    def repair_scan(self, _queue: object, _limit: int) -> int:
        """Start the builder when a base is due and none runs here; never waits for a build."""
        with self._lock:
            if self._closing.is_set() or (self._thread is not None and self._thread.is_alive()):
                return 0
            due = due_bases(self._db)
            if due:
                self._thread = threading.Thread(target=self._build, args=(due,), name="quire-hnsw", daemon=True)
                self._thread.start()
        return 0

    def wait(self, timeout: float | None = None) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def close(self) -> None:
        """Stop a build under way (the server drops what it built; the next builder starts again)."""
        with self._lock:
            self._closing.set()
            building = self._building
        if building is not None:
            try:
                building.cancel()
            except Exception:  # already finished or closed
                log.debug("cancelling the HNSW build failed", exc_info=True)
        self.wait(BUILD_THREAD_JOIN)

    def _build(self, due: list[int]) -> None:
        for base_id in due:
            if self._closing.is_set():
                return
            try:
                seconds = build_if_due(self._db, base_id, on_connection=self._hold)
            except Exception:  # cancelled, the base deleted meanwhile, the server gone: the next scan retries
                log.warning("building the HNSW index of base %s stopped", base_id, exc_info=True)
                seconds = None
            finally:
                self._hold(None)
            if seconds is not None:
                self.built[base_id] = seconds

    def _hold(self, connection: Any) -> None:
        with self._lock:
            self._building = connection
            if connection is not None and self._closing.is_set():
                connection.cancel()  # close() came first: this build must not start
