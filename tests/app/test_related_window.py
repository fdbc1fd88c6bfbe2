"""The window's related documents: "Related documents…" in the item tree's context menu lists, off the main
thread, the documents nearest to the selected item; on the real corpus of tests/support/related_corpus.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.related_panel import RelatedDialog
from knowledge.compose import open_quire
from knowledge.lifecycle import operations
from tests.app.conftest import WindowFactory, load_all, select_ids
from tests.support.files import write_tree
from tests.support.related_corpus import indexed_related_base

pytestmark = pytest.mark.model


def test_related_dialog_lists_the_same_subject_document_first(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    quire = open_quire(data_dir)
    try:
        _base, ids = indexed_related_base(quire, tmp_path)
        later = write_tree(tmp_path / "later", {"tenmoku.md": "Tenmoku glazes break brown on the rims of tea bowls.\n"})
        pending = operations.add_items(quire, "kb", [operations.PathInput(later / "tenmoku.md")]).created[0]
    finally:
        quire.close()
    window = open_window()
    load_all(qtbot, window.model)
    action = window.related_documents.action
    assert window.tree.contextMenuPolicy() == Qt.ContextMenuPolicy.ActionsContextMenu
    assert action in window.tree.actions() and not action.isEnabled()

    select_ids(window, [ids["desk/celadon.md"]])
    assert action.isEnabled()
    action.trigger()
    dialog = window.related_documents.dialog
    assert isinstance(dialog, RelatedDialog) and dialog.isVisible()
    qtbot.waitUntil(lambda: dialog.table.rowCount() > 0, timeout=60_000)
    assert dialog.table.item(0, 0).text() == "library/shelf/crawling.md"
    shown = {dialog.table.item(row, 0).text() for row in range(dialog.table.rowCount())}
    assert "library/desk/celadon.md" not in shown and len(shown) == 5
    passages = dialog.table.item(0, 2).text()
    assert passages.startswith("This (lines ") and "\nThat (lines " in passages and "celadon" in passages.casefold()
    assert dialog.status.text() == "5 related document(s), nearest first"

    select_ids(window, [pending])  # added, not indexed yet: the refusal is the answer
    window.related_documents.open()
    refused = window.related_documents.dialog
    assert refused is not None and refused is not dialog
    qtbot.waitUntil(lambda: "no indexed passages" in refused.status.text(), timeout=30_000)
    assert refused.table.rowCount() == 0
