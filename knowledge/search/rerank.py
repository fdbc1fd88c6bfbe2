"""The last step of hybrid search: a :class:`Reranker` orders what the two rankings found.

Hybrid search fetches the best chunks by cosine and by BM25 (each up to ``depth``, in the searcher's own
snapshot, every candidate already joined to its live row) and hands both lists to a reranker, which returns
one ordered list. The reranker sees what a cross-encoder would need — the query's terms, the candidates of
both lists with their first-stage scores and, when it asks (:attr:`Reranker.needs_texts`), their chunk
texts — and nothing else: no vectors, no index, no database. So a future offline cross-encoder fills this
seam without touching retrieval, and the same search runs whatever engine stores the base.

Quire ships one implementation: :class:`FusionReranker`, a fusion of the two lists' scores — the one fitted
on SciFact's training queries (``resources/fusion/``, :func:`active_fusion`) for ``hybrid``, reciprocal-rank
fusion for ``hybrid-rrf``. A reranker is local and deterministic: it sends nothing anywhere.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from knowledge.search import fusion
from knowledge.search.candidates import Ranked

# hybrid-rrf: reciprocal-rank fusion of the top HYBRID_DEPTH (or ``limit``, if larger) chunks of each
# ranking, equal weights. Chosen on the SciFact *training* queries (tests/benchmarks/tune_hybrid.py,
# results/hybrid_tuning.json): nDCG@10 is flat for k from 2 to 10 (0.720-0.725) and falls towards the
# classic k = 60 (0.714-0.716), so k = 5 — a small k lets each ranking's first places decide, which suits
# two short, strong rankings.
RRF_K = 5
VECTOR_WEIGHT = 0.5

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Candidates:
    """What both rankings found for one query, best first in each list, as (candidate, score) pairs:
    cosine for ``by_vector``, BM25 (higher is better) for ``by_keyword``; a candidate may be in both.
    ``texts`` holds the candidates' chunk texts by id, filled only for a reranker that needs them.
    ``keyword_complete``: ``by_keyword`` holds every visible chunk matching a query term (it came back
    shorter than asked), so a candidate missing from it matched none; else it was cut at the depth asked."""

    by_vector: Ranked
    by_keyword: Ranked
    terms: tuple[str, ...] = ()  # the query's keyword terms, stopwords left out
    texts: Mapping[int, str] = field(default_factory=dict)
    keyword_complete: bool = field(kw_only=True)

    def ids(self) -> list[int]:
        """Every candidate's chunk id once, vector list first."""
        return list(dict.fromkeys(c.id for c, _s in (*self.by_vector, *self.by_keyword)))


class Reranker(Protocol):
    """Orders the candidates of a hybrid search: at most ``depth`` of them, best first, each with a score
    where higher is better (the window's relevance bar divides by the best, so scores are not negative)."""

    @property
    def name(self) -> str: ...

    @property
    def needs_texts(self) -> bool: ...

    def rerank(self, candidates: Candidates, depth: int) -> Ranked: ...


@dataclass(frozen=True, slots=True)
class FusionReranker:
    """A fusion of the two lists' scores (:mod:`knowledge.search.fusion`) as the reranker."""

    fuser: fusion.Fusion

    @property
    def name(self) -> str:
        return f"{self.fuser.kind} fusion ({self.fuser.source})"

    @property
    def needs_texts(self) -> bool:
        return self.fuser.needs_texts

    def rerank(self, candidates: Candidates, depth: int) -> Ranked:
        if self.fuser.kind == "rrf":
            weight = float(self.fuser.params.get("vector_weight", VECTOR_WEIGHT))
            k = int(self.fuser.params.get("k", RRF_K))
            return fuse([candidates.by_vector, candidates.by_keyword], depth, k=k, weights=(weight, 1.0 - weight))
        return fuse_with(
            self.fuser,
            candidates.by_vector,
            candidates.by_keyword,
            depth,
            dict(candidates.texts),
            candidates.terms,
            keyword_complete=candidates.keyword_complete,
        )


RRF = fusion.rrf(RRF_K, VECTOR_WEIGHT)


@functools.cache
def active_fusion(path: Path | None = None) -> fusion.Fusion:
    """The fusion ``hybrid`` uses: the shipped data file's (``path``: another file), loaded once per
    process; a file that does not load is logged once and hybrid falls back to RRF."""
    try:
        return fusion.load_fusion(path or fusion.default_path())
    except fusion.FusionDataError as exc:
        _log.warning("%s", exc)
        return RRF


def reranker_for(mode: str, model_id: str | None = None) -> Reranker:
    """The reranker a hybrid mode ships with: the fitted fusion for ``hybrid`` on a base of the model it was
    fitted for (``model_id``), else RRF; RRF for ``hybrid-rrf``."""
    fitted = active_fusion()
    return FusionReranker(fitted if mode == "hybrid" and fitted.suits(model_id) else RRF)


def fuse(
    rankings: Sequence[Sequence[tuple[Any, float]]],
    depth: int,
    *,
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[Any, float]]:
    """Weighted reciprocal-rank fusion: score = sum of weight / (k + rank) over the rankings a chunk is in."""
    scores: dict[int, float] = {}
    rows: dict[int, Any] = {}
    for n, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[n]
        for rank, (row, _score) in enumerate(ranking, start=1):
            scores[row.id] = scores.get(row.id, 0.0) + weight / (k + rank)
            rows[row.id] = row
    ordered = sorted(scores, key=lambda cid: (-scores[cid], cid))[:depth]
    return [(rows[cid], scores[cid]) for cid in ordered]


def fuse_with(
    fuser: fusion.Fusion,
    by_vector: Ranked,
    by_keyword: Ranked,
    depth: int,
    texts: dict[int, str] | None = None,
    terms: Sequence[str] = (),
    *,
    keyword_complete: bool,
) -> Ranked:
    """The candidates of both rankings ordered by ``fuser``'s scores, shifted so the worst candidate scores
    0 (the window's relevance bar divides by the best; a learned score can be negative). ``texts`` (by
    chunk id) and ``terms`` feed the coverage features, when the fusion uses them; ``keyword_complete``
    says whether ``by_keyword`` holds every match (:attr:`Candidates.keyword_complete`)."""
    rows, features = fusion.candidate_features(
        by_vector, by_keyword, texts or {}, terms, keyword_complete=keyword_complete
    )
    if not rows:
        return []
    scores = fuser.scores(features)
    return fusion.order(rows, scores - float(scores.min()), depth)
