"""The bases sidebar says which bases are multilingual, and makes one: its label and tooltip, from the real
base on the real model's settings (no model is loaded: creating a base only records them)."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from tests.app.conftest import WindowFactory
from tests.support.prompters import ScriptedPrompter


def test_the_sidebar_creates_a_multilingual_base_and_marks_it(
    qtbot: QtBot, open_window: WindowFactory, prompter: ScriptedPrompter
) -> None:
    window = open_window()
    panel = window.bases_panel
    prompter.texts = ["English notes"]
    panel.create_base()
    qtbot.waitUntil(lambda: panel.list.count() == 1, timeout=30_000)
    prompter.texts = ["Welt"]
    panel.create_multilingual_base()
    qtbot.waitUntil(lambda: panel.list.count() == 2, timeout=30_000)
    entries = {panel.list.item(r).text(): panel.list.item(r) for r in range(panel.list.count())}
    assert set(entries) == {"English notes", "Welt  (multilingual)"}
    tip = entries["Welt  (multilingual)"].toolTip()
    assert tip.startswith("multilingual: a query in one language finds documents in another")
    assert "multilingual-e5-small · q4" in tip
    assert "multilingual" not in entries["English notes"].toolTip()
    assert window.ctx.base is not None and window.ctx.base.name == "Welt" and window.ctx.base.multilingual
