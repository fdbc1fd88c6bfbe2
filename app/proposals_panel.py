"""Pending agent proposals: who proposed what (with the preview), and a person's Start or Dismiss.

Reads and decisions run in ``Op``s (``knowledge.agents.proposals``); the GUI acts as a person, like the
folder-run panel. The list refreshes when the panel is shown, on Refresh, and on a slow timer while shown.
"""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.ops import Op
from app.run_reads import gui_principal, when
from knowledge.agents import proposals
from knowledge.agents.proposals import Decision, Proposal

REFRESH_MS = 2000


def preview_text(p: Proposal) -> str:
    """What a person reads before deciding."""
    lines = [p.summary(), f"proposed {when(p.created_at)} by {p.proposed_by}", ""]
    if p.kind == "folder_run":
        d = p.preview
        lines.append(f"walked {d.get('walked')} of at most {d.get('cap')} files and folders")
        lines += [f"  + {e['path']} ({e.get('size')} bytes)" for e in d.get("eligible", [])]
        lines += [f"  - {e['path']}: {e.get('reason')}" for e in d.get("ineligible", [])]
    else:
        lines += [f"title: {p.note_title}", "", p.note_text or ""]
    return "\n".join(lines)


class ProposalsPanel(QWidget):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.proposals: list[Proposal] = []
        self.header = QLabel("Agents' proposals wait here until you start or dismiss them.")
        self.list = QListWidget()
        self.preview = QPlainTextEdit()
        self.preview.setReadOnly(True)
        self.start_button = QPushButton("Start")
        self.dismiss_button = QPushButton("Dismiss")
        self.refresh_button = QPushButton("Refresh")
        buttons = QHBoxLayout()
        for b in (self.start_button, self.dismiss_button, self.refresh_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.preview, 2)
        layout.addLayout(buttons)
        self.list.currentRowChanged.connect(self._selected)
        self.start_button.clicked.connect(self.start_selected)
        self.dismiss_button.clicked.connect(self.dismiss_selected)
        self.refresh_button.clicked.connect(self.refresh)
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self._update_buttons()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.refresh()
        self.timer.start()

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self.timer.stop()

    def refresh(self) -> None:
        if not self.ctx.ready:
            return
        Op(proposals.list_proposals, self.ctx.quire).on_success(self._listed).on_failure(self.ctx.fail).bound_to(
            self
        ).run()

    def _listed(self, found: list[Proposal]) -> None:
        if [p.id for p in found] == [p.id for p in self.proposals]:
            return
        chosen = self.selected()
        self.proposals = found
        self.list.clear()
        for p in found:
            self.list.addItem(QListWidgetItem(p.summary()))
        rows = [i for i, p in enumerate(found) if chosen is not None and p.id == chosen.id]
        self.list.setCurrentRow(rows[0] if rows else (0 if found else -1))
        if not found:
            self.preview.setPlainText("")
        self._update_buttons()

    def selected(self) -> Proposal | None:
        row = self.list.currentRow()
        return self.proposals[row] if 0 <= row < len(self.proposals) else None

    def _selected(self, _row: int) -> None:
        chosen = self.selected()
        self.preview.setPlainText("" if chosen is None else preview_text(chosen))
        self._update_buttons()

    def _update_buttons(self) -> None:
        has = self.selected() is not None
        self.start_button.setEnabled(has)
        self.dismiss_button.setEnabled(has)

    def start_selected(self) -> None:
        self._decide(proposals.accept_proposal, "started")

    def dismiss_selected(self) -> None:
        self._decide(proposals.dismiss_proposal, "dismissed")

    def _decide(self, fn: object, verb: str) -> None:
        chosen = self.selected()
        if chosen is None or not self.ctx.ready:
            return
        self.start_button.setEnabled(False)
        self.dismiss_button.setEnabled(False)

        def done(decision: Decision) -> None:
            what = f"run {decision.run.run_id}" if decision.run is not None else "the proposal"
            self.ctx.info(f"{chosen.summary()}: {verb} ({what})")
            if decision.changes is not None:
                self.ctx.announce(decision.changes)
            self.refresh()

        def failed(exc: BaseException) -> None:
            self.ctx.fail(exc)
            self.refresh()

        Op(fn, self.ctx.quire, gui_principal(), chosen.id).on_success(done).on_failure(failed).bound_to(  # type: ignore[arg-type]
            self
        ).run()

