"""How hybrid search combines its two rankings: the features of each candidate, and the fusions over them.

Hybrid search fetches the best chunks by cosine (the vector ranking) and by BM25 (the keyword ranking) and
fuses the two lists. This module only ever sees those two ranked lists (chunk, score) and the candidates'
texts, never the vectors or the index, so it works the same whatever stores the vectors.

Every candidate (a chunk in either list) gets the features in ``FEATURES``; a fusion turns them into one
score. Two fusions exist:

* ``rrf``: weighted reciprocal-rank fusion (the former default; ``mode="hybrid-rrf"`` selects it).
* ``convex``: a convex combination of the two scores, each normalised within the query's list
  (:func:`convex_scores`); its numbers come from a fusion data file (``resources/fusion/``), fitted on
  SciFact's training queries by ``tests/benchmarks/bench_fusion.py`` and loaded offline by
  :func:`load_fusion`, which refuses a file that is not Quire fusion data of this version.

A score a candidate lacks (it is in one list only) is imputed. Absent from the keyword list: when that list
is complete (shorter than the depth asked for, so it holds every visible chunk matching a query term) the
candidate matched none, and its BM25 is 0; when the list was cut at that depth, its BM25 is at most the last
one kept, and the list's lowest stands in. Absent from the vector list: its cosine is imputed as the list's
lowest (a chunk below the cut-off, or one without a vector yet: nothing says it is 0).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from knowledge.errors import KnowledgeError
from knowledge.search.snippets import WORD

# Bumped whenever the features, their order or meaning, or the file's layout change (like the chunker's
# version): a file of another version is refused rather than misread. Not bumped when a complete keyword
# list's absent candidates went from its lowest BM25 to 0: on SciFact's training claims, fitting
# the convex weight with either imputation picks the same weight and scores the same (their keyword lists are
# almost never complete), and no file of another kind was ever shipped.
FUSION_VERSION = "fusion-1"
FUSION_FORMAT = "quire-fusion"
FUSION_FILE = f"{FUSION_VERSION}.json"
FEATURES = (
    "cosine",  # the chunk's cosine with the query (imputed: the list's lowest)
    "cosine_minmax",  # cosine scaled to 0..1 over the vector list
    "cosine_z",  # cosine as standard deviations from the vector list's mean
    "bm25",  # BM25 (higher is better; imputed: 0 when the list is complete, else the list's lowest)
    "bm25_minmax",  # over the list, or over every candidate when the list is complete (their BM25 known)
    "bm25_z",
    "bm25_max",  # bm25 / the list's best
    "vector_rank",  # 1-based; absent = list length + 1
    "keyword_rank",
    "coverage",  # share of the query's terms found in the chunk
    "first_line_coverage",  # share found in the chunk's first line (a title, a heading)
    "query_terms",  # how many terms the query has
)
NORMS = ("minmax", "z", "max")


@dataclass(frozen=True, slots=True)
class Features:
    """The candidates of one query (chunk ids, in first-seen order) and their feature matrix (one row each)."""

    ids: list[int]
    matrix: np.ndarray  # float64, len(ids) x len(FEATURES)
    lengths: tuple[int, int]  # of the vector and the keyword list

    def column(self, name: str) -> np.ndarray:
        return self.matrix[:, FEATURES.index(name)]


def _normalised(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """min-max and z-score of a list's scores, with the values an absent candidate gets in each."""
    if scores.size == 0:
        return scores, scores, 0.0, 0.0
    low, high = float(scores.min()), float(scores.max())
    span = high - low
    minmax = (scores - low) / span if span > 0 else np.ones_like(scores)
    std = float(scores.std())
    z = (scores - float(scores.mean())) / std if std > 0 else np.zeros_like(scores)
    absent_z = (low - float(scores.mean())) / std if std > 0 else 0.0
    return minmax, z, 0.0, absent_z


