"""Overhead of parsing in the parse process (knowledge/ingest/parse_worker.py) against parsing in-process.

Run on purpose: ``python -m tests.benchmarks.parse_worker_overhead [N]``; prints JSON. Small files are
the worst case (the fixed cost per item is largest beside the parse itself). Batches of 128 items per
request, as index-documents sends them.
"""

from __future__ import annotations

import json
import sys
import time

from knowledge.ingest.parse_worker import ParseLimits, ParseWorker
from knowledge.sources import parse_bytes

BATCH = 128


def sample(n: int) -> list[tuple[str, bytes, int]]:
    body = "# Note {n}\n\n" + "A small Markdown note about rivers and the sea, line {n}.\n" * 20
    return [(f"note{n}.md", body.format(n=n).encode(), 50 << 20, "eng") for n in range(n)]


def main(n: int = 300) -> dict[str, float]:
    files = sample(n)
    start = time.perf_counter()
    for name, data, limit in files:
        parse_bytes(data, name=name, max_bytes=limit)
    in_process = time.perf_counter() - start

    worker = ParseWorker(ParseLimits.from_env())
    try:
        start = time.perf_counter()
        worker.parse_many(files[:1])  # the child's start (spawn + imports), paid once per worker thread
        startup = time.perf_counter() - start
        start = time.perf_counter()
        for first in range(0, n, BATCH):
            worker.parse_many(files[first : first + BATCH])
        isolated = time.perf_counter() - start
    finally:
        worker.close()
    return {
        "files": n,
        "in_process_ms_per_file": round(1000 * in_process / n, 3),
        "isolated_ms_per_file": round(1000 * isolated / n, 3),
        "overhead_ms_per_file": round(1000 * (isolated - in_process) / n, 3),
        "child_startup_s": round(startup, 3),
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)))
