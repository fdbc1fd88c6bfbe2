"""The keyword indexes search ranks with: per base, its tantivy index opened from the data directory
(:mod:`knowledge.library.keyword_file`), and the translation of a
:class:`~knowledge.search.keyword_query.KeywordQuery`
into tantivy's terms.

Translation. Each alternative and required phrase is cut by FTS5's own tokenizer
(:func:`knowledge.library.keyword_file.analyze`, query mode): one token is a term, several a phrase (as FTS5
reads a quoted string), none matches nothing. The alternatives are OR-ed (SHOULD), each required phrase is a
MUST beside them; tantivy sums the clauses' BM25 as FTS5's ``bm25()`` sums its phrases. A plain query — only
words — is a disjunction of terms, which tantivy's top-k answers with block-max WAND: blocks of postings whose
best score cannot enter the current top k are skipped, so common terms cost little (hence no common-term cut
here). A scope that admits few documents (``ITEM_FILTER_MAX``) is a MUST on their item ids scoring zero, so a
narrow filter is intersected inside the index instead of filtered out of a long ranking.

Freshness, as for the vector file: the base's ``vectors_version`` is read in the search's own snapshot; an
index opened at that version or later serves it (chunks the snapshot lacks are dropped by the join to live
rows); otherwise the index is opened again and, if still behind, synced by the search itself — unless that
means building it from more than ``SEARCH_BUILD_MAX`` rows, when this search ranks with FTS5 instead (the
writer's next commit, an import, the window's worker at start or ``quire doctor`` builds it), or waiting
more than ``LOCK_WAIT`` for another process that writes it. A base is known by (id, created_at).

Threading: one lock serialises opening; an opened index is never changed, only replaced.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import tantivy
from sqlalchemy import Connection

from knowledge.library.bases import Base
from knowledge.library.file_locks import Busy
from knowledge.library.index import vectors_version
from knowledge.library.keyword_file import KeywordFiles, history_differs
from knowledge.library.keyword_schema import SCHEMA, Opened, analyze
from knowledge.library.vector_format import BaseKey
from knowledge.search.keyword_query import KeywordQuery

log = logging.getLogger(__name__)

ITEM_FILTER_MAX = 20_000  # admitted documents passed to the index as a filter (more: filtered after ranking)
SEARCH_BUILD_MAX = 50_000  # chunks a search would index itself before ranking; more: FTS5 ranks meanwhile
LOCK_WAIT = 2.0  # seconds a search waits for another process writing the index (an append); then FTS5 ranks
_MUST, _SHOULD = tantivy.Occur.Must, tantivy.Occur.Should


class KeywordIndex:
    """The opened keyword indexes of every base this process searched (see the module docstring)."""

    def __init__(self, files: KeywordFiles | None = None) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, Opened] = {}
        self._files = files  # None: no local indexes (a team store ranks in SQL)

    @property
    def files(self) -> KeywordFiles | None:
        """Where the indexes live (None: a team store, which has none)."""
        return self._files

    def opened(self, conn: Connection, base: Base) -> Opened | None:
        """The base's index, at least as new as ``conn``'s snapshot; None when FTS5 must rank instead."""
        if self._files is None:
            return None
        key = BaseKey(base.id, base.created_at, base.dimension)
        version = vectors_version(conn, base.id)
        held = self._held.get(base.id)
        if held is not None and held.stamp.key == key and held.version >= version:
            return held
        with self._lock:
            held = self._held.get(base.id)
            if held is not None and held.stamp.key == key and held.version >= version:
                return held
            found = self._open(conn, key, version)
            if found is None:
                self._held.pop(base.id, None)
                return None
            self._held[base.id] = found
            return found

    def _open(self, conn: Connection, key: BaseKey, version: int) -> Opened | None:
        assert self._files is not None
        files = self._files
        try:
            found = files.peek(key, wait=LOCK_WAIT)
            if found is None or found.version < version or history_differs(conn, found.stamp, version):
                found = files.sync(key.base_id, rebuild_at_most=SEARCH_BUILD_MAX, wait=LOCK_WAIT)
        except Busy:  # another process rebuilds it (minutes on a large base): FTS5 ranks meanwhile
            log.info("keyword index of base %s is being written elsewhere: FTS5 ranks this search", key.base_id)
            return None
        except (OSError, ValueError):  # no room, no permission, a damaged index: FTS5 ranks
            log.warning("the keyword index of base %s could not be brought up to date", key.base_id, exc_info=True)
            return None
        if found is None or found.version < version:
            log.info("keyword index of base %s not ready: FTS5 ranks this search", key.base_id)
            return None
        return found

    def forget(self, base_id: int) -> None:
        with self._lock:
            self._held.pop(base_id, None)

    @staticmethod
    def top(
        opened: Opened, query: KeywordQuery, limit: int, items: AbstractSet[int] | None = None
    ) -> list[tuple[int, float]]:
        """Up to ``limit`` (chunk id, BM25) pairs, best first; ``items``: only chunks of these documents."""
        found = as_tantivy(query)
        if found is None:
            return []
        if items is not None and len(items) <= ITEM_FILTER_MAX:
            only = tantivy.Query.const_score_query(tantivy.Query.term_set_query(SCHEMA, "item", sorted(items)), 0.0)
            found = tantivy.Query.boolean_query([(_MUST, only), (_MUST, found)])
        searcher = opened.searcher()
        hits = searcher.search(found, limit, count=False).hits
        ids = searcher.fast_field_values("id", [address for _score, address in hits])
        return [(int(i), float(score)) for (score, _address), i in zip(hits, ids, strict=True) if i]

    @staticmethod
    def counts(opened: Opened, phrases: Sequence[str]) -> list[int]:
        """How many documents of the index hold each phrase (deleted ones not counted): the rows holding it,
        when the index holds exactly a snapshot's rows (the caller checks)."""
        searcher = opened.searcher()
        found = []
        for phrase in phrases:
            query = _phrase(phrase)
            result = None if query is None else searcher.search(query, 1, count=True)
            found.append(0 if result is None else int(result.count or 0))  # type: ignore[attr-defined]  # not in the stub
        return found


def as_tantivy(query: KeywordQuery) -> tantivy.Query | None:
    """The tantivy query meaning what ``query.fts5()`` means to FTS5; None when it matches nothing."""
    alternatives = [q for q in map(_phrase, query.alternatives) if q is not None]
    if not alternatives:
        return None
    any_of = tantivy.Query.boolean_query([(_SHOULD, q) for q in alternatives])
    if not query.required:
        return any_of
    required = [_phrase(p) for p in query.required]
    if any(q is None for q in required):
        return None  # a required phrase with no token matches no chunk
    return tantivy.Query.boolean_query([*((_MUST, q) for q in required if q is not None), (_MUST, any_of)])


def _phrase(value: str) -> tantivy.Query | None:
    tokens = analyze(value, query=True)
    if not tokens:
        return None
    if len(tokens) == 1:
        return tantivy.Query.term_query(SCHEMA, "text", tokens[0], index_option="freq")
    return tantivy.Query.phrase_query(SCHEMA, "text", list(tokens))
