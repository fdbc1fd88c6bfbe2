"""Issue 13 in the window: an agent proposes a folder run over MCP, a person starts it, the audit says who."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from knowledge import folder_runs
from knowledge.agents import access, proposals
from knowledge.agents.server import QuireMCP
from knowledge.compose import open_quire
from knowledge.errors import Forbidden
from knowledge.library import audit
from knowledge.principal import Principal, acting_as
from tests.agents.helpers import error_text, payload, run
from tests.app.conftest import WindowFactory, create_base
from tests.conftest import quire_cli
from tests.support.files import write_tree
from tests.support.prompters import ScriptedPrompter


def _propose(data_dir: Path, folder: Path) -> tuple[dict[str, object], str]:
    """The agent's side, in its own Quire on the same data directory (like a `quire mcp` process)."""
    quire = open_quire(data_dir)
    try:
        server = QuireMCP(quire, agent="claude").server

        async def session() -> tuple[dict[str, object], str]:
            async with Client(server) as client:
                args = {"base": "notes", "folder": str(folder)}
                proposed = payload(await client.call_tool("propose_folder_run", args))
                # no tool starts, deletes, reindexes or reverts anything
                names = {t.name for t in (await client.list_tools()).tools}
                assert not any(w in n for n in names for w in ("start", "delete", "reindex", "revert", "accept"))
                missing = str(folder.parent / "nonexistent")  # inside the allowed folder: looked at
                refused = error_text(await client.call_tool("propose_folder_run", {"base": "notes", "folder": missing}))
                outside = error_text(
                    await client.call_tool("propose_folder_run", {"base": "notes", "folder": "/nonexistent/x"})
                )
                assert "forbidden" in outside and "Agent access" in outside
                return proposed, refused

        return run(session)
    finally:
        quire.close()


