"""What keyword search asks, built once from the parsed query: the words OR-ed, identifiers as exact phrases,
typed phrases required (:class:`KeywordQuery`), and the same query as an FTS5 match string. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from knowledge.search.snippets import WORD
from knowledge.search.syntax import ParsedQuery, plain
from knowledge.search.term_stats import quoted

# Words that match nearly every chunk: dropping them keeps BM25 OR-queries fast and sharp.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "this",
        "to",
        "was",
        "were",
        "which",
        "with",
    ]
)


def query_terms(query: str) -> list[str]:
    return [w for w in (m.group(0).lower() for m in WORD.finditer(query)) if w not in STOPWORDS]


@dataclass(frozen=True)
class KeywordQuery:
    """What keyword search asks: chunks containing every ``required`` phrase (none: any chunk matching one
    of the alternatives), ranked by BM25 summed over the ``alternatives`` (words, identifiers as exact
    phrases, and the required phrases again) and the required phrases — as FTS5's ``bm25()`` sums over
    every phrase of its match expression."""

    required: tuple[str, ...]
    alternatives: tuple[str, ...]

    def fts5(self) -> str:
        """The FTS5 match string (quoting makes any user text safe to MATCH)."""
        alternatives = " OR ".join(quoted(a) for a in self.alternatives)
        if not self.required:
            return alternatives
        return f"({' AND '.join(quoted(p) for p in self.required)}) AND ({alternatives})"


def keyword_query(
    query: str | ParsedQuery, keep: Callable[[list[str]], list[str]] | None = None
) -> KeywordQuery | None:
    """The words OR-ed, each identifier beside them as one exact phrase (kept whole: never dropped by
    ``keep``), and — when the query has phrases — all the phrases required, so BM25 ranks over everything
    typed while only chunks with every phrase match. None when nothing is left to search for.

    ``keep`` may narrow the words (on a large base: without the common ones, :mod:`knowledge.search.term_stats`).
    """
    parsed = plain(query) if isinstance(query, str) else query
    terms = list(dict.fromkeys(query_terms(" ".join((*parsed.words, *parsed.identifiers)))))
    if keep is not None and terms:
        terms = keep(terms)
    required = tuple(parsed.phrases)
    alternatives = tuple(dict.fromkeys([*parsed.phrases, *parsed.identifiers, *terms]))
    return KeywordQuery(required, alternatives) if alternatives else None


def fts_query(query: str | ParsedQuery, keep: Callable[[list[str]], list[str]] | None = None) -> str | None:
    """The FTS5 match string of :func:`keyword_query`: ``("p1" AND "p2") AND ("p1" OR "p2" OR ids OR words)``."""
    found = keyword_query(query, keep)
    return None if found is None else found.fts5()
