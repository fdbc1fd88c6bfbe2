"""Search that degrades, not fails: when meaning search is unavailable, a hybrid or vector search answers with
the keyword ranking and says so. The CLI, the window and the MCP search tool all search through :func:`answer`.

Meaning search is unavailable, and only then, when one of these is raised (each a deliberate signal, never a
bare exception type a bug could raise):

* ``ModelUnavailable`` (``model_unavailable``): the packaged model will not load (its files damaged: a
  truncated or unreadable weights file), or the query encoder process cannot start or died twice in a row;
* ``ModelNotInstalled`` (``model_unavailable``): the base's model is not installed here (the multilingual
  add-on removed, or not the file this Quire ships);
* ``EmbedderUnavailable`` (``endpoint_unavailable``): the base's remote endpoint is down, unreachable or
  answers nonsense after its bounded retries; ``EmbeddingRejected`` (``endpoint_refused``): it refused the
  query's text;
* ``VectorsUnavailable`` (``vectors_unavailable``): the base's vector index cannot be read.

Anything else propagates: a keyword search that fails, an endpoint no one here confirmed, a bug. The answer's
``degraded`` holds the mode actually used (``keyword``), the code and a short message without paths; the
exception itself (which may name files) goes to the log only, at INFO: the answer already says it.

A ``vector`` search degrades too: the person asked for an answer, and keyword results marked as such are one
(a script that must have vectors reads ``degraded``); an error would leave nothing to read until the install or
the endpoint is repaired.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knowledge.errors import ModelNotInstalled, ModelUnavailable
from knowledge.ingest.remote import EmbedderUnavailable, EmbeddingRejected
from knowledge.search.query import Hit, answer_mode, search
from knowledge.search.rerank import Reranker
from knowledge.search.syntax import Filters
from knowledge.search.vector_index import VectorsUnavailable

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)

KEYWORD = "keyword"
# exception -> (code, message): the message is for people and names no file
REASONS: tuple[tuple[type[Exception], str, str], ...] = (
    (ModelUnavailable, "model_unavailable", "the embedding model could not be loaded"),
    (ModelNotInstalled, "model_unavailable", "this knowledge base's embedding model is not installed here"),
    (EmbedderUnavailable, "endpoint_unavailable", "the knowledge base's embedding endpoint did not answer"),
    (EmbeddingRejected, "endpoint_refused", "the knowledge base's embedding endpoint refused the query"),
    (VectorsUnavailable, "vectors_unavailable", "the knowledge base's vector index could not be read"),
)
UNAVAILABLE = tuple(kind for kind, _code, _message in REASONS)


@dataclass(frozen=True, slots=True)
class Degraded:
    """Why an answer is not the mode asked for: the mode used instead, a code and a short message."""

    code: str
    message: str
    mode: str = KEYWORD

    def as_dict(self) -> dict[str, str]:
        return {"mode": self.mode, "code": self.code, "message": self.message}

    @property
    def notice(self) -> str:
        """The one line the CLI prints on stderr."""
        return f"meaning search unavailable ({self.code}): showing keyword results"

    @property
    def sentence(self) -> str:
        """The notice as the window shows it, with the message."""
        return f"Meaning search is unavailable: {self.message}. Showing keyword results."


@dataclass(frozen=True, slots=True)
class Answer:
    """A search's hits, the mode the answer reports (``filter`` for filters alone) and, when meaning search
    was unavailable, why (``degraded``)."""

    hits: list[Hit]
    mode: str
    degraded: Degraded | None = None


def degraded_for(exc: BaseException) -> Degraded | None:
    """The reason for one of the ``UNAVAILABLE`` exceptions; None for anything else."""
    for kind, code, message in REASONS:
        if isinstance(exc, kind):
            return Degraded(code, message)
    return None


def answer(
    quire: Quire,
    base_ref: str | int,
    query: str,
    *,
    mode: str = "hybrid",
    limit: int = 10,
    subtree: int | None = None,
    filters: Filters | None = None,
    reranker: Reranker | None = None,
) -> Answer:
    """:func:`knowledge.search.query.search`, answered by keyword (marked ``degraded``) when meaning search is
    unavailable; a keyword search that fails raises."""
    options: dict[str, Any] = {"limit": limit, "subtree": subtree, "filters": filters}
    try:
        hits = search(quire, base_ref, query, mode=mode, reranker=reranker, **options)
    except UNAVAILABLE as exc:
        why = degraded_for(exc)
        assert why is not None
        log.info("meaning search unavailable (%s); answering by keyword", why.code, exc_info=True)
        hits = search(quire, base_ref, query, mode=KEYWORD, **options)
        return Answer(hits, answer_mode(query, KEYWORD), why)
    return Answer(hits, answer_mode(query, mode))
