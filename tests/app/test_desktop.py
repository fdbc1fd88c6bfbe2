"""Issue 14 — the desktop app: menus and shortcuts drive the buttons' operations, Preferences round-trip
with ``quire config``, pause/resume from the window, first run and the sample base, search as you type
(a superseded query never shows), and a PDF hit opens at its page. Real database, real worker where
indexing matters."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.accessibility import unnamed_controls
from app.first_run import sample_files
from app.open_at import OpenRequest, open_request
from app.resources import DARK_COLOURS, style_sheet
from app.search_results import RELEVANCE, SOURCE
from app.status_bar import JobsView
from app.window import MainWindow
from knowledge import preferences
from knowledge.compose import open_quire
from knowledge.library import Location
from tests.app.conftest import WORKER_TIMEOUT_MS, WindowFactory, create_base, load_all, select_ids, tree_items
from tests.conftest import quire_cli
from tests.sources.builders import make_pdf
from tests.support.prompters import ScriptedPrompter


def activate(qtbot: QtBot, window: MainWindow) -> None:
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5_000)


def menu_actions(window: MainWindow) -> set[int]:
    found: set[int] = set()
    for menu_action in window.menuBar().actions():
        menu = menu_action.menu()
        if menu is not None:
            found.update(id(a) for a in menu.actions())  # type: ignore[union-attr]
    return found


def settled(qtbot: QtBot, window: MainWindow) -> bool:
    load_all(qtbot, window.model)
    found = tree_items(window.model)
    return bool(found) and all(i.status in ("completed", "failed") for i in found)


def test_the_menus_hold_the_buttons_own_actions_and_the_shortcuts_drive_them(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, prompter: ScriptedPrompter
) -> None:
    create_base(data_dir, "notes")
    window = open_window()
    in_menus = menu_actions(window)
    for act in window.toolbar.actions():
        if not act.isSeparator():
            assert id(act) in in_menus, f"{act.text()!r} is a button but not in a menu"
    assert [m.text() for m in window.menuBar().actions()] == ["&File", "&Edit", "&View", "&Tools", "&Help"]
    assert window.act_reindex.shortcut().toString() == "F5"
    activate(qtbot, window)

    # File → Add note (its toolbar button's action) adds the note; the row appears
    prompter.notes = [("Plums", "Prune plum trees in summer, not winter.")]
    with qtbot.waitSignal(window.ctx.changes_made, timeout=10_000):
        window.act_add_note.trigger()
    qtbot.waitUntil(lambda: any(i.name.startswith("Plums") for i in tree_items(window.model)), timeout=10_000)
    note = next(i for i in tree_items(window.model) if i.name.startswith("Plums"))

    # Ctrl+F focuses the search field on the Search tab
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.currentWidget() is window.search_panel
    qtbot.waitUntil(lambda: window.search_panel.query.hasFocus(), timeout=5_000)

    # Delete asks first, then deletes the selection
    window.tabs.setCurrentIndex(0)
    select_ids(window, [note.id])
    window._update_actions()
    prompter.confirm_answers = [True]
    with qtbot.waitSignal(window.ctx.changes_made, timeout=10_000) as deleted:
        qtbot.keyClick(window.tree, Qt.Key.Key_Delete)
    assert any("Delete 'Plums" in q for q in prompter.asked)
    assert deleted.args[0].statuses.get(note.id) == "deleting"

    # Ctrl+, opens Preferences
    qtbot.keyClick(window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    dialog = window.menus.preferences_dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.waitUntil(lambda: dialog.is_loaded and dialog.text_of("worker.nice") == "10", timeout=10_000)
    dialog.close()

    # Help → About lists the versions and the data directory
    about = window.menus.about_text()
    for name in ("Quire", "Python", "Qt", "SQLite", "sqlite-vec"):
        assert f"<td>{name}</td>" in about
    assert str(data_dir) in about

    # Ctrl+Q quits through the normal shutdown
    activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window._closed and not window.isVisible(), timeout=20_000)
    assert window.ctx.quire is None


def test_preferences_set_in_the_dialog_are_what_quire_config_reads_and_the_other_way_round(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path
) -> None:
    window = open_window()
    dialog = window.menus.open_preferences()
    qtbot.waitUntil(lambda: dialog.is_loaded, timeout=10_000)
    assert dialog.text_of("worker.threads") == "1"
    dialog.set_text("worker.threads", "4")
    dialog.set_text("ingest.ignore_patterns", "*.tmp\nbuild/")
    with qtbot.waitSignal(dialog.saved, timeout=10_000):
        dialog.buttons.button(dialog.buttons.StandardButton.Save).click()
    got = quire_cli("config", "get", "worker.threads", data_dir=data_dir, timeout=60)
    assert got.returncode == 0 and got.stdout.strip() == "4"
    patterns = quire_cli("config", "get", "ingest.ignore_patterns", data_dir=data_dir, timeout=60)
    assert patterns.stdout.split() == ["*.tmp", "build/"]

    # the CLI changes a value: the dialog shows it the next time it opens
    assert quire_cli("config", "set", "ocr.language", "deu", data_dir=data_dir, timeout=60).returncode == 0
    dialog = window.menus.open_preferences()
    qtbot.waitUntil(lambda: dialog.is_loaded, timeout=10_000)
    assert dialog.text_of("ocr.language") == "deu"
    assert dialog.text_of("worker.threads") == "4"
    assert dialog.agent_access.text().startswith("off")

    # a value the module refuses keeps the dialog open with its message, and stores nothing
    dialog.set_text("ocr.language", "English!")
    dialog.apply()
    qtbot.waitUntil(lambda: "Tesseract language codes" in dialog.error.text(), timeout=10_000)
    assert dialog.isVisible()
    quire = open_quire(data_dir)
    try:
        assert preferences.get(quire.db, "ocr.language") == "deu"
    finally:
        quire.close()


def test_pause_from_the_window_is_the_persisted_flag_and_the_status_bar_says_what_waits(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, prompter: ScriptedPrompter
) -> None:
    create_base(data_dir, "notes")
    window = open_window()  # no worker: the added notes stay waiting
    prompter.notes = [("One", "first note"), ("Two", "second note")]
    for _ in range(2):
        with qtbot.waitSignal(window.ctx.changes_made, timeout=10_000):
            window.act_add_note.trigger()
    assert window.status.pause_button.defaultAction() is window.menus.act_pause

    window.status.pause_button.click()
    quire = open_quire(data_dir)
    try:
        qtbot.waitUntil(lambda: preferences.is_paused(quire.db), timeout=10_000)
        qtbot.waitUntil(lambda: window.status.summary.text() == "Paused — 2 files waiting", timeout=10_000)
        assert window.menus.act_pause.text() == "Resume indexing"

        window.menus.act_pause.trigger()
        qtbot.waitUntil(lambda: not preferences.is_paused(quire.db), timeout=10_000)
        qtbot.waitUntil(lambda: window.status.summary.text().startswith("0/2 files"), timeout=10_000)
    finally:
        quire.close()

    # the summary opens the jobs view: the two index jobs are in flight
    window.status.summary.click()
    view = window.findChild(JobsView, "jobsView")
    assert view is not None
    qtbot.waitUntil(lambda: view.loaded, timeout=10_000)
    lines = [view.in_flight.item(i).text() for i in range(view.in_flight.count())]
    assert sum("pending" in line for line in lines) == 2


def test_an_empty_window_explains_itself_and_offers_a_sample_base(qtbot: QtBot, open_window: WindowFactory) -> None:
    window = open_window()
    assert window.items_stack.currentWidget() is window.first_run
    with qtbot.waitSignal(window.first_run.sample_created, timeout=10_000) as created:
        window.first_run.sample_button.click()
    assert created.args[0].name == "Sample"
    assert window.items_stack.currentWidget() is not window.first_run
    load_all(qtbot, window.model)
    assert {i.name for i in tree_items(window.model)} == {p.name for p in sample_files()}


def test_typing_searches_a_superseded_query_never_shows_and_a_pdf_hit_opens_at_its_page(
    qtbot: QtBot, open_window: WindowFactory, tmp_path: Path, prompter: ScriptedPrompter
) -> None:
    window = open_window(start_worker=True)
    with qtbot.waitSignal(window.first_run.sample_created, timeout=10_000):
        window.menus.act_sample.trigger()  # File → Create sample base: the first-run button's operation
    filler = [f"Orchard note {n}: pruning, grafting and mulching fruit trees along the south wall." for n in range(40)]
    pages = [filler, filler, [*filler[:20], "Quince jelly needs pectin and patience.", *filler[20:]]]  # pages > a chunk
    pdf = tmp_path / "orchard.pdf"
    pdf.write_bytes(make_pdf(pages))
    window.add_paths([pdf])
    qtbot.waitUntil(lambda: settled(qtbot, window), timeout=WORKER_TIMEOUT_MS)
    panel = window.search_panel
    shown: list[str] = []
    panel.searched.connect(lambda _hits: shown.append(panel.status.text()))

    # typing alone searches (no button, no Enter)
    window.tabs.setCurrentWidget(panel)
    panel.mode.setCurrentText("keyword")
    qtbot.keyClicks(panel.query, "sourdough starter")
    qtbot.waitUntil(lambda: bool(shown), timeout=WORKER_TIMEOUT_MS)
    assert "sourdough starter" in shown[-1]
    assert panel.results.index(0, SOURCE).data() == "sourdough-starter.md"
    assert panel.results.index(0, RELEVANCE).data().startswith("#1 ")

    # the first query is slow (held in the search hook); the newer one's results are the only ones shown
    entered, release = threading.Event(), threading.Event()
    real = panel.search_fn

    def slow_for_tomatoes(*args: Any, **kwargs: Any) -> Any:
        if "tomato" in args[2]:
            entered.set()
            release.wait(60)
        return real(*args, **kwargs)

    panel.search_fn = slow_for_tomatoes
    shown.clear()
    panel.query.setText("tomato blossom")
    qtbot.waitUntil(entered.is_set, timeout=10_000)
    panel.query.setText("quince jelly")
    qtbot.waitUntil(lambda: panel.debounce.isActive() is False and panel._pending is not None, timeout=5_000)
    release.set()
    qtbot.waitUntil(lambda: bool(shown), timeout=WORKER_TIMEOUT_MS)
    # one search runs at a time: the held query's callback ran before the newer one started
    assert all("tomato" not in text for text in shown), shown
    assert "quince jelly" in shown[-1]

    # the PDF hit is on page 3: "Open at location" hands the viewer file:///…/orchard.pdf#page=3
    hit = panel.current_hit()
    assert hit is not None and hit.item_name == "orchard.pdf" and hit.page == 3
    panel.open_button.click()
    request = prompter.opened_at[-1]
    assert isinstance(request, OpenRequest)
    assert request.url == f"{pdf.resolve().as_uri()}#page=3"

    # F5 reindexes the selection (the toolbar's Reindex action)
    window.tabs.setCurrentIndex(0)
    doc = next(i for i in tree_items(window.model) if i.name == "orchard.pdf")
    select_ids(window, [doc.id])
    window._update_actions()
    activate(qtbot, window)
    with qtbot.waitSignal(window.ctx.changes_made, timeout=10_000) as reindexed:
        qtbot.keyClick(window, Qt.Key.Key_F5)
    assert reindexed.args[0].job_ids  # the reindex job was queued
    qtbot.waitUntil(lambda: window.model.item_for_id(doc.id).generation > doc.generation, timeout=WORKER_TIMEOUT_MS)


def test_every_control_has_an_accessible_name(qtbot: QtBot, open_window: WindowFactory) -> None:
    window = open_window()
    assert unnamed_controls(window) == []
    dialog = window.menus.open_preferences()
    assert unnamed_controls(dialog) == []
    assert window.search_panel.query.accessibleName() == "Search query"


def test_the_style_sheet_follows_a_dark_palette() -> None:
    light, dark = style_sheet(False), style_sheet(True)
    assert "#ffffff" in light and "#ffffff" not in dark
    assert DARK_COLOURS["#ffffff"] in dark


def test_open_requests_for_text_lines_follow_the_editor_and_fall_back_to_the_clipboard(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    at = Location(line_start=42, line_end=50)
    assert open_request(path, at, {"EDITOR": "vim"}).argv == ("vim", "+42", "--", str(path))
    assert open_request(path, at, {"VISUAL": "code --wait"}).argv == ("code", "--wait", "-g", "--", f"{path}:42")
    assert open_request(path, at, {"EDITOR": "kate"}).argv == ("kate", "--line", "42", "--", str(path))
    assert open_request(path, at, {"EDITOR": "subl"}).argv == ("subl", "--", f"{path}:42")
    unknown = open_request(path, at, {"EDITOR": "someeditor"})
    assert unknown.argv == () and unknown.url == path.resolve().as_uri() and unknown.clipboard == f"{path}:42"
    pdf = open_request(tmp_path / "a.pdf", Location(page=7), {})
    assert pdf.url is not None and pdf.url.endswith("a.pdf#page=7")
