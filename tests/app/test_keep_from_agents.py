"""The item tree's context menu keeps the selection from agents and lets agents see it again, through the
knowledge operation (off the main thread), as an agent reading the base then finds."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from knowledge.errors import NotFound
from knowledge.library import agent_exclusions
from knowledge.lifecycle import operations
from knowledge.principal import Principal, acting_as
from tests.app.conftest import WindowFactory, create_base, select_ids, tree_items
from tests.support.prompters import ScriptedPrompter


def test_keep_from_agents_and_allow_agents_in_the_item_menu(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, prompter: ScriptedPrompter
) -> None:
    base = create_base(data_dir, "notes")
    window = open_window()
    prompter.notes = [("Diary", "private thoughts")]
    window.add_note()
    qtbot.waitUntil(lambda: [i.name for i in tree_items(window.model)] == ["Diary"], timeout=10_000)
    note = tree_items(window.model)[0]
    quire = window.ctx.quire
    assert quire is not None
    assert window.act_keep_from_agents in window.tree.actions() and window.act_allow_agents in window.tree.actions()
    select_ids(window, [note.id])
    assert window.act_keep_from_agents.isEnabled()

    window.act_keep_from_agents.trigger()
    qtbot.waitUntil(lambda: agent_exclusions.kept_from_agents(quire, base.id) == {note.id}, timeout=10_000)
    qtbot.waitUntil(lambda: "kept from agents" in window.statusBar().currentMessage(), timeout=10_000)
    with acting_as(Principal.agent("bot")), pytest.raises(NotFound):
        operations.get_item(quire, base.id, note.id)

    window.act_allow_agents.trigger()
    qtbot.waitUntil(lambda: agent_exclusions.kept_from_agents(quire, base.id) == frozenset(), timeout=10_000)
    with acting_as(Principal.agent("bot")):
        assert operations.get_item(quire, base.id, note.id).name == "Diary"
