"""Search finds the expected SciFact documents for known training queries (real model, real index)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from knowledge.ingest.models import chosen_encoder
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import Hit, search
from tests.knowledge.helpers import drain, make_base


def _scifact_dir() -> Path:
    """shared/ lies beside the repository (developers and CI); QUIRE_SCIFACT_DIR overrides."""
    import os

    candidates = [
        os.environ.get("QUIRE_SCIFACT_DIR", ""),
        Path(__file__).resolve().parents[3] / "shared/data/scifact",
    ]
    return next((Path(c) for c in candidates if c and Path(c, "corpus.jsonl").exists()), Path(candidates[1]))


SCIFACT = _scifact_dir()
# 200 training queries: on the first 40 alone hybrid and vector tie (nDCG@10 0.880 vs 0.885), too few to
# tell fusion from either single mode; at 100 they still tie (0.871 vs 0.873); at 200 hybrid leads both.
QUERIES = 200
DISTRACTORS = 400


def load_subset() -> tuple[dict[str, dict[str, str]], list[tuple[str, str, set[str]]]]:
    qrels: dict[str, set[str]] = {}
    for line in (SCIFACT / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        qid, doc, _score = line.split("\t")
        qrels.setdefault(qid, set()).add(doc)
    queries = [json.loads(line) for line in (SCIFACT / "queries.train.jsonl").read_text().splitlines()]
    chosen = [(q["_id"], q["text"], qrels[q["_id"]]) for q in queries if q["_id"] in qrels][:QUERIES]
    corpus = {d["_id"]: d for d in map(json.loads, (SCIFACT / "corpus.jsonl").read_text().splitlines())}
    wanted = set().union(*(rel for _q, _t, rel in chosen))
    others = sorted(set(corpus) - wanted)
    wanted |= set(random.Random(3).sample(others, DISTRACTORS))
    return {d: corpus[d] for d in sorted(wanted)}, chosen


def _documents_in_order(hits: list[Hit]) -> list[str]:
    """The documents of a ranked hit list, first appearance only (several chunks may share one document)."""
    return list(dict.fromkeys(Path(h.item_name).stem for h in hits))


def ndcg_at_10(ranked: list[str], relevant: set[str]) -> float:
    """Binary-relevance nDCG@10 (as BEIR scores SciFact): discounted gain over the ideal ordering's."""
    gain = sum(1 / math.log2(rank + 2) for rank, doc in enumerate(ranked[:10]) if doc in relevant)
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(relevant), 10)))
    return gain / ideal


@pytest.mark.skipif(not SCIFACT.exists(), reason="shared/data/scifact is not beside the repository")
def test_known_queries_find_their_documents(quire: Quire, tmp_path: Path) -> None:
    docs, queries = load_subset()
    folder = tmp_path / "scifact"
    folder.mkdir()
    for doc_id, doc in docs.items():
        (folder / f"{doc_id}.txt").write_text(f"{doc['title']}\n\n{doc['text']}", encoding="utf-8")
    # What a new base gets on this machine (OpenVINO; bf16 only where the CPU has it): a forced torch bf16
    # on a CPU without bf16 instructions runs emulated, and took most of this test's six minutes.
    precision, backend = chosen_encoder()
    make_base(quire, precision=precision, backend=backend)
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire, timeout=900)
    assert {i.status for i in operations.list_items(quire, "kb", flat=True)} == {"completed"}

    found: dict[str, float] = {}
    quality: dict[str, float] = {}
    for mode in ("hybrid", "hybrid-rrf", "vector", "keyword"):
        hits, gain = 0, 0.0
        for _qid, text, relevant in queries:
            ranked = _documents_in_order(search(quire, "kb", text, mode=mode, limit=10))
            hits += bool(set(ranked) & relevant)
            gain += ndcg_at_10(ranked, relevant)
        found[mode] = hits / len(queries)
        quality[mode] = gain / len(queries)
    # measured on this subset (one run, torch bf16): hit@10 hybrid 0.95, vector 0.92, keyword 0.92;
    # nDCG@10 hybrid 0.888, vector 0.852, keyword 0.847 (FACTS.md: the full training split ranks them alike)
    assert found["hybrid"] >= 0.85, found
    assert found["vector"] >= 0.8 and found["keyword"] >= 0.75, found
    # fusion must earn its keep: a broken fuse (one ranking ignored, ranks reversed) falls to or below a
    # single mode, so hybrid has to beat the better of the two by a clear margin, and find as many
    assert quality["hybrid"] >= max(quality["vector"], quality["keyword"]) + 0.015, quality
    assert found["hybrid"] >= max(found["vector"], found["keyword"]), found
    # the fitted fusion (resources/fusion/) against the reciprocal-rank fusion it replaced, on this small base
    # (600 documents; the fusion was fitted on the full corpus, where it leads by 0.015): measured 0.881 vs
    # 0.883, a tie. It must not fall clearly below; tests/knowledge/test_fusion_quality.py holds it above RRF
    # on full-corpus rankings.
    assert quality["hybrid"] >= quality["hybrid-rrf"] - 0.01, quality
