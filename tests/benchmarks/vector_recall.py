"""Recall of the sign-bit preselection against the exact scan, per oversampling factor, with its cost.

``python -m tests.benchmarks.vector_recall DATA_DIR BASE QUERIES_FILE [--factors 20,40,80,160]``

Encodes each query once (the base's real query encoder), then on the base's memory-mapped vector file:

- the exact top-10 and top-50 of every query: every float16 copy scored (float32 products, all queries at
  once, block by block);
- for each factor and each ``k`` search asks for (20 for a vector search of 10 hits, 62 for hybrid's 50:
  ``knowledge.search.query``), ``VectorIndex.nearest`` with ``OVERSAMPLE`` set to the factor and the exact
  path off, timed per call, the factors taking turns query by query so a shared machine's load hits them
  alike. recall@10: the share of the exact top-10 among the 10 nearest it returns (recall@50 for k = 62).

Prints one JSON line (also used in-process by ``bench_million``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.benchmarks.bench_latency import stats

ADOPTED = 0  # the factor list's stand-in for what search does (vector_index.rescored_rows)
FACTORS = (20, 40, 80, 160, ADOPTED)
KS = {"vector (k=20)": 20, "hybrid (k=62)": 62}
BLOCK = 65_536


def exact_tops(floats: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int) -> list[list[int]]:
    """Each query's ``k`` best chunk ids by cosine with every stored vector, best first (ties: lower id)."""
    q = np.asarray(queries, dtype=np.float32).T  # (dim, queries)
    best_s = np.full((q.shape[1], 0), -np.inf, dtype=np.float32)
    best_i = np.empty((q.shape[1], 0), dtype=np.int64)
    for start in range(0, len(ids), BLOCK):
        scores = (floats[start : start + BLOCK].astype(np.float32, copy=False) @ q).T  # (queries, block)
        block_ids = np.broadcast_to(ids[start : start + BLOCK], scores.shape)
        all_s = np.concatenate([best_s, scores], axis=1)
        all_i = np.concatenate([best_i, block_ids], axis=1)
        keep = np.argpartition(-all_s, k - 1, axis=1)[:, :k] if all_s.shape[1] > k else np.argsort(-all_s, axis=1)
        best_s = np.take_along_axis(all_s, keep, axis=1)
        best_i = np.take_along_axis(all_i, keep, axis=1)
    out = []
    for s, i in zip(best_s, best_i, strict=True):
        order = np.lexsort((i, -s))
        out.append([int(x) for x in i[order]])
    return out


def measure(data_dir: Path, base_name: str, queries_file: Path, factors: tuple[int, ...] = FACTORS) -> dict[str, Any]:
    from knowledge.compose import open_quire
    from knowledge.library.bases import get_base
    from knowledge.library.vector_file import VectorFiles
    from knowledge.library.vector_format import BaseKey
    from knowledge.search import vector_index

    texts = [json.loads(line)["text"] for line in queries_file.read_text().splitlines() if line.strip()]
    quire = open_quire(data_dir)
    saved = (
        vector_index.OVERSAMPLE,
        vector_index.EXACT_SCAN_MAX,
        vector_index.RESCORE_ROWS,
        vector_index.OVERSAMPLE_FLOOR,
    )
    try:
        base = get_base(quire.db, base_name)
        files = VectorFiles(quire.db)
        mapped = files.peek(BaseKey(base.id, base.created_at, base.dimension)) or files.sync(base.id)
        assert mapped is not None
        encoder = quire.query_encoder(base)
        vectors = np.stack([encoder.encode_query(t) for t in texts]).astype(np.float32)
        t0 = time.perf_counter()
        exact = exact_tops(mapped.floats, mapped.ids, vectors, 50)
        exact_s = time.perf_counter() - t0
        vector_index.EXACT_SCAN_MAX = 0
        index = vector_index.VectorIndex(files)
        configs = [(f, label, k) for f in factors for label, k in KS.items()]
        times: dict[tuple[int, str], list[float]] = {(f, label): [] for f, label, _k in configs}
        overlap10: dict[tuple[int, str], list[float]] = {(f, label): [] for f, label, _k in configs}
        overlap50: dict[int, list[float]] = {f: [] for f in factors}
        with quire.db.read() as conn:
            index.nearest(conn, base, vectors[0], 10)  # the mapping opened once, outside the timings
            for n, q in enumerate(vectors):
                for f, label, k in configs:
                    # a factor: exactly f x k rows; ADOPTED: the shipped row budget (rescored_rows)
                    vector_index.OVERSAMPLE = saved[0] if f == ADOPTED else f
                    vector_index.RESCORE_ROWS = saved[2] if f == ADOPTED else f * k
                    vector_index.OVERSAMPLE_FLOOR = saved[3] if f == ADOPTED else f
                    t0 = time.perf_counter()
                    found = [cid for cid, _d in index.nearest(conn, base, q, k)]
                    times[(f, label)].append((time.perf_counter() - t0) * 1000)
                    overlap10[(f, label)].append(len(set(found[:10]) & set(exact[n][:10])) / 10)
                    if k >= 50:
                        overlap50[f].append(len(set(found[:50]) & set(exact[n][:50])) / 50)
        rows = []
        for f, label, _k in configs:
            row = {
                "factor": f if f != ADOPTED else "adopted",
                "rows": vector_index.rescored_rows(k) if f == ADOPTED else f * k,
                "search": label,
                "recall@10": round(float(np.mean(overlap10[(f, label)])), 4),
                "recall@10_min": min(overlap10[(f, label)]),
                **{k: v for k, v in stats(times[(f, label)]).items() if k in ("p50_ms", "p95_ms", "mean_ms")},
            }
            if label.startswith("hybrid"):
                row["recall@50"] = round(float(np.mean(overlap50[f])), 4)
            rows.append(row)
        return {
            "base": base_name,
            "chunks": int(mapped.header.count),
            "queries": len(texts),
            "exact_scan_all_queries_s": round(exact_s, 1),
            "by_factor": rows,
        }
    finally:
        (
            vector_index.OVERSAMPLE,
            vector_index.EXACT_SCAN_MAX,
            vector_index.RESCORE_ROWS,
            vector_index.OVERSAMPLE_FLOOR,
        ) = saved
        quire.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("base")
    parser.add_argument("queries_file", type=Path)
    parser.add_argument("--factors", default=",".join(map(str, FACTORS)))
    args = parser.parse_args(argv)
    factors = tuple(int(f) for f in args.factors.split(","))
    print(json.dumps(measure(args.data_dir, args.base, args.queries_file, factors)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
