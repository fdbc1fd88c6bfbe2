"""Narrowing an embedding failure to the items that caused it: one refused or broken text fails its own
item, never its batch neighbours (poison-item isolation). Shared by the index job and folder runs."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobs.backoff import retry_transient
from jobs.sanitize import sanitize_error, sanitize_reason
from knowledge.ingest.material import BatchStats, Prepared, Rejected, embed_batch
from knowledge.ingest.remote import EmbedderUnavailable, EmbeddingRejected
from knowledge.ingest.slices import INDEX_TIMEOUT, OverBudget
from knowledge.library.ids import ItemId

if TYPE_CHECKING:
    from knowledge.ingest.embedding import Encoder
    from knowledge.library.bases import Base
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


class Culprits(dict[ItemId, Rejected]):
    """Items of a batch that failed on their own, by id (merged with ``+``)."""

    def __add__(self, other: dict[ItemId, Rejected]) -> Culprits:
        return Culprits({**self, **other})


def embed_narrowed(
    quire: Quire, base: Base, prepared: Sequence[Prepared], encoder: Encoder, stats: BatchStats
) -> Culprits:
    """Embed the batch; if that fails, bisect it until the failure is narrowed to its culprits, which are
    answered ``embedding_error`` with the cause, or ``embedding_rejected`` when a remote endpoint refused
    the text (transient faults get bounded retries first); a batch past its time budget fails the file it
    names ``index_timeout`` (``ingest.slices``). Only the culprit fails: its batch neighbours
    are embedded in the halves that succeed. An unavailable endpoint is raised, never bisected."""
    try:
        retry_transient(lambda: embed_batch(quire, base, prepared, encoder, stats), attempts=3)
        return Culprits()
    except EmbedderUnavailable:
        raise  # the endpoint is down, not an item: bisecting would only repeat the bounded retries
    except OverBudget as over:  # that file fails; its neighbours go on, their done slices taken from the cache
        culprit = next(p for p in prepared if p.item.id == over.item_id)
        rest = [p for p in prepared if p is not culprit]
        log.warning("item %s ran out of its embedding budget", over.item_id)
        failed = Culprits({over.item_id: Rejected(culprit.item, INDEX_TIMEOUT, over.message)})
        return failed + embed_narrowed(quire, base, rest, encoder, stats) if rest else failed
    except Exception as exc:
        if len(prepared) == 1:
            log.warning("item %s could not be embedded: %s", prepared[0].item.id, exc)
            return Culprits({prepared[0].item.id: _culprit(prepared[0], exc)})
    middle = len(prepared) // 2
    return embed_narrowed(quire, base, prepared[:middle], encoder, stats) + embed_narrowed(
        quire, base, prepared[middle:], encoder, stats
    )


def _culprit(prepared: Prepared, exc: Exception) -> Rejected:
    if isinstance(exc, EmbeddingRejected):  # the endpoint's own words (already cleaned), without a type name
        return Rejected(prepared.item, exc.code, sanitize_reason(str(exc)))
    return Rejected(prepared.item, "embedding_error", sanitize_error(exc))
