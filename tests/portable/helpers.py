"""Helpers for portable-base tests: a base with real rows written without a model, and comparisons.

``synthetic_base`` writes items, owned blobs, chunks with unit vectors (through ``index.write_item_material``,
the function ingest uses), a folder run with its manifest, outcomes and audit entries. Tests that need
the real model and worker build their base the ordinary way instead.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection, insert, inspect, text

from knowledge.library import audit, bases, blobs, index
from knowledge.library import index_postgres as pg
from knowledge.library.bases import Base
from knowledge.runtime import Quire
from knowledge.store.schema import items
from knowledge.store.schema_runs import folder_run_outcomes, folder_run_sources, folder_runs, ingest_batches

WORDS = [
    "protein",
    "cell",
    "membrane",
    "enzyme",
    "tomato",
    "garden",
    "bicycle",
    "chain",
    "sourdough",
    "starter",
    "flour",
    "water",
    "meeting",
    "agenda",
    "budget",
    "river",
    "mountain",
    "library",
    "window",
    "keyboard",
    "planet",
    "orbit",
    "violin",
    "concert",
]


FILES_PER_TRANSACTION = 200


def synthetic_base(
    quire: Quire,
    name: str = "kb",
    *,
    files: int = 12,
    chunks_per_file: int = 4,
    model_id: str = "all-MiniLM-L6-v2",
    dimension: int = 384,
    source_root: Path | None = None,
    seed: int = 0,
) -> Base:
    rng = np.random.default_rng(seed)
    base = bases.create_base(quire.db, name, model_id=model_id, dimension=dimension, precision="fp32")
    root_path = str(source_root or Path("/nonexistent/quire-portable-test") / name)
    now = time.time()
    with quire.db.write() as conn:
        folder_id = _insert_item(conn, base.id, None, "directory", Path(root_path).name, root_path, None, now)
        conn.execute(text("UPDATE items SET root_id = id WHERE id = :i"), {"i": folder_id})
        run_id = conn.execute(
            insert(folder_runs).values(
                base_id=base.id,
                folder=root_path,
                idempotency_key=f"key-{name}-{seed}",
                request_fingerprint="f" * 64,
                approved_by="person:tester",
                status="completed",
                declared_size=files,
                walked=files,
                container_item_id=folder_id,
                created_at=now,
                updated_at=now,
            )
        ).inserted_primary_key[0]
        audit.append(conn, audit.RUN_CREATED, "person:tester", base_id=base.id, run_id=run_id, payload={"n": files})
    for start in range(0, files, FILES_PER_TRANSACTION):  # each commit syncs the keyword file: not one per file
        with quire.db.write() as conn:
            for n in range(start, min(files, start + FILES_PER_TRANSACTION)):
                _synthetic_file(
                    quire, conn, rng, base.id, folder_id, run_id, root_path, n, chunks_per_file, dimension, now
                )
    with quire.db.write() as conn:
        audit.append(conn, audit.RUN_COMPLETED, "system", base_id=base.id, run_id=run_id, payload={"n": files})
        conn.execute(text("UPDATE items SET status = 'completed' WHERE id = :i"), {"i": folder_id})
    return bases.get_base(quire.db, base.id)


def _synthetic_file(
    quire: Quire,
    conn: Connection,
    rng: np.random.Generator,
    base_id: int,
    folder_id: int,
    run_id: int,
    root_path: str,
    n: int,
    chunks_per_file: int,
    dimension: int,
    now: float,
) -> None:
    """File ``n`` of a synthetic base: its owned copy, item, chunks and vectors, and its run's ledger rows."""
    words = [WORDS[(n + k) % len(WORDS)] for k in range(6)]
    body = "\n".join(" ".join(rng.permutation(words)) + f" part {n}-{c}" for c in range(chunks_per_file))
    raw = body.encode()
    sha = hashlib.sha256(raw).hexdigest()
    blobs.write_file(quire.blobs_dir, sha, raw)
    blobs.record(conn, quire.blobs_dir, sha, raw, "raw")
    rel = f"doc{n:03d}.txt"
    item_id = _insert_item(conn, base_id, folder_id, "file", rel, f"{root_path}/{rel}", rel, now, sha=sha)
    conn.execute(
        text("UPDATE items SET root_id = :r, run_id = :run, chunk_count = :c WHERE id = :i"),
        {"r": folder_id, "run": run_id, "c": chunks_per_file, "i": item_id},
    )
    lines = body.split("\n")
    rows, offset = [], 0
    for c, line in enumerate(lines):
        rows.append(
            index.ChunkRow(
                c,
                line,
                offset,
                offset + len(line),
                None,
                c + 1,
                c + 1,
                len(line.split()),
                hashlib.sha256(line.encode()).hexdigest(),
            )
        )
        offset += len(line) + 1
    vectors = rng.normal(size=(len(rows), dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.write_item_material(conn, base_id, item_id, rows, vectors)
    source_id = conn.execute(
        insert(folder_run_sources).values(
            run_id=run_id,
            ordinal=n,
            relative_path=rel,
            size=len(raw),
            content_sha256=sha,
            approved_by="person:tester",
        )
    ).inserted_primary_key[0]
    batch_id = conn.execute(
        insert(ingest_batches).values(run_id=run_id, source_id=source_id, item_id=item_id, attempt=1, created_at=now)
    ).inserted_primary_key[0]
    conn.execute(
        insert(folder_run_outcomes).values(
            run_id=run_id,
            source_id=source_id,
            disposition="committed",
            item_id=item_id,
            batch_id=batch_id,
            attempt=1,
            settled_at=now,
        )
    )


def _insert_item(
    conn: Any,
    base_id: int,
    parent: int | None,
    kind: str,
    name: str,
    source: str,
    rel: str | None,
    now: float,
    sha: str | None = None,
) -> int:
    pk = conn.execute(
        insert(items).values(
            base_id=base_id,
            parent_id=parent,
            type=kind,
            name=name,
            source_path=source,
            relative_path=rel,
            status="completed",
            blob_sha256=sha,
            created_at=now,
            updated_at=now,
        )
    ).inserted_primary_key
    return int(pk[0])


def table_counts(quire: Quire) -> dict[str, int]:
    """Row counts of every table an import writes (to show that nothing was written)."""
    names = [
        "bases",
        "items",
        "chunks",
        "blobs",
        "identities",
        "folder_runs",
        "folder_run_sources",
        "folder_run_outcomes",
        "ingest_batches",
        "audit_log",
        "base_imports",
    ]
    with quire.db.read() as conn:
        found = {n: int(conn.execute(text(f"SELECT count(*) FROM {n}")).scalar_one()) for n in names}
        # a base's vector and keyword tables (on SQLite with their shadow tables), on either engine
        tables = inspect(conn).get_table_names()
        found["base_tables"] = sum(1 for t in tables if t.startswith(("vec_base_", "fts_base_")))
        found["blob_contents"] = int(conn.execute(text("SELECT count(*) FROM blob_contents")).scalar_one())
    blob_files = [p for p in quire.blobs_dir.rglob("*") if p.is_file()] if quire.blobs_dir.exists() else []
    found["blob_files"] = len(blob_files)
    return found


def base_content(quire: Quire, base_ref: str | int) -> dict[str, Any]:
    """A base's items, chunks (text, location, vectors), blobs and ledger, with ids replaced by paths."""
    base = bases.get_base(quire.db, base_ref)
    with quire.db.read() as conn:
        item_rows = conn.execute(
            text(
                "SELECT id, parent_id, type, name, source_path, relative_path, status, chunk_count, blob_sha256 "
                "FROM items WHERE base_id = :b ORDER BY source_path, name"
            ),
            {"b": base.id},
        ).all()
        key = {r.id: (r.source_path, r.name) for r in item_rows}
        embedding = pg.embedding_column("v") if conn.dialect.name == "postgresql" else "v.embedding"
        chunk_rows = conn.execute(
            text(
                f'SELECT c.item_id, c.ordinal, c.text, c.start, c."end", c.line_start, c.vector_f16, {embedding} '
                f"FROM chunks c JOIN {index.vec_table(base.id)} v ON v.rowid = c.id WHERE c.base_id = :b"
            ),
            {"b": base.id},
        ).all()
        fts = int(conn.execute(text(f"SELECT count(*) FROM {index.fts_table(base.id)}")).scalar_one())
        runs = conn.execute(
            text(
                "SELECT folder, status, declared_size, "
                "(SELECT count(*) FROM folder_run_sources s WHERE s.run_id = r.id), "
                "(SELECT count(*) FROM folder_run_outcomes o WHERE o.run_id = r.id) FROM folder_runs r "
                "WHERE base_id = :b ORDER BY folder"
            ),
            {"b": base.id},
        ).all()
        actions = sorted(
            r[0] for r in conn.execute(text("SELECT action FROM audit_log WHERE base_id = :b"), {"b": base.id}).all()
        )
    return {
        "settings": {k: v for k, v in base.as_dict().items() if k not in ("id", "updated_at")},
        "items": [
            (
                key.get(r.parent_id),
                r.type,
                r.name,
                r.source_path,
                r.relative_path,
                r.status,
                r.chunk_count,
                r.blob_sha256,
            )
            for r in item_rows
        ],
        "chunks": sorted(
            (key[r.item_id], r.ordinal, r.text, r.start, r.end, r.line_start, bytes(r.vector_f16), _float32(r[7]))
            for r in chunk_rows
        ),
        "fts_rows": fts,
        "runs": [tuple(r) for r in runs],
        "audit": actions,
    }


def _float32(embedding: object) -> bytes:
    """A vector as float32 bytes: vec0 keeps those bytes, pgvector is read back as ``real[]``."""
    return embedding if isinstance(embedding, bytes) else pg.as_blob(embedding)


def hits_without_ids(hits: list[Any]) -> list[dict[str, Any]]:
    out = []
    for h in hits:
        d = h.as_dict() if hasattr(h, "as_dict") else dict(h)
        d.pop("chunk_id", None)
        d.pop("item_id", None)
        out.append(json.loads(json.dumps(d, sort_keys=True, default=str)))
    return out
