"""With the real worker process the window starts: drop a folder, watch rows settle, read chunks, search.

The worker is ``python -m app.cli worker`` with the real embedding model; the window sees its
work only by polling, as in the app.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from PySide6.QtCore import QModelIndex, Qt
from pytestqt.qtbot import QtBot

from app.chunk_viewer import ChunkViewer
from app.document_viewer import DocumentViewer
from app.item_rows import STATUS, StatusRole
from app.open_at import OpenRequest
from app.search_results import HTML_ROLE, LOCATION, RELEVANCE, SNIPPET, SOURCE
from knowledge.store.schema import ACTIVE_STATUSES
from tests.app.conftest import (
    WORKER_TIMEOUT_MS,
    WindowFactory,
    copy_sample,
    create_base,
    drop_paths,
    load_all,
    row_text,
    select_ids,
    tree_items,
)
from tests.sources.builders import make_pdf
from tests.support.files import write_tree
from tests.support.prompters import ScriptedPrompter


def _settled(qtbot: QtBot, window: object) -> bool:
    model = window.model  # type: ignore[attr-defined]
    load_all(qtbot, model)
    found = tree_items(model)
    return bool(found) and all(i.status in ("completed", "failed", "skipped") for i in found)


def test_a_dropped_folder_is_added_and_its_rows_move_to_completed_or_failed_with_reasons(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    create_base(data_dir, "inbox")
    folder = write_tree(
        tmp_path / "mixed",
        {
            "guide.md": "# Guide\n\nHow to prune apple trees in late winter, before the buds break.\n",
            "notes/todo.txt": "Call the plumber about the leaking boiler valve on Tuesday.\n",
            "data.bin": b"\x00\x01\x02binary",
            "scan.pdf": b"%PDF-1.4 this is not really a pdf",
        },
    )
    window = open_window(start_worker=True)
    seen: dict[int, list[str]] = defaultdict(list)

    def record(first: QModelIndex, _last: QModelIndex, *_roles: object) -> None:
        item = window.model.item_at(first)
        if item is not None and (not seen[item.id] or seen[item.id][-1] != item.status):
            seen[item.id].append(item.status)

    def record_inserted(parent: QModelIndex, start: int, end: int) -> None:
        for row in range(start, end + 1):
            record(window.model.index(row, STATUS, parent), QModelIndex())

    window.model.dataChanged.connect(record)
    window.model.rowsInserted.connect(record_inserted)

    drop_paths(window.tree.viewport(), [folder])
    qtbot.waitUntil(lambda: len(tree_items(window.model)) == 1, timeout=10_000)
    root = tree_items(window.model)[0]
    assert root.name == "mixed" and root.status in ACTIVE_STATUSES
    window.tree.expand(window.model.index_for_id(root.id))

    qtbot.waitUntil(lambda: _settled(qtbot, window), timeout=WORKER_TIMEOUT_MS)
    rows = {i.name: i for i in tree_items(window.model)}
    assert {n: i.status for n, i in rows.items()} == {
        "mixed": "failed",  # a container with failed children is failed
        "notes": "completed",
        "guide.md": "completed",
        "todo.txt": "completed",
        "data.bin": "skipped",  # not read by design: quiet, never a failure (issue 12)
        "scan.pdf": "failed",  # damaged: what went wrong stays failed
    }
    assert row_text(window.model, rows["data.bin"].id)[1:] == ["skipped", "100%", "unsupported file type .bin"]
    assert row_text(window.model, rows["scan.pdf"].id)[3]  # the parser's reason, shown in the row
    assert row_text(window.model, rows["mixed"].id)[3] == "4 items · 2 indexed · 1 skipped · 1 failed"
    grey = window.model.index_for_id(rows["data.bin"].id, STATUS).data(Qt.ItemDataRole.ForegroundRole)
    red = window.model.index_for_id(rows["scan.pdf"].id, STATUS).data(Qt.ItemDataRole.ForegroundRole)
    assert grey.color().name() == "#9e9e9e" and red.color().name() == "#c62828"
    assert row_text(window.model, rows["guide.md"].id)[3] == "1 chunk"
    for name in ("guide.md", "todo.txt"):  # each was seen active before it completed
        history = seen[rows[name].id]
        assert history[-1] == "completed" and any(s in ACTIVE_STATUSES for s in history[:-1]), history
    assert window.model.index_for_id(rows["data.bin"].id, STATUS).data(StatusRole) == "skipped"

    # "Hide skipped": the rows are paged in again without it, and come back when it is off
    window.hide_skipped.setChecked(True)
    window.tree.expand(window.model.index_for_id(root.id))
    qtbot.waitUntil(lambda: _settled(qtbot, window) and len(tree_items(window.model)) == 5, timeout=10_000)
    assert "data.bin" not in {i.name for i in tree_items(window.model)}
    window.hide_skipped.setChecked(False)
    qtbot.waitUntil(lambda: _settled(qtbot, window) and len(tree_items(window.model)) == 6, timeout=10_000)

    # "Retry failed" on the folder: the user repaired the PDF; only it is read again, and the folder turns green
    (folder / "scan.pdf").write_bytes(make_pdf([["A repaired scan about pruning"]]))
    generations = {i.id: i.generation for i in tree_items(window.model)}
    select_ids(window, [root.id])
    assert window.act_retry_failed.isEnabled()
    window.retry_failed()
    qtbot.waitUntil(
        lambda: _settled(qtbot, window) and _status(window, root.id) == "completed", timeout=WORKER_TIMEOUT_MS
    )
    moved = {i.name for i in tree_items(window.model) if i.generation != generations[i.id]}
    assert moved == {"scan.pdf"}
    assert not window.act_retry_failed.isEnabled()  # nothing selected has failed any more

    # chunk viewer for a completed item
    select_ids(window, [rows["guide.md"].id])
    assert window.act_chunks.isEnabled() and window.act_reindex.isEnabled()
    window.view_chunks()
    viewer = window.findChild(ChunkViewer, "chunkViewer")
    assert viewer is not None
    qtbot.waitUntil(lambda: viewer.loaded, timeout=10_000)
    assert viewer.list.count() == 1 and "lines 1-3" in viewer.list.item(0).text()
    assert "prune apple trees" in viewer.text.toPlainText()
    viewer.close()

    # reindex runs through the worker again (fast: same content) and the row comes back completed, reset once
    before = window.model.item_for_id(rows["guide.md"].id)
    assert before is not None
    window.reindex_selected()
    qtbot.waitUntil(lambda: _generation(window, before.id) > before.generation, timeout=WORKER_TIMEOUT_MS)
    qtbot.waitUntil(lambda: window.model.item_for_id(before.id).status == "completed", timeout=WORKER_TIMEOUT_MS)


def _status(window: object, item_id: int) -> str | None:
    item = window.model.item_for_id(item_id)  # type: ignore[attr-defined]
    return None if item is None else str(item.status)


def _generation(window: object, item_id: int) -> int:
    item = window.model.item_for_id(item_id)  # type: ignore[attr-defined]
    return -1 if item is None else int(item.generation)


def test_search_finds_the_expected_document_and_a_deleted_item_vanishes_at_once(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path, prompter: ScriptedPrompter
) -> None:
    base = create_base(data_dir, "sample")
    sample = copy_sample(tmp_path / "sample")
    window = open_window(start_worker=True)
    window.add_paths(sorted(sample.iterdir()))
    qtbot.waitUntil(lambda: _settled(qtbot, window), timeout=WORKER_TIMEOUT_MS)
    assert {i.status for i in tree_items(window.model)} == {"completed"}

    panel = window.search_panel
    panel.query.setText("why do my tomatoes get a black patch at the bottom")
    panel.mode.setCurrentText("hybrid")
    with qtbot.waitSignal(panel.searched, timeout=WORKER_TIMEOUT_MS) as blocker:
        panel.run_search()
    hits = blocker.args[0]
    assert hits and Path(hits[0].source_path).name == "tomato-growing.md"
    top = panel.results.index(0, 0)
    assert panel.results.index(0, SOURCE).data() == "tomato-growing.md"
    assert panel.results.index(0, LOCATION).data().startswith("lines ")
    assert panel.results.index(0, RELEVANCE).data().startswith("#1 ")  # a rank and a bar, not a raw score
    assert "<b " in panel.results.index(0, SNIPPET).data(HTML_ROLE)  # highlighted query words
    assert panel.current_hit() is not None and panel.current_hit().item_id == hits[0].item_id
    assert top.isValid()

    panel.open_source()
    opened = prompter.opened_at[0]
    assert isinstance(opened, OpenRequest) and opened.path == Path(hits[0].source_path)
    panel.show_in_document()
    shown = window.findChild(DocumentViewer, "documentViewer")
    assert shown is not None
    qtbot.waitUntil(lambda: shown.loaded, timeout=10_000)
    assert shown.passage() is not None and shown.passage().chunk_id == hits[0].chunk_id  # type: ignore[union-attr]
    shown.close()

    # the original is gone: "Open source" opens the base's own copy, under the file's name
    Path(hits[0].source_path).unlink()
    panel.open_source()
    qtbot.waitUntil(lambda: len(prompter.opened_at) == 2, timeout=10_000)
    copy = prompter.opened_at[1].path  # type: ignore[attr-defined]
    assert copy.name == "tomato-growing.md" and copy.is_file()
    assert "Blossom end rot" in copy.read_text()

    # delete the document: its hits leave the list as soon as the delete returns
    tomato = next(i for i in tree_items(window.model) if i.name == "tomato-growing.md")
    select_ids(window, [tomato.id])
    prompter.confirm_answers = [True]
    with qtbot.waitSignal(window.ctx.changes_made, timeout=10_000):
        window.delete_selected()
    assert all(h.item_id != tomato.id for h in panel.results.hits)
    # the tree drops the row from the same Changes (its slot may run just after this signal's others)
    qtbot.waitUntil(lambda: window.model.index_for_id(tomato.id) == QModelIndex(), timeout=5_000)

    with qtbot.waitSignal(panel.searched, timeout=WORKER_TIMEOUT_MS) as again:
        panel.run_search()
    assert all(h.item_id != tomato.id for h in again.args[0])
    assert base.id == window.ctx.base.id  # type: ignore[union-attr]
