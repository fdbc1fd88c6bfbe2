"""Embedding many passages in slices, each kept as it is made, under a budget that grows with the text.

A big file (a long manual, a year of logs) is embedded :func:`slice_texts` passages at a time, and each
slice's vectors go into the base's vector cache (``index.keep_vectors``, one short write) before the next
slice starts. A worker that takes the file over after a crash or a stop finds them there by text hash
(``index.vectors_for_hashes``) and embeds only what is left, instead of starting the file over; the cache
rows go when the item's chunks are written (``index.forget_cached``).

Before each slice after the first, the batch's time is held against its budget, ``QUIRE_EMBED_BUDGET_SECONDS``
(default 120) plus ``QUIRE_EMBED_SECONDS_PER_MB`` (default 300) per MiB of its text: about 3 passages a
second, a sixth of the packaged model's rate on two loaded cores, so only something wrong runs out of it.
Past it, the file with the most passages left fails ``index_timeout`` and the run or job goes on; what
was embedded stays cached, so retrying that file continues where it stopped.

A batch that fits in one slice is embedded in one call and caches nothing (the common case costs nothing).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from knowledge.ingest import encode_watch
from knowledge.ingest.models import model_stamp
from knowledge.library import index
from knowledge.library.bases import Base
from knowledge.library.ids import ItemId
from knowledge.library.index import ChunkRow
from knowledge.library.tree import Item

if TYPE_CHECKING:
    from knowledge.ingest.embedding import Encoder
    from knowledge.runtime import Quire

INDEX_TIMEOUT = "index_timeout"
MIB = 1024 * 1024


def slice_texts() -> int:
    """Passages per slice: a few tens of seconds of the packaged model's work on two cores."""
    return max(1, int(os.environ.get("QUIRE_EMBED_SLICE_TEXTS", "256")))


@dataclass(frozen=True)
class EmbedBudget:
    base_seconds: float = 120.0
    seconds_per_mib: float = 300.0

    @classmethod
    def from_env(cls) -> EmbedBudget:
        return cls(
            base_seconds=float(os.environ.get("QUIRE_EMBED_BUDGET_SECONDS", "120")),
            seconds_per_mib=float(os.environ.get("QUIRE_EMBED_SECONDS_PER_MB", "300")),
        )

    def seconds_for(self, text_bytes: int) -> float:
        return self.base_seconds + self.seconds_per_mib * text_bytes / MIB


class Prepared(Protocol):
    """What is read of a prepared item (``ingest.material.Prepared``, which imports this module)."""

    @property
    def item(self) -> Item: ...
    @property
    def text(self) -> str: ...
    @property
    def rows(self) -> list[ChunkRow]: ...


class BatchStats(Protocol):
    def timed(self, stage: str) -> AbstractContextManager[None]: ...


class OverBudget(Exception):
    """A batch's embedding ran past its budget; ``item_id`` is the file that fails for it."""

    def __init__(self, item_id: ItemId, message: str) -> None:
        super().__init__(message)
        self.item_id = item_id
        self.message = message


def encode_missing(
    quire: Quire, base: Base, encoder: Encoder, pending: Sequence[Prepared], missing: dict[str, str], stats: BatchStats
) -> dict[str, np.ndarray]:
    """Vectors for ``missing`` (text hash -> text): one call when they fit in a slice, else slice by slice,
    each slice cached before the next (raises :class:`OverBudget` when the budget runs out)."""
    texts = list(missing.items())
    size = slice_texts()
    if len(texts) <= size:
        return dict(zip(missing, _encode(base, encoder, list(missing.values()), stats), strict=True))
    text_bytes = sum(len(p.text.encode("utf-8")) for p in pending)
    limit, started = EmbedBudget.from_env().seconds_for(text_bytes), time.monotonic()
    stamp, made = model_stamp(base), dict[str, np.ndarray]()
    for start in range(0, len(texts), size):
        if start and time.monotonic() - started > limit:
            raise _over_budget(pending, missing, made, limit, text_bytes)
        part = texts[start : start + size]
        vectors = _encode(base, encoder, [t for _sha, t in part], stats)
        pairs = [(sha, vectors[n]) for n, (sha, _t) in enumerate(part)]
        with quire.db.write() as conn:  # kept now: a worker that takes this file over embeds only the rest
            index.keep_vectors(conn, base.id, pairs, stamp)
        made.update(pairs)
    return made


def _encode(base: Base, encoder: Encoder, texts: list[str], stats: BatchStats) -> np.ndarray:
    # a local model's call is bounded by ending the process (encode_watch); a remote one has its deadlines
    watch = encode_watch.bounded(len(texts)) if base.embedder is None else contextlib.nullcontext()
    with stats.timed("encode"), watch:
        return encoder.encode_documents(texts)


def _over_budget(
    pending: Sequence[Prepared], missing: dict[str, str], made: dict[str, np.ndarray], limit: float, text_bytes: int
) -> OverBudget:
    """The file with the most passages still to embed fails; the others in its batch are embedded again
    (their done slices come from the cache)."""

    def left(p: Prepared) -> int:
        return sum(1 for row in p.rows if row.text_sha256 in missing and row.text_sha256 not in made)

    culprit = max(pending, key=left)
    total = len({row.text_sha256 for row in culprit.rows})
    message = (
        f"embedding took longer than its {limit:.0f} s budget ({text_bytes / MIB:.1f} MB of text) and was "
        f"stopped with {left(culprit):,} of its {total:,} passages left; those embedded are kept, so a retry "
        "goes on from there"
    )
    return OverBudget(culprit.item.id, message)
