"""The "Agent access" page: let AI agents read this data directory over MCP (off by default).

It turns the server setting on or off, shows the ready-to-paste client configuration (Claude Desktop's
stdio entry, or the HTTP URL and bearer token), keeps the list of folders agents may propose runs over
(none by default), lists the agents seen and their recent calls (from the audit log) and replaces the
token. Everything runs through ``Op``s on ``knowledge.agents.access``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.context import AppContext
from app.ops import Op
from app.run_reads import gui_principal, when
from app.self_command import quire_command
from knowledge.agents import access
from knowledge.runtime import Quire


@dataclass(frozen=True)
class AccessState:
    enabled: bool
    config: dict[str, Any] | None  # only while enabled (it carries the token)
    calls: list[access.Call]
    roots: list[Path]


def read_state(quire: Quire) -> AccessState:
    """Runs in an ``Op``."""
    enabled = access.is_enabled(quire)
    command = quire_command("--data-dir", str(quire.data_dir), "mcp")
    config = access.client_config(quire.data_dir, command) if enabled else None
    return AccessState(enabled, config, access.recent_calls(quire, limit=50), access.allowed_roots(quire))


def config_text(config: dict[str, Any]) -> str:
    http = config["http"]
    return str(
        "Claude Desktop (claude_desktop_config.json), or any client that launches a command (stdio):\n"
        + json.dumps({"mcpServers": config["mcpServers"]}, indent=2)
        + "\n\nOver HTTP: run\n  "
        + http["command"]
        + f"\nthen connect to {http['url']} with the header\n  Authorization: {http['headers']['Authorization']}\n"
    )


class AgentAccessPage(QWidget):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.state: AccessState | None = None
        self.enabled_box = QCheckBox("Let AI agents read the knowledge bases of this data directory (MCP)")
        self.explain = QLabel(
            "Agents can search and read; anything they want to add waits as a proposal until you start it."
        )
        self.config = QPlainTextEdit()
        self.config.setReadOnly(True)
        self.roots_label = QLabel("Folders agents may propose to add (nothing elsewhere is looked at):")
        self.roots = QListWidget()
        self.allow_button = QPushButton("Allow a folder…")
        self.disallow_button = QPushButton("Remove folder")
        self.clients = QLabel("")
        self.calls = QListWidget()
        self.revoke_button = QPushButton("Revoke token")
        self.refresh_button = QPushButton("Refresh")
        buttons = QHBoxLayout()
        buttons.addWidget(self.revoke_button)
        buttons.addWidget(self.refresh_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.enabled_box)
        layout.addWidget(self.explain)
        layout.addWidget(self.config, 2)
        layout.addWidget(self.roots_label)
        layout.addWidget(self.roots, 1)
        root_buttons = QHBoxLayout()
        root_buttons.addWidget(self.allow_button)
        root_buttons.addWidget(self.disallow_button)
        root_buttons.addStretch(1)
        layout.addLayout(root_buttons)
        layout.addWidget(self.clients)
        layout.addWidget(self.calls, 1)
        layout.addLayout(buttons)
        self.enabled_box.clicked.connect(self.set_enabled)
        self.revoke_button.clicked.connect(self.revoke)
        self.refresh_button.clicked.connect(self.refresh)
        self.allow_button.clicked.connect(self.allow_folder)
        self.disallow_button.clicked.connect(self.disallow_folder)
        self._show(None)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.refresh()

    def refresh(self) -> None:
        if self.ctx.ready:
            Op(read_state, self.ctx.quire).on_success(self._show).on_failure(self.ctx.fail).bound_to(self).run()

    def _show(self, state: AccessState | None) -> None:
        self.state = state
        enabled = state is not None and state.enabled
        self.enabled_box.setChecked(enabled)
        self.revoke_button.setEnabled(enabled)
        self.config.setPlainText(
            config_text(state.config) if state is not None and state.config else "Agent access is off."
        )
        self.roots.clear()
        for root in state.roots if state is not None else []:
            self.roots.addItem(str(root))
        if state is not None and not state.roots:
            self.roots.addItem("None: agents cannot propose folder runs.")
        self.disallow_button.setEnabled(state is not None and bool(state.roots))
        calls = state.calls if state is not None else []
        seen = access.clients(calls)
        self.clients.setText("Agents seen: " + (", ".join(seen) if seen else "none yet"))
        self.calls.clear()
        for c in calls:
            outcome = "" if c.ok is None else (" ok" if c.ok else " refused")
            self.calls.addItem(f"{when(c.at)}  {c.actor}  {c.tool or c.action}{outcome}")

    def set_enabled(self, on: bool) -> None:
        if not self.ctx.ready:
            return
        Op(access.set_enabled, self.ctx.quire, gui_principal(), on).on_success(lambda _on: self.refresh()).on_failure(
            self.ctx.fail
        ).bound_to(self).run()

    def revoke(self) -> None:
        if not self.ctx.ready:
            return
        if not self.ctx.prompter.confirm(self, "Revoke token", "Clients using the current token will be refused."):
            return
        Op(access.revoke_token, self.ctx.quire, gui_principal()).on_success(lambda _t: self.refresh()).on_failure(
            self.ctx.fail
        ).bound_to(self).run()

    def allow_folder(self) -> None:
        if not self.ctx.ready:
            return
        folder = self.ctx.prompter.choose_folder(self, "Folder agents may propose to add")
        if folder is None:
            return
        Op(access.allow_root, self.ctx.quire, gui_principal(), folder).on_success(
            lambda _roots: self.refresh()
        ).on_failure(self.ctx.fail).bound_to(self).run()

    def disallow_folder(self) -> None:
        chosen = self.roots.currentItem()
        if not self.ctx.ready or self.state is None or chosen is None or not self.state.roots:
            return
        Op(access.disallow_root, self.ctx.quire, gui_principal(), Path(chosen.text())).on_success(
            lambda _roots: self.refresh()
        ).on_failure(self.ctx.fail).bound_to(self).run()
