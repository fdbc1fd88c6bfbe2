"""How knowledge/search.py's hybrid fusion was chosen: a grid over RRF's k, the candidate depth and the
weight of the vector ranking, scored by nDCG@10 on the SciFact TRAINING queries (never a test split).

``python -m tests.benchmarks.tune_hybrid [--quick]`` (after ``bench_ingest`` built the bases): for every
training query it fetches each ranking once, as deep as the grid needs (``vector_candidates`` /
``keyword_candidates`` of the bf16 base, in this process), then fuses them every way in the grid with
the same ``search.fuse`` that hybrid search uses, and scores each fused list of chunks as the quality
benchmark does (collapsed to documents, nDCG@10). Writes ``results/hybrid_tuning.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

from knowledge.compose import open_quire
from knowledge.library.bases import get_base
from knowledge.runtime import Quire
from knowledge.search import query as search
from knowledge.search import rerank
from tests.benchmarks import bench_ingest, corpus, metrics
from tests.benchmarks.common import RESULTS, loadavg, log

KS = (2, 5, 10, 20, 30, 60, 100)
DEPTHS = (20, 50, 100, 200)
VECTOR_WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7)


def fetch(quire: Quire, data: corpus.SciFact, depth: int) -> dict[str, tuple[list[Any], list[Any]]]:
    base = get_base(quire.db, bench_ingest.BASE)
    encoder = quire.query_encoder(base)
    found = {}
    for qid, text in data.queries:
        vector = encoder.encode_query(text)
        with quire.db.read() as conn:
            found[qid] = (
                search.vector_candidates(conn, base, vector, depth, None, index=quire.vectors),
                search.keyword_candidates(conn, base, text, depth, None),
            )
    return found


def doc_ranking(hits: list[tuple[Any, float]]) -> list[str]:
    return metrics.dedupe(Path(row.name).stem for row, _score in hits)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    state = bench_ingest.setup_bases(args.quick)
    data = corpus.load(args.quick)
    quire = open_quire(Path(state["bf16"]["data_dir"]))
    t0 = time.perf_counter()
    try:
        lists = fetch(quire, data, max(DEPTHS))
    finally:
        quire.close()
    single = {
        "vector": metrics.evaluate({q: doc_ranking(v[:100]) for q, (v, _k) in lists.items()}, data.qrels)["ndcg@10"],
        "keyword": metrics.evaluate({q: doc_ranking(k[:100]) for q, (_v, k) in lists.items()}, data.qrels)["ndcg@10"],
    }
    grid = []
    for k, depth, weight in itertools.product(KS, DEPTHS, VECTOR_WEIGHTS):
        rankings = {
            q: doc_ranking(rerank.fuse([v[:depth], kw[:depth]], depth, k=k, weights=(weight, 1 - weight)))
            for q, (v, kw) in lists.items()
        }
        grid.append(
            {
                "k": k,
                "depth": depth,
                "vector_weight": weight,
                "ndcg@10": round(metrics.evaluate(rankings, data.qrels)["ndcg@10"], 4),
            }
        )
    grid.sort(key=lambda g: -g["ndcg@10"])
    current = (
        next(
            g
            for g in grid
            if g["k"] == rerank.RRF_K
            and g["depth"] == search.HYBRID_DEPTH
            and g["vector_weight"] == rerank.VECTOR_WEIGHT
        )
        if search.HYBRID_DEPTH in DEPTHS
        else None
    )
    out = {
        "queries": len(data.queries),
        "documents": len(data.docs),
        "single_modes_ndcg@10": single,
        "chosen_in_search_py": {
            "k": rerank.RRF_K,
            "depth": search.HYBRID_DEPTH,
            "vector_weight": rerank.VECTOR_WEIGHT,
            "ndcg@10": current["ndcg@10"] if current else None,
        },
        "top": grid[:15],
        "grid": grid,
        "seconds": round(time.perf_counter() - t0, 1),
        "loadavg": loadavg(),
    }
    path = RESULTS / f"hybrid_tuning{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    log(f"single modes {single}; best {grid[:5]}; chosen {out['chosen_in_search_py']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
