"""Search over a base — vector, keyword (BM25) and hybrid (reciprocal-rank fusion) — and what it keeps in
memory per base: the vector index and keyword term statistics. See :mod:`knowledge.search.query`."""

from knowledge.search.query import MAX_QUERY_CHARS, MAX_QUERY_TERMS, MODES, Hit, check_query, search
from knowledge.search.snippets import make_snippet

__all__ = ["MAX_QUERY_CHARS", "MAX_QUERY_TERMS", "MODES", "Hit", "check_query", "make_snippet", "search"]
