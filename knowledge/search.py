"""Search over a base: vector (sqlite-vec, cosine), keyword (FTS5, BM25) and hybrid (reciprocal-rank fusion).

Visibility: hits are joined to their items and ``deleting`` items are dropped inside the same read
snapshot, so nothing whose delete has committed is ever returned. Both indexes are over-fetched and
the fetch grows until enough visible hits are found (or the index is exhausted).

Vector search is exact (a brute-force cosine scan of the float vectors) on bases of up to
``EXACT_SCAN_MAX`` chunks, where the scan costs a few milliseconds. Above that it is two-stage: the
binary-quantized vectors (one sign bit per dimension, :func:`knowledge.index.bits_table`) are scanned by
Hamming distance for ``OVERSAMPLE`` times the candidates needed, and only those candidates are rescored
with the exact float cosine (FACTS.md #7: recall@10 0.996 against the exact scan, at a fraction of its
cost). Scores are always the exact cosine similarity.

Queries are encoded by the process's query encoder (one intra-op thread, FACTS.md #8).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, bindparam, text

from knowledge import items as tree
from knowledge.bases import Base, assert_base_can_run_runtime_operation, resolve_base
from knowledge.errors import InvalidInput
from knowledge.index import bits_table, fts_table, has_bits_table, vec_table

if TYPE_CHECKING:
    from knowledge.runtime import Quire

MODES = ("hybrid", "vector", "keyword")
# Hybrid: weighted reciprocal-rank fusion of the top HYBRID_DEPTH (or ``limit``, if larger) chunks of each
# ranking. Chosen on the SciFact *training* queries (tests/benchmarks/tune_hybrid.py).
RRF_K = 60
HYBRID_DEPTH = 100
VECTOR_WEIGHT = 0.5
# Vector search: exact scan up to this many chunks, binary-quantized candidates + float rescoring above.
EXACT_SCAN_MAX = 20_000
OVERSAMPLE = 10
MAX_K = 4096  # sqlite-vec's largest k for one KNN query
SNIPPET_CHARS = 240
_WORD = re.compile(r"\w+", re.UNICODE)
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


@dataclass
class Hit:
    chunk_id: int
    item_id: int
    item_name: str
    source_path: str | None
    ordinal: int
    text: str
    page: int | None
    line_start: int | None
    line_end: int | None
    score: float
    mode: str
    snippet: str = ""
    highlights: list[tuple[int, int]] = field(default_factory=list)  # spans inside ``snippet``

    def location(self) -> str:
        if self.page is not None:
            return f"page {self.page}"
        if self.line_start is not None:
            return f"lines {self.line_start}-{self.line_end}"
        return ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "item_id": self.item_id,
            "item_name": self.item_name,
            "source_path": self.source_path,
            "ordinal": self.ordinal,
            "score": round(self.score, 6),
            "location": {"page": self.page, "line_start": self.line_start, "line_end": self.line_end},
            "text": self.text,
            "snippet": self.snippet,
            "highlights": self.highlights,
        }


def query_terms(query: str) -> list[str]:
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(query)) if w not in STOPWORDS]


def fts_query(query: str) -> str | None:
    """An FTS5 OR-query of the quoted terms (quoting makes any user text safe to MATCH)."""
    terms = list(dict.fromkeys(query_terms(query)))
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


# -- candidates --------------------------------------------------------------------------------


def _visible(conn: Connection, chunk_ids: Sequence[int], allowed: set[int] | None) -> dict[int, Any]:
    if not chunk_ids:
        return {}
    rows = conn.execute(
        text(
            "SELECT c.id, c.item_id, c.ordinal, c.text, c.page, c.line_start, c.line_end, i.name, i.source_path "
            "FROM chunks c JOIN items i ON i.id = c.item_id WHERE c.id IN :ids AND i.status != 'deleting'"
        ).bindparams(bindparam("ids", expanding=True)),
        {"ids": list(chunk_ids)},
    ).all()
    return {r.id: r for r in rows if allowed is None or r.item_id in allowed}


def _total_chunks(conn: Connection, base_id: int, cap: int) -> int:
    """The base's chunk count, counted no further than ``cap`` (a bounded index scan on a large base)."""
    return int(
        conn.execute(
            text("SELECT count(*) FROM (SELECT 1 FROM chunks WHERE base_id = :b LIMIT :cap)"),
            {"b": base_id, "cap": cap},
        ).scalar_one()
    )


