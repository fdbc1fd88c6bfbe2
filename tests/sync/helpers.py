"""Helpers for sync tests: a base with a synced folder, an encoder that counts, search by keyword."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from knowledge import sync
from knowledge.lifecycle import PathInput, add_items
from knowledge.runtime import Quire
from knowledge.search import search
from tests.knowledge.helpers import drain, make_base
from tests.support.encoders import CountingEncoder, install


def counting_encoder(quire: Quire) -> CountingEncoder:
    return install(quire, CountingEncoder())


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
