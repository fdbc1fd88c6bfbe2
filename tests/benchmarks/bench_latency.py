"""Query latency per mode (query encoding included), at SciFact scale and at 100,000 chunks, idle and
while an ingest runs in another process.

Latency is what ``quire search --queries-file`` reports per query (``elapsed_ms``: the search call in
that process, encoding the query with the one-thread query encoder, then the index work). The first
queries of each process (model load, cold caches) are warm-up and not counted.

* SciFact scale: the bf16 SciFact base from ``bench_ingest`` (~9,600 chunks; exact vector scan).
* 100,000 chunks: a SYNTHETIC base (``synth_base.py``: SciFact's chunks replicated with perturbed
  vectors, written through ``knowledge.library.index.write_item_material``) — vector search there goes through
  the binary-quantized candidates + float rescoring.
* During ingest: a ``quire worker`` in another process ingests the SciFact files into a fresh base in
  the same data directory as the searched base while the queries run.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.benchmarks import bench_ingest, corpus
from tests.benchmarks.common import (
    REPO,
    Result,
    child_env,
    db_rows,
    log,
    percentile,
    python_module,
    quire,
    quire_argv,
    run_benchmark,
    target,
)

MODES = ("vector", "keyword", "hybrid")
WARMUP = 10
LIMIT = 10


def ensure_synth(quick: bool, source: Path) -> tuple[Path, dict[str, Any]]:
    """The synthetic base, rebuilt when its size or its source's backend changed (its vectors are the source's)."""
    wanted = 25_000 if quick else 100_000
    (backend,) = db_rows(source, "SELECT backend FROM bases WHERE name = ?", (bench_ingest.BASE,))[0]
    data_dir = bench_ingest.area(quick) / "data-synth"
    return data_dir, synth_base_in(data_dir, source, wanted, lambda info: info.get("backend", "torch") == backend)


def synth_base_in(
    data_dir: Path, source: Path, chunks: int, still_good: Callable[[dict[str, Any]], bool] = lambda _info: True
) -> dict[str, Any]:
    """The synthetic base of ``chunks`` chunks built from ``source`` in ``data_dir``: kept when its marker says
    that size and ``still_good`` accepts it, else rebuilt (``synth_base`` in a child process)."""
    marker = data_dir / "synth.json"
    if marker.exists():
        info: dict[str, Any] = json.loads(marker.read_text())
        if info.get("chunks") == chunks and still_good(info):
            return info
    bench_ingest.fresh(data_dir)
    log(f"building the synthetic {chunks:,}-chunk base")
    info = python_module("tests.benchmarks.synth_base", str(data_dir), str(source), bench_ingest.BASE, str(chunks))
    marker.write_text(json.dumps(info))
    return info


def latencies(data_dir: Path, base: str, queries_file: Path, mode: str) -> list[float]:
    out = quire(
        data_dir, "search", base, "--queries-file", str(queries_file), "--mode", mode, "--limit", str(LIMIT), "--json"
    ).stdout
    values = []
    for line in out.splitlines():
        row = json.loads(line)
        if not str(row["id"]).startswith("warmup-"):
            values.append(float(row["elapsed_ms"]))
    return values


def stats(values: list[float]) -> dict[str, float]:
    return {
        "queries": len(values),
        "p50_ms": round(percentile(values, 50), 2),
        "p95_ms": round(percentile(values, 95), 2),
        "p99_ms": round(percentile(values, 99), 2),
        "max_ms": round(max(values), 2),
        "mean_ms": round(sum(values) / len(values), 2),
    }


class BusyIngest:
    """A ``quire worker`` ingesting the SciFact files into a fresh base of ``data_dir`` meanwhile."""

    def __init__(self, data_dir: Path, docs: Path, name: str) -> None:
        self.data_dir, self.docs, self.name = data_dir, docs, name
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> BusyIngest:
        quire(self.data_dir, "base", "create", self.name)
        quire(self.data_dir, "add", self.name, str(self.docs))
        self.proc = subprocess.Popen(
            quire_argv(self.data_dir, "worker"),
            cwd=REPO,
            env=child_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        deadline = time.monotonic() + 300
        while self.chunks() == 0:  # wait until it really embeds and writes (model loaded)
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the background ingest did not start")
            time.sleep(0.5)
        return self

    def chunks(self) -> int:
        rows = db_rows(
            self.data_dir,
            "SELECT count(*) FROM chunks c JOIN bases b ON b.id = c.base_id WHERE b.name = ?",
            (self.name,),
        )
        return int(rows[0][0])

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.pending() > 0

    def pending(self) -> int:
        rows = db_rows(self.data_dir, "SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")
        return int(rows[0][0])

    def __exit__(self, *_exc: object) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        quire(self.data_dir, "base", "delete", self.name, check=False)


def run(quick: bool) -> Result:
    return run_benchmark("latency", quick, lambda result: _run(result, quick))


def _run(result: Result, quick: bool) -> None:
    state = bench_ingest.setup_bases(quick)
    scifact_dir = Path(state["bf16"]["data_dir"])
    synth_dir, synth = ensure_synth(quick, scifact_dir)
    data = corpus.load(quick)
    queries_file = bench_ingest.area(quick) / "queries.latency.jsonl"
    corpus.write_queries(data, queries_file, limit=100 if quick else 300, warmup=WARMUP)
    scales = {
        "scifact": (scifact_dir, bench_ingest.BASE, state["bf16"]["chunks"]),
        "100k" if not quick else "25k": (synth_dir, "synth", synth["chunks"]),
    }
    measured: dict[str, dict[str, dict[str, Any]]] = {"idle": {}, "during_ingest": {}}
    for scale, (data_dir, base, chunks) in scales.items():
        measured["idle"][scale] = {"chunks": chunks}
        for mode in MODES:
            measured["idle"][scale][mode] = stats(latencies(data_dir, base, queries_file, mode))
            log(f"idle {scale} {mode}: {measured['idle'][scale][mode]}")
    docs = Path(state["docs_dir"])
    for scale, (data_dir, base, chunks) in scales.items():
        measured["during_ingest"][scale] = {"chunks": chunks}
        with BusyIngest(data_dir, docs, "busy") as busy:
            for mode in MODES:
                entry = stats(latencies(data_dir, base, queries_file, mode))
                entry["ingest_still_running"] = busy.running()
                measured["during_ingest"][scale][mode] = entry
                log(f"during ingest {scale} {mode}: {entry}")
            measured["during_ingest"][scale]["busy_chunks_written"] = busy.chunks()
    result.data["latency"] = measured
    result.data["limit"] = LIMIT
    result.data["synthetic_base"] = synth
    recall_file = bench_ingest.area(quick) / "queries.recall.jsonl"
    corpus.write_queries(data, recall_file, limit=200)
    # the same two-stage search forced on the real SciFact vectors, and on the synthetic base (whose ~10
    # perturbed copies of every vector make near-ties that sign bits cannot order: a harder case)
    result.data["quantized_recall_at_10_vs_exact"] = {
        "scifact_real_vectors": python_module(
            "tests.benchmarks.quantized_recall", str(scifact_dir), bench_ingest.BASE, str(recall_file)
        ),
        "synthetic": python_module("tests.benchmarks.quantized_recall", str(synth_dir), "synth", str(recall_file)),
    }
    log(f"quantized vs exact: {result.data['quantized_recall_at_10_vs_exact']}")
    big = "100k" if not quick else "25k"
    # the window's own process with the large base open, after one search from its panel (memory_probe)
    window = python_module(
        "tests.benchmarks.memory_probe", "window", str(synth_dir), "synth", env={"QT_QPA_PLATFORM": "offscreen"}
    )
    result.data["window_memory"] = window
    log(f"window RSS after a search on {big}: {window['rss_mb']['after_search']:.0f} MB")
    result.targets.append(
        target(
            f"window process RSS with the {big}-chunk base open, after a search",
            round(window["rss_mb"]["after_search"], 1),
            at_most=300,
            unit="MB",
            note="queries are encoded in the window's query process (its own RSS not counted)",
        )
    )
    for mode in MODES:
        result.targets.append(
            target(
                f"p95 {mode}, SciFact scale, idle", measured["idle"]["scifact"][mode]["p95_ms"], at_most=20, unit="ms"
            )
        )
    for mode in MODES:
        result.targets.append(
            target(f"p95 {mode}, {big} chunks, idle", measured["idle"][big][mode]["p95_ms"], at_most=50, unit="ms")
        )
    for scale in scales:
        for mode in MODES:
            result.targets.append(
                target(
                    f"p95 {mode}, {scale}, during ingest",
                    measured["during_ingest"][scale][mode]["p95_ms"],
                    at_most=60,
                    unit="ms",
                )
            )