def candidate_features(
    vector: Sequence[tuple[Any, float]],
    keyword: Sequence[tuple[Any, float]],
    texts: Mapping[int, str],
    terms: Sequence[str],
    *,
    keyword_complete: bool,
) -> tuple[list[Any], Features]:
    """The candidates of both rankings (each once, vector list first) and their features.

    ``vector`` and ``keyword`` are (candidate, score) lists, best first, a candidate having an ``id``;
    ``texts`` the candidates' chunk texts by id (a missing text counts as no term found); ``terms`` the
    query's keyword terms (stopwords left out); ``keyword_complete``: the keyword list holds every chunk
    that matched (it came back shorter than the depth asked for), so a candidate absent from it scores 0."""
    rows: dict[int, Any] = {}
    for row, _score in (*vector, *keyword):
        rows.setdefault(row.id, row)
    ids = list(rows)
    at = {cid: n for n, cid in enumerate(ids)}
    m = np.zeros((len(ids), len(FEATURES)), dtype=np.float64)
    _fill_list(m, at, vector, "cosine", "vector_rank", complete=False)
    _fill_list(m, at, keyword, "bm25", "keyword_rank", complete=keyword_complete)
    high = max((s for _r, s in keyword), default=0.0)
    m[:, FEATURES.index("bm25_max")] = m[:, FEATURES.index("bm25")] / high if high > 0 else 0.0
    distinct = list(dict.fromkeys(terms))
    m[:, FEATURES.index("query_terms")] = len(distinct)
    if distinct and texts:  # no texts: the fusion needs no text features
        for cid, n in at.items():
            body = texts.get(cid, "")
            m[n, FEATURES.index("coverage")] = coverage(body, distinct)
            m[n, FEATURES.index("first_line_coverage")] = coverage(body.split("\n", 1)[0], distinct)
    return [rows[cid] for cid in ids], Features(ids, m, (len(vector), len(keyword)))


def _fill_list(
    m: np.ndarray,
    at: Mapping[int, int],
    ranking: Sequence[tuple[Any, float]],
    prefix: str,
    rank_col: str,
    *,
    complete: bool,
) -> None:
    """One list's columns (its score, the score normalised two ways, the rank) for every candidate.
    ``complete``: the candidates it lacks score 0 — known, not bounded — so they are normalised with the
    rest; otherwise they get the list's lowest and the normalisations are over the list alone."""
    cols = {name: FEATURES.index(name) for name in (prefix, f"{prefix}_minmax", f"{prefix}_z", rank_col)}
    scores = np.array([s for _r, s in ranking], dtype=np.float64)
    rows_at = [at[r.id] for r, _s in ranking]
    m[:, cols[rank_col]] = len(ranking) + 1
    m[rows_at, cols[rank_col]] = np.arange(1, len(ranking) + 1)
    if complete and 0 < len(ranking) < len(m):
        every = np.zeros(len(m))
        every[rows_at] = scores
        minmax, z, _absent_minmax, _absent_z = _normalised(every)
        m[:, cols[prefix]], m[:, cols[f"{prefix}_minmax"]], m[:, cols[f"{prefix}_z"]] = every, minmax, z
        return
    # an empty list imputes 0 everywhere; a list holding every candidate has none to impute
    minmax, z, absent_minmax, absent_z = _normalised(scores)
    m[:, cols[prefix]] = float(scores.min()) if scores.size else 0.0
    m[:, cols[f"{prefix}_minmax"]] = absent_minmax
    m[:, cols[f"{prefix}_z"]] = absent_z
    m[rows_at, cols[prefix]] = scores
    m[rows_at, cols[f"{prefix}_minmax"]] = minmax
    m[rows_at, cols[f"{prefix}_z"]] = z


def coverage(body: str, terms: Sequence[str]) -> float:
    """The share of ``terms`` some word of ``body`` matches: equal, or (both at least 4 letters) sharing all
    but the last two letters of the shorter, at least 4 — a crude stem, as snippets mark matches."""
    if not terms:
        return 0.0
    words = {w.group(0).lower() for w in WORD.finditer(body)}
    heads: dict[str, list[str]] = {}
    for w in words:
        if len(w) >= 4:
            heads.setdefault(w[:4], []).append(w)
    found = 0
    for t in terms:
        if t in words or (
            len(t) >= 4
            and any(
                w[: max(4, min(len(w), len(t)) - 2)] == t[: max(4, min(len(w), len(t)) - 2)]
                for w in heads.get(t[:4], ())
            )
        ):
            found += 1
    return found / len(terms)


# -- the fusions -------------------------------------------------------------------------------


