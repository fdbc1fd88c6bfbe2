"""Keyword search: the query's words, phrases and identifiers as one BM25 query, and its ranking.

One query (:class:`~knowledge.search.keyword_query.KeywordQuery`), two rankers with the same meaning. On a
local store the base's tantivy index ranks it (:mod:`knowledge.search.keyword_index`: a top-k that skips
what cannot reach the top, over FTS5's own tokens); where there is no usable index — a team store, an index
a search would have to rebuild from many rows first, or one another process is rebuilding — the FTS5 table
(PostgreSQL's BM25 on a team store) ranks the same query written as a match string. Only the FTS5 ranking
leaves very common terms out on large bases (:mod:`knowledge.search.term_stats`): it scores every matching
row, tantivy does not.

Measured on SciFact (5,183 documents, the 809 training queries, ``tests/benchmarks/bench_keyword_parity.py``):
keyword nDCG@10 is 0.7005 with FTS5 and 0.7004 with the tantivy index.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from functools import partial

from sqlalchemy import Connection, bindparam, text

from knowledge.library import index_postgres
from knowledge.library.bases import Base
from knowledge.library.index import fts_table, vectors_version
from knowledge.library.keyword_schema import Opened
from knowledge.search import keyword_bm25
from knowledge.search.candidates import Ranked, over_fetch, visible
from knowledge.search.keyword_index import KeywordIndex
from knowledge.search.keyword_query import KeywordQuery, fts_query, keyword_query
from knowledge.search.scope import Scope
from knowledge.search.syntax import ParsedQuery
from knowledge.search.term_stats import TermStats

CANDIDATES = 2  # the index's candidates per chunk asked for, scored exactly (see _scored_candidates)


def keyword_candidates(
    conn: Connection,
    base: Base,
    query: str | ParsedQuery,
    depth: int,
    scope: Scope | None,
    *,
    stats: TermStats | None = None,
    index: KeywordIndex | None = None,
) -> Ranked:
    """The ``depth`` best visible chunks by BM25, from the base's keyword index when it has a usable one,
    else from FTS5 (``stats``: leave common terms out on a large base)."""
    fetch = _ranker(conn, base, query, scope, stats, index)
    if fetch is None:
        return []
    limit = over_fetch(depth)
    while True:
        rows, exhausted = fetch(limit)
        shown = visible(conn, [r[0] for r in rows], scope)
        hits = [(shown[r[0]], float(r[1])) for r in rows if r[0] in shown]
        if len(hits) >= depth or exhausted:
            return hits[:depth]
        limit *= 4


# limit -> (up to limit (chunk id, score) pairs, best first; whether the ranker has no more than those)
Fetch = Callable[[int], tuple[list[tuple[int, float]], bool]]


def _ranker(
    conn: Connection,
    base: Base,
    query: str | ParsedQuery,
    scope: Scope | None,
    stats: TermStats | None,
    index: KeywordIndex | None,
) -> Fetch | None:
    """The index's candidates scored as FTS5 scores them, or FTS5's own ranking."""
    opened = None if index is None else index.opened(conn, base)
    if index is not None and opened is not None:
        whole = keyword_query(query)
        if whole is None:
            return None
        items = None if scope is None else scope.items
        return lambda limit: _scored_candidates(conn, base, index, opened, whole, limit, items, stats)
    match = fts_query(query, None if stats is None else lambda terms: stats.rare_terms(conn, base, terms))
    if match is None:
        return None

    def fetch(limit: int) -> tuple[list[tuple[int, float]], bool]:
        rows = ranked_matches(conn, base, match, limit)
        return rows, len(rows) < limit

    return fetch


def _scored_candidates(
    conn: Connection,
    base: Base,
    index: KeywordIndex,
    opened: Opened,
    query: KeywordQuery,
    limit: int,
    items: AbstractSet[int] | None,
    stats: TermStats | None,
) -> tuple[list[tuple[int, float]], bool]:
    """The index's ``CANDIDATES`` x ``limit`` best (by its own BM25), scored exactly as FTS5's ``bm25()`` would
    in this snapshot (:mod:`knowledge.search.keyword_bm25`); the ``limit`` best of those. Chunks the snapshot
    lacks (an index ahead of it, or holding chunks whose delete it was never told of) are left out."""
    asked = limit * CANDIDATES
    found = index.top(opened, query, asked, items)
    texts = _texts(conn, [chunk_id for chunk_id, _score in found])
    phrases = [*query.required, *query.alternatives]  # the match expression's phrases, in FTS5's order
    totals = keyword_bm25.table_totals(conn, base.id)
    exact = opened.version == vectors_version(conn, base.id) and opened.documents() == totals.rows
    # the index holds exactly this snapshot's rows: count there (else FTS5 counts); cached per version either way
    hits = (stats or TermStats()).counts(conn, base, phrases, partial(index.counts, opened) if exact else None)
    scored = keyword_bm25.scores(texts, keyword_bm25.phrase_tokens(phrases), hits, totals)
    ranked = sorted(scored.items(), key=lambda pair: (-pair[1], pair[0]))
    # no more than these: the index ran dry and none of its candidates were cut here (hybrid reads a short
    # keyword list as every match)
    return ranked[:limit], len(found) < asked and len(ranked) <= limit


_TEXTS = text("SELECT id, text FROM chunks WHERE id IN :ids").bindparams(bindparam("ids", expanding=True))


def _texts(conn: Connection, chunk_ids: list[int]) -> dict[int, str]:
    return {int(r[0]): str(r[1]) for r in conn.execute(_TEXTS, {"ids": chunk_ids}).all()} if chunk_ids else {}


def ranked_matches(conn: Connection, base: Base, match: str, limit: int) -> list[tuple[int, float]]:
    """Up to ``limit`` (chunk id, score) pairs for an FTS5-style match string, best (highest score) first, ties
    by chunk id: FTS5's BM25 here, the same BM25 computed in SQL on a team store
    (``index_postgres.keyword_matches``)."""
    table = fts_table(base.id)
    if conn.dialect.name == "postgresql":
        return index_postgres.keyword_matches(conn, table, match, limit)
    rows = conn.execute(
        text(f"SELECT rowid, bm25({table}) AS s FROM {table} WHERE {table} MATCH :m ORDER BY s, rowid LIMIT :n"),
        {"m": match, "n": limit},
    ).all()
    return [(int(r[0]), -float(r[1])) for r in rows]
