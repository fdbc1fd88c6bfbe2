"""Search over a base — vector, keyword (BM25) and hybrid (reciprocal-rank fusion) — and what it keeps in
memory per base: the vector index and keyword term statistics. See :mod:`knowledge.search.query`."""

from knowledge.search.query import MODES, Hit, search
from knowledge.search.snippets import make_snippet

__all__ = ["MODES", "Hit", "make_snippet", "search"]
