"""Search quality on both engines: SciFact nDCG@10 per mode on SQLite and on a team store (PostgreSQL +
pgvector on loopback, from its wheel), the same documents ingested the same way through the real CLI.

``python -m tests.benchmarks.bench_engines [--quick]`` writes ``results/engines[-quick].json``. Both bases
are fp32 on the same encoder, so their vectors agree and what differs is each engine's own search path
(keyword ranking above all: FTS5's BM25 against PostgreSQL's). Target: every mode within 0.01 nDCG@10 of
SQLite's. Ingest seconds are recorded too (one worker each, one after the other, in this one run).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.benchmarks import corpus, metrics
from tests.benchmarks.bench_ingest import area, fresh
from tests.benchmarks.common import REPO, Result, child_env, log, run_benchmark, target
from tests.support.servers import start_postgres

MODES = ("keyword", "vector", "hybrid")
BASE = "scifact"
PARITY = 0.01


def cli(data_dir: Path, store: str | None, *args: str, timeout: float = 7200) -> str:
    import subprocess

    where = ["--store", store] if store else []
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), *where, *args],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"quire {args[0]} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def ingest(data_dir: Path, store: str | None, docs: Path) -> float:
    """Create the base, add the folder, run one worker until idle; the worker's seconds."""
    cli(data_dir, store, "base", "create", BASE, "--precision", "fp32", "--json")
    cli(data_dir, store, "add", BASE, str(docs), "--json")
    started = time.monotonic()
    cli(data_dir, store, "worker", "--until-idle", "--nice", "0", "--json")
    return time.monotonic() - started


def rankings(data_dir: Path, store: str | None, queries: Path, mode: str) -> dict[str, list[str]]:
    out = cli(
        data_dir, store, "search", BASE, "--queries-file", str(queries), "--mode", mode, "--limit", "100", "--json"
    )
    return metrics.rankings_of(out)


def run(quick: bool) -> Result:
    return run_benchmark("engines", quick, lambda result: _run(result, quick))


def _run(result: Result, quick: bool) -> None:
    data = corpus.load(quick)
    root = area(quick) / "engines"
    docs = root / "docs"
    corpus.write_tree(data, docs)
    queries = root / "queries.train.jsonl"
    corpus.write_queries(data, queries)
    server = start_postgres()
    try:
        url = server.create_database("quire_bench")
        cli(fresh(root / "pg-local"), url, "store", "init", "--json")
        engines = {"sqlite": (fresh(root / "data-sqlite"), None), "postgresql": (root / "pg-local", url)}
        scores: dict[str, dict[str, dict[str, float]]] = {}
        seconds: dict[str, float] = {}
        for engine, (data_dir, store) in engines.items():
            log(f"{engine}: ingesting {len(data.docs)} SciFact documents")
            seconds[engine] = round(ingest(data_dir, store, docs), 1)
            scores[engine] = {}
            for mode in MODES:
                scores[engine][mode] = metrics.evaluate(rankings(data_dir, store, queries, mode), data.qrels)
                log(f"{engine} {mode}: nDCG@10 {scores[engine][mode]['ndcg@10']:.4f}")
    finally:
        server.stop()
    result.data.update(
        documents=len(data.docs), queries=len(data.queries), scores=scores, ingest_seconds=seconds, precision="fp32"
    )
    for mode in MODES:
        gap = abs(scores["postgresql"][mode]["ndcg@10"] - scores["sqlite"][mode]["ndcg@10"])
        result.targets.append(target(f"|nDCG@10 PostgreSQL - SQLite| ({mode})", gap, at_most=PARITY))


if __name__ == "__main__":
    run("--quick" in sys.argv)
