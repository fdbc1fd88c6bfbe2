"""Search over a base: vector (cosine), keyword (BM25: :mod:`knowledge.search.keyword`) and hybrid (the two fused).

Hybrid hands both rankings to a reranker (:mod:`knowledge.search.rerank`): by default the fusion fitted
on SciFact's training queries (:mod:`knowledge.search.fusion`, its numbers in ``resources/fusion/``);
``hybrid-rrf`` fuses them by weighted reciprocal-rank fusion, as hybrid did before, and is what hybrid
falls back to when the fusion data cannot be loaded.

Visibility: hits are joined to their live rows and items, and ``deleting`` items are dropped, inside the
same read snapshot (:mod:`knowledge.search.candidates`), so nothing whose delete has committed is ever
returned, whatever a derived index still holds. Both rankings are over-fetched and
the fetch grows until enough visible hits are found (or the index is exhausted).

Vector search runs over the base's vector file mapped in this process
(:class:`knowledge.search.vector_index.VectorIndex`, kept on the ``Quire``): exact up to 20,000 chunks,
binary-quantized candidates rescored with the float16 copies above; on a team store it runs in the server
(:mod:`knowledge.search.vector_server`: pgvector, HNSW on large bases). Scores are cosine similarities.
Keyword search ranks with the base's tantivy index, a top-k that skips what cannot reach the top
(:mod:`knowledge.search.keyword_index`), or with FTS5 where there is none (a team store; an index not built
yet), which leaves very common terms out of the query on bases above 20,000 chunks
(:mod:`knowledge.search.term_stats`).

Hybrid runs its keyword part on a second thread, with its own read snapshot, while the query is encoded
and the vectors are searched; each part filters deleted material in its own snapshot, and both snapshots
begin after the call, so a delete committed before the search is never shown.

Queries are encoded by the process's query encoder (one intra-op thread, FACTS.md #8).

Queries are parsed first (:mod:`knowledge.search.syntax`: phrases, exclusions, ``type:``/``in:``/``tag:``/
``from:``/``after:``/``before:`` filters, identifiers); what a search may return
(:mod:`knowledge.search.scope`) is worked out inside each snapshot and applied to every candidate before a
ranking is cut, so a filter never leaves fewer hits than exist. The keyword side gets phrases as required
FTS5 phrases and identifiers as exact phrases beside the words (never dropped as common) and, in a short
query, their exact matches rank first; the encoder gets the text without filters and exclusions. Each hit
carries the notes whose ``[[wiki links]]`` name its document (:mod:`knowledge.library.links`), read once
for all the hits.

Filters alone (``tag:pottery``, ``type:pdf after:2024-01``) rank nothing: the answer lists the documents
they match, newest first, one hit each (its first chunk), ``limit`` of them, each hit's mode ``filter``
(:mod:`knowledge.search.listing`).

Bounded: a query over ``MAX_QUERY_CHARS`` characters or ``MAX_QUERY_TERMS`` distinct terms is refused
(``InvalidInput``, :func:`check_query`) before anything runs, so no caller (the CLI, the window, an agent)
can make one search cost an unbounded FTS5 OR-query or encoder call.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, bindparam, text

from knowledge.errors import InvalidInput
from knowledge.library import agent_hidden
from knowledge.library.bases import Base, assert_base_can_run_runtime_operation, resolve_base
from knowledge.library.chunk_view import ChunkView
from knowledge.library.links import Backlink, backlinks
from knowledge.search.candidates import Candidate, Ranked, hit_rows, over_fetch, path_below_root, visible
from knowledge.search.keyword import keyword_candidates
from knowledge.search.keyword_query import query_terms
from knowledge.search.listing import FILTER_MODE, listed
from knowledge.search.rerank import Candidates, Reranker, reranker_for
from knowledge.search.scope import Scope, admitted_chunks, build_scope, identifier_counts
from knowledge.search.snippets import make_snippet
from knowledge.search.syntax import Filters, ParsedQuery, parse
from knowledge.search.vector_index import VectorSearch

if TYPE_CHECKING:
    from knowledge.runtime import Quire

MODES = ("hybrid", "vector", "keyword", "hybrid-rrf")
HYBRID_MODES = frozenset({"hybrid", "hybrid-rrf"})
# Hybrid reranks the top HYBRID_DEPTH (or ``limit``, if larger) chunks of each ranking: on the SciFact
# training queries depth 50 scores the same as 100 or 200 (within 0.001) at half the work.
HYBRID_DEPTH = 50
MAX_K = 4096  # the most vector candidates one search looks at
MAX_QUERY_CHARS = 1000
MAX_QUERY_TERMS = 64  # distinct words (stopwords left out): the OR-terms of the keyword query
# Identifiers rank their exact matches first only in a short query (at most this many other words): a
# person looking something up. In a sentence they only add their exact phrase to the keyword query.
# Measured on the 809 SciFact training claims (149 contain an "identifier" such as IL-6 or 4-PBA), keyword
# nDCG@10: 0.7005 plain; 0.7005 with identifier phrases; 0.6921 with exact matches always first (0.690 ->
# 0.645 on those 149); 0.7005 with this rule (7 claims affected).
SHORT_QUERY_WORDS = 3
# Hybrid's keyword halves, one at a time per process: a long-lived thread (no start-up per query); two
# searches at once queue their keyword halves here, which a two-core machine would serialise anyway.
_KEYWORD_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quire-search-keyword")


@dataclass(kw_only=True)
class Hit(ChunkView):
    """A chunk found by a search: its view (ids, document, location, text, OCR) with how it was found."""

    score: float
    mode: str
    path: str = ""  # the document's path below the top of its tree, that top's name first: what tells it apart
    snippet: str = ""
    highlights: list[tuple[int, int]] = field(default_factory=list)  # spans inside ``snippet``
    linked_from: list[Backlink] = field(default_factory=list)  # notes whose [[wiki links]] name this document

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.which(),
            "path": self.path or self.item_name,
            "score": round(self.score, 6),
            "location": self.location.as_dict(),
            "text": self.text,
            "snippet": self.snippet,
            "highlights": self.highlights,
            "ocr": self.ocr,
            "linked_from": [b.as_dict() for b in self.linked_from],
        }


def check_query(query: str) -> None:
    """Refuse (``InvalidInput``) an empty query or one over the bounds; the message says the bound."""
    if not query.strip():
        raise InvalidInput("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"the query is {len(query):,} characters long; a query may have at most {MAX_QUERY_CHARS:,}")
    distinct = len(set(query_terms(query)))
    if distinct > MAX_QUERY_TERMS:
        raise InvalidInput(f"the query has {distinct} different words; a query may have at most {MAX_QUERY_TERMS}")


# -- candidates --------------------------------------------------------------------------------


def vector_candidates(
    conn: Connection,
    base: Base,
    vector: np.ndarray,
    depth: int,
    scope: Scope | None,
    *,
    index: VectorSearch,
) -> Ranked:
    """The ``depth`` nearest visible chunks the scope admits (over-fetched until enough are visible); when
    the scope admits only a few chunks, exactly those are scored."""
    if scope is not None and not scope.everything:
        admitted = admitted_chunks(conn, scope)
        if admitted is not None:
            return _score_exactly(conn, admitted, vector)[:depth]
    k = min(over_fetch(depth), MAX_K)
    while True:
        rows = index.nearest(conn, base, vector, k)
        shown = visible(conn, [r[0] for r in rows], scope)
        hits = [(shown[r[0]], 1.0 - float(r[1])) for r in rows if r[0] in shown]
        if len(hits) >= depth or len(rows) < k or k >= MAX_K:
            return hits[:depth]
        k = min(k * 4, MAX_K)


_F16_OF = text("SELECT id, vector_f16 FROM chunks WHERE id IN :ids").bindparams(bindparam("ids", expanding=True))


def _score_exactly(conn: Connection, admitted: list[tuple[int, int]], vector: np.ndarray) -> Ranked:
    """Cosine of the query with each admitted chunk (its float16 copy), best first."""
    items = dict(admitted)
    ids = list(items)
    scored: list[tuple[Candidate, float]] = []
    query = np.asarray(vector, dtype=np.float32)
    query = query / (float(np.linalg.norm(query)) or 1.0)
    for start in range(0, len(ids), 500):
        for cid, blob in conn.execute(_F16_OF, {"ids": ids[start : start + 500]}).all():
            if blob is None:
                continue
            v = np.frombuffer(blob, dtype=np.float16).astype(np.float32)
            scored.append((Candidate(cid, items[cid]), float(v @ query) / (float(np.linalg.norm(v)) or 1.0)))
    return sorted(scored, key=lambda pair: (-pair[1], pair[0].id))


_TEXTS = text("SELECT id, text FROM chunks WHERE id IN :ids").bindparams(bindparam("ids", expanding=True))


def _texts(conn: Connection, chunk_ids: Sequence[int]) -> dict[int, str]:
    ids = list(dict.fromkeys(chunk_ids))
    return {int(r[0]): str(r[1]) for r in conn.execute(_TEXTS, {"ids": ids}).all()} if ids else {}


# -- entry point -------------------------------------------------------------------------------


def search(
    quire: Quire,
    base_ref: str | int,
    query: str,
    *,
    mode: str = "hybrid",
    limit: int = 10,
    subtree: int | None = None,
    filters: Filters | None = None,
    reranker: Reranker | None = None,
) -> list[Hit]:
    """The ``limit`` best hits for ``query`` (the syntax of :mod:`knowledge.search.syntax`); ``subtree`` and
    ``filters`` (the window's controls) narrow it further, as the typed filters do. Filters alone list the
    ``limit`` newest documents they match (:mod:`knowledge.search.listing`), whatever the mode. A hybrid
    mode orders its candidates with ``reranker`` (by default the one the mode ships with:
    :func:`rerank.reranker_for`)."""
    if mode not in MODES:
        raise InvalidInput(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    if limit < 1 or limit > 1000:
        raise InvalidInput("limit must be between 1 and 1000")
    check_query(query)
    parsed = parse(query) if filters is None else parse(query).with_filters(filters)
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
    assert_base_can_run_runtime_operation(base)
    if parsed.filters_only:  # nothing to rank by: the documents the filters match, newest first
        with quire.db.read() as conn:
            found = listed(conn, base, parsed, subtree, limit)
        return _with_backlinks(quire, base, [_hit(row, score, FILTER_MODE, (), ()) for row, score in found])
    hybrid = mode in HYBRID_MODES
    depth = max(limit, HYBRID_DEPTH) if hybrid else limit
    ranker = (reranker or reranker_for(mode, base.model_id)) if hybrid else None
    terms = query_terms(" ".join((*parsed.words, *parsed.identifiers, *parsed.phrases)))

    def keyword(conn: Connection, scope: Scope) -> Ranked:
        return keyword_candidates(conn, base, parsed, depth, scope, stats=quire.terms, index=quire.keywords)

    if mode == "keyword":
        found = _in_snapshot(quire, base, parsed, subtree, keyword, limit, exact_first=_looks_up(parsed))
    else:
        # hybrid: the keyword part runs on the search thread, in its own read snapshot, while this thread
        # encodes the query and scans the vectors (SQLite and torch both release the GIL): hybrid then costs
        # about its slower half, not the sum of both. It runs in this call's context (copy_context): the acting
        # principal, which decides what the scope hides from an agent, follows it onto that thread
        run_here = contextvars.copy_context().run
        background = (
            _KEYWORD_THREAD.submit(run_here, _in_snapshot, quire, base, parsed, subtree, keyword, 0) if hybrid else None
        )
        vector = quire.query_encoder(base).encode_query(parsed.text)

        def both(conn: Connection, scope: Scope) -> Ranked:
            by_vector = vector_candidates(conn, base, vector, depth, scope, index=quire.vectors)
            if background is None or ranker is None:
                return by_vector
            by_keyword = background.result()
            # a keyword list shorter than asked is every match: a candidate missing from it matched no term
            found = Candidates(by_vector, by_keyword, tuple(terms), keyword_complete=len(by_keyword) < depth)
            if ranker.needs_texts:
                found = replace(found, texts=_texts(conn, found.ids()))
            return ranker.rerank(found, depth)

        found = _in_snapshot(quire, base, parsed, subtree, both, limit, exact_first=hybrid and _looks_up(parsed))
    marked = [*parsed.phrases, *parsed.identifiers]
    hits = [_hit(row, score, mode, terms, marked) for row, score in found]
    return _with_backlinks(quire, base, hits)


def answer_mode(query: str, mode: str) -> str:
    """The mode an answer to ``query`` reports: ``filter`` when it is filters alone (a listing, not a ranking)."""
    return FILTER_MODE if parse(query).filters_only else mode


def _with_backlinks(quire: Quire, base: Base, hits: list[Hit]) -> list[Hit]:
    """Each hit with the notes linking to its document (one read for all the hits)."""
    if not hits:
        return hits
    with quire.db.read() as conn:
        linked = backlinks(conn, base.id, [h.item_id for h in hits])
        hidden = agent_hidden.hidden_ids(conn, base.id)  # a note kept from an agent is not cited to it
    for hit in hits:
        hit.linked_from = [b for b in linked[hit.item_id] if b.item_id not in hidden]
    return hits


def _in_snapshot(
    quire: Quire,
    base: Base,
    parsed: ParsedQuery,
    subtree: int | None,
    fn: Callable[[Connection, Scope], Ranked],
    rows_for: int,
    *,
    exact_first: bool = False,
) -> list[tuple[Any, float]]:
    """``fn(conn, scope)`` in one read snapshot (``scope``: what the query, its filters and ``subtree``
    admit, worked out in that snapshot); its first ``rows_for`` results come back as hit rows read in that
    same snapshot, the rest as they are. ``exact_first``: chunks with typed identifiers rank first."""
    with quire.db.read() as conn:
        ranked = fn(conn, build_scope(conn, base, parsed, subtree))
        if exact_first and parsed.identifiers:
            ranked = _identifiers_first(ranked, identifier_counts(conn, base, parsed.identifiers))
        if rows_for <= 0:
            return ranked
        rows = hit_rows(conn, [c.id for c, _score in ranked[:rows_for]])
        return [(rows[c.id], score) for c, score in ranked[:rows_for] if c.id in rows]


def _looks_up(parsed: ParsedQuery) -> bool:
    """A short query with identifiers: their exact matches rank first (``SHORT_QUERY_WORDS``)."""
    return bool(parsed.identifiers) and len(set(query_terms(" ".join(parsed.words)))) <= SHORT_QUERY_WORDS


def _identifiers_first(ranked: Ranked, counts: dict[int, int]) -> Ranked:
    """Chunks containing more of the typed identifiers exactly come first; the ranking decides the rest."""
    return sorted(ranked, key=lambda pair: -counts.get(pair[0].id, 0))  # stable: keeps the ranking's order


def _hit(row: Any, score: float, mode: str, terms: Sequence[str], phrases: Sequence[str]) -> Hit:
    snippet, spans = make_snippet(row.text, terms, phrases=phrases)
    return Hit(
        **ChunkView.fields(row), path=path_below_root(row), score=score, mode=mode, snippet=snippet, highlights=spans
    )
