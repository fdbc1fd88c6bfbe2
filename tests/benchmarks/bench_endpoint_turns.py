"""What a shared turn at a remote endpoint costs each request: ``python -m tests.benchmarks.bench_endpoint_turns``
writes ``results/endpoint_turns.json``.

In one run, on a data directory's SQLite file and on a real PostgreSQL from its wheel on loopback: 500 turns taken
and ended one after another (``knowledge.store.endpoint_turns.turn``: a pace write, a slot write, the end's delete),
and the same with two threads of one process taking turns together, against the per-process turn (a token bucket
and a semaphore) that a remote request paid before. A request to an embedding endpoint takes tens of milliseconds
to seconds, so the target is a small share of the fastest request we expect (a local server: 20 ms).
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

from knowledge.ingest.remote_turns import local_turn
from knowledge.store.database import Database
from knowledge.store.endpoint_turns import Allowance, turn
from knowledge.store.migrations import migrate
from knowledge.store.postgres import PostgresDatabase
from tests.benchmarks.common import Result, log, percentile, run_benchmark, target
from tests.support.servers import start_postgres

TURNS = 500
FASTEST_REQUEST_MS = 20.0
ALLOWANCE = Allowance("http://127.0.0.1:11434/v1/embeddings", 100_000.0, 100_000, 4, hold=35.0)


def _turns(db: Database | None, count: int, threads: int) -> dict[str, float]:
    """Turns taken and ended back to back by ``threads`` threads: per-turn times (ms)."""
    times: list[float] = []
    lock = threading.Lock()

    def take(n: int) -> None:
        for _ in range(n):
            started = time.perf_counter()
            with turn(db, ALLOWANCE) if db is not None else local_turn(ALLOWANCE):
                pass
            with lock:
                times.append((time.perf_counter() - started) * 1000)

    workers = [threading.Thread(target=take, args=(count // threads,)) for _ in range(threads)]
    wall = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - wall
    return {
        "turns": len(times),
        "median_ms": round(percentile(times, 50), 3),
        "p95_ms": round(percentile(times, 95), 3),
        "turns_per_second": round(len(times) / wall, 1),
    }


def _run(result: Result) -> None:
    found: dict[str, dict[str, float]] = {}
    found["per process (before)"] = _turns(None, TURNS, 1)
    with tempfile.TemporaryDirectory() as tmp:
        db = Database.in_dir(Path(tmp))
        migrate(db)
        found["sqlite, one thread"] = _turns(db, TURNS, 1)
        found["sqlite, two threads"] = _turns(db, TURNS, 2)
        db.dispose()
    server = start_postgres()
    try:
        pg = PostgresDatabase(server.create_database("quire_turns"))
        migrate(pg)
        found["postgresql, one thread"] = _turns(pg, TURNS, 1)
        found["postgresql, two threads"] = _turns(pg, TURNS, 2)
        pg.dispose()
    finally:
        server.stop()
    for name, r in found.items():
        log(f"{name}: median {r['median_ms']} ms, p95 {r['p95_ms']} ms, {r['turns_per_second']} turns/s")
    result.data.update(results=found, fastest_request_ms=FASTEST_REQUEST_MS)
    worst = max(r["median_ms"] for k, r in found.items() if "before" not in k)
    result.targets.append(
        target("a shared turn's median cost, share of a 20 ms request", worst / FASTEST_REQUEST_MS, at_most=0.25)
    )


def run(quick: bool = False) -> Result:
    return run_benchmark("endpoint_turns", quick, _run)


if __name__ == "__main__":
    run()
    sys.exit(0)
