"""What the main window's parts (``app.menus``, ``app.sync_actions``, ``app.connect_dialog``) use of the window:
:class:`WindowFace`. They take the window as a ``WindowFace`` instead of importing ``app.window``, which
imports them to build itself — so the window and its parts import each other without a cycle.

At run time ``WindowFace`` is ``QMainWindow`` itself, and ``app.window.MainWindow`` derives from it exactly
as it did from ``QMainWindow``; for the type checker it is ``QMainWindow`` with these members declared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtWidgets import QMainWindow

if TYPE_CHECKING:
    from PySide6.QtGui import QAction, QKeySequence
    from PySide6.QtWidgets import QTabWidget

    from app.backup_menu import BackupMenu
    from app.bases_panel import BasesPanel
    from app.context import AppContext
    from app.first_run import FirstRunPage
    from app.poller import Poller
    from app.search_panel import SearchPanel
    from app.status_bar import StatusBar
    from app.team_store import TeamStore
    from knowledge.library import Item

    class WindowFace(QMainWindow):
        """The main window as its parts see it (``app.window.MainWindow`` is the one kind there is)."""

        store: TeamStore | None
        ctx: AppContext
        poller: Poller
        status: StatusBar
        tabs: QTabWidget
        bases_panel: BasesPanel
        first_run: FirstRunPage
        search_panel: SearchPanel
        backup_menu: BackupMenu
        hide_skipped: QAction
        act_add_files: QAction
        act_add_folder: QAction
        act_add_note: QAction
        act_delete: QAction
        act_reindex: QAction
        act_retry_failed: QAction
        act_chunks: QAction
        act_sync: QAction
        act_sync_apply: QAction

        def action(self, text: str, slot: object, shortcut: QKeySequence.StandardKey | None = None) -> QAction: ...

        def selected_items(self) -> list[Item]: ...

        def sibling(self, store: TeamStore | None) -> WindowFace: ...

        def start(self) -> None: ...

        def shutdown(self) -> None: ...

else:
    WindowFace = QMainWindow
