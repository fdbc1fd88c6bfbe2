"""Search at scale: a SYNTHETIC base (``synth_base.py``, from the SciFact ingest) of ``--scale`` 100k, 300k
or 1m chunks (the default; or ``--chunks N``), the same queries through ``quire search --queries-file``
with the code before and after a change, each mode in a fresh process.

``python -m tests.benchmarks.bench_million [--scale 1m] [--before SRC_TREE] [--name NAME]``

Building the base takes minutes (1m: about an hour on a loaded 2-core machine, ~5 GB of database); it is
kept in ``QUIRE_BENCH_DIR`` (``full/data-synth-<chunks>``; keep it outside the repository) and reused while
its marker says that size. In ``make bench`` it runs only when named: ``make bench BENCH_ARGS="--only
million"`` (1,000,000 chunks; ``--quick``: 100,000).

Per mode and code version: the first answer after process start (wall time from spawning the process to
its first result line: interpreter, imports, opening the data directory, the model, the vectors), the first
query's own ``elapsed_ms``, p50/p95/p99 of the other queries (warm-up dropped), the process's peak RSS
(``ru_maxrss`` of a wrapper's only child) and the 1-minute load average as it started. ``--before`` is a
source tree of the earlier code (e.g. ``git archive <commit> | tar -x -C DIR``); the data directory is the
same, so only the code differs. The OS page cache is left as it is (shared machine): "cold" means a fresh
process, not a cold disk.

Then the same queries (code after) while a ``quire worker`` ingests SciFact into another base of the same
data directory (``bench_latency.BusyIngest``), and the window's own process on the base (``memory_probe
window``: RSS after one search from its panel, that search's time, and the main thread's lateness on a 10 ms
heartbeat meanwhile). The targets at scale are in the result file (``summarize`` renders them): first hybrid
answer after process start <= 1.5 s; hybrid p95 <= 80 ms idle and <= 120 ms during an ingest; keyword p95
<= 60 ms; the window <= 500 MB after a search and never late by more than 50 ms.

Then, in this process, on the base's memory-mapped vector file: the time to rebuild it from rows (what a
first search cost before, and what a damaged file costs once), and the sign-bit preselection against the
exact scan per oversampling factor — recall@10 and time per search (``vector_recall``).
Results: ``tests/benchmarks/results/<name>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.benchmarks import bench_ingest, corpus, vector_recall
from tests.benchmarks.bench_latency import BusyIngest, stats, synth_base_in
from tests.benchmarks.common import REPO, Result, child_env, log, python_module, run_benchmark, target

MODES = ("vector", "keyword", "hybrid")
SCALES = {"100k": 100_000, "300k": 300_000, "1m": 1_000_000}
WARMUP = 10
QUERIES = 300
RECALL_QUERIES = 200
_WRAP = (
    "import resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:])\n"
    "sys.stderr.write('\\nMAXRSS_KB %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(r.returncode)\n"
)


def ensure_synth(chunks: int) -> tuple[Path, dict[str, Any]]:
    source = bench_ingest.area(False) / "data-bf16"
    data_dir = bench_ingest.area(False) / f"data-synth-{chunks}"
    return data_dir, synth_base_in(data_dir, source, chunks)


def run_queries(code: Path, data_dir: Path, queries: Path, mode: str, store: str | None = None) -> dict[str, Any]:
    """One fresh ``quire search --queries-file`` process on ``code``'s source tree (on ``store``, a team store,
    when given: ``data_dir`` is then the machine's own directory)."""
    argv = [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir)]
    argv += [] if store is None else ["--store", store]
    argv += ["search", "synth"]
    argv += ["--queries-file", str(queries), "--mode", mode, "--limit", "10", "--json"]
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRAP, *argv],
        cwd=code,
        env=child_env({"PYTHONPATH": str(code)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.append(proc.stderr.read() if proc.stderr else ""))
    reader.start()
    first_line_s: float | None = None
    rows = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if first_line_s is None:
            first_line_s = time.perf_counter() - started
        rows.append(json.loads(line))
    proc.wait()
    reader.join()
    if proc.returncode != 0:
        raise RuntimeError(f"search exited {proc.returncode}: {errors[0][-2000:]}")
    rss_kb = int(errors[0].rsplit("MAXRSS_KB", 1)[1].split()[0])
    failed = [r for r in rows if "elapsed_ms" not in r]  # a query the search refused or failed: its error line
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(rows)} queries failed, the first: {failed[0]}")
    measured = [float(r["elapsed_ms"]) for r in rows if not str(r["id"]).startswith("warmup-")]
    return {
        "first_answer_after_start_s": round(first_line_s or 0.0, 2),
        "first_query_ms": round(float(rows[0]["elapsed_ms"]), 1),
        **stats(measured),
        "peak_rss_mb": round(rss_kb / 1024, 1),
    }


