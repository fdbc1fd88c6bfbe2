"""Quire's main window: menu bar, bases sidebar, live item tree, search, folder runs, notices, status bar.

The menu bar and its shortcuts live in ``app.menus`` (they reuse this window's actions), the status bar
with progress, rate, ETA and pause in ``app.status_bar``, Preferences in ``app.preferences``, and the
page an empty window shows instead of empty panels in ``app.first_run``.

Start-up order (``start``): the window is shown first; an ``Op`` opens the data directory and runs
startup recovery; then the worker process starts, the poll timer starts, and — when recovery left items
parked as interrupted — a notice says how many and offers to reindex them. Neither torch nor the model
is imported on the way (FACTS.md #9): the first search loads the query encoder, in an ``Op``.

Live updates (STYLE.md #3, #4): every mutation's ``Changes`` go to the views at once
(``AppContext.changes_made``); everything the worker does is seen by polling (``app.poller``).

Threading contract: everything in this module runs on the Qt main thread; database reads and writes
happen in ``Op``s (``app.ops``), whose callbacks come back here.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QLabel,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app import item_rules, ops
from app.accessibility import name_controls
from app.agent_access import AgentAccessPage
from app.backup_menu import BackupMenu
from app.bases_panel import BasesPanel
from app.chunk_viewer import ChunkViewer
from app.context import AppContext, why_base_refuses_changes
from app.document_viewer import DocumentViewer
from app.first_run import FirstRunPage
from app.folder_runs_panel import FolderRunsPanel
from app.item_actions import ItemActions
from app.item_model import ItemTreeModel
from app.item_view import ItemTreeView
from app.menus import Menus
from app.notices import MessageBar
from app.ops import Op
from app.poller import Poller
from app.prompts import Prompter, QtPrompter
from app.proposals_panel import ProposalsPanel
from app.related_panel import RelatedDocuments
from app.resources import icon
from app.search_panel import SearchPanel
from app.startup import Parked, PollResult, ReindexOutcome, StartupResult, open_and_recover, reindex_parked
from app.status_bar import StatusBar
from app.sync_actions import SyncActions
from app.team_store import TeamStore
from app.unindexed_sources import UnindexedSources
from app.window_face import WindowFace
from app.worker_process import WorkerProcess
from knowledge.library import Base, Item
from knowledge.lifecycle import Changes
from knowledge.search import Hit, warm_search

log = logging.getLogger(__name__)


class MainWindow(ItemActions, WindowFace):
    """See the module docstring. ``started`` fires once start-up (open + recovery) has finished."""

    started = Signal(object)  # StartupResult

    def __init__(
        self,
        data_dir: Path,
        *,
        prompter: Prompter | None = None,
        start_worker: bool = True,
        poll_ms: int = 500,
        store: TeamStore | None = None,
    ) -> None:
        super().__init__()
        self.store = store  # a team store (app.team_store), else the data directory's own
        self.setWindowTitle(f"Quire — {store.shown if store else data_dir}")
        self.setWindowIcon(icon("quire"))
        self.ctx = AppContext(data_dir, prompter or QtPrompter(), self)
        ops.set_default_failure_handler(self.ctx.fail)
        self.start_worker = start_worker
        self.poll_ms = poll_ms
        self.worker = WorkerProcess(data_dir, self, store=store)
        self.model = ItemTreeModel(self)
        self._viewers: list[ChunkViewer | DocumentViewer] = []
        self._closed = False
        self._parked: dict[int, Parked] = {}
        self.startup_result: StartupResult | None = None
        self._build(poll_ms)
        self._connect()
        self._update_actions()

    # -- building -----------------------------------------------------------------------------

    def _build(self, poll_ms: int) -> None:
        self.message_bar = MessageBar("messageBar")
        self.recovery_notice = MessageBar("recoveryNotice")
        self.bases_panel = BasesPanel(self.ctx)
        self.tree = ItemTreeView()
        self.tree.setObjectName("itemTree")
        self.tree.setModel(self.model)
        self.tree.configure_columns()
        self.search_panel = SearchPanel(self.ctx)
        self.folder_runs_panel = self._make_folder_runs_panel()
        self.first_run = FirstRunPage(self.ctx)
        self.items_stack = QStackedWidget()
        self.items_stack.addWidget(self.first_run)
        self.items_stack.addWidget(self._items_page())
        self.tabs = QTabWidget()
        self.tabs.addTab(self.items_stack, "Items")
        self.tabs.addTab(self.search_panel, "Search")
        self.tabs.addTab(self.folder_runs_panel, "Folder runs")
        self.proposals_panel = ProposalsPanel(self.ctx)
        self.agent_access_page = AgentAccessPage(self.ctx)
        self.tabs.addTab(self.proposals_panel, "Proposals")
        self.tabs.addTab(self.agent_access_page, "Agent access")
        splitter = QSplitter()
        splitter.addWidget(self.bases_panel)
        splitter.addWidget(self.tabs)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([230, 970])
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.recovery_notice)
        layout.addWidget(self.message_bar)
        layout.addWidget(splitter, 1)
        self.setCentralWidget(central)
        self.backup_menu = BackupMenu(self, self.ctx)
        self.poller = Poller(self.ctx, self.model, poll_ms, self)
        self.polled = self.poller.polled
        self.menus = Menus(self)
        self.status = StatusBar(self, self.ctx, self.menus.act_pause)
        self.menus.build()
        self._name_controls()
        self.resize(1200, 760)

    def _name_controls(self) -> None:
        """Accessible names for screen readers on the controls this window owns (panels name their own)."""
        for widget, name in (
            (self.tree, "Items of the selected knowledge base"),
            (self.tabs, "Views"),
            (self.toolbar, "Item actions"),
            (self.drop_hint, "Drop hint"),
            (self.bases_panel, "Knowledge bases"),
            (self.message_bar, "Messages"),
            (self.recovery_notice, "Recovery notice"),
        ):
            widget.setAccessibleName(name)
        for panel in (self.bases_panel,):
            for button in (panel.new_button, panel.rename_button, panel.lock_button, panel.delete_button):
                button.setAccessibleName(button.toolTip())
            panel.list.setAccessibleName("Knowledge bases")
        name_controls(self)

    def _make_folder_runs_panel(self) -> FolderRunsPanel:
        return FolderRunsPanel(self.ctx)

    def _items_page(self) -> QWidget:
        self.toolbar = QToolBar("Items")
        self.act_add_files = self.action("Add files…", self.add_files, QKeySequence.StandardKey.Open)
        self.act_add_folder = self.action("Add folder…", self.add_folder)
        self.act_add_note = self.action("Add note…", self.add_note, QKeySequence.StandardKey.New)
        self.act_delete = self.action("Delete", self.delete_selected, QKeySequence.StandardKey.Delete)
        self.act_reindex = self.action("Reindex", self.reindex_selected)
        self.act_chunks = self.action("View chunks", self.view_chunks)
        self.act_retry_failed = self.action("Retry failed", self.retry_failed)
        self.sync_actions = SyncActions(self)
        self.related_documents = RelatedDocuments(self.ctx, self.tree, self.selected_items, self)  # context menu
        self.act_sync, self.act_sync_apply = self.sync_actions.act_toggle, self.sync_actions.act_apply
        for act in (self.act_add_files, self.act_add_folder, self.act_add_note):
            self.toolbar.addAction(act)
        self.toolbar.addSeparator()
        for act in (
            self.act_delete,
            self.act_reindex,
            self.act_retry_failed,
            self.act_chunks,
            self.act_sync,
            self.act_sync_apply,
        ):
            self.toolbar.addAction(act)
        self.make_item_menu(self.tree, [self.act_chunks, self.act_reindex, self.act_retry_failed, self.act_delete])
        self.toolbar.addSeparator()
        self.hide_skipped = QAction("Hide skipped", self)  # a toggle in the toolbar and the View menu
        self.hide_skipped.setCheckable(True)
        self.hide_skipped.setToolTip("Hide files Quire does not read by design (unsupported, ignored, empty, no text)")
        self.hide_skipped.toggled.connect(lambda on: self.model.set_hidden_statuses(("skipped",) if on else ()))
        self.toolbar.addAction(self.hide_skipped)
        self.unindexed = UnindexedSources(self.ctx)  # a run's failed and skipped files have no row in the tree
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.toolbar)
        self.drop_hint = QLabel("Drop files or folders here to add them to the selected base.")
        self.drop_hint.setObjectName("hint")
        layout.addWidget(self.drop_hint)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.unindexed)
        return page

    def action(self, text: str, slot: object, shortcut: QKeySequence.StandardKey | None = None) -> QAction:
        act = QAction(text, self)
        act.triggered.connect(slot)
        if shortcut is not None:
            act.setShortcut(shortcut)
        return act

    def sibling(self, store: TeamStore | None) -> MainWindow:
        """A new window on ``store`` (``None``: the data directory) as this one was made: its prompter, its worker
        (or none) and its poll interval (``app.connect_dialog.reopen`` puts it in this one's place)."""
        return MainWindow(
            self.ctx.data_dir,
            prompter=self.ctx.prompter,
            start_worker=self.start_worker,
            poll_ms=self.poll_ms,
            store=store,
        )

    def _connect(self) -> None:
        self.ctx.message.connect(self._show_message)
        self.ctx.base_changed.connect(self._base_changed)
        self.ctx.changes_made.connect(self._changes_made)
        self.ctx.ready_changed.connect(lambda _ready: self._update_actions())
        self.model.statuses_changed.connect(self._update_actions)
        self.tree.selectionModel().selectionChanged.connect(lambda *_: self._update_actions())
        self.tree.paths_dropped.connect(self.add_paths)
        self.tree.doubleClicked.connect(self._double_clicked)
        self.search_panel.show_hits.connect(self.open_document_viewer)
        self.worker.state_changed.connect(lambda state: self.status.worker_label.setText(f"Worker: {state}"))
        self.poller.polled.connect(self._show_progress)
        self.poller.polled.connect(lambda _result: self.unindexed.refresh())
        self.ctx.bases_changed.connect(self._show_first_run)
        self.first_run.create_base.connect(self.bases_panel.create_base)

    # -- start-up and shutdown ----------------------------------------------------------------

    def start(self) -> None:
        """Open the data directory and recover in the background; then start the worker and the poll."""
        self.statusBar().showMessage("Opening the data directory and checking for interrupted work…")
        Op(open_and_recover, self.ctx.data_dir, self.store).bound_to(self).on_success(self._started).on_failure(
            self._start_failed
        ).run()

    def _started(self, result: StartupResult) -> None:
        if self._closed:
            result.quire.close()
            return
        self.startup_result = result
        self.ctx.attach(result.quire)
        self.ctx.set_bases(result.bases)
        if result.bases and self.ctx.base is None:
            self.ctx.select_base(result.bases[0])
        if self.ctx.base is not None:  # what its first search waits for, done while the window appears
            Op(warm_search, result.quire, self.ctx.base).bound_to(self).on_success(lambda _s: None).on_failure(
                lambda exc: log.warning("warming the first search failed: %s", exc)
            ).run()
        if self.start_worker:
            self.worker.start()
        self.poller.start()
        self.statusBar().showMessage("Ready.", 4000)
        if result.parked_count:
            self._show_recovery_notice(result.parked)
        self.started.emit(result)

    def _start_failed(self, exc: BaseException) -> None:
        self.statusBar().showMessage("Could not open the data directory.")
        self.ctx.fail(exc)

    def _show_recovery_notice(self, parked: dict[int, Parked]) -> None:
        self._parked = parked
        count = sum(len(ids) for ids in parked.values())
        names = ", ".join(repr(b.name) for b in self.ctx.bases if b.id in parked)
        text = (
            f"Quire stopped while indexing last time: {count} item{'s were' if count != 1 else ' was'} "
            f"interrupted and parked as failed (in {names}). Reindex to try again."
        )
        self.recovery_notice.show_message(text, "warning", [("Reindex them", self.reindex_interrupted)])

    def reindex_interrupted(self) -> None:
        quire = self.ctx.quire
        if quire is None or not self._parked:
            return
        button = self.recovery_notice.button("Reindex them")
        if button is not None:
            button.setEnabled(False)
        Op(reindex_parked, quire, self._parked).bound_to(self).on_success(self._reindexed_parked).on_failure(
            self.ctx.fail
        ).run()

    def _reindexed_parked(self, outcome: ReindexOutcome) -> None:
        for changes in outcome.changes:
            self.ctx.announce(changes)
        if outcome.refused:
            reasons = "; ".join(outcome.refused.values())
            self.recovery_notice.show_message(f"Some interrupted items could not be reindexed: {reasons}", "error")
            return
        count = sum(len(ids) for ids in self._parked.values())
        self._parked = {}
        self.recovery_notice.show_message(f"Reindexing {count} interrupted item{'s' if count != 1 else ''}…", "info")
        self.poller.poll_now()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.hide()  # the worker may take a moment to stop: the window is gone at once
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop polling, stop the worker (SIGTERM: it stops taking jobs), let running Ops end, close."""
        if self._closed:
            return
        self._closed = True
        self.poller.stop()
        for viewer in list(self._viewers):
            viewer.close()
        self.worker.stop()
        ops.wait_for_ops(15_000)
        self.search_panel.remove_copies()
        quire = self.ctx.detach()
        if quire is not None:
            quire.close()
        ops.set_default_failure_handler(None)

    # -- messages -----------------------------------------------------------------------------

    def _show_message(self, level: str, text: str) -> None:
        if level == "info":
            self.statusBar().showMessage(text, 8000)
            return
        self.message_bar.show_message(text, level)

    # -- base and selection -------------------------------------------------------------------

    def _base_changed(self, base: Base | None) -> None:
        base_id = None if base is None else base.id
        if base_id != self.model.base_id:
            self.model.set_source(self.ctx.quire, base_id)
            self.poller.restart_cursor()
            if base_id is not None and self.model.canFetchMore(QModelIndex()):
                self.model.fetchMore(QModelIndex())
        self.drop_hint.setText(why_base_refuses_changes(base) or "Drop files or folders here to add them to this base.")
        self._update_actions()
        self.sync_actions.show_states()

    def selected_items(self) -> list[Item]:
        rows = self.tree.selectionModel().selectedRows(0)
        return [item for item in (self.model.item_at(index) for index in rows) if item is not None]

    def _update_actions(self) -> None:
        base, ready = self.ctx.base, self.ctx.ready
        refusal = why_base_refuses_changes(base) if ready else "Starting…"
        for act in (self.act_add_files, self.act_add_folder, self.act_add_note):
            act.setEnabled(refusal is None)
            act.setToolTip(refusal or act.text())
        chosen = self.selected_items()
        self._enable(self.act_delete, item_rules.why_no_delete(base, chosen) if ready else refusal)
        self._enable(self.act_reindex, item_rules.why_no_reindex(base, chosen) if ready else refusal)
        self._enable(self.act_chunks, item_rules.why_no_chunks(base, chosen) if ready else refusal)
        folder = next((i for i in chosen if i.is_container), None) if len(chosen) == 1 else None
        self.search_panel.set_folder(None if folder is None else (folder.id, folder.name))
        self._enable(self.act_retry_failed, item_rules.why_no_retry(base, chosen) if ready else refusal)
        for act in (self.act_keep_from_agents, self.act_allow_agents):  # a read-only (locked) base still takes them
            self._enable(act, ("Select items first" if not chosen else None) if ready else "Starting…")
        self.sync_actions.update(base, chosen, refusal if not ready else None)

    @staticmethod
    def _enable(act: QAction, refusal: str | None) -> None:
        act.setEnabled(refusal is None)
        act.setToolTip(refusal or act.text())

    # -- viewers ----------------------------------------------------------------------------

    def view_chunks(self) -> None:
        base, chosen = self.ctx.base, self.selected_items()
        if base is not None and len(chosen) == 1:
            self.open_chunk_viewer(base.id, chosen[0].id, chosen[0].name, -1)

    def open_chunk_viewer(self, base_id: int, item_id: int, title: str, chunk_id: int) -> ChunkViewer:
        viewer = ChunkViewer(self.ctx, base_id, item_id, title, chunk_id if chunk_id >= 0 else None, self)
        self._viewers.append(viewer)
        viewer.destroyed.connect(lambda *_: self._viewers.remove(viewer) if viewer in self._viewers else None)
        viewer.show()
        viewer.load()
        return viewer

    def open_document_viewer(self, base_id: int, hits: list[Hit], chunk_id: int) -> DocumentViewer:
        """The in-app viewer on one document's hits, at ``chunk_id``'s (``app.document_viewer``)."""
        viewer = DocumentViewer(self.ctx, base_id, hits, chunk_id, self.search_panel.open_hit, self)
        self._viewers.append(viewer)
        viewer.destroyed.connect(lambda *_: self._viewers.remove(viewer) if viewer in self._viewers else None)
        viewer.show()
        viewer.load()
        return viewer

    def _double_clicked(self, index: QModelIndex) -> None:
        item = self.model.item_at(index)
        if item is not None and not item.is_container and item.status == "completed":
            self.view_chunks()

    def _changed(self, changes: Changes, text: str) -> None:
        self.ctx.announce(changes)
        self.ctx.info("Nothing to do." if changes.noop else text)

    def _changes_made(self, changes: Changes) -> None:
        self.model.apply_changes(changes)
        self._update_actions()
        self.poller.poll_now()

    # -- status bar and first run -------------------------------------------------------------

    def _show_progress(self, result: PollResult) -> None:
        self.status.show(result)
        if result.work is not None and result.work.paused != self.menus.act_pause.isChecked():
            self.menus.show_paused(result.work.paused)

    def _show_first_run(self, bases: list[Base]) -> None:
        self.items_stack.setCurrentIndex(1 if bases else 0)


__all__ = ["MainWindow", "Qt"]
