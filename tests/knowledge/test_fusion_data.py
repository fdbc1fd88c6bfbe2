"""The learned fusion: its features on hand-built rankings, the shipped data file, and files it refuses.

A fusion data file is numbers fitted offline (tests/benchmarks/bench_fusion.py); search trusts only one that
is exactly this version's: anything else is refused with a message that names the file, what is wrong, and
that hybrid search falls back to reciprocal-rank fusion.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from knowledge.ingest.embedding import DEFAULT_MODEL_ID
from knowledge.library.bases import MULTILINGUAL_MODEL_ID
from knowledge.search import fusion
from knowledge.search.candidates import Candidate
from knowledge.search.rerank import (
    RRF,
    RRF_K,
    VECTOR_WEIGHT,
    Candidates,
    FusionReranker,
    active_fusion,
    fuse,
    fuse_with,
    reranker_for,
)


@dataclass(frozen=True)
class Row:
    id: int


A, B, C, D = (Row(n) for n in (1, 2, 3, 4))
VECTOR = [(A, 0.9), (B, 0.8), (C, 0.5)]
KEYWORD = [(C, 12.0), (D, 6.0)]


def features(
    texts: dict[int, str] | None = None, terms: tuple[str, ...] = (), *, complete: bool = False
) -> fusion.Features:
    rows, feats = fusion.candidate_features(VECTOR, KEYWORD, texts or {}, terms, keyword_complete=complete)
    assert [r.id for r in rows] == [1, 2, 3, 4]  # each candidate once, the vector list's first
    return feats


def test_features_normalise_each_list_and_impute_the_absent_as_a_cut_lists_worst() -> None:
    """A keyword list cut at the depth asked for: a chunk below the cut scores at most the last one kept."""
    f = features()
    assert f.column("cosine").tolist() == [0.9, 0.8, 0.5, 0.5]  # D is not in the vector list: its lowest
    assert f.column("cosine_minmax").tolist() == pytest.approx([1.0, 0.75, 0.0, 0.0])
    cos = np.array([0.9, 0.8, 0.5])
    assert f.column("cosine_z")[:3] == pytest.approx((cos - cos.mean()) / cos.std())
    assert f.column("cosine_z")[3] == pytest.approx(f.column("cosine_z")[2])
    assert f.column("bm25").tolist() == [6.0, 6.0, 12.0, 6.0]  # A and B are not in the keyword list
    assert f.column("bm25_minmax").tolist() == [0.0, 0.0, 1.0, 0.0]
    assert f.column("bm25_max").tolist() == [0.5, 0.5, 1.0, 0.5]
    assert f.column("vector_rank").tolist() == [1, 2, 3, 4]  # absent: the list's length + 1
    assert f.column("keyword_rank").tolist() == [3, 3, 1, 2]
    assert f.lengths == (3, 2)


def test_a_complete_keyword_list_scores_the_candidates_it_lacks_0() -> None:
    """A keyword list shorter than the depth asked for holds every match: A and B matched no query term, so
    their BM25 is 0 (not the list's lowest, which would credit them like D, a real match) and the
    normalisations run over all four candidates. The vector side is as before (a missing cosine is unknown)."""
    f = features(complete=True)
    assert f.column("bm25").tolist() == [0.0, 0.0, 12.0, 6.0]
    assert f.column("bm25_max").tolist() == [0.0, 0.0, 1.0, 0.5]
    assert f.column("bm25_minmax").tolist() == [0.0, 0.0, 1.0, 0.5]
    bm25 = np.array([0.0, 0.0, 12.0, 6.0])
    assert f.column("bm25_z") == pytest.approx((bm25 - bm25.mean()) / bm25.std())
    assert f.column("keyword_rank").tolist() == [3, 3, 1, 2]
    cut = features(complete=False)
    for name in ("cosine", "cosine_minmax", "cosine_z", "vector_rank", "keyword_rank"):
        assert f.column(name).tolist() == cut.column(name).tolist(), name
    # a complete list with no candidate missing, or an empty one, reads the same either way
    for keyword in (VECTOR, []):
        both = [fusion.candidate_features(VECTOR, keyword, {}, (), keyword_complete=c)[1].matrix for c in (True, False)]
        assert both[0].tolist() == both[1].tolist()


@pytest.mark.parametrize("fuser", [fusion.Fusion("convex", {"vector_weight": 0.65, "norm": "max"}, "t"), RRF])
def test_a_lone_keyword_match_outranks_every_candidate_that_matched_nothing(fuser: fusion.Fusion) -> None:
    """Issue 46: a rare word found in one chunk only. Imputing the others the list's worst gave them the same
    keyword credit as the match (bm25_max 1 each), and the vector side alone ordered them."""
    vector = [(Candidate(n, n), 0.6 - n / 100) for n in range(1, 31)]  # the match is the vector list's last
    keyword = [(Candidate(30, 30), 7.5)]
    ordered = FusionReranker(fuser).rerank(Candidates(vector, keyword, ("zorblat",), keyword_complete=True), 10)
    assert ordered[0][0].id == 30


def test_coverage_counts_query_terms_found_whole_or_by_their_stem() -> None:
    texts = {1: "Protein folding\nin the body", 3: "the proteins fold here", 4: "nothing relevant"}
    f = features(texts, ("protein", "folding"))
    assert f.column("coverage").tolist() == [1.0, 0.0, 1.0, 0.0]  # B has no text; "fold" stems "folding"
    assert f.column("first_line_coverage").tolist() == [1.0, 0.0, 1.0, 0.0]
    assert fusion.coverage("a title\nprotein below", ["protein"]) == 1.0
    assert fusion.coverage(["a title", "protein below"][0], ["protein"]) == 0.0
    assert f.column("query_terms").tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize("complete", [False, True])
def test_rrf_over_features_is_the_same_fusion_as_fuse(complete: bool) -> None:
    """Rank-based: a candidate missing from a list adds nothing from it, whether the list is complete or cut."""
    scores = fusion.rrf_scores(features(complete=complete), k=RRF_K, vector_weight=VECTOR_WEIGHT)
    by_fuse = {row.id: s for row, s in fuse([VECTOR, KEYWORD], 10, k=RRF_K, weights=(0.5, 0.5))}
    assert scores.tolist() == pytest.approx([by_fuse[n] for n in (1, 2, 3, 4)])


def test_convex_fusion_weighs_the_normalised_scores() -> None:
    f = features()
    for norm, cos, kw in (("minmax", "cosine_minmax", "bm25_minmax"), ("z", "cosine_z", "bm25_z")):
        got = fusion.convex_scores(f, vector_weight=0.3, norm=norm)
        assert got == pytest.approx(0.3 * f.column(cos) + 0.7 * f.column(kw))
    # all weight on one side orders by that side alone
    only_vector, only_keyword = (
        fusion.Fusion("convex", {"vector_weight": w, "norm": "minmax"}, "t") for w in (1.0, 0.0)
    )
    ordered = fuse_with(only_vector, VECTOR, KEYWORD, 10, keyword_complete=False)
    assert [row.id for row, _s in ordered][:2] == [1, 2]
    ordered = fuse_with(only_keyword, VECTOR, KEYWORD, 10, keyword_complete=False)
    assert ordered[0][0].id == 3
    assert min(s for _r, s in ordered) == 0.0  # shifted: the worst candidate scores 0, none below


def test_the_shipped_fusion_file_loads() -> None:
    path = fusion.default_path()
    assert path.parent.name == "fusion" and path.name == f"{fusion.FUSION_VERSION}.json"
    loaded = fusion.load_fusion(path)
    assert loaded.kind in fusion.KINDS and loaded.source == path.name
    assert 0.0 <= loaded.params["vector_weight"] <= 1.0
    active_fusion.cache_clear()
    assert active_fusion() == loaded  # what hybrid search uses


def _valid() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(fusion.default_path().read_text())
    return data


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\x00\xffnot json at all", "is not JSON"),
        (b'{"format": "quire-fusion", "version": "fusion-1", "kind": "conv', "is not JSON"),
        (json.dumps({"name": "some-package", "version": "1.0.0"}).encode(), "is not Quire fusion data"),
        (json.dumps([1, 2, 3]).encode(), "is not Quire fusion data"),
        (json.dumps({**_valid(), "version": "fusion-0"}).encode(), "is version 'fusion-0'"),
        (json.dumps({**_valid(), "features": ["cosine", "bm25"]}).encode(), "other features"),
        (json.dumps({**_valid(), "kind": "neural"}).encode(), "unknown kind 'neural'"),
        (json.dumps({**_valid(), "vector_weight": 1.5}).encode(), "outside 0..1"),
        (json.dumps({**_valid(), "vector_weight": "0.5"}).encode(), "no finite vector_weight"),
        (json.dumps({**_valid(), "norm": "softmax"}).encode(), "unknown norm 'softmax'"),
        (json.dumps({k: v for k, v in _valid().items() if k != "model"}).encode(), "names no model"),
    ],
    ids=[
        "binary",
        "truncated",
        "foreign",
        "not-an-object",
        "old-version",
        "features",
        "kind",
        "range",
        "type",
        "norm",
        "no-model",
    ],
)
def test_a_corrupt_or_foreign_file_is_refused_naming_the_rrf_fallback(
    tmp_path: Path, content: bytes, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "fusion-1.json"
    path.write_bytes(content)
    with pytest.raises(fusion.FusionDataError) as refused:
        fusion.load_fusion(path)
    message = str(refused.value)
    assert message.startswith("fusion data fusion-1.json: ") and why in message, message
    assert "reciprocal-rank fusion (hybrid-rrf)" in message
    assert str(tmp_path) not in message  # no absolute paths in messages
    # search falls back to RRF, and says so once in the log
    with caplog.at_level(logging.WARNING, logger="knowledge.search.query"):
        fallen = active_fusion(path)
    assert fallen.kind == "rrf" and fallen.params == {"k": RRF_K, "vector_weight": VECTOR_WEIGHT}
    assert [r.getMessage() for r in caplog.records] == [message]
    active_fusion.cache_clear()


def test_a_missing_file_is_refused_too(tmp_path: Path) -> None:
    with pytest.raises(fusion.FusionDataError, match=r"fusion data fusion-1.json: cannot be read .*hybrid-rrf"):
        fusion.load_fusion(tmp_path / "fusion-1.json")


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    params = {"kind": "convex", "norm": "z", "vector_weight": 0.35}
    path = fusion.write_fusion(params, tmp_path / "f.json", 809, "some-model")
    loaded = fusion.load_fusion(path)
    assert loaded == fusion.Fusion("convex", {"vector_weight": 0.35, "norm": "z"}, "f.json", "some-model")
    assert "809" in json.loads(path.read_text())["fitted_on"]


def test_the_fitted_fusion_serves_only_bases_of_the_model_it_was_fitted_on() -> None:
    """Score-based fusion does not carry over to another model's scores: other bases get RRF in ``hybrid``."""
    active_fusion.cache_clear()
    shipped = active_fusion()
    assert shipped.model == DEFAULT_MODEL_ID
    assert cast(FusionReranker, reranker_for("hybrid", DEFAULT_MODEL_ID)).fuser == shipped
    assert cast(FusionReranker, reranker_for("hybrid", MULTILINGUAL_MODEL_ID)).fuser == RRF
    assert cast(FusionReranker, reranker_for("hybrid-rrf", DEFAULT_MODEL_ID)).fuser == RRF
