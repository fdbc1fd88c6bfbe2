"""What the folder-run panel does to the selected run: Cancel, Retry and Revert (mixed into ``FolderRunsPanel``).

* **Cancel** (pending or running runs, after a confirmation) is ``folder_runs.cancel_run``: a pending run ends
  ``cancelled`` at once; a running one is stopped by its worker after the source it is on (the row reads
  ``cancelling`` meanwhile). What it committed stays, and Revert removes it.
* **Revert** (completed or cancelled runs, after a confirmation) is ``folder_runs.revert_run``.
* **Retry** (failed runs only) is ``folder_runs.retry_run``: a new run over the folder as it is now, linked
  to the failed one (which stays failed); what the failed run committed settles ``already_committed``. A
  second press replays the same new run. The new run is selected.

Threading contract: main thread; every call to the service runs in an ``Op``.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QPushButton, QWidget

from app.context import AppContext
from app.ops import Op
from knowledge import folder_runs
from knowledge.folder_runs import CANCELLABLE_RUN_STATUSES, REVERTIBLE_RUN_STATUSES, Principal, RunSummary


class RunActions:
    """The selected run's buttons; the panel provides the context, the selection and its refresh."""

    ctx: AppContext
    principal: Principal
    cancel_button: QPushButton
    retry_button: QPushButton
    revert_button: QPushButton

    def selected_summary(self) -> RunSummary | None:
        raise NotImplementedError

    def refresh(self) -> None:
        raise NotImplementedError

    def select_run(self, run_id: int) -> None:
        raise NotImplementedError

    def _widget(self) -> QWidget:
        assert isinstance(self, QWidget)
        return self

    def _owner(self) -> QObject:
        return self._widget()

    def _build_run_buttons(self) -> list[QPushButton]:
        self.cancel_button = QPushButton("Cancel run…")
        self.cancel_button.clicked.connect(self.cancel_selected)
        self.retry_button = QPushButton("Retry run")
        self.retry_button.clicked.connect(self.retry_selected)
        self.revert_button = QPushButton("Revert run…")
        self.revert_button.clicked.connect(self.revert_selected)
        return [self.cancel_button, self.retry_button, self.revert_button]

    def _update_run_buttons(self) -> None:
        summary, ready = self.selected_summary(), self.ctx.ready
        status = None if summary is None else summary.run.status
        self.cancel_button.setEnabled(
            ready and summary is not None and status in CANCELLABLE_RUN_STATUSES and not summary.cancel_requested
        )
        self.revert_button.setEnabled(ready and status in REVERTIBLE_RUN_STATUSES)
        self.retry_button.setEnabled(
            ready and summary is not None and status == "failed" and summary.retried_by is None
        )

    def _action_failed(self, exc: BaseException) -> None:
        self.ctx.fail(exc)
        self._update_run_buttons()

    # -- cancel -------------------------------------------------------------------------------

    def cancel_selected(self) -> None:
        quire, summary = self.ctx.quire, self.selected_summary()
        if quire is None or summary is None:
            return
        question = (
            f"Cancel folder run {summary.run.id} ({summary.run.folder} → {summary.base_name})?\n\n"
            "It stops after the file it is on. The item(s) it has added stay; Revert removes them."
        )
        if not self.ctx.prompter.confirm(self._widget(), "Cancel folder run", question):
            return
        self.cancel_button.setEnabled(False)
        Op(folder_runs.cancel_run, quire, self.principal, summary.run.id).bound_to(self._owner()).on_success(
            self._cancelled
        ).on_failure(self._action_failed).run()

    def _cancelled(self, result: folder_runs.CancelResult) -> None:
        if result.status == "cancelled":
            self.ctx.info(f"Folder run {result.run_id} cancelled.")
        else:
            self.ctx.info(f"Folder run {result.run_id} is being cancelled; it stops after the file it is on.")
        self.refresh()

    # -- revert -------------------------------------------------------------------------------

    def revert_selected(self) -> None:
        quire, summary = self.ctx.quire, self.selected_summary()
        if quire is None or summary is None:
            return
        question = (
            f"Revert folder run {summary.run.id} ({summary.run.folder} → {summary.base_name})?\n\n"
            f"The {summary.counts['committed']} item(s) it added are removed from the knowledge base; "
            "your files are not touched."
        )
        if not self.ctx.prompter.confirm(self._widget(), "Revert folder run", question):
            return
        self.revert_button.setEnabled(False)
        Op(folder_runs.revert_run, quire, self.principal, summary.run.id).bound_to(self._owner()).on_success(
            self._reverted
        ).on_failure(self._action_failed).run()

    def _reverted(self, result: folder_runs.RevertResult) -> None:
        self.ctx.info(f"Folder run {result.run_id} reverted; {result.deleting} item(s) are being removed.")
        self.refresh()

    # -- retry --------------------------------------------------------------------------------

    def retry_selected(self) -> None:
        quire, summary = self.ctx.quire, self.selected_summary()
        if quire is None or summary is None:
            return
        self.retry_button.setEnabled(False)
        Op(folder_runs.retry_run, quire, self.principal, summary.run.id).bound_to(self._owner()).on_success(
            self._retried
        ).on_failure(self._action_failed).run()

    def _retried(self, result: folder_runs.RetryResult) -> None:
        self.ctx.info(f"Folder run {result.retry_of} is retried as run {result.run_id}.")
        self.select_run(result.run_id)
