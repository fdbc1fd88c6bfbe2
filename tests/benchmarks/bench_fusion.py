"""Hybrid fusion fitted on the SciFact TRAINING queries, cross-validated on them only (never a test split).

``python -m tests.benchmarks.bench_fusion [--quick] [--folds 5]``:

1. **Base**: SciFact ingested once through the real path (``quire base create`` with what a new base gets
   on this machine, ``quire add``, ``quire worker --until-idle``), kept under the bench area.
2. **Candidate cache**: for every training query, in this process, the two rankings hybrid search fetches
   (``vector_candidates`` / ``keyword_candidates``, ``CACHE_DEPTH`` deep, the query parsed and encoded as
   search does) and the candidates' chunk texts, written to ``candidates.json`` beside the base: the fitting
   loop never encodes again. The cache is rebuilt when the base or the fusion version changes.
3. **Variants**, each scored by nDCG@10 (chunks collapsed to documents, as ``bench_quality``) in k folds
   of the queries (seeded shuffle): a variant's free numbers are fitted on the other folds, scored on the
   held-out fold. The variants: RRF as shipped; RRF with k and weight fitted; convex combinations of
   normalised scores (min-max, z-score, divided by the best) with the weight fitted; a per-query weight
   that moves with how much the two lists agree; LambdaRank (LightGBM) over all ``FEATURES``.
4. **Adopted**: of the variants that beat shipped RRF in every fold, the simplest within ``ADOPT_MARGIN`` of
   the best, refitted on all training queries and written to ``resources/fusion/`` (``--write``). Results:
   ``results/fusion.json``. ``--adopt-only`` redoes step 4 from the results file (no cross-validation).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from knowledge.search import fusion
from tests.benchmarks import bench_ingest, corpus, metrics
from tests.benchmarks.common import RESULTS, Result, log, run_benchmark

CACHE_DEPTH = 100
DEPTH = 50  # what hybrid search fetches of each ranking (query.HYBRID_DEPTH)
ALPHAS = tuple(round(a, 2) for a in np.arange(0.0, 1.0001, 0.05))
RRF_KS = (1, 2, 5, 10, 20, 60)
RRF_WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7)
# A variant with more fitted numbers is adopted over a simpler one only if it is ahead by more than this in
# cross-validated nDCG@10: about the spread of one variant's fold scores' mean (0.003-0.005 here), and the
# more numbers a fusion has the less sure it is to carry over from SciFact to other collections.
ADOPT_MARGIN = 0.005


# -- 1. the base -------------------------------------------------------------------------------


def base(quick: bool) -> dict[str, Any]:
    """The SciFact base: bench_ingest's default-precision one when it exists, else one ingested here."""
    existing = bench_ingest.load_state(quick)
    if existing is not None:
        return dict(existing["bf16"])
    root = bench_ingest.area(quick)
    record = root / "fusion-base.json"
    if record.exists():
        state: dict[str, Any] = json.loads(record.read_text())
        if Path(state["data_dir"], "quire.sqlite3").exists():
            return state
    data = corpus.load(quick)
    docs = root / "docs"
    corpus.write_tree(data, docs)
    log(f"ingesting SciFact ({len(data.docs)} docs) with the default encoder")
    state = bench_ingest.ingest_add(bench_ingest.fresh(root / "data-fusion"), docs, "auto")
    record.write_text(json.dumps(state, indent=2))
    return state


# -- 2. the candidate cache --------------------------------------------------------------------


