"""Faster encoders where they keep quality (issue 17, deliverable 6): torch fp32/bf16 against ONNX Runtime and
OpenVINO, fp32, bf16 and int8, on the same SciFact chunks. Run on purpose:

    python -m tests.benchmarks.bench_encoders [--docs N] [--only onnx-fp32,...] [--second-round 250]

Needs the optional extra ``encoders`` (``pip install -e '.[encoders]'``) or those packages on
``QUIRE_ENCODERS_PATH`` (prepended to the children's ``PYTHONPATH``); a variant whose packages are missing is
skipped with the import error in the JSON. Writes ``tests/benchmarks/results/encoders.json``.

**The texts.** The evaluation corpus is every SciFact document judged relevant to a training query (565 of the
5,183; by default nothing else, so that eight variants fit in one bounded run on a shared 2-core machine: a
corpus of only judged documents has fewer distractors than the full one, so absolute nDCG is higher than
``bench_quality``'s, but every variant ranks the same chunks), filled up to ``--docs`` documents in corpus order;
its documents are chunked by Quire's own chunker
(``knowledge.ingest.chunking.chunk_text``, the packaged model's tokenizer, default sizes), and every variant
encodes exactly these chunks, and all training queries, with 2 threads and Quire's length-sorted batching
(``plan_batches``, 8,192 padded tokens, at most 64 texts). Static int8 is calibrated on chunks of other documents.

**Throughput.** Each variant runs in its own process (model load and warm-up excluded from the timed pass; the
peak RSS is the process's ``ru_maxrss``). Round 1 runs the variants in order and times the full pass; round 2
runs them in *reverse* order over the first ``--second-round`` chunks, so that a drift in the machine's load
hits the two ends of the list alike. Ratios are to torch bf16 (the current default) in the same round.

**Quality.** Per variant: the cosine of each chunk's and query's vector to torch fp32's (min and mean), and
nDCG@10 / Recall@100 on the training queries in vector and hybrid mode. Vector: exact cosine over all chunks (what
``VectorIndex`` does below 20,000 chunks). Keyword: an FTS5 table over the same chunks with Quire's tokenizer and
query builder (``fts_table``'s ``FTS_TOKENIZER``, ``search.fts_query``, BM25), in an in-memory apsw database.
Hybrid: ``search.fuse`` of the two rankings with Quire's ``RRF_K``, ``VECTOR_WEIGHT`` and depth
``max(limit, HYBRID_DEPTH)``. Chunks are collapsed to documents and scored with ``metrics.py``, as
``bench_quality.py`` does (limit 100).

**The rule** (the issue's): a variant may become the default only if its nDCG@10 stays within 0.005 of torch fp32
in every mode and its throughput rises over torch bf16 (in both rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from tests.benchmarks import corpus, metrics
from tests.benchmarks.common import REPO, Result, log, python_module, run_benchmark, target, work_dir
from tests.benchmarks.encoder_variants import VARIANTS

LIMIT = 100  # as bench_quality: --limit 100, so hybrid fuses the top max(100, HYBRID_DEPTH) of each ranking
DEFAULT_DOCS = 0  # the judged documents only; see the module docstring
SECOND_ROUND = 250
QUICK_CHUNKS = 300
CALIBRATION_CHUNKS = 300
NDCG_TOLERANCE = 0.005
REFERENCE = "torch-fp32"
BASELINE = "torch-bf16"
# What could not be used at all, and why (measured on this machine, transformers 5.24.0).
BLOCKED = {
    "sentence-transformers backend='onnx' / export_dynamic_quantized_onnx_model": (
        "needs optimum-onnx; its newest release on PyPI (0.1.0, with optimum 2.1.0) requires transformers<4.58 and "
        "fails to import with 5.24 (ImportError: cannot import name 'is_offline_mode' from 'transformers.utils')"
    ),
    "sentence-transformers backend='openvino' / export_static_quantized_openvino_model": (
        "needs optimum-intel; its newest release on PyPI (2.2.0, with optimum 2.3.0) requires transformers<5.6 and "
        "fails to import with 5.24 (ImportError: cannot import name 'VisionRotaryEmbedding' from "
        "'transformers.models.qwen2_vl.modeling_qwen2_vl')"
    ),
}


class Row(NamedTuple):
    """What ``search.fuse`` needs of a candidate: its chunk id."""

    id: int


def evaluation_set(data: corpus.SciFact, docs: int) -> tuple[list[str], list[str]]:
    """The evaluation documents (every judged one, filled up in corpus order) and the calibration documents."""
    judged = {doc for rel in data.qrels.values() for doc in rel if doc in data.docs}
    chosen = dict.fromkeys(d for d in data.docs if d in judged)
    for doc in data.docs:
        if len(chosen) >= max(docs, len(judged)):
            break
        chosen.setdefault(doc, None)
    rest = [d for d in data.docs if d not in chosen]
    return list(chosen), rest[-CALIBRATION_CHUNKS:]


def chunk_docs(data: corpus.SciFact, doc_ids: Sequence[str]) -> tuple[list[str], list[str], int]:
    """Quire's chunks of the documents: texts, the document of each, and their content tokens."""
    from knowledge.ingest.chunking import chunk_text, load_tokenizer

    tokenizer = load_tokenizer()
    texts: list[str] = []
    owners: list[str] = []
    tokens = 0
    for doc in doc_ids:
        for chunk in chunk_text(data.body(doc), tokenizer):
            texts.append(chunk.text)
            owners.append(doc)
            tokens += chunk.token_count
    return texts, owners, tokens


