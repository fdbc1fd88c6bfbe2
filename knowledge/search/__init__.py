"""Search over a base — vector, keyword (BM25) and hybrid (reciprocal-rank fusion) — and what it keeps in
memory per base: the vector index and keyword term statistics. See :mod:`knowledge.search.query`."""

from knowledge.search.degraded import Answer, Degraded, answer
from knowledge.search.listing import FILTER_MODE
from knowledge.search.query import MAX_QUERY_CHARS, MAX_QUERY_TERMS, MODES, Hit, answer_mode, check_query, search
from knowledge.search.related import NotIndexed, Passage, Related, related
from knowledge.search.scope import base_tags
from knowledge.search.snippets import make_snippet
from knowledge.search.syntax import Filters, ParsedQuery, parse, parse_type, tag_name
from knowledge.search.warm import start_query_encoder, warm_search

__all__ = [
    "FILTER_MODE",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "MODES",
    "Answer",
    "Degraded",
    "Filters",
    "Hit",
    "NotIndexed",
    "ParsedQuery",
    "Passage",
    "Related",
    "answer",
    "answer_mode",
    "base_tags",
    "check_query",
    "make_snippet",
    "parse",
    "parse_type",
    "related",
    "search",
    "start_query_encoder",
    "tag_name",
    "warm_search",
]