def test_agent_proposal_is_started_by_a_person_in_the_window(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    create_base(data_dir, "notes")
    folder = write_tree(tmp_path / "papers", {"a.md": "alpha", "sub/b.txt": "beta", "c.bin": b"\x00\x01"})
    assert quire_cli("mcp", "--allow-root", str(tmp_path), data_dir=data_dir).returncode == 0  # a person's choice
    proposed, refused = _propose(data_dir, folder)
    preview = proposed["preview"]
    assert [e["path"] for e in preview["eligible"]] == ["a.md", "sub/b.txt"]  # type: ignore[index]
    assert preview["cap"] == 200 and preview["ineligible"]  # type: ignore[index]
    assert all("sha256" not in e for e in preview["eligible"] + preview["ineligible"])  # type: ignore[index,operator]
    assert "not_found" in refused and "folder not found" in refused

    window = open_window()
    panel = window.proposals_panel
    window.tabs.setCurrentWidget(panel)
    qtbot.waitUntil(lambda: panel.list.count() == 1, timeout=10_000)
    assert "claude proposes a folder run" in panel.list.item(0).text()
    assert "+ a.md" in panel.preview.toPlainText() and "agent:claude" in panel.preview.toPlainText()

    quire = window.ctx.quire
    assert quire is not None
    proposal_id = int(proposed["proposal_id"])  # type: ignore[call-overload]
    # the agent's own attempts to start are refused by the operations, whichever way it tries
    agent = Principal.agent("claude")
    with pytest.raises(Forbidden):
        proposals.accept_proposal(quire, agent, proposal_id)
    with pytest.raises(Forbidden), acting_as(agent):
        folder_runs.start_run(quire, Principal.person("claude"), "notes", folder)
    assert quire_cli("--as-agent", "claude", "run", "start", "notes", str(folder), data_dir=data_dir).returncode == 5
    assert folder_runs.list_runs(quire, base="notes") == []

    qtbot.mouseClick(panel.start_button, qtbot_button())
    qtbot.waitUntil(lambda: panel.list.count() == 0, timeout=10_000)
    (run_summary,) = folder_runs.list_runs(quire, base="notes")
    person = window_person()
    assert run_summary.run.approved_by == person
    (created,) = audit.list_entries(quire.db, run_id=run_summary.run.id, actions=[audit.RUN_CREATED])
    assert created.actor == person and created.payload["proposed_by"] == "agent:claude"
    accepted = proposals.get_proposal(quire, proposal_id)
    assert accepted.status == "accepted" and accepted.run_id == run_summary.run.id and accepted.decided_by == person
    filed = audit.list_entries(quire.db, actions=[audit.PROPOSAL_FILED, audit.PROPOSAL_ACCEPTED])
    assert [(e.action, e.actor) for e in filed] == [
        (audit.PROPOSAL_FILED, "agent:claude"),
        (audit.PROPOSAL_ACCEPTED, person),
    ]


def test_a_person_dismisses_a_note_proposal_and_the_access_page_shows_calls(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path
) -> None:
    create_base(data_dir, "notes")
    window = open_window()
    quire = window.ctx.quire
    assert quire is not None
    page = window.agent_access_page
    window.tabs.setCurrentWidget(page)
    qtbot.waitUntil(lambda: page.state is not None, timeout=10_000)
    assert not page.enabled_box.isChecked() and "Agent access is off" in page.config.toPlainText()
    page.enabled_box.click()  # a click on the box (its text is wider than the offscreen window)
    qtbot.waitUntil(lambda: page.state is not None and page.state.enabled, timeout=10_000)
    assert access.is_enabled(quire)
    shown = page.config.toPlainText()
    assert '"mcpServers"' in shown and "http://127.0.0.1:" in shown and "Authorization: Bearer " in shown

    proposal = proposals.propose_note(quire, Principal.agent("cursor"), "notes", "Remember the milk", "Shopping")
    access.record_call(quire, Principal.agent("cursor"), "propose_note", True)
    qtbot.mouseClick(page.refresh_button, qtbot_button())
    qtbot.waitUntil(lambda: "agent:cursor" in page.clients.text(), timeout=10_000)
    assert any("propose_note ok" in page.calls.item(i).text() for i in range(page.calls.count()))

    old = page.state.config["http"]["headers"]["Authorization"] if page.state and page.state.config else ""
    qtbot.mouseClick(page.revoke_button, qtbot_button())
    qtbot.waitUntil(lambda: old not in page.config.toPlainText(), timeout=10_000)

    panel = window.proposals_panel
    window.tabs.setCurrentWidget(panel)
    qtbot.waitUntil(lambda: panel.list.count() == 1, timeout=10_000)
    assert "Remember the milk" in panel.preview.toPlainText()
    qtbot.mouseClick(panel.dismiss_button, qtbot_button())
    qtbot.waitUntil(lambda: panel.list.count() == 0, timeout=10_000)
    assert proposals.get_proposal(quire, proposal.id).status == "dismissed"


def test_the_access_page_edits_the_folders_agents_may_propose(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path, prompter: ScriptedPrompter
) -> None:
    folder = write_tree(tmp_path / "papers", {"a.md": "alpha"})
    window = open_window()
    quire = window.ctx.quire
    assert quire is not None
    page = window.agent_access_page
    window.tabs.setCurrentWidget(page)
    qtbot.waitUntil(lambda: page.state is not None, timeout=10_000)
    assert page.roots.item(0).text().startswith("None") and not page.disallow_button.isEnabled()
    prompter.folders = [folder]
    qtbot.mouseClick(page.allow_button, qtbot_button())
    qtbot.waitUntil(lambda: page.state is not None and page.state.roots == [folder.resolve()], timeout=10_000)
    assert access.allowed_roots(quire) == [folder.resolve()] and page.roots.item(0).text() == str(folder.resolve())
    page.roots.setCurrentRow(0)
    qtbot.mouseClick(page.disallow_button, qtbot_button())
    qtbot.waitUntil(lambda: page.state is not None and page.state.roots == [], timeout=10_000)
    assert access.allowed_roots(quire) == []
    changes = [e for e in audit.list_entries(quire.db, actions=[audit.AGENT_ACCESS_CHANGED]) if "count" in e.payload]
    assert [(e.actor, e.payload["allowed_roots"]) for e in changes] == [
        (window_person(), "added"),
        (window_person(), "removed"),
    ]


def qtbot_button() -> Qt.MouseButton:
    return Qt.MouseButton.LeftButton


def window_person() -> str:
    from app.folder_runs_panel import gui_principal

    return gui_principal().label
