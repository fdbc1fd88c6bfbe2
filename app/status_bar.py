"""The status bar: files and chunks done / total over all work (a folder run's sources included), the
measured rate and an ETA, pause: ``knowledge.lifecycle.work_rate`` turns the poll's ``WorkTotals`` into
them, as it does for ``quire worker``'s progress line. Clicking the summary opens the jobs view: jobs in
flight and recent failures with their reasons.

Threading contract: main thread; the jobs view reads in an ``Op``.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QMainWindow,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.ops import Op
from app.startup import PollResult
from jobs.queue import JobRecord
from knowledge import lifecycle
from knowledge.library import Item
from knowledge.lifecycle import Progress, ProgressTracker, progress_text
from knowledge.runtime import Quire


class StatusBar:
    """Builds the window's permanent status widgets and keeps them current from the poll."""

    def __init__(self, window: QMainWindow, ctx: AppContext, pause_action: QAction) -> None:
        self.window, self.ctx = window, ctx
        self.tracker = ProgressTracker()
        self.last: Progress | None = None
        bar = window.statusBar()
        self.summary = QPushButton("Idle")
        self.summary.setObjectName("progressSummary")
        self.summary.setFlat(True)
        self.summary.setToolTip("Show the jobs in flight and recent failures")
        self.summary.clicked.connect(self.open_jobs_view)
        self.progress_bar = QProgressBar()
        self.progress_bar.setMaximumWidth(180)
        self.progress_bar.hide()
        self.pause_button = QToolButton()
        self.pause_button.setDefaultAction(pause_action)
        self.worker_label = QLabel("Worker: not started")
        for widget, name in (
            (self.summary, "Indexing progress; opens the jobs view"),
            (self.progress_bar, "Files indexed of the current work"),
            (self.pause_button, "Pause or resume indexing"),
            (self.worker_label, "Worker state"),
        ):
            widget.setAccessibleName(name)
            bar.addPermanentWidget(widget)
        self.jobs_view: JobsView | None = None

    def show(self, result: PollResult) -> None:
        if result.work is None:
            return
        progress = self.tracker.update(result.work, result.at)
        self.last = progress
        self.summary.setText(progress_text(progress))
        if progress.waiting and progress.total:
            self.progress_bar.setMaximum(progress.total)
            self.progress_bar.setValue(progress.done)
            self.progress_bar.setFormat(f"{progress.done}/{progress.total} files")
            self.progress_bar.show()
        else:
            self.progress_bar.hide()

    def open_jobs_view(self) -> JobsView:
        if self.jobs_view is None:
            self.jobs_view = JobsView(self.ctx, self.window)
        self.jobs_view.show()
        self.jobs_view.raise_()
        self.jobs_view.refresh()
        return self.jobs_view


@dataclass(frozen=True)
class JobsSnapshot:
    in_flight: list[JobRecord]
    failures: list[Item]


def read_jobs(quire: Quire) -> JobsSnapshot:
    running = quire.queue.list(status="running", limit=50)
    pending = quire.queue.list(status="pending", limit=50)
    return JobsSnapshot(running + pending, lifecycle.recent_failures(quire))


class JobsView(QDialog):
    """Jobs in flight (running first) and the files that failed most recently, with their reasons."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle("Jobs")
        self.setObjectName("jobsView")
        self.loaded = False
        self.in_flight = QListWidget()
        self.in_flight.setAccessibleName("Jobs in flight")
        self.failures = QListWidget()
        self.failures.setAccessibleName("Recent failures with reasons")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        refresh = buttons.addButton("Refresh", QDialogButtonBox.ButtonRole.ActionRole)
        refresh.clicked.connect(self.refresh)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("In flight"))
        layout.addWidget(self.in_flight, 1)
        layout.addWidget(QLabel("Recent failures"))
        layout.addWidget(self.failures, 1)
        layout.addWidget(buttons)
        self.resize(620, 460)

    def refresh(self) -> None:
        quire = self.ctx.quire
        if quire is not None:
            Op(read_jobs, quire).bound_to(self).on_success(self._show).run()

    def _show(self, snapshot: JobsSnapshot) -> None:
        self.in_flight.clear()
        for job in snapshot.in_flight:
            detail = f" · {job.progress_label} {job.progress_done}/{job.progress_total}" if job.progress_total else ""
            self.in_flight.addItem(f"#{job.id} {job.type} — {job.status}, attempt {job.attempt}{detail}")
        if not snapshot.in_flight:
            self.in_flight.addItem("Nothing in flight.")
        self.failures.clear()
        for item in snapshot.failures:
            reason = item.error_message or item.error_code or "no reason recorded"
            self.failures.addItem(f"{item.name} — {reason}")
        if not snapshot.failures:
            self.failures.addItem("No failures.")
        self.loaded = True