def build_cache(data_dir: Path, data: corpus.SciFact, path: Path) -> dict[str, Any]:
    from knowledge.compose import open_quire
    from knowledge.library.bases import get_base
    from knowledge.search.candidates import hit_rows
    from knowledge.search.keyword import keyword_candidates
    from knowledge.search.keyword_query import query_terms
    from knowledge.search.query import vector_candidates
    from knowledge.search.syntax import parse

    quire = open_quire(data_dir)
    t0 = time.perf_counter()
    try:
        b = get_base(quire.db, bench_ingest.BASE)
        encoder = quire.query_encoder(b)
        queries: dict[str, Any] = {}
        chunks: dict[str, list[str]] = {}
        for qid, text in data.queries:
            parsed = parse(text)
            vector = encoder.encode_query(parsed.text)
            with quire.db.read() as conn:
                by_vector = vector_candidates(conn, b, vector, CACHE_DEPTH, None, index=quire.vectors)
                by_keyword = keyword_candidates(
                    conn, b, parsed, CACHE_DEPTH, None, stats=quire.terms, index=quire.keywords
                )
                wanted = [c.id for c, _s in (*by_vector, *by_keyword) if str(c.id) not in chunks]
                for cid, row in hit_rows(conn, wanted).items():
                    chunks[str(cid)] = [Path(row.name).stem, row.text]
            queries[qid] = {
                "terms": query_terms(" ".join((*parsed.words, *parsed.identifiers, *parsed.phrases))),
                "vector": [[c.id, s] for c, s in by_vector],
                "keyword": [[c.id, s] for c, s in by_keyword],
            }
        precision, backend = b.precision, b.backend
    finally:
        quire.close()
    cache = {
        "fusion_version": fusion.FUSION_VERSION,
        "data_dir": str(data_dir),
        "precision": precision,
        "backend": backend,
        "depth": CACHE_DEPTH,
        "seconds": round(time.perf_counter() - t0, 1),
        "queries": queries,
        "chunks": chunks,
    }
    path.write_text(json.dumps(cache))
    return cache


def cache(quick: bool, rebuild: bool = False) -> dict[str, Any]:
    state = base(quick)
    path = Path(state["data_dir"]).parent / "candidates.json"
    if path.exists() and not rebuild:
        found: dict[str, Any] = json.loads(path.read_text())
        if found.get("fusion_version") == fusion.FUSION_VERSION and found.get("data_dir") == state["data_dir"]:
            return found
    log("building the candidate cache (encodes every training query once)")
    return build_cache(Path(state["data_dir"]), corpus.load(quick), path)


# -- 3. the variants ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    qid: str
    rows: list[Any]  # candidates (with .id), in fusion.candidate_features order
    features: fusion.Features
    docs: list[str]  # each candidate's document
    labels: np.ndarray  # each candidate's relevance grade


@dataclass(frozen=True)
class Row:
    id: int


def prepare(found: dict[str, Any], qrels: dict[str, dict[str, int]], depth: int = DEPTH) -> list[Query]:
    chunks = found["chunks"]
    texts = {int(cid): body for cid, (_doc, body) in chunks.items()}
    out = []
    for qid, q in found["queries"].items():
        if qid not in qrels:
            continue
        vector = [(Row(int(c)), float(s)) for c, s in q["vector"][:depth]]
        keyword = [(Row(int(c)), float(s)) for c, s in q["keyword"][:depth]]
        # as search decides it: a list shorter than the depth asked for holds every match
        complete = len(q["keyword"]) < depth
        rows, feats = fusion.candidate_features(vector, keyword, texts, q["terms"], keyword_complete=complete)
        docs = [chunks[str(r.id)][0] for r in rows]
        labels = np.array([max(0, qrels[qid].get(d, 0)) for d in docs], dtype=np.float64)
        out.append(Query(qid, rows, feats, docs, labels))
    return out


Scorer = Callable[[Query], np.ndarray]


def ndcgs(queries: Sequence[Query], scorer: Scorer, qrels: dict[str, dict[str, int]]) -> np.ndarray:
    """Each query's nDCG@10 of the documents ordered by ``scorer``'s candidate scores."""
    out = np.zeros(len(queries))
    for n, q in enumerate(queries):
        scores = scorer(q)
        ranked = sorted(range(len(q.rows)), key=lambda i: (-float(scores[i]), q.rows[i].id))
        out[n] = metrics.ndcg_at(metrics.dedupe(q.docs[i] for i in ranked), qrels[q.qid], 10)
    return out


def shipped_rrf(q: Query) -> np.ndarray:
    return fusion.rrf_scores(q.features, k=5, vector_weight=0.5)


def best_of(
    train: Sequence[Query], qrels: dict[str, dict[str, int]], grid: Sequence[Any], make: Callable[[Any], Scorer]
) -> Any:
    """The grid point whose scorer has the highest mean nDCG@10 on ``train`` (first on ties)."""
    scored = [(float(ndcgs(train, make(g), qrels).mean()), n) for n, g in enumerate(grid)]
    return grid[max(scored, key=lambda s: (s[0], -s[1]))[1]]


