"""The tree marks stale items (made by an older parser, chunker or model) and the bases sidebar's
"Reindex stale" re-derives exactly those."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot
from sqlalchemy import text, update

from app.item_text import STALE_MARK
from knowledge.compose import open_quire
from knowledge.library.tree import NewItem, create_item
from knowledge.lifecycle import current_stamps
from knowledge.lifecycle.operations import REINDEX_SUBTREE
from knowledge.store.schema import items
from tests.app.conftest import WindowFactory, create_base, load_all, row_text


def _completed_files(data_dir: Path, base_id: int) -> tuple[int, int]:
    """Two completed leaves: one stamped today, one by an older text parser."""
    quire = open_quire(data_dir)
    try:
        today = current_stamps(quire, base_id)
        with quire.db.write() as conn:
            ids = []
            for name, parser_version in (("fresh.txt", today.parsers["text"]), ("old.txt", "text-0")):
                item_id = create_item(conn, NewItem(base_id, "file", name, "completed", source_path=f"/x/{name}"))
                conn.execute(
                    update(items)
                    .where(items.c.id == item_id)
                    .values(
                        parser="text",
                        parser_version=parser_version,
                        chunker_version=today.chunker,
                        model_fingerprint=today.model,
                        chunk_count=1,
                    )
                )
                ids.append(item_id)
        return ids[0], ids[1]
    finally:
        quire.close()


def test_stale_items_are_marked_and_reindex_stale_takes_exactly_those(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path
) -> None:
    base = create_base(data_dir, "stamps")
    fresh, old = _completed_files(data_dir, base.id)
    window = open_window()
    qtbot.waitUntil(lambda: window.ctx.base is not None, timeout=30_000)
    load_all(qtbot, window.model)
    qtbot.waitUntil(lambda: STALE_MARK in row_text(window.model, old)[3], timeout=30_000)
    assert STALE_MARK not in row_text(window.model, fresh)[3]
    assert row_text(window.model, fresh)[3] == "1 chunk"

    panel = window.bases_panel
    assert panel.stale_button.isEnabled()
    qtbot.mouseClick(panel.stale_button, Qt.MouseButton.LeftButton)

    def reindex_jobs() -> list[list[int]]:
        quire = open_quire(data_dir)
        try:
            with quire.db.read() as conn:
                rows = conn.execute(text("SELECT payload FROM jobs WHERE type = :t"), {"t": REINDEX_SUBTREE}).all()
            return [json.loads(r[0])["root_ids"] for r in rows]
        finally:
            quire.close()

    qtbot.waitUntil(lambda: reindex_jobs() == [[old]], timeout=30_000)