def vector_candidates(
    conn: Connection, base: Base, vector: np.ndarray, depth: int, allowed: set[int] | None
) -> list[tuple[Any, float]]:
    total = _total_chunks(conn, base.id, max(EXACT_SCAN_MAX, MAX_K) + 1)
    quantized = total > EXACT_SCAN_MAX and has_bits_table(conn, base.id)
    k = min(max(depth * 2, 20), MAX_K)
    blob = np.asarray(vector, dtype=np.float32).tobytes()
    while True:
        rows = _knn_quantized(conn, base.id, blob, k) if quantized else _knn_exact(conn, base.id, blob, k)
        visible = _visible(conn, [r[0] for r in rows], allowed)
        hits = [(visible[r[0]], 1.0 - float(r[1])) for r in rows if r[0] in visible]
        if len(hits) >= depth or k >= total or k >= MAX_K:
            return hits[:depth]
        k = min(k * 4, MAX_K)


def _knn_exact(conn: Connection, base_id: int, blob: bytes, k: int) -> list[tuple[int, float]]:
    """The k nearest chunks by cosine distance: a full scan of the float vectors."""
    rows = conn.execute(
        text(f"SELECT rowid, distance FROM {vec_table(base_id)} WHERE embedding MATCH :q AND k = :k"),
        {"q": blob, "k": k},
    ).all()
    return [(int(r[0]), float(r[1])) for r in rows]


def _knn_quantized(conn: Connection, base_id: int, blob: bytes, k: int) -> list[tuple[int, float]]:
    """The k nearest by cosine distance among the ``OVERSAMPLE * k`` nearest by Hamming distance."""
    candidates = [
        int(r[0])
        for r in conn.execute(
            text(f"SELECT rowid FROM {bits_table(base_id)} WHERE embedding MATCH vec_quantize_binary(:q) AND k = :n"),
            {"q": blob, "n": min(k * OVERSAMPLE, MAX_K)},
        ).all()
    ]
    if not candidates:
        return []
    rows = conn.execute(
        text(
            f"SELECT rowid, vec_distance_cosine(embedding, :q) AS d FROM {vec_table(base_id)} WHERE rowid IN :ids"
        ).bindparams(bindparam("ids", expanding=True)),
        {"q": blob, "ids": candidates},
    ).all()
    ranked = sorted(((int(r[0]), float(r[1])) for r in rows), key=lambda r: (r[1], r[0]))
    return ranked[:k]


def keyword_candidates(
    conn: Connection, base: Base, query: str, depth: int, allowed: set[int] | None
) -> list[tuple[Any, float]]:
    match = fts_query(query)
    if match is None:
        return []
    limit = max(depth * 2, 20)
    while True:
        rows = conn.execute(
            text(
                f"SELECT rowid, bm25({fts_table(base.id)}) AS s FROM {fts_table(base.id)} "
                f"WHERE {fts_table(base.id)} MATCH :m ORDER BY s LIMIT :n"
            ),
            {"m": match, "n": limit},
        ).all()
        visible = _visible(conn, [r[0] for r in rows], allowed)
        hits = [(visible[r[0]], -float(r[1])) for r in rows if r[0] in visible]
        if len(hits) >= depth or len(rows) < limit:
            return hits[:depth]
        limit *= 4


