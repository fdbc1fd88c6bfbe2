"""Retrieval metrics, BEIR's definitions (as pytrec_eval computes them), written out here.

* nDCG@k: DCG = Σ_{i=1..k} rel_i / log2(i + 1) over the ranked documents (graded relevance ``rel_i``
  from the qrels, 0 when unjudged); IDCG is the DCG of the judged documents sorted by grade; a query's
  nDCG is DCG / IDCG. The mean is over the queries.
* Recall@k: |relevant documents (grade > 0) in the top k| / |relevant documents|.

Quire returns chunks; a document's rank is the rank of its best chunk (first occurrence), so a ranking
of chunk hits is collapsed to a ranking of distinct documents before scoring.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath


def dedupe(doc_ids: Iterable[str]) -> list[str]:
    """Distinct documents in order of first appearance."""
    return list(dict.fromkeys(doc_ids))


def rankings_of(search_jsonl: str) -> dict[str, list[str]]:
    """``quire search --queries-file … --json`` output → each query id's ranked document ids (file stems)."""
    found: dict[str, list[str]] = {}
    for line in search_jsonl.splitlines():
        if line.strip():
            row = json.loads(line)
            found[str(row["id"])] = dedupe(PurePath(h["item_name"]).stem for h in row["hits"])
    return found


def dcg(grades: Sequence[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(grades))


def ndcg_at(ranking: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    ideal = dcg(sorted((g for g in judged.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg([max(0, judged.get(doc, 0)) for doc in ranking[:k]]) / ideal


def recall_at(ranking: Sequence[str], judged: Mapping[str, int], k: int = 100) -> float:
    relevant = {d for d, g in judged.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant & set(ranking[:k])) / len(relevant)


def mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def evaluate(rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Mean nDCG@10 and Recall@100 over the judged queries (a query with no ranking scores 0)."""
    queries = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
    return {
        "ndcg@10": mean(ndcg_at(rankings.get(q, []), qrels[q], 10) for q in queries),
        "recall@100": mean(recall_at(rankings.get(q, []), qrels[q], 100) for q in queries),
        "queries": len(queries),
    }
