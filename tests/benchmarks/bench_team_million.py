"""Search at scale on a team store: ``bench_million``'s synthetic base (default 1,000,000 chunks) moved into
PostgreSQL + pgvector (from its wheel, on loopback) by ``quire store migrate``, which ends with the base's HNSW
build; then the same queries as ``bench_million`` through ``quire --store URL search --queries-file``, each
mode in a fresh process; then, in this process, pgvector's HNSW against the exact scan of the same rows on the
same server — recall@10 and time per search, for a vector search (k = 20) and hybrid's vector half (k = 62).

``python -m tests.benchmarks.bench_team_million [--scale 1m] [--store URL] [--queries N] [--name NAME]``
(in ``make bench`` only when named: ``BENCH_ARGS="--only team_million"``; ``--quick``: 100,000 chunks)

``--store``: a team store that already holds base ``synth`` (the move is skipped; its index is built if it is
due, timed). Otherwise a server is started for the run and stopped after it, with ``maintenance_work_mem``
set as the README advises for a large base (the graph of a million 384-dimension vectors fits in memory);
every other setting is the wheel's default (``shared_buffers`` 128 MB). The data lives in the system's
temporary directory (about 10 GB at a million chunks). Results: ``tests/benchmarks/results/team_million.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.benchmarks import bench_ingest, common, corpus
from tests.benchmarks.bench_latency import stats
from tests.benchmarks.bench_million import MODES, RECALL_QUERIES, SCALES, WARMUP, ensure_synth, run_queries
from tests.benchmarks.common import REPO, Result, log, run_benchmark, target, timed

MAINTENANCE_WORK_MEM = "4GB"
KS = {"vector (k=20)": 20, "hybrid (k=62)": 62}


def run(quick: bool) -> Result:
    """For ``run_all --only team_million`` (on purpose: the move alone takes half an hour at 1m)."""
    args = main_parser().parse_args(["--scale", "100k" if quick else "1m"])
    return run_benchmark("team_million", quick, lambda result: _run(result, args))


def main(argv: list[str]) -> int:
    args = main_parser().parse_args(argv)
    run_benchmark(args.name, False, lambda result: _run(result, args))
    return 0


def main_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="team_million", help="the result file's name")
    parser.add_argument("--scale", choices=sorted(SCALES), default="1m")
    parser.add_argument("--store", help="a team store that already holds base 'synth'")
    parser.add_argument("--queries", type=int, default=300, help="queries per mode (after the warm-up)")
    parser.add_argument("--recall-queries", type=int, default=RECALL_QUERIES // 2)
    parser.add_argument("--keyword-queries", type=int, default=50, help="queries ranked both ways (exact is slow)")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: search, hnsw, keyword")
    return parser


def _run(result: Result, args: argparse.Namespace) -> None:
    chunks = SCALES[args.scale]
    local = bench_ingest.area(False) / "team-million-local"
    server = None
    url = args.store
    if url is None:
        from tests.support.servers import start_postgres

        server = start_postgres()
    try:
        if server is not None:
            url = _prepared_store(server, result)
            data_dir, synth = ensure_synth(chunks)
            result.data["synthetic_base"] = synth
            result.data["move_in"] = _move_in(local, data_dir, url)
            log(f"moved in: {result.data['move_in']}")
        assert url is not None
        result.data["server"] = _server_facts(url)
        result.data["vector_index"] = _index_build(local, url)
        data = corpus.load(False)
        queries = bench_ingest.area(False) / "queries.team-million.jsonl"
        corpus.write_queries(data, queries, limit=args.queries, warmup=WARMUP)
        skip = set(filter(None, args.skip.split(",")))
        result.data["search"] = {}
        for mode in () if "search" in skip else MODES:
            load_before = round(os.getloadavg()[0], 2)
            entry = {**run_queries(REPO, local, queries, mode, store=url), "load_1m_before": load_before}
            result.data["search"][mode] = entry
            log(f"{mode}: {entry}")
        recall_file = bench_ingest.area(False) / "queries.team-million-recall.jsonl"
        corpus.write_queries(data, recall_file, limit=args.recall_queries)
        if "hnsw" not in skip:
            result.data["hnsw_vs_exact"] = hnsw_against_exact(local, url, recall_file)
            log(f"hnsw vs exact: {result.data['hnsw_vs_exact']}")
        if "keyword" not in skip:
            result.data["keyword_vs_exact"] = keyword_against_exact(local, url, recall_file, args.keyword_queries)
            log(f"keyword vs exact: {result.data['keyword_vs_exact']}")
    finally:
        if server is not None:
            server.stop()
    _targets(result, chunks)


def _prepared_store(server: Any, result: Result) -> str:
    import psycopg

    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
        conn.execute("SELECT pg_reload_conf()")
    url: str = server.create_database("team_million")
    return url


def _move_in(local: Path, data_dir: Path, url: str) -> dict[str, Any]:
    common.quire(local, "--store", url, "store", "init", "--json")
    seconds, moved = timed(lambda: common.quire_json(local, "store", "migrate", str(data_dir), url, timeout=7200))
    return {"seconds": round(seconds, 1), "bases": moved.get("bases", moved)}


def _server_facts(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn:
        facts = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("server_version", "shared_buffers", "maintenance_work_mem", "max_parallel_maintenance_workers")
        }
        facts["pgvector"] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]  # type: ignore[index]
        facts["database_mb"] = round(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20)  # type: ignore[index]
    return facts


def _index_build(local: Path, url: str) -> dict[str, Any]:
    """The base's HNSW index: built here if the move did not build it (a store given with ``--store``)."""
    from knowledge.compose import open_team_quire
    from knowledge.library import index_postgres as pg
    from knowledge.library.bases import get_base
    from knowledge.library.index import vec_table
    from knowledge.library.vector_indexes import build_if_due

    quire = open_team_quire(url, data_dir=local)
    try:
        base = get_base(quire.db, "synth")
        vec = vec_table(base.id)
        seconds = build_if_due(quire.db, base.id)
        with quire.db.read() as conn:
            state = pg.hnsw_state(conn, vec)
            size = conn.execute(pg_size(pg.hnsw_name(vec))).scalar()
        return {
            "built_here_s": None if seconds is None else round(seconds, 1),
            "state": state,
            "index_mb": None if size is None else round(int(size) / 2**20),
            "m": pg.HNSW_M,
            "ef_construction": pg.HNSW_EF_CONSTRUCTION,
        }
    finally:
        quire.close()