def fuse(
    rankings: Sequence[Sequence[tuple[Any, float]]],
    depth: int,
    *,
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[Any, float]]:
    """Weighted reciprocal-rank fusion: score = sum of weight / (k + rank) over the rankings a chunk is in."""
    scores: dict[int, float] = {}
    rows: dict[int, Any] = {}
    for n, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[n]
        for rank, (row, _score) in enumerate(ranking, start=1):
            scores[row.id] = scores.get(row.id, 0.0) + weight / (k + rank)
            rows[row.id] = row
    ordered = sorted(scores, key=lambda cid: (-scores[cid], cid))[:depth]
    return [(rows[cid], scores[cid]) for cid in ordered]


# -- entry point -------------------------------------------------------------------------------


def search(
    quire: Quire,
    base_ref: str | int,
    query: str,
    *,
    mode: str = "hybrid",
    limit: int = 10,
    subtree: int | None = None,
) -> list[Hit]:
    if mode not in MODES:
        raise InvalidInput(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    if limit < 1 or limit > 1000:
        raise InvalidInput("limit must be between 1 and 1000")
    if not query.strip():
        raise InvalidInput("the query is empty")
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
    assert_base_can_run_runtime_operation(base)
    vector = None
    if mode in ("hybrid", "vector"):
        vector = quire.query_encoder(base.model_id, base.precision).encode_query(query)
    depth = limit if mode != "hybrid" else max(limit, HYBRID_DEPTH)
    with quire.db.read() as conn:
        allowed = None
        if subtree is not None:
            tree.load_in_base(conn, base.id, subtree)
            allowed = set(tree.subtree_ids(conn, [subtree]))
        ranked = _rank(conn, base, query, vector, mode, depth, allowed)
    terms = query_terms(query)
    return [_hit(row, score, mode, terms) for row, score in ranked[:limit]]


def _rank(
    conn: Connection, base: Base, query: str, vector: np.ndarray | None, mode: str, depth: int, allowed: set[int] | None
) -> list[tuple[Any, float]]:
    if mode == "keyword":
        return keyword_candidates(conn, base, query, depth, allowed)
    assert vector is not None
    if mode == "vector":
        return vector_candidates(conn, base, vector, depth, allowed)
    return fuse(
        [vector_candidates(conn, base, vector, depth, allowed), keyword_candidates(conn, base, query, depth, allowed)],
        depth,
        weights=(VECTOR_WEIGHT, 1.0 - VECTOR_WEIGHT),
    )


def _hit(row: Any, score: float, mode: str, terms: Sequence[str]) -> Hit:
    snippet, spans = make_snippet(row.text, terms)
    return Hit(
        chunk_id=row.id,
        item_id=row.item_id,
        item_name=row.name,
        source_path=row.source_path,
        ordinal=row.ordinal,
        text=row.text,
        page=row.page,
        line_start=row.line_start,
        line_end=row.line_end,
        score=score,
        mode=mode,
        snippet=snippet,
        highlights=spans,
    )


def _matches(word: str, terms: Sequence[str]) -> bool:
    w = word.lower()
    for t in terms:
        if w == t:
            return True
        shorter = min(len(w), len(t))
        need = max(4, shorter - 2)
        if shorter >= 4 and w[:need] == t[:need]:
            return True
    return False


def make_snippet(body: str, terms: Sequence[str], width: int = SNIPPET_CHARS) -> tuple[str, list[tuple[int, int]]]:
    """A window of ``body`` around the first matching word, with the spans of matching words."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(body) if _matches(m.group(0), terms)]
    start = 0
    if words:
        start = max(0, words[0][0] - width // 4)
        space = body.rfind(" ", 0, start)
        start = space + 1 if space >= 0 and start - space < 20 else start
    end = min(len(body), start + width)
    window = body[start:end].replace("\n", " ")
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(body) else ""
    offset = len(prefix) - start
    spans = [(s + offset, e + offset) for s, e in words if s >= start and e <= end]
    return prefix + window + suffix, spans
