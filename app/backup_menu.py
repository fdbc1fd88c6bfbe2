"""File menu: back up the data directory, restore a backup into another folder (with progress).

Threading contract: main thread; the backup and the restore run as ``Op``s; progress comes back through
a queued signal to a progress bar in the status bar. A restore never replaces the open data directory:
it goes into an empty folder the person chooses, which they can then open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow, QProgressBar

from app.context import AppContext
from app.ops import Op
from knowledge.portable.backup import BackupResult
from knowledge.runtime import Quire


def backup(quire: Quire, target: Path, progress: Any) -> BackupResult:
    from knowledge.portable.backup import backup_data_dir

    return backup_data_dir(quire, target, progress=progress)


def auto_backup(quire: Quire) -> BackupResult | None:
    from knowledge.portable.backup import run_auto_backup_if_due

    return run_auto_backup_if_due(quire)


def restore(source: Path, target: Path) -> dict[str, Any]:
    from knowledge.portable.backup import restore_backup

    return restore_backup(source, target)


class _Relay(QObject):
    changed = Signal(str, int, int)


AUTO_CHECK_MS = 10 * 60 * 1000  # how often the window looks whether an automatic backup is due


class BackupMenu(QObject):
    def __init__(self, window: QMainWindow, ctx: AppContext, auto_check_ms: int = AUTO_CHECK_MS) -> None:
        super().__init__(window)
        self.window = window
        self.ctx = ctx
        # the File menu (app.menus) shows these two actions
        self.backup_action = QAction("Back up data directory…", window)
        self.backup_action.triggered.connect(self.back_up)
        self.restore_action = QAction("Restore a backup…", window)
        self.restore_action.triggered.connect(self.restore)
        self.progress = QProgressBar()
        self.progress.setObjectName("backupProgress")
        self.progress.setMaximumWidth(200)
        self.progress.setVisible(False)
        window.statusBar().addPermanentWidget(self.progress)
        self._relay = _Relay(self)
        self._relay.changed.connect(self._show_progress)
        # automatic backups (configured with `quire backup --auto DIR`; off by default): checked while open
        self._auto_running = False
        self.auto_timer = QTimer(self)
        self.auto_timer.setInterval(auto_check_ms)
        self.auto_timer.timeout.connect(self.check_auto_backup)
        ctx.ready_changed.connect(lambda ready: self.auto_timer.start() if ready else self.auto_timer.stop())

    def check_auto_backup(self) -> None:
        quire = self.ctx.quire
        if quire is None or self._auto_running:
            return
        self._auto_running = True
        Op(auto_backup, quire).bound_to(self).on_success(self._auto_done).on_failure(self._auto_failed).run()

    def _auto_done(self, result: BackupResult | None) -> None:
        self._auto_running = False
        if result is not None:
            self.ctx.info(f"Automatic backup written to {result.path}.")

    def _auto_failed(self, exc: BaseException) -> None:
        self._auto_running = False
        self.ctx.fail(exc)

    def _show_progress(self, stage: str, done: int, total: int) -> None:
        self.progress.setVisible(True)
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(min(done, max(total, 1)))
        self.progress.setFormat(f"{'Database' if stage == 'database' else 'Files'} %p%")

    def _done(self) -> None:
        self.progress.setVisible(False)

    def _failed(self, exc: BaseException) -> None:
        self._done()
        self.ctx.fail(exc)

    def back_up(self) -> None:
        quire = self.ctx.quire
        target = self.ctx.prompter.choose_folder(self.window, "Back up into folder") if quire else None
        if quire is None or target is None:
            return
        self._show_progress("database", 0, 1)
        Op(backup, quire, target, self._relay.changed.emit).bound_to(self).on_success(self._backed_up).on_failure(
            self._failed
        ).run()

    def _backed_up(self, result: BackupResult) -> None:
        self._done()
        missing = f" {result.blobs_missing} owned file(s) were missing." if result.blobs_missing else ""
        self.ctx.info(f"Backed up to {result.path} ({result.blobs} owned files).{missing}")

    def restore(self) -> None:
        source = self.ctx.prompter.choose_folder(self.window, "Choose a backup folder (quire-backup-…)")
        if source is None:
            return
        target = self.ctx.prompter.choose_folder(self.window, "Restore into an empty folder")
        if target is None:
            return
        self._show_progress("database", 0, 1)
        Op(restore, source, target).bound_to(self).on_success(self._restored).on_failure(self._failed).run()

    def _restored(self, result: dict[str, Any]) -> None:
        self._done()
        refused = int(result.get("blobs_refused_count", 0))
        named = "; ".join(result.get("blobs_refused", [])[:3]) + ("; …" if refused > 3 else "")
        self.ctx.info(
            f"Restored into {result['data_dir']} ({result['blobs']} owned files); open it with "
            f"quire gui --data-dir {result['data_dir']}"
            + (f". {refused} owned file(s) refused, not copied: {named}" if refused else "")
        )
