"""Recall@10 of the quantized vector search against the exact scan, on a real base with real queries.

``python -m tests.benchmarks.quantized_recall DATA_DIR BASE QUERIES_FILE`` encodes each query once, asks
``VectorIndex.nearest`` for the 10 nearest chunks twice — exact scan, then sign-bit candidates (``OVERSAMPLE`` x k)
rescored — and reports the mean overlap. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from knowledge.compose import open_quire
from knowledge.library.bases import get_base
from knowledge.search import vector_index


def main(argv: list[str]) -> int:
    data_dir, base_name, queries_file = Path(argv[0]), argv[1], Path(argv[2])
    texts = [json.loads(line)["text"] for line in queries_file.read_text().splitlines() if line.strip()]
    quire = open_quire(data_dir)
    try:
        base = get_base(quire.db, base_name)
        encoder = quire.query_encoder(base)
        vectors = [encoder.encode_query(t) for t in texts]
        found: dict[str, list[set[int]]] = {}
        for name, limit in (("exact", 10**9), ("quantized", 0)):
            vector_index.EXACT_SCAN_MAX = limit
            quire.vectors.forget(base.id)
            with quire.db.read() as conn:
                found[name] = [{cid for cid, _d in quire.vectors.nearest(conn, base, v, 10)} for v in vectors]
        overlap = [len(a & b) / 10 for a, b in zip(found["exact"], found["quantized"], strict=True)]
    finally:
        quire.close()
    print(
        json.dumps(
            {
                "queries": len(texts),
                "chunks": quire.vectors.held_count(base.id) or None,
                "recall@10": round(sum(overlap) / len(overlap), 4),
                "min": min(overlap),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
