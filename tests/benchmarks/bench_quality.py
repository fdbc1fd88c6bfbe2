"""Search quality on the SciFact training queries: nDCG@10 and Recall@100 per mode, bf16 and fp32 bases.

One ``quire search BASE --queries-file F --mode M --limit 100 --json`` process answers all queries of a
mode; its hits (chunks) are collapsed to documents (a document ranks where its best chunk ranks) and
scored with ``metrics.py``. Recall@100 therefore counts the distinct documents among the top 100
*chunks* (fewer than 100 documents when a document has several chunks in the list): a little stricter
than BEIR's document-level cut.
"""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks import bench_ingest, corpus, metrics
from tests.benchmarks.common import Result, log, quire, run_benchmark, target

# hybrid is the fitted fusion (resources/fusion/), hybrid-rrf the reciprocal-rank fusion it replaced
MODES = ("vector", "keyword", "hybrid", "hybrid-rrf")


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


def run(quick: bool) -> Result:
    return run_benchmark("quality", quick, lambda result: _run(result, quick))


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
