"""Hybrid search's reciprocal-rank fusion, on hand-built rankings (no model, no database).

Each expected score is written out with the RRF formula — sum over rankings of weight / (k + rank) — so a
change to the formula, the rank base, the weights or the tie-break fails here rather than only nudging the
SciFact numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from knowledge.search.rerank import RRF_K, VECTOR_WEIGHT, fuse


@dataclass(frozen=True)
class Row:
    """What ``fuse`` needs of a candidate row: its chunk id."""

    id: int


A, B, C, D, E = (Row(n) for n in (1, 2, 3, 4, 5))


def ranking(*rows: Row) -> list[tuple[Row, float]]:
    # the input scores are deliberately meaningless (and increasing): fusion must use ranks only
    return [(row, float(n * 100)) for n, row in enumerate(rows)]


def fused(rankings: list[list[tuple[Row, float]]], depth: int = 10, **kw: object) -> list[tuple[int, float]]:
    return [(row.id, score) for row, score in fuse(rankings, depth, **kw)]  # type: ignore[arg-type]


def test_equal_weight_fusion_follows_the_rrf_formula() -> None:
    k, w = 5, 0.5
    vector = ranking(A, B, C)
    keyword = ranking(C, D, A)
    expected = {
        A.id: w / (k + 1) + w / (k + 3),
        B.id: w / (k + 2),
        C.id: w / (k + 3) + w / (k + 1),
        D.id: w / (k + 2),
    }
    # A and C tie (1st + 3rd each), as do B and D (2nd in one ranking): ties go to the lower id
    assert [cid for cid, _ in fused([vector, keyword], k=k, weights=(w, w))] == [A.id, C.id, B.id, D.id]
    for cid, score in fused([vector, keyword], k=k, weights=(w, w)):
        assert score == pytest.approx(expected[cid])


def test_agreement_between_rankings_beats_a_single_first_place() -> None:
    k = 5
    vector = ranking(A, E, B)
    keyword = ranking(D, E, C)
    # E is second in both: 2 * 0.5/7 = 0.143 > 0.5/6 = 0.083 for A or D, first in one ranking only
    assert 2 * 0.5 / (k + 2) > 0.5 / (k + 1)
    order = [cid for cid, _ in fused([vector, keyword], k=k, weights=(0.5, 0.5))]
    assert order == [E.id, A.id, D.id, B.id, C.id]


def test_weights_scale_each_ranking_and_k_flattens_the_ranks() -> None:
    vector = ranking(A, B)
    keyword = ranking(B, A)
    # a heavier vector weight puts vector's first place first: A = .8/6 + .2/7, B = .8/7 + .2/6
    assert 0.8 / 6 + 0.2 / 7 > 0.8 / 7 + 0.2 / 6
    assert [cid for cid, _ in fused([vector, keyword], k=5, weights=(0.8, 0.2))] == [A.id, B.id]
    assert [cid for cid, _ in fused([vector, keyword], k=5, weights=(0.2, 0.8))] == [B.id, A.id]
    # no weights means 1.0 each, and a larger k gives smaller scores
    (_, at_k5), *_ = fused([vector, keyword], k=5)
    (_, at_k60), *_ = fused([vector, keyword], k=60)
    assert at_k5 == pytest.approx(1 / 6 + 1 / 7) and at_k60 == pytest.approx(1 / 61 + 1 / 62)


def test_depth_cuts_the_fused_list_after_ordering() -> None:
    vector = ranking(A, B, C, D)
    keyword = ranking(D, C, B, A)
    everything = fused([vector, keyword], depth=10, k=5)
    assert len(everything) == 4
    assert fused([vector, keyword], depth=2, k=5) == everything[:2]


def test_hybrid_rrf_weights_each_list_by_its_share() -> None:
    """hybrid-rrf (and hybrid's fallback): VECTOR_WEIGHT / (k + rank) from the vectors, the rest from keywords."""
    vector = ranking(A, B, C)
    keyword = ranking(B, C, A)
    weights = (VECTOR_WEIGHT, 1.0 - VECTOR_WEIGHT)
    expected = {
        A.id: weights[0] / (RRF_K + 1) + weights[1] / (RRF_K + 3),
        B.id: weights[0] / (RRF_K + 2) + weights[1] / (RRF_K + 1),
        C.id: weights[0] / (RRF_K + 3) + weights[1] / (RRF_K + 2),
    }
    got = fused([vector, keyword], weights=weights)
    assert [cid for cid, _ in got] == sorted(expected, key=lambda cid: (-expected[cid], cid))
    assert all(score == pytest.approx(expected[cid]) for cid, score in got)
