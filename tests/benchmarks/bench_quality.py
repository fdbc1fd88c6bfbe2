"""Search quality on the SciFact training queries: nDCG@10 and Recall@100 per mode, bf16 and fp32 bases.

One ``quire search BASE --queries-file F --mode M --limit 100 --json`` process answers all queries of a
mode; its hits (chunks) are collapsed to documents (a document ranks where its best chunk ranks) and
scored with ``metrics.py``. Recall@100 therefore counts the distinct documents among the top 100
*chunks* (fewer than 100 documents when a document has several chunks in the list): a little stricter
than BEIR's document-level cut.

In the same run (issue 27: one run shows all three):

* **fusion variants**: every variant ``bench_fusion`` knows, cross-validated on the training queries only
  (``bench_fusion.cross_validate`` over its candidate cache of the bf16 base), beside the fusion shipped in
  ``resources/fusion/`` (the one adopted) and what ``hybrid`` scores end to end above;
* **the multilingual base**: a SciFact subset (``MULTI_QUERIES`` training queries, every document judged
  for them, filled with distractors to ``MULTI_DOCS``) ingested twice through the real path, into a base of
  the default model and one created ``--multilingual`` (multilingual-e5-small): nDCG@10 per mode and ingest
  chunks/s of each. (The full corpus with the multilingual model takes hours on this machine kind.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knowledge.search import fusion
from tests.benchmarks import bench_fusion, bench_ingest, corpus, metrics
from tests.benchmarks.common import Result, log, quire, run_benchmark, target

# hybrid is the fitted fusion (resources/fusion/), hybrid-rrf the reciprocal-rank fusion it replaced
MODES = ("vector", "keyword", "hybrid", "hybrid-rrf")
FOLDS = 5
MULTI_QUERIES = 100
MULTI_DOCS = 600
MULTI_MODES = ("vector", "keyword", "hybrid")


def rankings(
    data_dir: Path, queries_file: Path, mode: str, limit: int = 100, base: str = bench_ingest.BASE
) -> dict[str, list[str]]:
    out = quire(
        data_dir,
        "search",
        base,
        "--queries-file",
        str(queries_file),
        "--mode",
        mode,
        "--limit",
        str(limit),
        "--json",
        timeout=3600,
    ).stdout
    return metrics.rankings_of(out)


def run(quick: bool, fusion_variants: bool = True, multilingual: bool = True) -> Result:
    def body(result: Result) -> None:
        _run(result, quick)
        if fusion_variants:
            result.data["fusion"] = fusion_cv(quick)
        if multilingual:
            result.data["multilingual"] = multilingual_subset(quick)
            _multilingual_targets(result)

    return run_benchmark("quality", quick, body)


def fusion_cv(quick: bool) -> dict[str, Any]:
    """Every fusion variant cross-validated on the training queries, and the one shipped (adopted)."""
    found = bench_fusion.cache(quick)
    data = corpus.load(quick)
    queries = bench_fusion.prepare(found, data.qrels)
    log(f"fusion variants: {len(queries)} training queries, {FOLDS} folds")
    variants = bench_fusion.cross_validate(queries, data.qrels, FOLDS)
    shipped = fusion.load_fusion(fusion.default_path())
    return {
        "queries": len(queries),
        "folds": FOLDS,
        "variants": variants,
        "shipped": {"kind": shipped.kind, "file": shipped.source, "version": fusion.FUSION_VERSION},
        "would_adopt": bench_fusion.adopt(variants, queries, data.qrels, write=False),
    }


def multilingual_subset(quick: bool) -> dict[str, Any]:
    """The SciFact subset in a default base and a multilingual one: nDCG@10 per mode, ingest chunks/s."""
    data = corpus.load(quick)
    sub = corpus.subset(data, MULTI_QUERIES // (4 if quick else 1), MULTI_DOCS // (4 if quick else 1))
    root = bench_ingest.area(quick) / "multilingual-subset"
    docs = root / "docs"
    corpus.write_tree(sub, docs)
    queries_file = root / "queries.jsonl"
    corpus.write_queries(sub, queries_file)
    out: dict[str, Any] = {"queries": len(sub.queries), "documents": len(sub.docs), "bases": {}}
    for name, create in (("default", ("--precision", "auto")), ("multilingual", ("--multilingual",))):
        data_dir = bench_ingest.fresh(root / f"data-{name}")
        log(f"multilingual subset: ingesting {len(sub.docs)} documents into a {name} base")
        ingest = bench_ingest.ingest_add(data_dir, docs, "auto", create_args=create)
        scores = {
            mode: metrics.evaluate(rankings(data_dir, queries_file, mode), sub.qrels)["ndcg@10"] for mode in MULTI_MODES
        }
        log(f"{name}: nDCG@10 {scores}, {ingest['chunks_per_s']} chunks/s")
        out["bases"][name] = {
            "ndcg@10": {m: round(v, 4) for m, v in scores.items()},
            "chunks": ingest["chunks"],
            "wall_seconds": ingest["wall_seconds"],
            "chunks_per_s": ingest["chunks_per_s"],
            "precision": ingest["precision"],
            "backend": ingest["backend"],
        }
    default, multi = out["bases"]["default"], out["bases"]["multilingual"]
    out["speed_ratio"] = round(multi["chunks_per_s"] / default["chunks_per_s"], 3)
    return out


def _multilingual_targets(result: Result) -> None:
    """Hybrid must beat both its halves on the multilingual base too (its fusion: RRF, see ``reranker_for``)."""
    scores = result.data["multilingual"]["bases"]["multilingual"]["ndcg@10"]
    margin = scores["hybrid"] - max(scores["vector"], scores["keyword"])
    result.targets.append(
        target(
            "hybrid nDCG@10 above both vector and keyword (multilingual base, SciFact subset): margin",
            margin,
            at_least=1e-4,
        )
    )


def _run(result: Result, quick: bool) -> None:
    state = bench_ingest.setup_bases(quick)
    data = corpus.load(quick)
    queries_file = bench_ingest.area(quick) / "queries.train.jsonl"
    corpus.write_queries(data, queries_file)
    scores: dict[str, dict[str, dict[str, float]]] = {}
    for precision in ("bf16", "fp32"):
        data_dir = Path(state[precision]["data_dir"])
        scores[precision] = {}
        for mode in MODES:
            scores[precision][mode] = metrics.evaluate(rankings(data_dir, queries_file, mode), data.qrels)
            log(
                f"{precision} {mode}: nDCG@10 {scores[precision][mode]['ndcg@10']:.4f} "
                f"R@100 {scores[precision][mode]['recall@100']:.4f}"
            )
    result.data["queries"] = len(data.queries)
    result.data["documents"] = len(data.docs)
    result.data["scores"] = scores
    result.data["base_precisions"] = {k: state[k]["precision"] for k in ("bf16", "fp32")}
    bf, fp = scores["bf16"], scores["fp32"]
    result.targets += [
        target(f"|nDCG@10 bf16 - fp32| ({mode})", abs(bf[mode]["ndcg@10"] - fp[mode]["ndcg@10"]), at_most=0.005)
        for mode in ("vector", "hybrid")
    ]
    for precision, s in scores.items():
        margin = s["hybrid"]["ndcg@10"] - max(s["vector"]["ndcg@10"], s["keyword"]["ndcg@10"])
        result.targets.append(
            target(f"hybrid nDCG@10 above both vector and keyword ({precision} base): margin", margin, at_least=1e-4)
        )
        result.targets.append(
            target(
                f"fitted fusion nDCG@10 above RRF's ({precision} base): margin",
                s["hybrid"]["ndcg@10"] - s["hybrid-rrf"]["ndcg@10"],
                at_least=1e-4,
            )
        )
