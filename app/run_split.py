"""Starting one run per sub-folder from the preview of a folder over the cap (mixed into ``FolderRunsPanel``).

The preview of a folder over the cap shows the split plan (``folder_runs.plan_split``: how many runs, each
sub-folder — or a folder's own files — with its count). **Start one run per sub-folder** is enabled only then,
and calls ``folder_runs.start_split``: every run of the plan starts in one transaction, or none does. Each
run's key is derived from its folder, the person and its files, so a second press replays the same runs.

Threading contract: main thread; the start runs in an ``Op``.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QPushButton

from app.context import AppContext
from app.ops import Op
from app.run_reads import PreviewOutcome
from knowledge import folder_runs
from knowledge.folder_runs import Principal, SplitPlan, SplitStart

SPLIT_LABEL = "Start one run per sub-folder"


def plan_text(plan: SplitPlan) -> str:
    return f"Start one run per sub-folder: {len(plan.runs)} runs of at most {plan.cap} files and folders each."


def plan_rows(plan: SplitPlan) -> list[list[str]]:
    return [[r.label, "", f"run {n}", f"{r.files} file(s), {r.walked} walked"] for n, r in enumerate(plan.runs, 1)]


class SplitActions:
    """The split button; the panel provides the context, the preview outcome and its refresh."""

    ctx: AppContext
    principal: Principal
    outcome: PreviewOutcome | None
    split_button: QPushButton
    split_started: Any  # the panel's Signal(object): the SplitStart
    split_done: PreviewOutcome | None  # the preview whose split has started: the button stays off for it

    def refresh(self) -> None:
        raise NotImplementedError

    def _update_buttons(self) -> None:
        raise NotImplementedError

    def _build_split_button(self) -> QPushButton:
        self.split_done = None
        self.split_button = QPushButton(SPLIT_LABEL)
        self.split_button.clicked.connect(self.start_split)
        return self.split_button

    def _update_split_button(self, ready: bool) -> None:
        outcome = self.outcome
        over_cap = outcome is not None and outcome.plan is not None and outcome.plan.over_cap
        done = over_cap and outcome is self.split_done
        self.split_button.setEnabled(ready and over_cap and not done)
        self.split_button.setText("Runs started" if done else SPLIT_LABEL)

    def start_split(self) -> None:
        """Start every run of the previewed plan in one transaction (a repeat replays them)."""
        quire, outcome = self.ctx.quire, self.outcome
        if quire is None or outcome is None or outcome.plan is None or not outcome.plan.over_cap:
            return
        self.split_button.setEnabled(False)
        owner = self
        assert isinstance(owner, QObject)
        Op(folder_runs.start_split, quire, self.principal, outcome.base_id, outcome.folder).bound_to(owner).on_success(
            lambda started: self._split_started(outcome, started)
        ).on_failure(self._split_failed).run()

    def _split_started(self, outcome: PreviewOutcome, started: SplitStart) -> None:
        self.split_done = outcome
        created = sum(1 for r in started.runs if r.outcome == "created")
        self.ctx.info(f"{len(started.runs)} folder runs started in one go ({created} new), one per sub-folder.")
        self._update_buttons()
        self.refresh()
        self.split_started.emit(started)

    def _split_failed(self, exc: BaseException) -> None:
        self.ctx.fail(exc)
        self._update_buttons()
