"""The keyword index against FTS5, with the model: keyword and hybrid nDCG@10 on the SciFact training queries.

``python -m tests.benchmarks.bench_keyword_index --before SRC_TREE [--queries N]`` writes
``results/keyword_index.json``. The same SciFact base (bench_ingest's bf16 one, ``full/data-bf16``: this
benchmark never builds or replaces it — run ``bench_ingest`` first) is searched by one ``quire search
--queries-file … --limit 100 --json`` process per mode and code version: ``--before`` is a source tree of
the code that ranked keywords with FTS5 (e.g. ``git archive <commit> | tar -x -C DIR``), the repository is
the code that ranks them with the base's keyword index; the data directory is the same, so only the
ranking differs. Hybrid fuses the keyword ranking with the vector one (the fitted
fusion reads BM25 divided by the query's best BM25), so it shows what the index's slightly different BM25
(tantivy's idf is ln(1 + x) where FTS5's is ln(x), lengths in one-byte buckets) does to the fused ranking.
``bench_keyword_parity`` measures the analyzer and ranking alone, without the model.

The writer's cost, in this process: material for 250 SciFact documents written per transaction through
``write_item_material`` (the real write path), rounds alternating between the keyword index synced after each
commit and not (the next synced round catches the skipped one up, so a synced round pays for two): the
index's share of an ingest's write time, without the encoder (which dominates a real ingest).

``--at-scale DATA_DIR`` (a synthetic base of ``bench_million``, e.g. ``full/data-synth-300000``) adds, in this
process: the keyword ranking alone (``keyword_candidates``: the index's top-k against FTS5's ranking with its
common-term cut, queries taking turns, so both see the same load) and the time and size of building the base's
index from its rows (into a scratch directory: the base's own index is left as it is).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.benchmarks import bench_ingest, corpus, metrics
from tests.benchmarks.common import REPO, Result, child_env, log, run_benchmark, target

MODES = ("keyword", "hybrid")
PARITY = 0.005


def rankings(code: Path, data_dir: Path, queries: Path, mode: str) -> tuple[dict[str, list[str]], float]:
    """Each query's ranked documents from one ``quire search`` process on ``code``'s tree, and its seconds."""
    argv = [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), "search", bench_ingest.BASE]
    argv += ["--queries-file", str(queries), "--mode", mode, "--limit", "100", "--json"]
    started = time.monotonic()
    out = subprocess.run(
        argv, cwd=code, env=child_env({"PYTHONPATH": str(code)}), capture_output=True, text=True, timeout=7200
    )
    if out.returncode != 0:
        raise RuntimeError(f"quire search ({code}, {mode}) failed: {out.stderr[-2000:]}")
    return metrics.rankings_of(out.stdout), time.monotonic() - started


def at_scale(data_dir: Path, data: corpus.SciFact, queries: int = 300) -> dict[str, Any]:
    """The keyword ranking alone on a large base, index against FTS5 taking turns; then a build from rows."""
    from knowledge.compose import open_quire
    from knowledge.library.bases import get_base
    from knowledge.library.keyword_file import KeywordFiles
    from knowledge.search.keyword import keyword_candidates
    from knowledge.search.syntax import parse
    from tests.benchmarks.bench_latency import stats

    quire = open_quire(data_dir)
    try:
        base = get_base(quire.db, "synth")
        times: dict[str, list[float]] = {"keyword_index": [], "fts5": []}
        for n, (_qid, text) in enumerate(data.queries[: queries + 10]):
            parsed = parse(text)
            for label, index in (("keyword_index", quire.keywords), ("fts5", None)):
                started = time.perf_counter()
                with quire.db.read() as conn:
                    keyword_candidates(conn, base, parsed, 10, None, stats=quire.terms, index=index)
                if n >= 10:  # the first ten warm both up
                    times[label].append((time.perf_counter() - started) * 1000)
        out: dict[str, Any] = {label: stats(values) for label, values in times.items()}
        out["load_1m_after"] = round(os.getloadavg()[0], 2)
        with tempfile.TemporaryDirectory(dir=data_dir.parent) as scratch:
            started = time.monotonic()
            opened = KeywordFiles(quire.db, Path(scratch)).sync(base.id)
            out["build_from_rows_s"] = round(time.monotonic() - started, 1)
            out["documents"] = None if opened is None else opened.documents()
            folder = Path(scratch) / "keywords"
            out["index_mb"] = round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20, 1)
            shutil.rmtree(folder, ignore_errors=True)
        out["database_mb"] = round((data_dir / "quire.sqlite3").stat().st_size / 2**20, 1)
        return out
    finally:
        quire.close()


def writer_cost(data: corpus.SciFact, rounds: int = 12, per_round: int = 250) -> dict[str, Any]:
    """Seconds a write transaction of ``per_round`` chunks takes with its after-commit keyword sync and without."""
    import numpy as np

    from knowledge.compose import open_quire
    from knowledge.library import index, keyword_file
    from knowledge.library.index import ChunkRow
    from knowledge.library.tree import NewItem, create_item
    from tests.knowledge.helpers import make_base

    texts = [data.body(d) for d in list(data.docs)[: rounds * per_round]]
    rng = np.random.default_rng(0)
    synced = keyword_file.SyncAfterCommit.__call__
    times: dict[str, list[float]] = {"synced": [], "not_synced": []}
    with tempfile.TemporaryDirectory() as scratch:
        quire = open_quire(Path(scratch) / "data")
        try:
            base = make_base(quire)
            for n in range(rounds):
                label = "synced" if n % 2 else "not_synced"
                keyword_file.SyncAfterCommit.__call__ = synced if n % 2 else (lambda self, db: None)  # type: ignore[method-assign]
                started = time.perf_counter()
                with quire.db.write() as conn:
                    for k, body in enumerate(texts[n * per_round : (n + 1) * per_round]):
                        item = create_item(conn, NewItem(base.id, "note", f"n{n}-{k}", "completed", note_text="x"))
                        row = ChunkRow(0, body, 0, len(body), None, 1, 1, 200, f"h{n}-{k}")
                        vector = rng.normal(size=(1, base.dimension)).astype(np.float32)
                        index.write_item_material(conn, base.id, item, [row], vector)
                times[label].append(time.perf_counter() - started)
        finally:
            keyword_file.SyncAfterCommit.__call__ = synced  # type: ignore[method-assign]
            quire.close()
    median = {k: sorted(v[1:])[len(v[1:]) // 2] for k, v in times.items()}  # the first round of each warms up
    per_chunk_ms = (median["synced"] - median["not_synced"]) / (2 * per_round) * 1000
    return {
        "chunks_per_transaction": per_round,
        "median_s": {k: round(v, 3) for k, v in median.items()},
        "keyword_sync_ms_per_chunk": round(per_chunk_ms, 3),
        "write_ms_per_chunk_without": round(median["not_synced"] / per_round * 1000, 3),
        "load_1m_after": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, required=True, help="source tree of the code that ranked with FTS5")
    parser.add_argument("--queries", type=int, help="only the first N training queries")
    parser.add_argument("--at-scale", type=Path, help="a synthetic base's data directory (bench_million)")
    args = parser.parse_args(argv)
    run_benchmark("keyword_index", False, lambda result: _run(result, args))
    return 0


def _run(result: Result, args: argparse.Namespace) -> None:
    data_dir = bench_ingest.area(False) / "data-bf16"
    if not (data_dir / "quire.sqlite3").is_file():
        raise SystemExit(f"no SciFact base at {data_dir}: run tests.benchmarks.bench_ingest first")
    data = corpus.load(False)
    queries = bench_ingest.area(False) / "queries.keyword-index.jsonl"
    asked = corpus.write_queries(data, queries, limit=args.queries)
    qrels = {q: data.qrels[q] for q in asked}
    scores: dict[str, dict[str, dict[str, float]]] = {"fts5": {}, "keyword_index": {}}
    seconds: dict[str, dict[str, float]] = {"fts5": {}, "keyword_index": {}}
    for mode in MODES:
        for label, code in (("fts5", args.before), ("keyword_index", REPO)):
            load = os.getloadavg()[0]
            found, took = rankings(code, data_dir, queries, mode)
            scores[label][mode] = metrics.evaluate(found, qrels)
            seconds[label][mode] = round(took, 1)
            log(f"{label} {mode}: nDCG@10 {scores[label][mode]['ndcg@10']:.4f} ({took:.0f} s, load {load:.1f})")
    result.data.update(base=str(data_dir), queries=len(asked), scores=scores, seconds=seconds)
    result.data["writer_cost"] = writer_cost(data)
    log(f"writer cost: {result.data['writer_cost']}")
    if args.at_scale is not None:
        result.data["at_scale"] = at_scale(args.at_scale, data)
        log(f"at scale: {result.data['at_scale']}")
    for mode in MODES:
        gap = abs(scores["keyword_index"][mode]["ndcg@10"] - scores["fts5"][mode]["ndcg@10"])
        result.targets.append(target(f"|nDCG@10 keyword index - FTS5| ({mode}, SciFact train)", gap, at_most=PARITY))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
