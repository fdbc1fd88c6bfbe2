"""Helpers for sync tests: a base with a synced folder, an encoder that counts, search by keyword."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sqlalchemy import text

from knowledge import sync
from knowledge.ingest.embedding import Encoder
from knowledge.ingest.models import model_spec
from knowledge.lifecycle import PathInput, add_items
from knowledge.runtime import Quire
from knowledge.search import search
from tests.knowledge.helpers import drain, make_base


class CountingEncoder(Encoder):
    def __init__(self) -> None:
        super().__init__(model_spec("all-MiniLM-L6-v2"), precision="fp32")
        self.texts_seen: list[str] = []

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.texts_seen.extend(texts)
        return super().encode_documents(texts)


def counting_encoder(quire: Quire) -> CountingEncoder:
    encoder = CountingEncoder()
    quire.encoder_factory = lambda _choice, query: (
        Encoder(model_spec("all-MiniLM-L6-v2"), precision="fp32") if query else encoder
    )
    return encoder


def synced_folder(quire: Quire, folder: Path, *, mode: str = "auto") -> tuple[int, sync.SyncRoot]:
    """Add ``folder`` to a fresh base ``kb``, index it, mark it synced; returns (item id, root)."""
    make_base(quire)
    changes = add_items(quire, "kb", [PathInput(folder)])
    drain(quire)
    item_id = changes.created[0]
    root = sync.enable_sync(quire, "kb", item_id, mode=mode)
    drain(quire)  # the first reconcile: nothing to do
    return item_id, root


def keyword_hits(quire: Quire, word: str) -> list[str]:
    """Relative paths of the items whose chunks contain ``word`` (keyword search)."""
    hits = search(quire, "kb", word, mode="keyword", limit=100)
    with quire.db.read() as conn:
        return sorted(
            conn.execute(text("SELECT relative_path FROM items WHERE id = :i"), {"i": h.item_id}).scalar_one()
            for h in hits
        )


def live_paths(quire: Quire) -> dict[str, str]:
    with quire.db.read() as conn:
        rows = conn.execute(
            text("SELECT relative_path, status FROM items WHERE status != 'deleting' AND relative_path IS NOT NULL")
        ).all()
    return {r[0]: r[1] for r in rows}


def reconcile_now(quire: Quire, root_id: int, **kw: object) -> sync.Outcome:
    return sync.reconcile(quire, root_id, quire.db.write, **kw)  # type: ignore[arg-type]


__all__ = ["drain"]
