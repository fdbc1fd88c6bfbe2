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

from sqlalchemy import Connection, text

from knowledge.library import index_postgres
from knowledge.library.bases import Base
from knowledge.library.index import fts_table
from knowledge.search.candidates import Ranked, over_fetch, visible
from knowledge.search.keyword_index import KeywordIndex
from knowledge.search.keyword_query import fts_query, keyword_query
from knowledge.search.scope import Scope
from knowledge.search.syntax import ParsedQuery
from knowledge.search.term_stats import TermStats


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
        rows = fetch(limit)
        shown = visible(conn, [r[0] for r in rows], scope)
        hits = [(shown[r[0]], float(r[1])) for r in rows if r[0] in shown]
        if len(hits) >= depth or len(rows) < limit:
            return hits[:depth]
        limit *= 4


Fetch = Callable[[int], list[tuple[int, float]]]


def _ranker(
    conn: Connection,
    base: Base,
    query: str | ParsedQuery,
    scope: Scope | None,
    stats: TermStats | None,
    index: KeywordIndex | None,
) -> Fetch | None:
    """``limit -> (chunk id, score) pairs, best first``: the index's top-k, or FTS5's ranking."""
    opened = None if index is None else index.opened(conn, base)
    if index is not None and opened is not None:
        whole = keyword_query(query)
        if whole is None:
            return None
        return lambda limit: index.top(opened, whole, limit, None if scope is None else scope.items)
    match = fts_query(query, None if stats is None else lambda terms: stats.rare_terms(conn, base, terms))
    if match is None:
        return None
    return lambda limit: ranked_matches(conn, base, match, limit)


def ranked_matches(conn: Connection, base: Base, match: str, limit: int) -> list[tuple[int, float]]:
    """Up to ``limit`` (chunk id, score) pairs for an FTS5-style match string, best (highest score) first:
    FTS5's BM25 here, the same BM25 computed in SQL on a team store (``index_postgres.keyword_matches``)."""
    table = fts_table(base.id)
    if conn.dialect.name == "postgresql":
        return index_postgres.keyword_matches(conn, table, match, limit)
    rows = conn.execute(
        text(f"SELECT rowid, bm25({table}) AS s FROM {table} WHERE {table} MATCH :m ORDER BY s LIMIT :n"),
        {"m": match, "n": limit},
    ).all()
    return [(int(r[0]), -float(r[1])) for r in rows]
