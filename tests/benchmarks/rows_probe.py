"""How a search reads the rows it rescores: gathered from the vector file's mapping, or read with ``pread``.

``python -m tests.benchmarks.rows_probe DATA_DIR BASE QUERIES_FILE METHOD`` (METHOD ``gather`` or ``pread``)
in a fresh process: for each query (encoded first, the base's real query encoder), the candidates a hybrid
search rescores (k = 62: the 62 x ``OVERSAMPLE`` nearest by Hamming distance of the sign bits, as
``VectorIndex.nearest`` picks them) are read by METHOD. Reports the time per read (p50 / p95 ms) and the
process's RSS before the first read and after the last — what stays mapped (``gather`` faults in the pages
around every row; ``pread`` copies the rows and maps nothing). The rows read are the same either way
(checked: their checksum), so recall is unchanged by construction. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.benchmarks.bench_latency import stats
from tests.benchmarks.memory_probe import rss_mb

HYBRID_K = 62


def measure(data_dir: Path, base_name: str, queries_file: Path, method: str) -> dict[str, Any]:
    from knowledge.library.bases import get_base
    from knowledge.library.vector_file import VectorFiles
    from knowledge.library.vector_format import BaseKey
    from knowledge.runtime import Quire
    from knowledge.search.vector_index import MAX_CANDIDATES, OVERSAMPLE, hamming, nearest_by_distance, sign_bits

    texts = [json.loads(line)["text"] for line in queries_file.read_text().splitlines() if line.strip()]
    quire = Quire.open(data_dir)  # reads only: no job types needed
    try:
        base = get_base(quire.db, base_name)
        encoder = quire.query_encoder(base)
        queries = [encoder.encode_query(t) for t in texts]
        files = VectorFiles(quire.db)
        mapped = files.peek(BaseKey(base.id, base.created_at, base.dimension))
        assert mapped is not None, "no vector file: search the base once first"
        count = min(len(mapped.ids), HYBRID_K * OVERSAMPLE, MAX_CANDIDATES)
        chosen = [
            nearest_by_distance(hamming(mapped.bits, sign_bits(q[None, :])[0]), count, base.dimension) for q in queries
        ]
        before = rss_mb()
        times, checksum = [], 0.0
        for positions in chosen:
            t0 = time.perf_counter()
            if method == "pread":
                rows = mapped.rows.read(positions)
            else:
                rows = mapped.floats[positions]
                if method == "gather-drop":
                    _drop(mapped)
            times.append((time.perf_counter() - t0) * 1000)
            checksum += float(rows.sum(dtype=np.float64))
        return {
            "method": method,
            "chunks": len(mapped.ids),
            "rows_per_search": count,
            "searches": len(chosen),
            **{k: v for k, v in stats(times).items() if k != "queries"},
            "rss_mb_before_reads": before,
            "rss_mb_after_reads": rss_mb(),
            "rss_growth_mb": round(rss_mb() - before, 1),
            "checksum": round(checksum, 3),
        }
    finally:
        quire.close()


def _drop(mapped: Any) -> None:
    import mmap

    mapping = mapped.floats.base
    while not isinstance(mapping, mmap.mmap):
        mapping = mapping.base if hasattr(mapping, "base") else mapping.obj
    start = mapped.header.offsets()[2] // mmap.PAGESIZE * mmap.PAGESIZE
    mapping.madvise(mmap.MADV_DONTNEED, start, len(mapping) - start)


if __name__ == "__main__":
    print(json.dumps(measure(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4])))
