"""Where a team store's owned copies live: in the database (``blob_contents``, bytea) or a shared directory.

``python -m tests.benchmarks.bench_blob_store`` writes ``results/blob_store.json``. In one run, on a real
PostgreSQL from its wheel on loopback: upload (``blobs.upload`` in a write transaction, as the scheduling
transaction does) and read back (``blobs.read_owned`` into an empty cache, as a worker on another machine
does) one 10 MB file five times and 100 files of 20 KB (one transaction, as one index job's group), against
the same bytes written (``blobs.write_file``: temporary file and rename) and read in a local directory — the
best a shared directory could do, before any network file system's cost. No model is loaded.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from knowledge.library import blobs
from knowledge.store.migrations import migrate
from knowledge.store.postgres import PostgresDatabase
from tests.benchmarks.common import Result, log, run_benchmark, target
from tests.support.servers import start_postgres

BIG, BIG_TIMES = 10 * 1024 * 1024, 5
SMALL, SMALL_COUNT = 20 * 1024, 100
# what the encoder consumes on this machine (FACTS: ~8.5k tokens/s, ~4 bytes a token): the pace to beat by far
ENCODER_BYTES_PER_SECOND = 8_500 * 4


def payloads() -> dict[str, list[bytes]]:
    return {
        "10MB": [os.urandom(BIG) for _ in range(BIG_TIMES)],
        "100x20KB": [os.urandom(SMALL) for _ in range(SMALL_COUNT)],
    }


def database_round(db: PostgresDatabase, cache: Path, files: list[bytes], one_transaction: bool) -> dict[str, float]:
    shas = [blobs.sha256_bytes(d) for d in files]
    started = time.perf_counter()
    if one_transaction:
        with db.write() as conn:
            for sha, data in zip(shas, files, strict=True):
                blobs.upload(conn, sha, data)
    else:
        for sha, data in zip(shas, files, strict=True):
            with db.write() as conn:
                blobs.upload(conn, sha, data)
    uploaded = time.perf_counter() - started
    started = time.perf_counter()
    for sha, data in zip(shas, files, strict=True):
        assert blobs.read_owned(db, cache, sha) == data
    read = time.perf_counter() - started
    return {"upload_s": uploaded, "read_s": read}


def directory_round(root: Path, files: list[bytes]) -> dict[str, float]:
    shas = [blobs.sha256_bytes(d) for d in files]
    started = time.perf_counter()
    for sha, data in zip(shas, files, strict=True):
        blobs.write_file(root, sha, data)
    written = time.perf_counter() - started
    started = time.perf_counter()
    for sha, data in zip(shas, files, strict=True):
        assert blobs.read(root, sha) == data
    read = time.perf_counter() - started
    return {"upload_s": written, "read_s": read}


def rates(seconds: dict[str, float], files: list[bytes]) -> dict[str, Any]:
    size = sum(len(d) for d in files)
    return {
        **{k: round(v, 4) for k, v in seconds.items()},
        "upload_mb_s": round(size / 1e6 / seconds["upload_s"], 1),
        "read_mb_s": round(size / 1e6 / seconds["read_s"], 1),
        "files_s_upload": round(len(files) / seconds["upload_s"], 1),
    }


def _run(result: Result) -> None:
    data = payloads()
    server = start_postgres()
    found: dict[str, Any] = {}
    try:
        db = PostgresDatabase(server.create_database("blobs"))
        migrate(db)
        with tempfile.TemporaryDirectory() as tmp:
            for name, files in data.items():
                base = Path(tmp) / name
                found[f"database {name}"] = rates(database_round(db, base / "cache", files, name != "10MB"), files)
                found[f"directory {name}"] = rates(directory_round(base / "shared", files), files)
        db.dispose()
    finally:
        server.stop()
    for name, r in found.items():
        log(f"{name}: upload {r['upload_mb_s']} MB/s, read {r['read_mb_s']} MB/s")
    result.data.update(results=found, encoder_bytes_per_second=ENCODER_BYTES_PER_SECOND)
    slowest = min(r["upload_mb_s"] for k, r in found.items() if k.startswith("database"))
    result.targets.append(
        target(
            "database upload, slowest case, in multiples of the encoder's pace",
            slowest * 1e6 / ENCODER_BYTES_PER_SECOND,
            at_least=100,
            unit="x",
        )
    )


def run(quick: bool = False) -> Result:
    return run_benchmark("blob_store", quick, _run)


if __name__ == "__main__":
    run()
    sys.exit(0)
