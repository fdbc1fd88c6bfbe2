"""Related documents ("see also"): the documents of a base nearest in meaning to one of its items.

Method. The item is represented by its chunks' vectors (a folder or archive: every chunk inside it), each
normalised. Candidates come from the base's vector search (the same :func:`query.vector_candidates` search
uses, so the same index on each engine: the mapped vector file, or pgvector on a team store) asked with the
mean of those vectors and with each of up to ``PROBES`` of the chunks themselves (evenly spaced), so a
document close to one part of a long item is found too. Chunk hits are gathered into documents; the best
``RESCORED`` documents by their best hit are then scored exactly from their chunks' float16 copies
(``chunks.vector_f16``, kept on both engines): with S the cosine matrix of the item's chunks against the
document's, the score is S's largest cosine, and that pair of passages is the "why". Measured on SciFact (the
123 training abstracts cited together with another by the same claim, among 400 others, 1,007 chunks; a
co-cited abstract ranked first, P@1, and MRR@10): largest cosine 0.772 / 0.860; the mean of S's row and column
maxima 0.740 / 0.837; half of each 0.756 / 0.849; the mean cosine (about the centroids' cosine) 0.707 / 0.811.
On the six documents of tests/search/test_related.py every method puts the same-subject document first.

Visibility is search's: the base must be able to run a search (a failed base refuses, a locked one answers),
candidates are joined to their live rows in the same read snapshot (``deleting`` items never appear), and the
item itself and everything inside it are left out of the scope search builds for its caller
(:func:`scope.build_scope`: ``subtree`` narrows the answer to one folder as it narrows a search, and whatever
search hides from the caller is hidden here too, the asked item included: not found). An item without chunks
(pending, failed, skipped, an empty folder) is refused with :class:`NotIndexed`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, bindparam, text

from knowledge.errors import GuardRejected, InvalidInput, NotFound
from knowledge.library import tree
from knowledge.library.bases import assert_base_can_run_runtime_operation, resolve_base
from knowledge.library.location import Location
from knowledge.search.candidates import hit_rows, path_below_root
from knowledge.search.query import vector_candidates
from knowledge.search.scope import build_scope
from knowledge.search.snippets import SNIPPET_CHARS
from knowledge.search.syntax import ParsedQuery

if TYPE_CHECKING:
    from knowledge.runtime import Quire

MAX_LIMIT = 100
PROBES = 16  # chunks of the item asked one by one, besides their mean
PROBE_DEPTH = 20  # nearest visible chunks asked per probe
RESCORED = 50  # candidate documents scored exactly (at least the limit)
MAX_ITEM_CHUNKS = 2000  # chunks representing the item (evenly spaced): a large folder stays bounded
MAX_DOC_CHUNKS = 500  # chunks of a candidate document read to score it (evenly spaced)


class NotIndexed(GuardRejected):
    """The item has no indexed passages to compare (pending, failed, skipped, or an empty folder)."""

    code = "not_indexed"


@dataclass(frozen=True)
class Passage:
    """One side of a "why": a chunk, where it is, and a short snippet of it."""

    chunk_id: int
    item_id: int
    ordinal: int
    page: int | None
    line_start: int | None
    line_end: int | None
    snippet: str

    @property
    def location(self) -> Location:
        return Location(self.page, self.line_start, self.line_end)

    def as_dict(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "item_id": self.item_id,
            "ordinal": self.ordinal,
            "location": self.location.as_dict(),
            "snippet": self.snippet,
        }


@dataclass(frozen=True)
class Related:
    """A related document: its score (see the module docstring) and the best matching pair of passages."""

    item_id: int
    name: str
    path: str
    source_path: str | None
    score: float
    similarity: float  # the cosine of the "why" pair
    mine: Passage  # the passage of the asked item
    theirs: Passage  # the passage of this document

    def as_dict(self) -> dict[str, Any]:
        return {
            "item_id": self.item_id,
            "name": self.name,
            "path": self.path,
            "source_path": self.source_path,
            "score": round(self.score, 6),
            "why": {
                "item": self.mine.as_dict(),
                "related": self.theirs.as_dict(),
                "similarity": round(self.similarity, 6),
            },
        }


def related(
    quire: Quire, base_ref: str | int, item_ref: int, limit: int = 10, *, subtree: int | None = None
) -> list[Related]:
    """The ``limit`` documents nearest to item ``item_ref``, best first (the module docstring says how)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
    assert_base_can_run_runtime_operation(base)
    with quire.db.read() as conn:
        item = tree.load_in_base(conn, base.id, item_ref)
        if item.status == "deleting":
            raise NotFound(f"item {item_ref} not found in this knowledge base")
        own = {int(i) for i in tree.subtree_ids(conn, [item.id])} if item.is_container else {int(item.id)}
        ids, vectors = _item_vectors(conn, own)
        if not len(ids):
            raise NotIndexed(f"{item.name!r} has no indexed passages to compare ({item.status})")
        scope = build_scope(conn, base, ParsedQuery(raw="", text=""), subtree)  # what a search may return
        if item.id in scope.excluded:  # hidden from the caller as search hides it: no such item
            raise NotFound(f"item {item_ref} not found in this knowledge base")
        scope = replace(scope, excluded=scope.excluded | own)
        best: dict[int, float] = {}
        for probe in _probes(vectors):
            for candidate, score in vector_candidates(conn, base, probe, PROBE_DEPTH, scope, index=quire.vectors):
                best[candidate.item_id] = max(score, best.get(candidate.item_id, -1.0))
        shortlist = sorted(best, key=lambda i: (-best[i], i))[: max(RESCORED, limit)]
        scored = []
        for doc in shortlist:
            doc_ids, doc_vectors = _item_vectors(conn, {doc}, MAX_DOC_CHUNKS)
            if len(doc_ids):
                similarity = vectors @ doc_vectors.T
                score, mine, theirs = document_score(similarity)
                pair = float(similarity[mine, theirs])
                scored.append((score, doc, int(ids[mine]), int(doc_ids[theirs]), pair))
        scored.sort(key=lambda s: (-s[0], s[1]))
        top = scored[:limit]
        rows = hit_rows(conn, [c for s in top for c in (s[2], s[3])])
    return [_related(s, pair, rows[a], rows[b]) for s, _doc, a, b, pair in top if a in rows and b in rows]


