"""Helpers for knowledge tests: bases, files, an in-process worker, counts of search material."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from sqlalchemy import insert, text, update

from jobs.schema import jobs, worker_sessions
from knowledge.library import bases
from knowledge.library.bases import Base
from knowledge.library.index import fts_table, vec_table
from knowledge.runtime import Quire
from knowledge.store.schema import items


def make_base(quire: Quire, name: str = "kb", precision: str = "fp32", backend: str = "torch") -> Base:
    from knowledge.ingest.models import model_spec

    spec = model_spec("all-MiniLM-L6-v2")
    return bases.create_base(
        quire.db, name, model_id=spec.model_id, dimension=spec.dimension, precision=precision, backend=backend
    )


def drain(quire: Quire, timeout: float = 300) -> int:
    """Run an in-process worker until no runnable job is left."""
    return quire.make_worker(poll_interval=0.01).run(until_idle=True, timeout=timeout)


def statuses(quire: Quire, base_id: int) -> dict[str, str]:
    with quire.db.read() as conn:
        rows = conn.execute(
            text("SELECT coalesce(relative_path, name), status FROM items WHERE base_id = :b"), {"b": base_id}
        ).all()
    return {r[0]: r[1] for r in rows}


def material_counts(quire: Quire, base_id: int) -> dict[str, int]:
    with quire.db.read() as conn:
        return {
            "chunks": conn.execute(text("SELECT count(*) FROM chunks WHERE base_id = :b"), {"b": base_id}).scalar_one(),
            "vectors": conn.execute(text(f"SELECT count(*) FROM {vec_table(base_id)}")).scalar_one(),
            "keywords": conn.execute(text(f"SELECT count(*) FROM {fts_table(base_id)}")).scalar_one(),
            "chunk_count_sum": conn.execute(
                text("SELECT coalesce(sum(chunk_count), 0) FROM items WHERE base_id = :b"), {"b": base_id}
            ).scalar_one(),
        }


def die_in_flight(quire: Quire, job_id: int, in_flight: Sequence[int]) -> None:
    """Write what a SIGKILLed worker leaves behind for one index job: the job ``running`` (one attempt more)
    under a session that ended, and ``in_flight`` items ``reading``. Recovery (``quire.recover()``) then runs
    the hook that is really registered; tests/knowledge/test_deaths.py kills real workers too."""
    now = time.time()
    session = f"dead/{job_id}/{uuid.uuid4().hex[:8]}"
    with quire.db.write() as conn:
        conn.execute(
            insert(worker_sessions).values(
                id=session, host="nowhere", pid=1, process_started_at=0.0, hosts_worker=1,
                started_at=now, heartbeat_at=now - 3600, ended_at=now - 60,
            )
        )  # fmt: skip
        conn.execute(
            update(jobs)
            .where(jobs.c.id == job_id)
            .values(status="running", lease_owner=session, attempt=jobs.c.attempt + 1)
        )
        conn.execute(update(items).where(items.c.id.in_(list(in_flight))).values(status="reading"))


def item_state(quire: Quire, item_id: int) -> tuple[str, str | None, int, int | None]:
    """(status, error code, deaths, job id) of one item."""
    with quire.db.read() as conn:
        row = conn.execute(
            text("SELECT status, error_code, deaths, job_id FROM items WHERE id = :i"), {"i": item_id}
        ).one()
    return (row.status, row.error_code, int(row.deaths), row.job_id)


def integrity_ok(quire: Quire) -> bool:
    """``PRAGMA integrity_check`` of the data directory's database says ``ok``."""
    with quire.db.read() as conn:
        return [r[0] for r in conn.execute(text("PRAGMA integrity_check")).all()] == ["ok"]


def recover_as_a_new_start(quire: Quire) -> None:
    """Startup recovery run by a freshly started process on the same data directory (its own live session),
    as the next worker or window start runs it."""
    from knowledge.compose import open_quire

    fresh = open_quire(quire.data_dir)
    try:
        fresh.recover()
    finally:
        fresh.close()
