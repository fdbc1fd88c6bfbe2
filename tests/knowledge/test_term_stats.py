"""Keyword search on a large base leaves out terms most chunks contain, and only then."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.library import index
from knowledge.library.bases import get_base
from knowledge.library.index import ChunkRow
from knowledge.library.tree import NewItem, create_item
from knowledge.runtime import Quire
from knowledge.search import query as search
from knowledge.search import term_stats
from knowledge.search.keyword_query import fts_query
from tests.knowledge.helpers import make_base
from tests.support.engine_fixtures import ENGINES, engine_quire

# on both engines: a team store counts its terms in PostgreSQL (its keyword table has no FTS5 MATCH)
quire = pytest.fixture(params=ENGINES)(engine_quire)


def fill(quire: Quire, texts: list[str]) -> None:
    rng = np.random.default_rng(0)
    with quire.db.write() as conn:
        for n, body in enumerate(texts):
            item = create_item(conn, NewItem(1, "note", f"n{n}", "completed", note_text=body))
            vector = rng.normal(size=(1, 384)).astype(np.float32)
            index.write_item_material(conn, 1, item, [ChunkRow(0, body, 0, len(body), None, 1, 1, 3, f"h{n}")], vector)


def keyword(quire: Quire, query: str) -> list[str]:
    base = get_base(quire.db, "kb")
    with quire.db.read() as conn:
        assert fts_query(query) is not None
        found = search.keyword_candidates(conn, base, query, 10, None, stats=quire.terms)
        rows = search.hit_rows(conn, [c.id for c, _s in found])
        return [rows[c.id].text for c, _s in found]


def test_common_terms_are_left_out_on_a_large_base_only(quire: Quire, monkeypatch: pytest.MonkeyPatch) -> None:
    make_base(quire)
    fill(quire, [f"protein sample {n}" for n in range(40)] + ["protein kinase cascade", "kinase inhibitor"])
    with quire.db.read() as conn:
        base = get_base(quire.db, "kb")
        assert quire.terms.rare_terms(conn, base, ["protein", "kinase"]) == ["protein", "kinase"]  # small base
    monkeypatch.setattr(term_stats, "EXACT_UP_TO", 0)
    quire.terms = term_stats.TermStats()
    with quire.db.read() as conn:
        assert quire.terms.rare_terms(conn, base, ["protein", "kinase"]) == ["kinase"]  # 41 of 42 chunks
        assert quire.terms.rare_terms(conn, base, ["protein", "sample"]) == ["sample"]  # the rarest stays
    assert set(keyword(quire, "protein kinase")) == {"protein kinase cascade", "kinase inhibitor"}


def test_counts_follow_the_base_as_it_changes(quire: Quire, monkeypatch: pytest.MonkeyPatch) -> None:
    make_base(quire)
    monkeypatch.setattr(term_stats, "EXACT_UP_TO", 0)
    fill(quire, ["alpha beta", "alpha gamma", "delta"])
    base = get_base(quire.db, "kb")
    with quire.db.read() as conn:
        assert quire.terms.rare_terms(conn, base, ["alpha", "delta"]) == ["delta"]  # alpha: 2 of 3
    fill(quire, [f"delta {n}" for n in range(10)])  # a write bumps the base's version
    with quire.db.read() as conn:
        assert quire.terms.rare_terms(conn, base, ["alpha", "delta"]) == ["alpha"]  # now delta is common


def test_phrase_counts_are_cached_per_version_whoever_counted_them(quire: Quire) -> None:
    """BM25's document frequencies for exact keyword scores: a counter given (the keyword index, when it holds
    exactly the snapshot's rows) is asked only for phrases not cached for this version; without one FTS5
    counts; a write moves the version and everything is counted again."""
    base = make_base(quire)
    fill(quire, ["protein kinase cascade", "kinase inhibitor", "silt budget of the harbour"])
    stats = term_stats.TermStats()
    asked: list[list[str]] = []

    def counter(phrases: list[str]) -> list[int]:
        asked.append(list(phrases))
        return [len(p) for p in phrases]  # not real counts: shows whose answer was kept

    with quire.db.read() as conn:
        assert stats.counts(conn, base, ["kinase", "silt budget"], counter) == [6, 11]
        assert stats.counts(conn, base, ["kinase", "protein"], counter) == [6, 7]  # "kinase" from the cache
        assert stats.counts(conn, base, ["inhibitor"]) == [1]  # no counter: FTS5 counts
    assert asked == [["kinase", "silt budget"], ["protein"]]
    fill(quire, ["kinase again"])
    with quire.db.read() as conn:
        assert stats.counts(conn, base, ["kinase"]) == [3]  # a new version: FTS5's count, not the cached 6
