"""The bases sidebar, the lazy item tree, drops onto bases that cannot take them, and the action guards.

No worker runs here: items stay where the operations put them, so every state is deterministic.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QModelIndex, QPersistentModelIndex
from pytestqt.qtbot import QtBot

from app.item_model import PAGE
from knowledge.compose import open_quire
from knowledge.library import bases, tree
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import NoteInput
from tests.app.conftest import (
    WindowFactory,
    create_base,
    drop_paths,
    load_all,
    row_text,
    select_ids,
    tree_items,
)
from tests.support.files import write_tree
from tests.support.prompters import ScriptedPrompter


def test_bases_sidebar_creates_renames_locks_and_deletes_after_confirmation(
    qtbot: QtBot, open_window: WindowFactory, prompter: ScriptedPrompter
) -> None:
    window = open_window()
    panel = window.bases_panel
    assert window.ctx.bases == []

    prompter.texts = ["Research"]
    panel.create_base()
    qtbot.waitUntil(lambda: window.ctx.base is not None and window.ctx.base.name == "Research", timeout=30_000)
    assert panel.list.count() == 1

    prompter.texts = ["Reading"]
    panel.rename_base()
    qtbot.waitUntil(lambda: window.ctx.base is not None and window.ctx.base.name == "Reading", timeout=10_000)
    assert panel.list.item(0).text() == "Reading"

    panel.toggle_lock()
    qtbot.waitUntil(lambda: window.ctx.base is not None and window.ctx.base.locked, timeout=10_000)
    assert panel.lock_button.text() == "Unlock"
    assert "locked" in panel.list.item(0).text()
    assert not window.act_add_files.isEnabled()
    assert "locked" in window.act_add_files.toolTip()
    panel.toggle_lock()
    qtbot.waitUntil(lambda: window.ctx.base is not None and not window.ctx.base.locked, timeout=10_000)
    assert window.act_add_files.isEnabled()

    prompter.confirm_answers = [False]
    panel.delete_base()
    assert "Delete the knowledge base 'Reading'" in prompter.asked[-1]
    assert window.ctx.base is not None  # declined: nothing happened

    panel.toggle_lock()  # a locked base is deleted too: the lock guards its content, not its removal
    qtbot.waitUntil(lambda: window.ctx.base is not None and window.ctx.base.locked, timeout=10_000)
    assert panel.delete_button.isEnabled()
    prompter.confirm_answers = [True]
    panel.delete_base()
    qtbot.waitUntil(lambda: window.ctx.bases == [] and window.ctx.base is None, timeout=10_000)
    assert panel.list.count() == 0


def test_the_tree_pages_lazily_and_updates_rows_in_place(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path
) -> None:
    base = create_base(data_dir)
    quire = open_quire(data_dir)
    try:
        changes = operations.add_items(quire, base.id, [NoteInput(f"body {n}", f"note {n:03}") for n in range(450)])
        window = open_window()
        model = window.model
        resets: list[int] = []
        model.modelReset.connect(lambda: resets.append(1))

        qtbot.waitUntil(lambda: model.rowCount() >= PAGE, timeout=10_000)
        assert model.rowCount() == PAGE and model.can_fetch_page(QModelIndex())  # a page, not everything
        window.tree.scrollToBottom()  # the last row in sight: the view asks for the next page
        qtbot.waitUntil(lambda: model.rowCount() == 2 * PAGE, timeout=10_000)
        load_all(qtbot, model)
        assert model.rowCount() == 450
        assert [model.index(r, 0).data() for r in (0, 1, 449)] == ["note 000", "note 001", "note 449"]

        # another process moves a row on: the same row updates in place
        target = changes.created[7]
        persistent = QPersistentModelIndex(model.index_for_id(target))
        with quire.db.write() as conn:
            tree.set_status(conn, [target], "embedding")
        qtbot.waitUntil(lambda: row_text(model, target)[1] == "embedding", timeout=10_000)
        assert persistent.isValid() and persistent.row() == 7

        # a row created elsewhere appears at its sorted place; a deleted one goes
        operations.add_items(quire, base.id, [NoteInput("late", "note 007b")])
        operations.delete_items(quire, base.id, [changes.created[3]])
        qtbot.waitUntil(lambda: model.rowCount() == 450 and model.index(7, 0).data() == "note 007b", timeout=10_000)
        assert model.index(3, 0).data() == "note 004"
        assert resets == []  # never a full reload
    finally:
        quire.close()


def test_dropping_onto_a_locked_or_failed_base_says_why(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    base = create_base(data_dir, "archive")
    folder = write_tree(tmp_path / "drop", {"a.md": "# A\n\nalpha"})
    quire = open_quire(data_dir)
    try:
        bases.set_locked(quire.db, base.id, True)
        window = open_window()
        drop_paths(window.tree.viewport(), [folder])
        assert "Cannot add 1 item: Knowledge base 'archive' is locked (read-only)" in window.message_bar.text()
        assert "locked" in window.drop_hint.text()

        bases.set_locked(quire.db, base.id, False)
        bases.mark_base_failed(quire.db, base.id, "its index could not be opened")
        qtbot.waitUntil(lambda: window.ctx.base is not None and window.ctx.base.status == "failed", timeout=10_000)
        drop_paths(window.tree.viewport(), [folder])
        assert "'archive' is failed: its index could not be opened; only delete is possible" in (
            window.message_bar.text()
        )
        assert operations.list_items(quire, base.id, flat=True) == []
    finally:
        quire.close()


def test_reindex_and_chunks_are_disabled_where_guards_refuse_and_stale_calls_are_refused(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    base = create_base(data_dir, "guards")
    folder = write_tree(tmp_path / "files", {"a.md": "# A\n\nalpha", "c.bin": b"\x00\x01"})
    window = open_window()  # no worker: a.md stays active, c.bin is skipped at once (unsupported)
    window.add_paths([folder / "a.md", folder / "c.bin"])
    qtbot.waitUntil(lambda: len(tree_items(window.model)) == 2, timeout=10_000)
    qtbot.waitUntil(lambda: {i.name: i.status for i in tree_items(window.model)}["c.bin"] == "skipped", timeout=10_000)
    items = {i.name: i for i in tree_items(window.model)}

    select_ids(window, [items["a.md"].id])
    assert not window.act_reindex.isEnabled()
    assert "'a.md' is processing" in window.act_reindex.toolTip()
    assert not window.act_chunks.isEnabled()
    assert window.act_delete.isEnabled()

    window.reindex_selected()  # a direct call: the service still guards, with a readable message
    qtbot.waitUntil(lambda: "cannot reindex while 'a.md' is processing" in window.message_bar.text(), timeout=10_000)
    viewer = window.open_chunk_viewer(base.id, items["a.md"].id, "a.md", -1)
    qtbot.waitUntil(lambda: viewer.loaded, timeout=10_000)
    assert "chunks can only be listed for a completed item; 'a.md' is processing" in viewer.header.text()
    viewer.close()

    select_ids(window, [items["c.bin"].id])
    assert window.act_reindex.isEnabled()  # skipped is terminal: reindex allowed (a later version may read it)
    assert not window.act_retry_failed.isEnabled()  # but it is not failed: nothing to retry
    assert not window.act_chunks.isEnabled()
    assert row_text(window.model, items["c.bin"].id)[3] == "unsupported file type .bin"

    # the base is locked by another process; before the poll notices, the action still looks enabled
    quire = open_quire(data_dir)
    try:
        bases.set_locked(quire.db, base.id, True)
    finally:
        quire.close()
    assert window.act_reindex.isEnabled()
    window.act_reindex.trigger()
    qtbot.waitUntil(lambda: "'guards' is locked (read-only)" in window.message_bar.text(), timeout=10_000)
    qtbot.waitUntil(lambda: not window.act_reindex.isEnabled(), timeout=10_000)  # and the poll catches up


def test_adding_a_note_and_deleting_it_after_confirmation(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, prompter: ScriptedPrompter
) -> None:
    create_base(data_dir, "notes")
    window = open_window()
    prompter.notes = [("Shopping", "eggs, flour, butter")]
    window.add_note()
    qtbot.waitUntil(lambda: [i.name for i in tree_items(window.model)] == ["Shopping"], timeout=10_000)
    note = tree_items(window.model)[0]
    assert note.type == "note"
    select_ids(window, [note.id])
    prompter.confirm_answers = [True]
    window.delete_selected()
    qtbot.waitUntil(lambda: tree_items(window.model) == [], timeout=10_000)
    assert "'Shopping'" in prompter.asked[-1]


def test_a_missing_path_is_refused_and_a_second_add_says_already_present(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path
) -> None:
    """Adding through the window is the operation the CLI calls: a path that is gone is refused with
    nothing created; adding a file twice makes one item and says so."""
    create_base(data_dir, "same")
    window = open_window()
    window.add_paths([data_dir.parent / "nowhere.txt"])
    qtbot.waitUntil(lambda: "no such file or folder" in window.message_bar.text(), timeout=10_000)
    assert tree_items(window.model) == []
    real = data_dir.parent / "real.txt"
    real.write_text("Real text about glaciers.")
    window.add_paths([real])
    qtbot.waitUntil(lambda: len(tree_items(window.model)) == 1, timeout=10_000)
    window.add_paths([real])
    qtbot.waitUntil(lambda: "1 already present" in window.statusBar().currentMessage(), timeout=10_000)
    assert len(tree_items(window.model)) == 1
