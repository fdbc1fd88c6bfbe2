"""Helpers for knowledge tests: bases, files, an in-process worker, counts of search material."""

from __future__ import annotations

from sqlalchemy import text

from knowledge.library import bases
from knowledge.library.bases import Base
from knowledge.library.index import fts_table, vec_table
from knowledge.runtime import Quire


def make_base(quire: Quire, name: str = "kb", precision: str = "fp32") -> Base:
    from knowledge.ingest.models import model_spec

    spec = model_spec("all-MiniLM-L6-v2")
    return bases.create_base(quire.db, name, model_id=spec.model_id, dimension=spec.dimension, precision=precision)


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
