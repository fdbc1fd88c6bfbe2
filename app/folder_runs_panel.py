"""The folder-run panel: drop or choose a folder → preview → Start → history, details, audit, cancel, revert.

* **Preview** (``knowledge.folder_runs.preview``): every file eligible or not, with the reason; how many
  files and folders the walk reached against the cap. A folder over the cap is refused, never
  truncated; the panel then lists the sub-folders that would each fit (``folder_runs.fitting_subfolders``) and
  the split plan, which **Start one run per sub-folder** starts in one go (``app/run_split.py``).
* **Start** uses one idempotency key per approved preview, made when the preview arrives: a double
  click, a second press or a retry after an error sends the same key, so the service replays the one
  run instead of starting another. A new preview gets a new key.
* **History** lists the runs over this folder or into this base (status, timestamps, progress and
  disposition counts), polled once a second while the panel is shown — progress is a column the GUI
  polls. Selecting a run shows each source's disposition and reason, and the run's audit entries.
* **Any size.** Every table is a model updated in place (``app/run_tables.py``), its columns sized once:
  the selected run's sources are paged in and only the rows that settled since the last poll change
  (``app/run_sources_model.py``); audit entries are read after the last one shown; the run list changes
  rows in place and inserts new runs at the top.
* **Cancel**, **Revert** and **Retry** act on the selected run (``app/run_actions.py``).

The GUI acts as a person (``Principal.person``), like the CLI in a terminal.

Threading contract: main thread; previews, starts, reads, cancels and reverts run in ``Op``s."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.ops import Op, describe_error
from app.run_actions import RunActions
from app.run_reads import (
    PreviewOutcome,
    RunView,
    audit_details,
    gui_principal,
    preview_folder,
    read_run,
    read_runs,
    size_text,
    when,
)
from app.run_sources_model import SourcesModel
from app.run_split import SplitActions, plan_rows, plan_text
from app.run_tables import RowsModel, read_only_view
from app.run_widgets import AUDIT_HEADERS, PREVIEW_HEADERS, RUN_HEADERS, DropZone
from knowledge import folder_runs
from knowledge.folder_runs import Preview, RunSummary, StartResult
from knowledge.library import Base, audit

REFRESH_MS = 1000


class FolderRunsPanel(QWidget, RunActions, SplitActions):
    """See the module docstring."""

    previewed = Signal(object)  # PreviewOutcome
    run_started = Signal(object)  # StartResult
    split_started = Signal(object)  # SplitStart
    runs_shown = Signal(list)  # list[RunSummary]
    run_shown = Signal(object)  # RunView

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.principal = gui_principal()
        self.folder: Path | None = None
        self.outcome: PreviewOutcome | None = None
        self.preview_key: str | None = None
        self.started_key: str | None = None  # the preview whose run has started: Start stays off for it
        self.runs: list[RunSummary] = []
        self.run_view: RunView | None = None
        self.selected_run: int | None = None
        self._reading_runs = False
        self._reading_run = False
        self.audit_entries: list[audit.Entry] = []  # the selected run's, as read so far
        self._build()
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        ctx.bases_changed.connect(self._bases_changed)
        ctx.base_changed.connect(self._base_selected)
        ctx.ready_changed.connect(lambda _ready: self._update_buttons())
        self._update_buttons()

    # -- building -----------------------------------------------------------------------------

    def _build(self) -> None:
        self.drop_zone = DropZone()
        self.drop_zone.dropped.connect(self._dropped)
        self.drop_zone.choose_button.clicked.connect(self.choose_folder)
        self.base_combo = QComboBox()
        self.base_combo.currentIndexChanged.connect(lambda _i: self._target_changed())
        self.summary = QLabel("No folder chosen yet.")
        self.summary.setObjectName("previewSummary")
        self.summary.setWordWrap(True)
        self.preview_model = RowsModel(PREVIEW_HEADERS, self)
        self.preview_table = read_only_view(self.preview_model, 3)
        self.start_button = QPushButton("Start run")
        self.start_button.clicked.connect(self.start_run)
        self._build_split_button()
        self.scope = QComboBox()
        self.scope.addItems(["Runs over this folder", "Runs into this base"])
        self.scope.currentIndexChanged.connect(lambda _i: self.refresh())
        self.runs_model = RowsModel(RUN_HEADERS, self)
        self.runs_table = read_only_view(self.runs_model, 1)
        self.runs_table.selectionModel().selectionChanged.connect(lambda *_args: self._run_selected())
        self.run_buttons = self._build_run_buttons()
        self.sources_model = SourcesModel(self)
        self.sources_table = read_only_view(self.sources_model, 1)
        self.audit_model = RowsModel(AUDIT_HEADERS, self)
        self.audit_table = read_only_view(self.audit_model, 4)
        layout = QVBoxLayout(self)
        layout.addLayout(self._target_row())
        layout.addWidget(self.drop_zone)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self._preview_box())
        splitter.addWidget(self._history_box())
        splitter.setSizes([260, 380])
        layout.addWidget(splitter, 1)

    def _target_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(QLabel("Into knowledge base:"))
        row.addWidget(self.base_combo, 1)
        return row

    def _preview_box(self) -> QWidget:
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.split_button)
        top.addWidget(self.start_button)
        layout.addLayout(top)
        layout.addWidget(self.preview_table, 1)
        return box

    def _history_box(self) -> QWidget:
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        top.addWidget(self.scope)
        top.addStretch(1)
        for button in self.run_buttons:
            top.addWidget(button)
        layout.addLayout(top)
        detail_tabs = QTabWidget()
        detail_tabs.addTab(self.sources_table, "Sources")
        detail_tabs.addTab(self.audit_table, "Audit log")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.runs_table)
        split.addWidget(detail_tabs)
        layout.addWidget(split, 1)
        return box

    # -- target base --------------------------------------------------------------------------

    def target_base(self) -> Base | None:
        base_id = self.base_combo.currentData()
        return None if base_id is None else self.ctx.base_by_id(int(base_id))

    def _bases_changed(self, found: list[Base]) -> None:
        current = self.base_combo.currentData()
        self.base_combo.blockSignals(True)
        self.base_combo.clear()
        for base in found:
            self.base_combo.addItem(base.name, base.id)
        wanted = current if current is not None else (self.ctx.base.id if self.ctx.base else None)
        index = self.base_combo.findData(wanted)
        self.base_combo.setCurrentIndex(index if index >= 0 else (0 if found else -1))
        self.base_combo.blockSignals(False)
        if self.base_combo.currentData() != current:
            self._target_changed()

    def _base_selected(self, base: Base | None) -> None:
        if base is not None and self.outcome is None:
            index = self.base_combo.findData(base.id)
            if index >= 0:
                self.base_combo.setCurrentIndex(index)

    def _target_changed(self) -> None:
        if self.folder is not None:
            self.preview(self.folder)
        else:
            self.refresh()

    # -- preview ------------------------------------------------------------------------------

    def choose_folder(self) -> None:
        folder = self.ctx.prompter.choose_folder(self, "Choose a folder to run")
        if folder is not None:
            self.preview(folder)

    def _dropped(self, paths: list[Path]) -> None:
        folders = [p for p in paths if p.is_dir()]
        if len(paths) != 1 or not folders:
            self.ctx.warn("Drop one folder to preview a run over it (files are added from the Items tab).")
            return
        self.preview(folders[0])

    def preview(self, folder: Path) -> None:
        """Preview a run over ``folder`` into the target base; the old preview (and its key) are dropped."""
        quire, base = self.ctx.quire, self.target_base()
        self.folder, self.outcome, self.preview_key = folder, None, None
        self.drop_zone.label.setText(str(folder))
        self._show_preview_rows([])
        self._update_buttons()
        if quire is None or base is None:
            self.summary.setText("Select or create a knowledge base first.")
            return
        self.summary.setText(f"Previewing {folder} …")
        Op(preview_folder, quire, self.principal, base.id, folder).bound_to(self).on_success(
            self._previewed
        ).on_failure(self._preview_failed).run()
        self.refresh()

    def _previewed(self, outcome: PreviewOutcome) -> None:
        if outcome.folder != self.folder:
            return  # a newer preview was asked for meanwhile
        self.outcome = outcome
        self.preview_key = f"gui-{uuid.uuid4().hex}" if outcome.preview is not None else None
        if outcome.preview is not None:
            self._show_preview(outcome.preview)
        else:
            self._show_split(outcome)
        self._update_buttons()
        self.previewed.emit(outcome)

    def _preview_failed(self, exc: BaseException) -> None:
        self.summary.setText(f"Cannot preview this folder: {describe_error(exc)}")
        self.ctx.fail(exc)
        self._update_buttons()

    def _show_preview(self, preview: Preview) -> None:
        unreadable = len(preview.unreadable_folders)
        self.summary.setText(
            f"{preview.folder} → {preview.base_name}: walked {preview.walked} of at most {preview.cap} files and "
            f"folders · {len(preview.eligible)} eligible · {len(preview.ineligible)} not eligible"
            + (f" · {unreadable} folder(s) could not be read" if unreadable else "")
        )
        rows = [[e.relative, size_text(e.size), "yes", ""] for e in preview.eligible]
        rows += [[e.relative, size_text(e.size), "no", e.reason or ""] for e in preview.ineligible]
        rows += [[f, "", "no", "could not be read (not walked)"] for f in preview.unreadable_folders]
        self._show_preview_rows(rows)

    def _show_split(self, outcome: PreviewOutcome) -> None:
        split = outcome.split
        assert split is not None
        fits = ", ".join(f"{f.relative} ({f.walked})" for f in split.fitting) or "none"
        self.summary.setText(
            f"{outcome.refusal}. Sub-folders that would each fit under the cap of {split.cap}: {fits}"
            + ("" if split.complete else " (not every branch was searched)")
            + ("" if outcome.plan is None else f". {plan_text(outcome.plan)}")
        )
        if outcome.plan is not None:
            self._show_preview_rows(plan_rows(outcome.plan))
        else:
            self._show_preview_rows([[f.relative, "", "fits", f"{f.walked} files and folders"] for f in split.fitting])

    def _show_preview_rows(self, rows: list[list[str]]) -> None:
        self.preview_model.replace(rows)

    # -- start --------------------------------------------------------------------------------

    def start_run(self) -> None:
        """Start a run over the previewed folder with this preview's key (a repeat replays the same run)."""
        quire, outcome, key = self.ctx.quire, self.outcome, self.preview_key
        if quire is None or outcome is None or outcome.preview is None or key is None:
            return
        self.start_button.setEnabled(False)
        Op(folder_runs.start_run, quire, self.principal, outcome.base_id, outcome.folder, key=key).bound_to(
            self
        ).on_success(self._started).on_failure(self._start_failed).run()

    def _started(self, result: StartResult) -> None:
        self.started_key = result.key
        verb = "started" if result.outcome == "created" else "was already started (same preview)"
        self.ctx.info(f"Folder run {result.run_id} {verb}.")
        self.selected_run = result.run_id
        self._update_buttons()
        self.refresh()
        self.run_started.emit(result)

    def _start_failed(self, exc: BaseException) -> None:
        self.ctx.fail(exc)
        self._update_buttons()

    # -- history ------------------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._timer.start()
        self.refresh()

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self._timer.stop()

    def refresh(self) -> None:
        """Re-read the run list and the selected run — one read of each in flight at a time."""
        quire = self.ctx.quire
        if quire is None:
            return
        self._read_run()
        if self._reading_runs:
            return
        by_folder = self.scope.currentIndex() == 0 and self.folder is not None
        base = self.target_base()
        self._reading_runs = True
        Op(read_runs, quire, self.folder if by_folder else None, None if base is None else base.id).bound_to(
            self
        ).on_success(self._runs_read).on_failure(self._runs_failed).run()

    def _runs_failed(self, exc: BaseException) -> None:
        self._reading_runs = False

    def _runs_read(self, runs: list[RunSummary]) -> None:
        self._reading_runs = False
        self.runs = list(reversed(runs))  # newest first
        selection = self.runs_table.selectionModel()
        selection.blockSignals(True)
        self.runs_model.set_rows([self._run_row(r) for r in self.runs], [r.run.id for r in self.runs])
        row = -1 if self.selected_run is None else self.runs_model.row_of(self.selected_run)
        if row >= 0 and not selection.isRowSelected(row):
            self.runs_table.selectRow(row)
        selection.blockSignals(False)
        self._update_buttons()
        self.runs_shown.emit(self.runs)

    @staticmethod
    def _run_row(summary: RunSummary) -> list[str]:
        run, c = summary.run, summary.counts
        dispositions = f"{c['committed']} committed · {c['skipped']} skipped · {c['rejected']} rejected"
        if c["already_committed"]:
            dispositions += f" · {c['already_committed']} already committed"
        return [
            str(run.id),
            run.folder,
            summary.base_name,
            run.status
            + (" · cancelling" if summary.cancel_requested else "")
            + (f" ({run.error})" if run.error else "")
            + (f" · retry of {run.retry_of}" if run.retry_of is not None else "")
            + (f" · retried as {summary.retried_by}" if summary.retried_by is not None else ""),
            when(run.created_at),
            when(run.started_at),
            when(run.reverted_at or run.finished_at),
            f"{c['settled']}/{run.declared_size}",
            dispositions,
        ]

    def _run_selected(self) -> None:
        rows = self.runs_table.selectionModel().selectedRows()
        key = self.runs_model.key_at(rows[0].row()) if rows else None
        if key is None:
            return
        self.select_run(int(str(key)))
        self._update_buttons()

    def select_run(self, run_id: int) -> None:
        self.selected_run = run_id
        self.refresh()

    def _read_run(self) -> None:
        """Show the selected run's sources (paged, updated in place) and read its summary and new entries."""
        quire, run_id = self.ctx.quire, self.selected_run
        self.sources_model.show_run(quire, run_id)
        if quire is None or run_id is None:
            return
        self.sources_model.poll()
        if self.run_view is not None and self.run_view.summary.run.id != run_id:
            self.run_view, self.audit_entries = None, []
            self.audit_model.replace([])
        if self._reading_run:
            return
        self._reading_run = True
        after = self.audit_entries[-1].id if self.audit_entries else 0
        Op(read_run, quire, run_id, after).bound_to(self).on_success(self._run_read).on_failure(self._run_failed).run()

    def _run_failed(self, exc: BaseException) -> None:
        self._reading_run = False

    def _run_read(self, view: RunView) -> None:
        self._reading_run = False
        after = self.audit_entries[-1].id if self.audit_entries else 0
        if view.summary.run.id != self.selected_run or view.after_entry != after:
            self._read_run()  # read for a run no longer shown: read the one that is
            return
        self.audit_entries.extend(view.entries)
        self.audit_model.append([self._entry_row(e) for e in view.entries], [e.id for e in view.entries])
        self.run_view = dataclasses.replace(view, entries=self.audit_entries, after_entry=0)
        self._update_buttons()
        self.run_shown.emit(self.run_view)

    @staticmethod
    def _entry_row(e: audit.Entry) -> list[str]:
        return [when(e.at), e.action, e.actor, "" if e.attempt is None else str(e.attempt), audit_details(e)]

    def selected_summary(self) -> RunSummary | None:
        return next((r for r in self.runs if r.run.id == self.selected_run), None)

    # -- buttons ------------------------------------------------------------------------------

    def _update_buttons(self) -> None:
        ready = self.ctx.ready and self.target_base() is not None
        self.drop_zone.choose_button.setEnabled(ready)
        has_preview = self.outcome is not None and self.outcome.preview is not None
        fresh = self.preview_key is not None and self.preview_key != self.started_key
        self.start_button.setEnabled(ready and has_preview and fresh)
        self.start_button.setText("Run started" if has_preview and not fresh else "Start run")
        self._update_split_button(ready)
        self._update_run_buttons()
