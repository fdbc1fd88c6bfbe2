"""The "Keep in sync" toggle on a folder row: on, its state shown, off again (through Ops, no main-thread writes)."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from knowledge import sync
from knowledge.compose import open_quire
from knowledge.lifecycle import PathInput, add_items, list_items
from tests.app.conftest import WindowFactory, create_base, select_ids, tree_items
from tests.support.files import write_tree


def _synced(data_dir: Path) -> list[int]:
    quire = open_quire(data_dir)
    try:
        return [r.item_id for r in sync.list_roots(quire.db)]
    finally:
        quire.close()


def test_keep_in_sync_toggle_on_a_folder_row(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    create_base(data_dir, "inbox")
    folder = write_tree(tmp_path / "watched", {"a.txt": "alpha"})
    loose = write_tree(tmp_path / "loose", {"b.txt": "beta"}) / "b.txt"  # a file of its own (one inside the
    quire = open_quire(data_dir)  # folder would be answered already_covered by the folder's root)
    try:
        folder_id = add_items(quire, "inbox", [PathInput(folder)]).created[0]
        note_id = add_items(quire, "inbox", [PathInput(loose)]).created[0]
    finally:
        quire.close()
    window = open_window()
    qtbot.waitUntil(lambda: len(tree_items(window.model)) == 2, timeout=10_000)

    select_ids(window, [note_id])
    window._update_actions()
    assert not window.act_sync.isEnabled()  # a file is not a folder
    select_ids(window, [folder_id])
    window._update_actions()
    assert window.act_sync.isEnabled() and window.act_sync.text() == "Keep in sync"

    window.act_sync.trigger()
    qtbot.waitUntil(lambda: _synced(data_dir) == [folder_id], timeout=10_000)
    qtbot.waitUntil(lambda: window.act_sync.text() == "Stop syncing", timeout=10_000)
    # the folder's sync state, e.g. "auto: not watched (no worker running); not synced yet"
    assert window.act_sync.toolTip().startswith("auto: ")

    window.act_sync.trigger()
    qtbot.waitUntil(lambda: _synced(data_dir) == [], timeout=10_000)
    qtbot.waitUntil(lambda: window.act_sync.text() == "Keep in sync", timeout=10_000)


def test_review_folder_lists_pending_changes_and_the_button_applies_them(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    import os

    from tests.knowledge.helpers import drain

    create_base(data_dir, "inbox")
    folder = write_tree(tmp_path / "watched", {"a.txt": "alpha"})
    quire = open_quire(data_dir)
    try:
        folder_id = add_items(quire, "inbox", [PathInput(folder)]).created[0]
        drain(quire)
        root = sync.enable_sync(quire, "inbox", folder_id, mode="review")
        drain(quire)
        (folder / "b.txt").write_text("beta arrives")
        st = os.stat(folder / "b.txt")
        os.utime(folder / "b.txt", (st.st_atime - 10, st.st_mtime - 10))
        sync.reconcile(quire, root.id, quire.db.write)  # a review scan: listed, not applied
    finally:
        quire.close()
    window = open_window()
    qtbot.waitUntil(lambda: len(tree_items(window.model)) == 1, timeout=10_000)
    select_ids(window, [folder_id])
    window.sync_actions.show_states()
    qtbot.waitUntil(lambda: window.act_sync_apply.isEnabled(), timeout=10_000)
    assert window.act_sync_apply.toolTip() == "added b.txt"
    assert "1 change(s) pending review" in window.act_sync.toolTip()

    window.act_sync_apply.trigger()
    qtbot.waitUntil(lambda: not window.act_sync_apply.isEnabled(), timeout=10_000)
    check = open_quire(data_dir)
    try:
        names = {i.name for i in list_items(check, "inbox", flat=True)}
    finally:
        check.close()
    assert "b.txt" in names