def rrf_scores(features: Features, *, k: float, vector_weight: float) -> np.ndarray:
    """Weighted reciprocal-rank fusion: weight / (k + rank) summed over the lists a candidate is in."""
    out = np.zeros(len(features.ids))
    for col, weight, length in (
        ("vector_rank", vector_weight, features.lengths[0]),
        ("keyword_rank", 1 - vector_weight, features.lengths[1]),
    ):
        ranks = features.column(col)
        out += np.where(ranks <= length, weight / (k + ranks), 0.0)
    return out


def convex_scores(features: Features, *, vector_weight: float, norm: str) -> np.ndarray:
    """``vector_weight`` x the normalised cosine + (1 - it) x the normalised BM25 (``norm``: one of ``NORMS``)."""
    cos = features.column("cosine_minmax" if norm == "minmax" else "cosine_z" if norm == "z" else "cosine")
    kw = features.column("bm25_minmax" if norm == "minmax" else "bm25_z" if norm == "z" else "bm25_max")
    return vector_weight * cos + (1 - vector_weight) * kw


@dataclass(frozen=True, slots=True)
class Tree:
    """One regression tree as flat arrays: node i splits on ``feature[i]`` at ``threshold[i]`` (go ``left[i]``
    when the value is at most it, else ``right[i]``), or is a leaf (``feature[i]`` = -1) worth ``value[i]``."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray


def tree_scores(features: Features, trees: Sequence[Tree]) -> np.ndarray:
    """The sum of every tree's leaf value for each candidate (a boosted ranker's score)."""
    x = features.matrix
    rows = np.arange(len(x))
    out = np.zeros(len(x))
    for tree in trees:
        node = np.zeros(len(x), dtype=np.int64)
        for _ in range(len(tree.feature)):  # a path visits each node at most once
            inner = tree.feature[node] >= 0
            if not inner.any():
                break
            go_left = x[rows, np.maximum(tree.feature[node], 0)] <= tree.threshold[node]
            node = np.where(inner, np.where(go_left, tree.left[node], tree.right[node]), node)
        out += tree.value[node]
    return out


def order(rows: Sequence[Any], scores: np.ndarray, depth: int) -> list[tuple[Any, float]]:
    """The ``depth`` best rows by score, ties to the lower chunk id (as RRF breaks them)."""
    ranked = sorted(range(len(rows)), key=lambda n: (-float(scores[n]), rows[n].id))[:depth]
    return [(rows[n], float(scores[n])) for n in ranked]


# -- the fusion data file ------------------------------------------------------------------------


class FusionDataError(KnowledgeError):
    """A fusion data file that is not Quire fusion data of this version (corrupt, foreign or stale)."""

    code = "fusion_data"


RRF_FALLBACK = "hybrid search uses reciprocal-rank fusion (hybrid-rrf) instead"
KINDS = ("convex", "trees")
MAX_TREES = 2000
MAX_NODES = 512  # per tree


@dataclass(frozen=True, slots=True)
class Fusion:
    """A fusion and where its numbers came from; ``scores`` gives one score per candidate, higher first."""

    kind: str  # "rrf" or one of KINDS
    params: Mapping[str, Any]
    source: str  # the file's name, or "built in"
    # The model whose scores it was fitted on: score-based fusion does not carry over to another model's
    # scores (multilingual-e5's cosines crowd near the top where MiniLM's spread). None: any model (RRF).
    model: str | None = None

    def suits(self, model_id: str | None) -> bool:
        """Whether it was fitted for a base of ``model_id`` (rank-based RRF suits every model)."""
        return self.model is None or model_id is None or model_id == self.model

    @property
    def needs_texts(self) -> bool:
        """Whether the fusion reads the candidates' texts (the coverage features)."""
        return self.kind == "trees"

    def scores(self, features: Features) -> np.ndarray:
        if self.kind == "trees":
            return tree_scores(features, self.params["trees"])
        if self.kind == "rrf":
            return rrf_scores(features, k=float(self.params["k"]), vector_weight=float(self.params["vector_weight"]))
        return convex_scores(features, vector_weight=float(self.params["vector_weight"]), norm=str(self.params["norm"]))


def rrf(k: float, vector_weight: float) -> Fusion:
    return Fusion("rrf", {"k": k, "vector_weight": vector_weight}, "built in")