def scan_comparison(data_dir: Path, queries_file: Path) -> dict[str, Any]:
    """The file rebuilt from rows (what a missing or damaged file costs once), then the sign-bit
    preselection against the exact scan per oversampling factor (``vector_recall``)."""
    from knowledge.compose import open_quire
    from knowledge.library.bases import get_base
    from knowledge.library.vector_file import VectorFiles

    quire = open_quire(data_dir)
    try:
        base = get_base(quire.db, "synth")
        files = VectorFiles(quire.db)
        path = files.path(base.id)
        path.unlink(missing_ok=True)
        t0 = time.perf_counter()
        mapped = files.sync(base.id)
        rebuild_s = time.perf_counter() - t0
        assert mapped is not None
        file_mb = round(path.stat().st_size / 2**20, 1)
    finally:
        quire.close()
    return {
        "file_mb": file_mb,
        "rebuild_from_rows_s": round(rebuild_s, 1),
        **vector_recall.measure(data_dir, "synth", queries_file),
    }


def mapped_vs_in_memory(data_dir: Path, queries_file: Path) -> dict[str, Any]:
    """The same searches through the mapped file and through the in-memory copy read from rows (the code
    before), in one process, query by query in turn, so that the load of a shared machine hits both alike;
    and the first search of each (what opening costs)."""
    from knowledge.compose import open_quire
    from knowledge.library.bases import get_base
    from knowledge.library.vector_file import VectorFiles
    from knowledge.search.vector_index import VectorIndex

    texts = [json.loads(line)["text"] for line in queries_file.read_text().splitlines() if line.strip()]
    quire = open_quire(data_dir)
    try:
        base = get_base(quire.db, "synth")
        encoder = quire.query_encoder(base)
        vectors = [encoder.encode_query(t) for t in texts]
        indexes = {"mapped": VectorIndex(VectorFiles(quire.db)), "in_memory": VectorIndex()}
        first_ms: dict[str, float] = {}
        times: dict[str, list[float]] = {name: [] for name in indexes}
        for n, q in enumerate(vectors):
            for name, index in indexes.items():
                t0 = time.perf_counter()
                with quire.db.read() as conn:
                    index.nearest(conn, base, q, 13)  # what vector_candidates asks for 10 hits
                elapsed = (time.perf_counter() - t0) * 1000
                if n == 0:
                    first_ms[name] = round(elapsed, 1)
                else:
                    times[name].append(elapsed)
        return {
            "queries": len(vectors) - 1,
            "first_search_ms": first_ms,
            **{name: stats(values) for name, values in times.items()},
            "p50_ratio_mapped_over_in_memory": round(
                stats(times["mapped"])["p50_ms"] / stats(times["in_memory"])["p50_ms"], 3
            ),
        }
    finally:
        quire.close()


def during_ingest(data_dir: Path, queries: Path, data: corpus.SciFact) -> dict[str, Any]:
    """The same queries (code after) while a ``quire worker`` ingests the SciFact files into a fresh base of
    the same data directory (``bench_latency.BusyIngest``; the base is deleted afterwards)."""
    docs = bench_ingest.area(False) / "docs"
    corpus.write_tree(data, docs)
    out: dict[str, Any] = {}
    with BusyIngest(data_dir, docs, "busy") as busy:
        for mode in MODES:
            load_before = round(os.getloadavg()[0], 2)
            entry = run_queries(REPO, data_dir, queries, mode)
            out[mode] = {**entry, "load_1m_before": load_before, "ingest_still_running": busy.running()}
            log(f"during ingest {mode}: {out[mode]}")
        out["busy_chunks_written"] = busy.chunks()
    return out


def window_probe(data_dir: Path) -> dict[str, Any]:
    """The window's own process after one search from its panel, its first search's time and its main
    thread's lateness meanwhile (``memory_probe window``, offscreen, no worker)."""
    probe: dict[str, Any] = python_module(
        "tests.benchmarks.memory_probe", "window", str(data_dir), "synth", env={"QT_QPA_PLATFORM": "offscreen"}
    )
    return probe