def fit_rrf(train: Sequence[Query], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    k, w = best_of(
        train,
        qrels,
        list(itertools.product(RRF_KS, RRF_WEIGHTS)),
        lambda g: lambda q: fusion.rrf_scores(q.features, k=g[0], vector_weight=g[1]),
    )
    return {"k": k, "vector_weight": w}


def fit_convex(norm: str) -> Callable[[Sequence[Query], dict[str, dict[str, int]]], dict[str, Any]]:
    def fit(train: Sequence[Query], qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
        a = best_of(
            train, qrels, ALPHAS, lambda a: lambda q: fusion.convex_scores(q.features, vector_weight=a, norm=norm)
        )
        return {"norm": norm, "vector_weight": a}

    return fit


def agreement(q: Query, top: int = 10) -> float:
    """How much the two lists agree: the share of the vector list's first ``top`` also in the keyword's."""
    v = q.features.column("vector_rank")
    k = q.features.column("keyword_rank")
    return float(np.count_nonzero((v <= top) & (k <= q.features.lengths[1]))) / top


def per_query_scorer(params: dict[str, Any]) -> Scorer:
    def score(q: Query) -> np.ndarray:
        a = min(1.0, max(0.0, params["base_weight"] + params["slope"] * (agreement(q) - 0.5)))
        return fusion.convex_scores(q.features, vector_weight=a, norm=params["norm"])

    return score


def fit_per_query(train: Sequence[Query], qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    """A convex weight that moves with the lists' agreement: a = base + slope x (agreement - 0.5), on the
    normalisation that fits best as a fixed convex combination."""
    fixed = max(
        (fit_convex(norm)(train, qrels) for norm in fusion.NORMS),
        key=lambda p: float(
            ndcgs(
                train,
                lambda q: fusion.convex_scores(q.features, vector_weight=p["vector_weight"], norm=p["norm"]),
                qrels,
            ).mean()
        ),
    )
    grid = [
        {"norm": fixed["norm"], "base_weight": b, "slope": s}
        for b in np.round(np.arange(fixed["vector_weight"] - 0.15, fixed["vector_weight"] + 0.1501, 0.05), 2)
        for s in (-0.6, -0.4, -0.2, 0.0, 0.2, 0.4, 0.6)
    ]
    return dict(best_of(train, qrels, grid, per_query_scorer))


LGBM_PARAMS = {
    "objective": "lambdarank",
    "n_estimators": 150,
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_child_samples": 40,
    "subsample": 0.8,
    "subsample_freq": 1,
    "colsample_bytree": 0.8,
    "lambdarank_truncation_level": 20,
    "n_jobs": 1,
    "verbose": -1,
    "random_state": 7,
}


# Features that do not depend on the corpus's scale: raw BM25 grows with a collection's term statistics and
# raw cosine with the model, so a ranker split on them may not carry over to someone else's documents.
SCALE_FREE = tuple(f for f in fusion.FEATURES if f not in ("bm25", "cosine"))
LGBM_SMALL = {**LGBM_PARAMS, "n_estimators": 100, "num_leaves": 7, "min_child_samples": 100}


@dataclass(frozen=True)
class Ranker:
    """A LightGBM ranker and which of ``fusion.FEATURES`` it was given (its split indices are into those)."""

    model: Any
    columns: tuple[int, ...]

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(matrix[:, list(self.columns)]))


def lambdarank(params: dict[str, Any], features: Sequence[str]) -> Callable[..., Ranker]:
    def fit(train: Sequence[Query], _qrels: dict[str, dict[str, int]]) -> Ranker:
        import lightgbm

        columns = tuple(fusion.FEATURES.index(f) for f in features)
        model = lightgbm.LGBMRanker(**params)
        model.fit(
            np.vstack([q.features.matrix[:, list(columns)] for q in train]),
            np.concatenate([q.labels for q in train]).astype(int),
            group=[len(q.rows) for q in train],
        )
        return Ranker(model, columns)

    return fit


fit_lambdarank = lambdarank(LGBM_PARAMS, fusion.FEATURES)


def lambdarank_scorer(model: Ranker) -> Scorer:
    """The model's trees evaluated by ``fusion.tree_scores`` (what search runs), checked against LightGBM's."""
    import math

    trees = [
        fusion.Tree(*(np.asarray(t[k]) for k in ("feature", "threshold", "left", "right", "value")))
        for t in flat_trees(model)
    ]

    def score(q: Query) -> np.ndarray:
        ours = fusion.tree_scores(q.features, trees)
        theirs = model.predict(q.features.matrix)
        if not np.allclose(ours, theirs, atol=1e-9 * max(1.0, math.fsum(abs(theirs)))):
            raise AssertionError("fusion.tree_scores disagrees with LightGBM")
        return ours

    return score


@dataclass(frozen=True)
class Variant:
    name: str
    fit: Callable[[Sequence[Query], dict[str, dict[str, int]]], Any]
    scorer: Callable[[Any], Scorer]
    describe: Callable[[Any], Any] = lambda p: p


VARIANTS = (
    Variant("rrf (shipped: k=5, weight 0.5)", lambda _t, _q: None, lambda _p: shipped_rrf, lambda _p: None),
    Variant(
        "rrf, k and weight fitted",
        fit_rrf,
        lambda p: lambda q: fusion.rrf_scores(q.features, k=p["k"], vector_weight=p["vector_weight"]),
    ),
    *(
        Variant(
            f"convex, {norm} scores",
            fit_convex(norm),
            lambda p: lambda q: fusion.convex_scores(q.features, vector_weight=p["vector_weight"], norm=p["norm"]),
        )
        for norm in fusion.NORMS
    ),
    Variant("per-query weight (by list agreement)", fit_per_query, per_query_scorer),
    Variant("lambdarank (lightgbm, all features)", fit_lambdarank, lambdarank_scorer, lambda _m: "model"),
    Variant(
        "lambdarank (lightgbm, scale-free features)",
        lambdarank(LGBM_PARAMS, SCALE_FREE),
        lambdarank_scorer,
        lambda _m: "model",
    ),
    Variant(
        "lambdarank (lightgbm, scale-free features, 100 trees of 7 leaves)",
        lambdarank(LGBM_SMALL, SCALE_FREE),
        lambdarank_scorer,
        lambda _m: "model",
    ),
)


def folds(queries: Sequence[Query], k: int, seed: int = 27) -> list[list[int]]:
    order = list(range(len(queries)))
    random.Random(seed).shuffle(order)
    return [sorted(order[n::k]) for n in range(k)]


def cross_validate(queries: list[Query], qrels: dict[str, dict[str, int]], k: int) -> list[dict[str, Any]]:
    splits = folds(queries, k)
    baseline = ndcgs(queries, shipped_rrf, qrels)
    out = []
    for variant in VARIANTS:
        t0 = time.perf_counter()
        per_fold = []
        for held in splits:
            held_set = set(held)
            train = [q for n, q in enumerate(queries) if n not in held_set]
            test = [queries[n] for n in held]
            params = variant.fit(train, qrels)
            score = float(ndcgs(test, variant.scorer(params), qrels).mean())
            per_fold.append(
                {
                    "ndcg@10": round(score, 4),
                    "rrf_ndcg@10": round(float(baseline[held].mean()), 4),
                    "params": variant.describe(params),
                }
            )
        mean = float(np.mean([f["ndcg@10"] for f in per_fold]))
        wins = all(f["ndcg@10"] > f["rrf_ndcg@10"] for f in per_fold)
        out.append(
            {
                "variant": variant.name,
                "cv_ndcg@10": round(mean, 4),
                "wins_every_fold": wins,
                "folds": per_fold,
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
        log(f"{variant.name}: CV nDCG@10 {mean:.4f}, wins every fold: {wins}; {[f['ndcg@10'] for f in per_fold]}")
    return out


# -- entry point -------------------------------------------------------------------------------


def run(quick: bool, k: int = 5, write: bool = False) -> Result:
    """(run_all) ``write``: also refit the adopted fusion and replace ``resources/fusion/``."""
    return run_benchmark("fusion", quick, lambda result: _run(result, quick, k, write))


def _run(result: Result, quick: bool, k: int, write: bool) -> None:
    found = cache(quick)
    data = corpus.load(quick)
    queries = prepare(found, data.qrels)
    single = {
        "vector": float(ndcgs(queries, lambda q: -q.features.column("vector_rank"), data.qrels).mean()),
        "keyword": float(ndcgs(queries, lambda q: -q.features.column("keyword_rank"), data.qrels).mean()),
    }
    log(f"{len(queries)} training queries; single modes over the fused candidates {single}")
    result.data.update(
        {
            "queries": len(queries),
            "folds": k,
            "depth": DEPTH,
            "base": {key: found[key] for key in ("precision", "backend")},
            "single_modes_ndcg@10": {m: round(v, 4) for m, v in single.items()},
            "variants": cross_validate(queries, data.qrels, k),
        }
    )
    result.data["adopted"] = adopt(result.data["variants"], queries, data.qrels, write)


def adopt(
    variants: list[dict[str, Any]], queries: list[Query], qrels: dict[str, dict[str, int]], write: bool
) -> dict[str, Any] | None:
    """Of the variants that beat shipped RRF in every fold (none: RRF stays), the simplest (``VARIANTS`` runs
    from fewest fitted numbers to most) within ``ADOPT_MARGIN`` of the best; refitted on all queries."""
    winners = [v for v in variants if v["wins_every_fold"]]
    if not winners:
        return None
    top = max(v["cv_ndcg@10"] for v in winners)
    best = next(v for v in winners if v["cv_ndcg@10"] >= top - ADOPT_MARGIN)
    variant = next(v for v in VARIANTS if v.name == best["variant"])
    params = variant.fit(queries, qrels)
    chosen = {"variant": best["variant"], "cv_ndcg@10": best["cv_ndcg@10"], "params": variant.describe(params)}
    if write:
        from knowledge.ingest.embedding import DEFAULT_MODEL_ID  # the model of the base the cache was made on

        file = params_for_file(best["variant"], params)
        path = fusion.write_fusion(file, fusion.default_path(), len(queries), DEFAULT_MODEL_ID)
        chosen["file"] = str(path.relative_to(fusion.default_path().parents[2]))
    return chosen


def params_for_file(name: str, params: Any) -> dict[str, Any]:
    if name.startswith("convex"):
        return {"kind": "convex", "norm": params["norm"], "vector_weight": float(params["vector_weight"])}
    if name.startswith("lambdarank"):
        return {"kind": "trees", "trees": flat_trees(params)}
    raise SystemExit(f"{name} is not something a fusion file can carry")


def flat_trees(ranker: Ranker) -> list[dict[str, list[float]]]:
    """LightGBM's trees as the flat arrays ``fusion.Tree`` reads (nodes numbered depth first, so every child
    comes after its parent; split features renumbered into ``fusion.FEATURES``)."""
    out = []
    for info in ranker.model.booster_.dump_model()["tree_info"]:
        tree: dict[str, list[Any]] = {k: [] for k in ("feature", "threshold", "left", "right", "value")}

        def add(node: dict[str, Any], tree: dict[str, list[Any]] = tree) -> int:
            at = len(tree["feature"])
            for key in tree:
                tree[key].append(0)
            if "leaf_value" in node:
                tree["feature"][at], tree["value"][at] = -1, float(node["leaf_value"])
                return at
            if node["decision_type"] != "<=":
                raise SystemExit(f"unexpected split {node['decision_type']}")
            feature = ranker.columns[int(node["split_feature"])]
            tree["feature"][at], tree["threshold"][at] = feature, float(node["threshold"])
            tree["left"][at] = add(node["left_child"])
            tree["right"][at] = add(node["right_child"])
            return at

        add(info["tree_structure"])
        out.append(tree)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="write the adopted fusion to resources/fusion/")
    parser.add_argument("--rebuild-cache", action="store_true")
    parser.add_argument("--adopt-only", action="store_true", help="step 4 only, from results/fusion.json")
    args = parser.parse_args()
    if args.adopt_only:
        path = RESULTS / f"fusion{'-quick' if args.quick else ''}.json"
        doc = json.loads(path.read_text())
        data = corpus.load(args.quick)
        queries = prepare(cache(args.quick), data.qrels)
        doc["results"]["adopted"] = adopt(doc["results"]["variants"], queries, data.qrels, args.write)
        path.write_text(json.dumps(doc, indent=2) + "\n")
        log(f"adopted: {doc['results']['adopted']}")
        return 0
    if args.rebuild_cache:
        cache(args.quick, rebuild=True)
    result = run(args.quick, args.folds, args.write)
    log(f"adopted: {result.data.get('adopted')}; results in {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