def resources_dir() -> Path:
    """``resources/`` beside the packages (a source tree), or inside the frozen app's bundle."""
    bundle = getattr(sys, "_MEIPASS", None)
    return Path(bundle) / "resources" if bundle is not None else Path(__file__).resolve().parents[2] / "resources"


def default_path() -> Path:
    return resources_dir() / "fusion" / FUSION_FILE


def load_fusion(path: Path) -> Fusion:
    """The fusion a data file holds; ``FusionDataError`` (naming the file, what is wrong and the RRF
    fallback) for anything that is not exactly what this version writes."""
    name = path.name

    def refuse(why: str) -> FusionDataError:
        return FusionDataError(f"fusion data {name}: {why}; {RRF_FALLBACK}")

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise refuse(f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise refuse("is not JSON (corrupt?)") from None
    if not isinstance(data, dict) or data.get("format") != FUSION_FORMAT:
        raise refuse(f'is not Quire fusion data (no "format": "{FUSION_FORMAT}")')
    if data.get("version") != FUSION_VERSION:
        raise refuse(f"is version {data.get('version')!r}, this Quire reads {FUSION_VERSION!r}")
    if data.get("features") != list(FEATURES):
        raise refuse("was fitted on other features than this Quire computes")
    kind = data.get("kind")
    if kind not in KINDS:
        raise refuse(f"has an unknown kind {kind!r}")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise refuse("names no model it was fitted on")
    if kind == "trees":
        return Fusion(kind, {"trees": _trees(data.get("trees"), refuse)}, name, model)
    weight = data.get("vector_weight")
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
        raise refuse("has no finite vector_weight")
    if not 0.0 <= float(weight) <= 1.0:
        raise refuse(f"has vector_weight {weight}, outside 0..1")
    if data.get("norm") not in NORMS:
        raise refuse(f"has an unknown norm {data.get('norm')!r}")
    return Fusion(kind, {"vector_weight": float(weight), "norm": data["norm"]}, name, model)


def _trees(raw: Any, refuse: Any) -> list[Tree]:
    """Trees checked so that evaluating them cannot fail or loop: every child a later node, every feature
    one of ``FEATURES``, every number finite."""
    if not isinstance(raw, list) or not 0 < len(raw) <= MAX_TREES:
        raise refuse(f"has no list of 1 to {MAX_TREES} trees")
    trees = []
    for n, t in enumerate(raw):
        try:
            tree = Tree(
                feature=np.asarray(t["feature"], dtype=np.int64),
                threshold=np.asarray(t["threshold"], dtype=np.float64),
                left=np.asarray(t["left"], dtype=np.int64),
                right=np.asarray(t["right"], dtype=np.int64),
                value=np.asarray(t["value"], dtype=np.float64),
            )
        except (KeyError, TypeError, ValueError, OverflowError):
            raise refuse(f"has a malformed tree ({n})") from None
        size = len(tree.feature)
        if not 0 < size <= MAX_NODES or any(
            a.shape != (size,) for a in (tree.threshold, tree.left, tree.right, tree.value)
        ):
            raise refuse(f"has a malformed tree ({n})")
        inner = tree.feature >= 0
        index = np.arange(size)
        if (
            (tree.feature >= len(FEATURES)).any()
            or (tree.feature < -1).any()
            or not np.isfinite(tree.threshold[inner]).all()
            or not np.isfinite(tree.value).all()
            or ((tree.left[inner] <= index[inner]) | (tree.left[inner] >= size)).any()
            or ((tree.right[inner] <= index[inner]) | (tree.right[inner] >= size)).any()
        ):
            raise refuse(f"has a malformed tree ({n})")
        trees.append(tree)
    return trees


def write_fusion(params: Mapping[str, Any], path: Path, queries: int, model: str) -> Path:
    """Write ``params`` (a kind and its numbers), fitted on ``model``'s scores, as this version's fusion data
    file (the benchmark does)."""
    data = {
        "format": FUSION_FORMAT,
        "version": FUSION_VERSION,
        **params,
        "model": model,
        "features": list(FEATURES),
        "fitted_on": f"SciFact training queries ({queries}), tests/benchmarks/bench_fusion.py",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    load_fusion(path)  # what was written must load
    return path
