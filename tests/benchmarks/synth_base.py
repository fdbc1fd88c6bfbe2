"""A synthetic base of N chunks for latency at scale — SYNTHETIC, built cheaply, never embedded.

``python -m tests.benchmarks.synth_base TARGET_DATA_DIR SOURCE_DATA_DIR SOURCE_BASE CHUNKS``

It replicates the source base's real chunks (SciFact, as ingested) until ``CHUNKS`` chunks exist:
replica ``r`` of a document becomes an item ``<doc>-r<r>.txt`` with the same chunk texts and the
source's vectors perturbed by Gaussian noise (sigma 0.02 per dimension, then re-normalised; cosine to the
original ≈ 0.93), so that the vector distribution stays that of real MiniLM vectors and every
chunk has a distinct vector. Rows go through ``knowledge.library.index.write_item_material`` (chunks, float
vectors, binary vectors, FTS5 entries), 200 items per write transaction, into a base of the source's
precision and backend (so the query encoder is the one real searches use). Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from knowledge.compose import open_quire
from knowledge.library import bases, index
from knowledge.library.index import ChunkRow
from knowledge.library.tree import NewItem, create_item
from knowledge.store.database import DB_FILENAME, open_raw_connection

NOISE = 0.02
ITEMS_PER_TX = 200


def source_documents(
    data_dir: Path, base: str
) -> tuple[dict[str, str | int], list[tuple[str, list[ChunkRow], np.ndarray]]]:
    conn = open_raw_connection(data_dir / DB_FILENAME)
    (base_row,) = conn.execute(
        "SELECT id, model_id, dimension, precision, backend FROM bases WHERE name = ?", (base,)
    ).fetchall()
    base_id = base_row[0]
    rows = conn.execute(
        'SELECT i.name, c.ordinal, c.text, c.start, c."end", c.page, c.line_start, c.line_end, c.token_count, '
        f"c.text_sha256, v.embedding FROM chunks c JOIN items i ON i.id = c.item_id "
        f"JOIN vec_base_{int(base_id)} v ON v.rowid = c.id WHERE c.base_id = ? AND i.status = 'completed' "
        "ORDER BY c.item_id, c.ordinal",
        (base_id,),
    ).fetchall()
    conn.close()
    docs: dict[str, tuple[list[ChunkRow], list[np.ndarray]]] = {}
    for r in rows:
        chunk_rows, vectors = docs.setdefault(str(r[0]), ([], []))
        chunk_rows.append(ChunkRow(*r[1:10]))
        vectors.append(np.frombuffer(r[10], dtype=np.float32))
    meta = {"model_id": base_row[1], "dimension": base_row[2], "precision": base_row[3], "backend": base_row[4]}
    return meta, [(name, cr, np.stack(vs)) for name, (cr, vs) in docs.items()]


def main(argv: list[str]) -> int:
    target_dir, source_dir, source_base, wanted = Path(argv[0]), Path(argv[1]), argv[2], int(argv[3])
    t0 = time.perf_counter()
    meta, docs = source_documents(source_dir, source_base)
    rng = np.random.default_rng(100_000)
    quire = open_quire(target_dir)
    try:
        base = bases.create_base(
            quire.db,
            "synth",
            model_id=str(meta["model_id"]),
            dimension=int(meta["dimension"]),
            precision=str(meta["precision"]),
            backend=str(meta["backend"]),
        )
        with quire.db.write() as conn:
            root = create_item(conn, NewItem(base.id, "directory", "synthetic", "completed", source_path="/synthetic"))
        written = items = 0
        replica = 0
        while written < wanted:
            for start in range(0, len(docs), ITEMS_PER_TX):
                if written >= wanted:
                    break
                with quire.db.write() as conn:
                    for name, rows, vectors in docs[start : start + ITEMS_PER_TX]:
                        if written >= wanted:
                            break
                        rows = rows[: wanted - written]
                        noisy = vectors[: len(rows)] + rng.normal(0.0, NOISE, (len(rows), vectors.shape[1]))
                        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
                        stem = name.rsplit(".", 1)[0]
                        item = create_item(
                            conn,
                            NewItem(
                                base.id,
                                "file",
                                f"{stem}-r{replica}.txt",
                                "completed",
                                parent_id=root,
                                root_id=root,
                                relative_path=f"{stem}-r{replica}.txt",
                            ),
                        )
                        index.write_item_material(conn, base.id, item, rows, noisy.astype(np.float32))
                        written += len(rows)
                        items += 1
            replica += 1
    finally:
        quire.close()
    print(
        json.dumps(
            {
                "base": "synth",
                "chunks": written,
                "items": items,
                "replicas": replica,
                "precision": meta["precision"],
                "backend": meta["backend"],
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