def document_score(similarity: np.ndarray) -> tuple[float, int, int]:
    """Score of a document from the cosine matrix (item chunks x document chunks): its largest cosine, with
    that pair's (row, column), the "why" (the module docstring says why this score)."""
    row, column = np.unravel_index(int(np.argmax(similarity)), similarity.shape)
    return float(similarity[row, column]), int(row), int(column)


def _probes(vectors: np.ndarray) -> list[np.ndarray]:
    """The mean of the item's vectors (normalised), then up to ``PROBES`` of them, evenly spaced."""
    mean = vectors.mean(axis=0)
    mean = mean / (float(np.linalg.norm(mean)) or 1.0)
    picked = vectors if len(vectors) <= PROBES else vectors[np.linspace(0, len(vectors) - 1, PROBES).astype(int)]
    return [mean.astype(np.float32), *picked]


_CHUNKS_OF = text(
    "SELECT c.id FROM chunks c JOIN items i ON i.id = c.item_id "
    "WHERE c.item_id IN :items AND i.status != 'deleting' AND c.vector_f16 IS NOT NULL ORDER BY c.item_id, c.ordinal"
).bindparams(bindparam("items", expanding=True))
_VECTORS = text("SELECT id, vector_f16 FROM chunks WHERE id IN :ids").bindparams(bindparam("ids", expanding=True))


def _item_vectors(conn: Connection, item_ids: set[int], most: int = MAX_ITEM_CHUNKS) -> tuple[np.ndarray, np.ndarray]:
    """The live chunks of ``item_ids`` (at most ``most``, evenly spaced) and their normalised float32 vectors."""
    listed = list(item_ids)
    chunk_ids: list[int] = []
    for start in range(0, len(listed), 500):
        chunk_ids.extend(int(r[0]) for r in conn.execute(_CHUNKS_OF, {"items": listed[start : start + 500]}).all())
    if len(chunk_ids) > most:
        chunk_ids = [chunk_ids[int(n)] for n in np.linspace(0, len(chunk_ids) - 1, most)]
    stored: dict[int, bytes] = {}
    for start in range(0, len(chunk_ids), 500):
        stored.update((int(r[0]), r[1]) for r in conn.execute(_VECTORS, {"ids": chunk_ids[start : start + 500]}).all())
    kept = [c for c in chunk_ids if stored.get(c) is not None]
    if not kept:
        return np.empty(0, dtype=np.int64), np.empty((0, 0), dtype=np.float32)
    matrix = np.stack([np.frombuffer(stored[c], dtype=np.float16).astype(np.float32) for c in kept])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.asarray(kept, dtype=np.int64), matrix / np.where(norms == 0, 1.0, norms)


def _passage(row: Any) -> Passage:
    body = " ".join(str(row.text).split())
    snippet = body if len(body) <= SNIPPET_CHARS else body[: SNIPPET_CHARS - 1].rstrip() + "…"
    return Passage(row.id, row.item_id, row.ordinal, row.page, row.line_start, row.line_end, snippet)


def _related(score: float, similarity: float, mine: Any, theirs: Any) -> Related:
    return Related(
        item_id=int(theirs.item_id),
        name=str(theirs.name),
        path=path_below_root(theirs),
        source_path=theirs.source_path,
        score=score,
        similarity=similarity,
        mine=_passage(mine),
        theirs=_passage(theirs),
    )
