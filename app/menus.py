"""The menu bar (File / Edit / View / Tools / Help), its shortcuts, and the About dialog.

Every menu entry is the very ``QAction`` its button uses (the Items toolbar's ``act_add_files`` …, the
status bar's pause button), so a menu entry, its shortcut and its button always do the same thing.
Shortcuts follow the platform (``QKeySequence.StandardKey``): Ctrl/Cmd+F finds (focuses the search),
Ctrl/Cmd+, opens Preferences, F5 reindexes the selection, Delete deletes (after a confirmation),
Ctrl/Cmd+Q quits through the window's normal close and shutdown.

Threading contract: main thread; pause/resume is written in an ``Op``.
"""

from __future__ import annotations

import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import qVersion
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMessageBox

from app.connect_dialog import ConnectDialog, open_connect_dialog, reopen
from app.ops import Op
from app.preferences import PreferencesDialog
from knowledge import preferences

if TYPE_CHECKING:
    from app.window_face import WindowFace


def shortcut_for(standard: QKeySequence.StandardKey, fallback: str) -> QKeySequence:
    """The platform's key for a standard action, or ``fallback`` where the platform defines none."""
    keys = QKeySequence.keyBindings(standard)
    return keys[0] if keys else QKeySequence(fallback)


def versions() -> dict[str, str]:
    """What the About dialog lists (quire, Python, Qt, SQLite, sqlite-vec)."""
    import apsw

    return {
        "Quire": _package_version("quire"),
        "Python": platform.python_version(),
        "Qt": f"{qVersion()} (PySide6 {pyside_version})",
        "SQLite": apsw.sqlite_lib_version(),
        "sqlite-vec": _package_version("sqlite-vec"),
    }


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