def pg_size(relation: str) -> Any:
    from sqlalchemy import text

    return text("SELECT pg_relation_size(to_regclass(:r))").bindparams(r=relation)


def hnsw_against_exact(local: Path, url: str, queries_file: Path) -> dict[str, Any]:
    """Each query's nearest through the HNSW index (what search runs) and by the exact scan of every row (the
    index off), in turn query by query, in one read snapshot: recall@10 and time per search."""
    from sqlalchemy import text

    from knowledge.compose import open_team_quire
    from knowledge.library import index_postgres as pg
    from knowledge.library.bases import get_base
    from knowledge.library.index import vec_table

    texts = [json.loads(line)["text"] for line in queries_file.read_text().splitlines() if line.strip()]
    quire = open_team_quire(url, data_dir=local)
    try:
        base = get_base(quire.db, "synth")
        vec = vec_table(base.id)
        exact_sql = text(
            f"SELECT rowid, embedding <=> CAST(CAST(:q AS real[]) AS vector) AS d FROM {vec} ORDER BY d, rowid LIMIT :k"
        )
        encoder = quire.query_encoder(base)
        vectors = np.stack([encoder.encode_query(t) for t in texts]).astype(np.float32)
        times: dict[str, dict[str, list[float]]] = {label: {"hnsw": [], "exact": []} for label in KS}
        recall: dict[str, list[float]] = {label: [] for label in KS}
        gaps: dict[str, list[float]] = {label: [] for label in KS}
        with quire.db.read() as conn:
            pg.nearest(conn, vec, vectors[0], 10)  # the index's first pages read once, outside the timings
            for q in vectors:
                for label, k in KS.items():
                    t0 = time.perf_counter()
                    hits = pg.nearest(conn, vec, q, k)
                    times[label]["hnsw"].append((time.perf_counter() - t0) * 1000)
                    conn.execute(text("SELECT set_config('enable_indexscan', 'off', true)"))
                    t0 = time.perf_counter()
                    rows = conn.execute(exact_sql, {"q": q.tolist(), "k": k}).all()
                    times[label]["exact"].append((time.perf_counter() - t0) * 1000)
                    conn.execute(text("SELECT set_config('enable_indexscan', 'on', true)"))
                    found, exact = [c for c, _d in hits], [int(r[0]) for r in rows]
                    recall[label].append(len(set(found[:10]) & set(exact[:10])) / 10)
                    if len(hits) >= 10 and len(rows) >= 10:  # how much farther the 10th found is than the 10th
                        gaps[label].append(hits[9][1] - float(rows[9][1]))
        return {
            "queries": len(texts),
            "ef_search": pg.EF_SEARCH,
            "by_search": {
                label: {
                    "recall@10": round(float(np.mean(recall[label])), 4),
                    "recall@10_min": min(recall[label]),
                    # cosine distance of the 10th hit found minus the exact 10th's: what a miss costs
                    "distance_gap_at_10_mean": float(np.mean(gaps[label])) if gaps[label] else None,
                    "distance_gap_at_10_max": float(np.max(gaps[label])) if gaps[label] else None,
                    "hnsw": _ms(times[label]["hnsw"]),
                    "exact_scan": _ms(times[label]["exact"]),
                }
                for label in KS
            },
        }
    finally:
        quire.close()


