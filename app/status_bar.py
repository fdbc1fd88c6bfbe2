"""The status bar: files and chunks done / total over all work, the measured rate and an ETA, pause.

The rate is measured, not guessed: ``ProgressTracker`` keeps the completed-file and chunk counts of the
recent polls (``app.poller`` results) and divides what changed by the time between them. "Done / total"
counts from the moment work appeared (files waiting went from none to some), so a new batch starts at
0 / N. Clicking the summary opens the jobs view: jobs in flight and recent failures with their reasons.

Threading contract: main thread; the jobs view reads in an ``Op``.
"""

from __future__ import annotations

from collections import deque
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
from knowledge.lifecycle import WorkTotals
from knowledge.runtime import Quire

WINDOW_SECONDS = 30.0  # the rate is measured over about this much recent time


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    chunks: int
    files_per_second: float | None
    eta_seconds: float | None
    waiting: int
    paused: bool


class ProgressTracker:
    """Turns successive ``WorkTotals`` into done / total, a files-per-second rate and an ETA."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int]] = deque()
        self.start_completed: int | None = None

    def update(self, work: WorkTotals, at: float) -> Progress:
        settled = work.completed + work.failed
        if work.waiting and self.start_completed is None:
            self.start_completed = settled
        if not work.waiting:
            self.start_completed = None
            self.samples.clear()
        self.samples.append((at, settled))
        while len(self.samples) > 2 and at - self.samples[0][0] > WINDOW_SECONDS:
            self.samples.popleft()
        done = settled - (self.start_completed if self.start_completed is not None else settled)
        rate = self.rate()
        eta = work.waiting / rate if rate and work.waiting and not work.paused else None
        return Progress(max(0, done), max(0, done) + work.waiting, work.chunks, rate, eta, work.waiting, work.paused)

    def rate(self) -> float | None:
        if len(self.samples) < 2:
            return None
        (t0, n0), (t1, n1) = self.samples[0], self.samples[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 and n1 > n0 else None


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def progress_text(p: Progress) -> str:
    if p.paused and p.waiting:
        return f"Paused — {p.waiting:,} file{'s' if p.waiting != 1 else ''} waiting"
    if p.paused:
        return "Paused — nothing waiting"
    if not p.waiting:
        return f"Idle · {p.chunks:,} chunks indexed"
    parts = [f"{p.done:,}/{p.total:,} files", f"{p.chunks:,} chunks"]
    parts.append(f"{p.files_per_second:.1f} files/s" if p.files_per_second else "measuring rate…")
    if p.eta_seconds is not None:
        parts.append(f"about {duration(p.eta_seconds)} left")
    return " · ".join(parts)


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