def keyword_rankings(texts: Sequence[str], queries: Sequence[str], depth: int) -> list[list[tuple[Row, float]]]:
    """BM25 over an FTS5 table of the chunks, queried as Quire's keyword search queries (rowid = chunk index)."""
    import apsw

    from knowledge.library.index import FTS_TOKENIZER
    from knowledge.search.keyword_query import fts_query

    conn = apsw.Connection(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE chunks USING fts5(text, tokenize='{FTS_TOKENIZER}')")
    with conn:
        conn.executemany("INSERT INTO chunks (rowid, text) VALUES (?, ?)", list(enumerate(texts)))
    rankings = []
    for query in queries:
        match = fts_query(query)
        rows = (
            conn.execute(
                "SELECT rowid, bm25(chunks) AS s FROM chunks WHERE chunks MATCH ? ORDER BY s LIMIT ?", (match, depth)
            ).fetchall()
            if match
            else []
        )
        rankings.append([(Row(int(r[0])), -float(r[1])) for r in rows])
    conn.close()
    return rankings


def vector_rankings(docs: np.ndarray, queries: np.ndarray, depth: int) -> list[list[tuple[Row, float]]]:
    scores = queries @ docs.T
    rankings = []
    for row in scores:
        top = np.argpartition(-row, min(depth, len(row) - 1))[:depth]
        top = top[np.lexsort((top, -row[top]))]
        rankings.append([(Row(int(i)), float(row[i])) for i in top])
    return rankings


def scores(
    rankings: Sequence[Sequence[tuple[Row, float]]], owners: Sequence[str], query_ids: Sequence[str], qrels: Any
) -> dict[str, float]:
    as_docs = {
        qid: metrics.dedupe(owners[row.id] for row, _s in ranked)
        for qid, ranked in zip(query_ids, rankings, strict=True)
    }
    return metrics.evaluate(as_docs, qrels)


def quality(
    docs: np.ndarray,
    queries: np.ndarray,
    keyword: Sequence[Sequence[tuple[Row, float]]],
    owners: Sequence[str],
    query_ids: Sequence[str],
    qrels: Any,
) -> dict[str, dict[str, float]]:
    from knowledge.search.query import HYBRID_DEPTH
    from knowledge.search.rerank import VECTOR_WEIGHT, fuse

    depth = max(LIMIT, HYBRID_DEPTH)
    by_vector = vector_rankings(docs, queries, depth)
    hybrid = [
        fuse([v, k], depth, weights=(VECTOR_WEIGHT, 1.0 - VECTOR_WEIGHT))
        for v, k in zip(by_vector, keyword, strict=True)
    ]
    return {
        "vector": scores([r[:LIMIT] for r in by_vector], owners, query_ids, qrels),
        "hybrid": scores([r[:LIMIT] for r in hybrid], owners, query_ids, qrels),
    }


def drift(vectors: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    cos = np.sum(vectors * reference, axis=1)
    return {"min_cos": round(float(cos.min()), 6), "mean_cos": round(float(cos.mean()), 6)}


def child_env() -> dict[str, str]:
    extra = os.environ.get("QUIRE_ENCODERS_PATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), extra) if p)}


def run_variant(variant: str, model_dir: Path, texts_file: Path, out: Path, only: int = 0) -> dict[str, Any]:
    args = ["encode", variant, str(model_dir), str(texts_file), str(out)] + (["--only", str(only)] if only else [])
    result: dict[str, Any] = python_module("tests.benchmarks.encoder_variants", *args, env=child_env())
    return result


def run(
    quick: bool,
    docs: int = DEFAULT_DOCS,
    only: Sequence[str] = VARIANTS,
    second: int = SECOND_ROUND,
    max_chunks: int = 0,
    name: str = "encoders",
) -> Result:
    """``quick`` (``run_all --quick --only encoders``): a smoke test of the harness on 300 chunks."""
    if quick and not max_chunks:
        max_chunks, second = QUICK_CHUNKS, min(second, QUICK_CHUNKS)
    return run_benchmark(name, quick, lambda result: _run(result, docs, list(only), second, max_chunks))


def _run(result: Result, docs: int, variants: list[str], second: int, max_chunks: int) -> None:
    for must in (REFERENCE, BASELINE):
        if must not in variants:
            variants.insert(0 if must == REFERENCE else 1, must)
    area = work_dir() / "encoders"
    area.mkdir(parents=True, exist_ok=True)
    data = corpus.load(False)
    eval_docs, calibration_docs = evaluation_set(data, docs)
    texts, owners, tokens = chunk_docs(data, eval_docs)
    calibration, _o, _t = chunk_docs(data, calibration_docs)
    if max_chunks:  # a smoke test of the harness: the scores then mean nothing
        texts, owners = texts[:max_chunks], owners[:max_chunks]
    query_ids = [qid for qid, _t in data.queries]
    texts_file = area / "texts.json"
    texts_file.write_text(json.dumps({"chunks": texts, "queries": [t for _q, t in data.queries]}), encoding="utf-8")
    calibration_file = area / "calibration.json"
    calibration_file.write_text(json.dumps(calibration[:CALIBRATION_CHUNKS]), encoding="utf-8")
    log(f"{len(eval_docs)} documents, {len(texts)} chunks ({tokens} tokens), {len(query_ids)} queries")
    model_dir = area / "models"
    prepared: dict[str, Any] = {}
    try:
        if any(v.startswith(("onnx-", "openvino-")) for v in variants):  # only the graph variants need files
            prepared = python_module(
                "tests.benchmarks.encoder_variants", "prepare", str(model_dir), str(calibration_file), env=child_env()
            )
    except RuntimeError as exc:
        prepared = {"error": str(exc)[-1500:]}
    log(f"prepared {prepared}")

    runs: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for variant in variants:
        try:
            runs[variant] = run_variant(variant, model_dir, texts_file, area / variant)
            log(f"{variant}: {runs[variant]['chunks_per_s']} chunks/s, RSS {runs[variant]['peak_rss_mb']} MB")
        except RuntimeError as exc:
            skipped[variant] = str(exc)[-800:]
            log(f"{variant}: skipped ({str(exc)[-200:]})")
    for variant in reversed([v for v in variants if v in runs]):
        again = run_variant(variant, model_dir, texts_file, area / variant, only=second)
        runs[variant]["round2_chunks"] = again["chunks"]
        runs[variant]["round2_chunks_per_s"] = again["chunks_per_s"]
        runs[variant]["round2_loadavg_1m"] = again["loadavg_1m_after"]
        log(f"{variant} round 2: {again['chunks_per_s']} chunks/s")

    keyword = keyword_rankings(texts, [t for _q, t in data.queries], max(LIMIT, 50))
    keyword_scores = scores([r[:LIMIT] for r in keyword], owners, query_ids, data.qrels)
    ref_docs = np.load(area / f"{REFERENCE}.docs.npy")
    ref_queries = np.load(area / f"{REFERENCE}.queries.npy")
    table: dict[str, dict[str, Any]] = {}
    for variant, measured in runs.items():
        vecs, qvecs = np.load(area / f"{variant}.docs.npy"), np.load(area / f"{variant}.queries.npy")
        entry = dict(measured)
        entry["chunk_drift_vs_fp32"] = drift(vecs, ref_docs)
        entry["query_drift_vs_fp32"] = drift(qvecs, ref_queries)
        entry["quality"] = quality(vecs, qvecs, keyword, owners, query_ids, data.qrels)
        table[variant] = entry
        log(
            f"{variant}: vector nDCG@10 {entry['quality']['vector']['ndcg@10']:.4f}, hybrid "
            f"{entry['quality']['hybrid']['ndcg@10']:.4f}, min cos {entry['chunk_drift_vs_fp32']['min_cos']}"
        )
    decide(result, table)
    result.data.update(
        {
            "documents": len(eval_docs),
            "chunks": len(texts),
            "content_tokens": None if max_chunks else tokens,
            "queries": len(query_ids),
            "second_round_chunks": second,
            "max_chunks": max_chunks or None,
            "not_selected": [v for v in VARIANTS if v not in variants],
            "threads": 2,
            "prepared": prepared,
            "keyword": keyword_scores,
            "variants": table,
            "skipped": skipped,
            "blocked": BLOCKED,
        }
    )


def decide(result: Result, table: dict[str, dict[str, Any]]) -> None:
    """Apply the rule to every variant; record the ratios and which (if any) qualifies, fastest first."""
    ref, base = table[REFERENCE], table[BASELINE]
    qualified = []
    for variant, entry in table.items():
        deltas = {m: entry["quality"][m]["ndcg@10"] - ref["quality"][m]["ndcg@10"] for m in ("vector", "hybrid")}
        ratios = [
            entry["chunks_per_s"] / base["chunks_per_s"],
            entry["round2_chunks_per_s"] / base["round2_chunks_per_s"],
        ]
        entry["ndcg@10_delta_vs_fp32"] = {m: round(d, 4) for m, d in deltas.items()}
        entry["throughput_vs_torch_bf16"] = [round(r, 3) for r in ratios]
        entry["throughput_vs_torch_fp32"] = round(entry["chunks_per_s"] / ref["chunks_per_s"], 3)
        entry["keeps_quality"] = all(abs(d) <= NDCG_TOLERANCE for d in deltas.values())
        entry["faster_than_bf16"] = all(r > 1.0 for r in ratios)
        if entry["keeps_quality"] and entry["faster_than_bf16"] and variant != BASELINE:
            qualified.append(variant)
    qualified.sort(key=lambda v: -table[v]["chunks_per_s"])
    result.data["qualifies_as_default"] = qualified
    for variant, entry in table.items():
        if variant == REFERENCE:
            continue
        worst = max(abs(d) for d in entry["ndcg@10_delta_vs_fp32"].values())
        result.targets.append(
            target(f"{variant}: max |nDCG@10 - fp32| over vector, hybrid", worst, at_most=NDCG_TOLERANCE)
        )
        if variant != BASELINE:
            result.targets.append(
                target(
                    f"{variant}: throughput / torch bf16 (worse round)",
                    min(entry["throughput_vs_torch_bf16"]),
                    at_least=1.0,
                    unit="x",
                )
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_encoders")
    parser.add_argument("--docs", type=int, default=DEFAULT_DOCS, help="evaluation documents (judged ones first)")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(VARIANTS)} (torch fp32/bf16 always run)")
    parser.add_argument("--second-round", type=int, default=SECOND_ROUND, help="chunks timed in the reverse round")
    parser.add_argument("--max-chunks", type=int, default=0, help="smoke test: only the first N chunks")
    parser.add_argument("--name", default="encoders", help="result file name (encoders-adopted: Quire's own backend)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    chosen = list(VARIANTS) if not args.only else [v.strip() for v in args.only.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from {VARIANTS}")
    result = run(False, args.docs, chosen, args.second_round, args.max_chunks, args.name)
    for t in result.targets:
        log(f"{'MET ' if t['met'] else 'MISS'} {t['name']}: {t['measured']} (target {t['target']})")
    log(f"qualifies as default: {result.data.get('qualifies_as_default')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