def run(quick: bool) -> Result:
    """For ``run_all --only million`` (on purpose: building the base takes minutes): the code as it is."""
    chunks = SCALES["100k" if quick else "1m"]
    args = argparse.Namespace(
        chunks=chunks, before=None, name="million", skip_scan=False, skip_ingest=False, skip_window=False
    )
    return run_benchmark("million", quick, lambda result: _run(result, args))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", choices=sorted(SCALES), help="the base's size: 100k, 300k or 1m (the default)")
    parser.add_argument("--chunks", type=int, help="any other size")
    parser.add_argument("--before", type=Path, help="source tree of the earlier code")
    parser.add_argument("--name", default="million")
    parser.add_argument("--skip-scan", action="store_true")
    parser.add_argument("--skip-ingest", action="store_true", help="no during-ingest condition")
    parser.add_argument("--skip-window", action="store_true", help="no window probe")
    args = parser.parse_args(argv)
    args.chunks = args.chunks or SCALES[args.scale or "1m"]
    run_benchmark(args.name, False, lambda result: _run(result, args))
    return 0


def _run(result: Result, args: argparse.Namespace) -> None:
    data_dir, synth = ensure_synth(args.chunks)
    result.data["synthetic_base"] = synth
    result.data["database_mb"] = round((data_dir / "quire.sqlite3").stat().st_size / 2**20, 1)
    data = corpus.load(False)
    queries = bench_ingest.area(False) / "queries.million.jsonl"
    corpus.write_queries(data, queries, limit=QUERIES, warmup=WARMUP)
    codes = {"after": REPO} if args.before is None else {"before": args.before, "after": REPO}
    for label, code in codes.items():
        result.data[label] = {}
        for mode in MODES:
            load_before = round(os.getloadavg()[0], 2)
            entry = {**run_queries(code, data_dir, queries, mode), "load_1m_before": load_before}
            result.data[label][mode] = entry
            log(f"{label} {mode}: {entry}")
    if not args.skip_scan:
        recall = bench_ingest.area(False) / "queries.million-recall.jsonl"
        corpus.write_queries(data, recall, limit=RECALL_QUERIES)
        result.data["scan"] = scan_comparison(data_dir, recall)
        log(f"scan: {result.data['scan']}")
        result.data["mapped_vs_in_memory"] = mapped_vs_in_memory(data_dir, recall)
        log(f"mapped vs in memory: {result.data['mapped_vs_in_memory']}")
        result.data["rescore_reads"] = {  # each in a fresh process: what stays mapped is the point
            method: python_module("tests.benchmarks.rows_probe", str(data_dir), "synth", str(recall), method)
            for method in ("gather", "pread")
        }
        log(f"rows rescored, gathered vs pread: {result.data['rescore_reads']}")
    if not args.skip_ingest:
        result.data["during_ingest"] = during_ingest(data_dir, queries, data)
    if not args.skip_window:
        result.data["window"] = window_probe(data_dir)
        log(f"window: {result.data['window']}")
    after = result.data["after"]
    size = f"{synth['chunks']:,} chunks"
    result.targets += [
        target(
            f"first hybrid answer after process start, {size}",
            after["hybrid"]["first_answer_after_start_s"],
            at_most=1.5,
            unit="s",
        ),
        target(f"p95 hybrid, {size}, idle", after["hybrid"]["p95_ms"], at_most=80, unit="ms"),
        target(f"p95 keyword, {size}, idle", after["keyword"]["p95_ms"], at_most=60, unit="ms"),
    ]
    busy = result.data.get("during_ingest")
    if busy:
        result.targets.append(
            target(f"p95 hybrid, {size}, during an ingest", busy["hybrid"]["p95_ms"], at_most=120, unit="ms")
        )
    window = result.data.get("window")
    if window:
        result.targets += [
            target(
                f"window process RSS after a search, {size}",
                window["rss_mb"]["after_search"],
                at_most=500,
                unit="MB",
                note="queries are encoded in the window's query process (its own RSS not counted)",
            ),
            target(
                f"window main thread lateness (10 ms heartbeat) to the first search's hits, {size}",
                window["main_thread_lateness"]["max_ms"],
                at_most=50,
                unit="ms",
            ),
        ]
    if "scan" in result.data:
        adopted = [r for r in result.data["scan"]["by_factor"] if r["factor"] == "adopted"]
        for row in adopted:
            result.targets.append(
                target(
                    f"sign-bit search recall@10 vs exact scan, {row['search']}, {row['rows']:,} rows rescored, "
                    f"{size} (synthetic)",
                    row["recall@10"],
                    at_least=0.98,
                )
            )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
