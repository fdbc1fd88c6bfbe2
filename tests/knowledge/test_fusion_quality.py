"""The shipped fusion must rank a fixed set of real SciFact rankings better than reciprocal-rank fusion.

The fixture (``data/fusion_subset.json.gz``) holds, for the last 300 of SciFact's 809 training queries, both
rankings hybrid search fetched on the full corpus (50 chunks a side, scores as search sees them) and which
documents are relevant. No model and no database: this checks the fusion itself — the features, the shipped
numbers and their loading — so a regression in any of them (or a file that falls back to RRF) fails here.
These queries are among those the fusion was fitted on: this guards against regressions, it is not the
quality measurement (that is tests/benchmarks/bench_fusion.py's cross-validation).
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knowledge.search import fusion
from knowledge.search.rerank import RRF_K, VECTOR_WEIGHT, active_fusion, fuse, fuse_with

FIXTURE = Path(__file__).parent / "data" / "fusion_subset.json.gz"


@dataclass(frozen=True)
class Row:
    id: int


def _ndcg10(ranked_docs: list[str], relevant: dict[str, int]) -> float:
    docs = list(dict.fromkeys(ranked_docs))[:10]
    gain = sum(relevant.get(d, 0) / math.log2(n + 2) for n, d in enumerate(docs))
    ideal = sum(g / math.log2(n + 2) for n, g in enumerate(sorted(relevant.values(), reverse=True)[:10]))
    return gain / ideal


def _queries() -> list[dict[str, Any]]:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as f:
        queries: list[dict[str, Any]] = json.load(f)["queries"]
    return queries


def test_the_shipped_fusion_beats_rrf_on_a_fixed_set_of_real_rankings() -> None:
    active_fusion.cache_clear()
    shipped = active_fusion()
    assert shipped.kind != "rrf", "the shipped fusion file did not load"
    totals = {"shipped": 0.0, "rrf": 0.0}
    queries = _queries()
    assert len(queries) == 300
    for q in queries:
        vector = [(Row(c), s) for c, s in q["vector"]]
        keyword = [(Row(c), s) for c, s in q["keyword"]]
        doc_of = q["doc_of"]
        by_rrf = fuse([vector, keyword], 50, k=RRF_K, weights=(VECTOR_WEIGHT, 1 - VECTOR_WEIGHT))
        by_shipped = fuse_with(shipped, vector, keyword, 50, keyword_complete=len(keyword) < 50)
        totals["rrf"] += _ndcg10([doc_of[str(r.id)] for r, _s in by_rrf], q["relevant"])
        totals["shipped"] += _ndcg10([doc_of[str(r.id)] for r, _s in by_shipped], q["relevant"])
    mean = {k: v / len(queries) for k, v in totals.items()}
    # measured when the fusion was fitted: RRF 0.720, the shipped convex fusion 0.740
    assert mean["shipped"] >= mean["rrf"] + 0.01, mean


def test_the_fixture_is_what_the_fusion_sees() -> None:
    """Every ranking is best first and every chunk maps to a document, so the test above measures fusion."""
    for q in _queries():
        for side in ("vector", "keyword"):
            scores = [s for _c, s in q[side]]
            assert scores == sorted(scores, reverse=True) and len(scores) <= 50
        assert {str(c) for c, _s in (*q["vector"], *q["keyword"])} <= set(q["doc_of"])
        assert q["relevant"] and all(g > 0 for g in q["relevant"].values())
    assert fusion.FUSION_VERSION == "fusion-1"  # the fixture's rankings are what this version's features read