class Menus:
    """Builds the window's menu bar and owns the actions that are not item actions."""

    def __init__(self, window: WindowFace) -> None:
        self.window = window
        w = window
        self.act_new_base = w.action("New knowledge base…", w.bases_panel.create_base)
        self.act_sample = w.action("Create sample base", w.first_run.create_sample)
        self.act_connect = w.action("Connect to a team store…", self.open_connect)
        self.act_use_local = w.action("Use this machine's data", self.use_local)
        self.act_use_local.setVisible(w.store is not None)  # a window on a team store can go back
        self.act_preferences = w.action("Preferences…", self.open_preferences)
        self.act_preferences.setShortcut(shortcut_for(QKeySequence.StandardKey.Preferences, "Ctrl+,"))
        self.act_preferences.setMenuRole(QAction.MenuRole.PreferencesRole)
        self.act_quit = w.action("Quit", w.close)
        self.act_quit.setShortcut(shortcut_for(QKeySequence.StandardKey.Quit, "Ctrl+Q"))
        self.act_quit.setMenuRole(QAction.MenuRole.QuitRole)
        self.act_find = w.action("Find…", self.focus_search)
        self.act_find.setShortcut(shortcut_for(QKeySequence.StandardKey.Find, "Ctrl+F"))
        w.act_reindex.setShortcut(shortcut_for(QKeySequence.StandardKey.Refresh, "F5"))
        self.act_pause = w.action("Pause indexing", self.toggle_pause)
        self.act_pause.setCheckable(True)
        self.act_jobs = w.action("Jobs…", lambda: w.status.open_jobs_view())
        self.act_about = w.action("About Quire", self.show_about)
        self.act_about.setMenuRole(QAction.MenuRole.AboutRole)
        self.preferences_dialog: PreferencesDialog | None = None

    def build(self) -> None:
        w = self.window
        bar = w.menuBar()
        file_menu = bar.addMenu("&File")
        for act in (self.act_new_base, self.act_sample, None, w.act_add_files, w.act_add_folder, w.act_add_note):
            file_menu.addSeparator() if act is None else file_menu.addAction(act)
        file_menu.addSeparator()
        file_menu.addAction(w.backup_menu.backup_action)
        file_menu.addAction(w.backup_menu.restore_action)
        file_menu.addSeparator()
        file_menu.addAction(self.act_connect)
        file_menu.addAction(self.act_use_local)
        file_menu.addSeparator()
        if w.store is not None:  # they copy a data directory's SQLite file; a team store is backed up by pg_dump
            for act in (w.backup_menu.backup_action, w.backup_menu.restore_action):
                act.setEnabled(False)
                act.setToolTip("A team store is backed up on its server (pg_dump), not from this window.")
        file_menu.addAction(self.act_preferences)
        file_menu.addSeparator()
        file_menu.addAction(self.act_quit)
        edit = bar.addMenu("&Edit")
        edit.addAction(self.act_find)
        edit.addAction(w.act_delete)
        view = bar.addMenu("&View")
        for index in range(w.tabs.count()):
            view.addAction(self._tab_action(index))
        view.addSeparator()
        view.addAction(w.hide_skipped)
        view.addAction(w.act_chunks)
        view.addAction(self.act_jobs)
        tools = bar.addMenu("&Tools")
        tools.addAction(w.act_reindex)
        tools.addAction(w.act_retry_failed)
        tools.addSeparator()
        tools.addAction(w.act_sync)
        tools.addAction(w.act_sync_apply)
        tools.addSeparator()
        tools.addAction(self.act_pause)
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self.act_about)

    def _tab_action(self, index: int) -> QAction:
        tabs = self.window.tabs
        act = QAction(tabs.tabText(index), self.window)
        act.setShortcut(QKeySequence(f"Ctrl+{index + 1}"))
        act.triggered.connect(lambda: tabs.setCurrentIndex(index))
        return act

    # -- slots --------------------------------------------------------------------------------

    def focus_search(self) -> None:
        w = self.window
        w.tabs.setCurrentWidget(w.search_panel)
        w.search_panel.query.setFocus()
        w.search_panel.query.selectAll()

    def open_connect(self) -> ConnectDialog:
        return open_connect_dialog(self.window)

    def use_local(self) -> None:
        reopen(self.window, None)

    def open_preferences(self) -> PreferencesDialog:
        if self.preferences_dialog is None:
            self.preferences_dialog = PreferencesDialog(self.window.ctx, self.window)
        dialog = self.preferences_dialog
        dialog.error.setText("")
        dialog.show()
        dialog.raise_()
        dialog.load()
        return dialog

    def toggle_pause(self) -> None:
        """Pause or resume indexing (the flag the worker's claim loop reads; it survives restarts)."""
        quire, paused = self.window.ctx.quire, self.act_pause.isChecked()
        if quire is None:
            self.act_pause.setChecked(not paused)
            return
        Op(preferences.set_paused, quire.db, paused).bound_to(self.window).on_success(self._paused).on_failure(
            self.window.ctx.fail
        ).run()

    def _paused(self, paused: bool) -> None:
        self.show_paused(paused)
        self.window.ctx.info(
            "Indexing paused: running work finishes, nothing new starts." if paused else "Indexing resumed."
        )
        self.window.poller.poll_now()

    def show_paused(self, paused: bool) -> None:
        self.act_pause.setChecked(paused)
        self.act_pause.setText("Resume indexing" if paused else "Pause indexing")

    def about_text(self) -> str:
        rows = "".join(f"<tr><td>{name}</td><td>{value}</td></tr>" for name, value in versions().items())
        return (
            "<h3>Quire</h3><p>Local-first knowledge bases.</p>"
            f"<table>{rows}</table><p>Data directory: <code>{self.window.ctx.data_dir}</code></p>"
            f"<p>{sys.platform}</p>"
        )

    def show_about(self) -> QMessageBox:
        box = QMessageBox(QMessageBox.Icon.Information, "About Quire", self.about_text(), parent=self.window)
        box.setObjectName("aboutDialog")
        box.show()
        return box