def keyword_against_exact(local: Path, url: str, queries_file: Path, count: int) -> dict[str, Any]:
    """Keyword search's ranking as it ships (rows read up to ``MAX_SCORED_ROWS`` unless the top is proven
    sooner) against BM25 over every matching row, query by query in one snapshot: recall@10 and time. The
    query's terms as search sends them (the common ones left out above 20,000 chunks, as on both engines)."""
    from knowledge.compose import open_team_quire
    from knowledge.library import index_postgres as pg
    from knowledge.library.bases import get_base
    from knowledge.library.index import fts_table
    from knowledge.search.keyword_query import fts_query, query_terms

    texts = [json.loads(line)["text"] for line in queries_file.read_text().splitlines() if line.strip()][:count]
    quire = open_team_quire(url, data_dir=local)
    capped = pg.MAX_SCORED_ROWS
    times: dict[str, list[float]] = {"shipped": [], "every_row": []}
    recall: list[float] = []
    try:
        base = get_base(quire.db, "synth")
        fts = fts_table(base.id)
        with quire.db.read() as conn:
            for query in texts:
                terms = quire.terms.rare_terms(conn, base, query_terms(query))
                match = fts_query(" ".join(terms))
                if match is None:
                    continue
                found: dict[str, list[int]] = {}
                for label, cap in (("shipped", capped), ("every_row", 10**12)):
                    pg.MAX_SCORED_ROWS = cap
                    t0 = time.perf_counter()
                    found[label] = [c for c, _s in pg.keyword_matches(conn, fts, match, 10)]
                    times[label].append((time.perf_counter() - t0) * 1000)
                exact = found["every_row"]
                recall.append(len(set(found["shipped"]) & set(exact)) / max(1, len(exact)))
    finally:
        pg.MAX_SCORED_ROWS = capped
        quire.close()
    return {
        "queries": len(recall),
        "max_scored_rows": capped,
        "recall@10": round(float(np.mean(recall)), 4) if recall else None,
        "recall@10_min": min(recall) if recall else None,
        "exact_share": round(sum(r == 1.0 for r in recall) / max(1, len(recall)), 3),
        "shipped": _ms(times["shipped"]),
        "every_row": _ms(times["every_row"]),
    }


def _ms(values: list[float]) -> dict[str, float]:
    return {k: v for k, v in stats(values).items() if k in ("p50_ms", "p95_ms", "mean_ms")}


def _targets(result: Result, chunks: int) -> None:
    search = result.data.get("search", {})
    by = result.data.get("hnsw_vs_exact", {}).get("by_search", {})
    size = f"{chunks:,} chunks, team store"
    result.targets += [
        target(f"hybrid p95, {size}", search.get("hybrid", {}).get("p95_ms"), at_most=80, unit="ms"),
        target(f"keyword p95, {size}", search.get("keyword", {}).get("p95_ms"), at_most=60, unit="ms"),
        target(f"vector p95, {size}", search.get("vector", {}).get("p95_ms"), at_most=80, unit="ms"),
        target(
            f"recall@10 of HNSW against the exact scan, vector search (k=20), {size}",
            by.get("vector (k=20)", {}).get("recall@10"),
            at_least=0.98,
        ),
        target(
            f"recall@10 of HNSW against the exact scan, hybrid's vector half (k=62), {size}",
            by.get("hybrid (k=62)", {}).get("recall@10"),
            at_least=0.98,
        ),
    ]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
