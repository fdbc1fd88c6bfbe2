"""The item tree's actions in the main window: add (files, a folder, a note, dropped paths), delete, reindex,
retry the failed, keep from agents / allow agents (the tree's context menu). Each asks what it must (through the
context's prompter), runs its knowledge operation in an ``Op`` off the main thread and announces the changes; a base
that refuses changes gets a message saying why.

A mixin of :class:`app.window.MainWindow` (whose menus, toolbar and drop target call these by name): it uses the
window's context, poller, selection and announcement, declared below.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction

from app import item_rules
from app.context import why_base_refuses_changes
from app.ops import Op
from app.startup import person
from app.team_store import upload_here
from knowledge import lifecycle
from knowledge.library import agent_exclusions
from knowledge.lifecycle import Changes, NoteInput, PathInput
from knowledge.runtime import Quire

if TYPE_CHECKING:
    from PySide6.QtWidgets import QMainWindow, QWidget

    from app.context import AppContext
    from app.poller import Poller
    from knowledge.library import Item

    _Window = QMainWindow  # what the mixin is mixed into, for the type checker
else:
    _Window = object


class ItemActions(_Window):
    """See the module docstring."""

    if TYPE_CHECKING:
        ctx: AppContext
        poller: Poller

        def selected_items(self) -> list[Item]: ...

        def _changed(self, changes: Changes, text: str) -> None: ...

    def add_files(self) -> None:
        paths = self.ctx.prompter.choose_files(self)
        if paths:
            self.add_paths(paths)

    def add_folder(self) -> None:
        folder = self.ctx.prompter.choose_folder(self, "Add a folder")
        if folder is not None:
            self.add_paths([folder])

    def add_note(self) -> None:
        note = self.ctx.prompter.ask_note(self)
        if note is not None:
            title, body = note
            self._add([NoteInput(body, title.strip() or None)], "note")

    def add_paths(self, paths: list[Path]) -> None:
        """Files and folders (chosen or dropped) into the selected base — or a message saying why not."""
        refusal = why_base_refuses_changes(self.ctx.base) if self.ctx.ready else "Quire is still starting."
        if refusal is not None:
            count = f"{len(paths)} item{'s' if len(paths) != 1 else ''}"
            self.ctx.message.emit("warning", f"Cannot add {count}: {refusal}")
            return
        self._add([PathInput(p) for p in paths], f"{len(paths)} item{'s' if len(paths) != 1 else ''}")

    def _add(self, inputs: list[lifecycle.ItemInput], what: str) -> None:
        base, quire = self.ctx.base, self.ctx.quire
        if base is None or quire is None:
            return
        Op(lifecycle.add_items, quire, base.id, inputs, owner=person()).bound_to(self).on_success(
            lambda changes: self._added(quire, changes, item_rules.added_message(changes, what, base.name))
        ).on_failure(self.ctx.fail).run()

    def _added(self, quire: Quire, changes: Changes, text: str) -> None:
        self._changed(changes, text)
        if quire.is_team_store:  # this machine walks what it added and uploads the files, as `quire add` does
            Op(upload_here, quire).bound_to(self).on_success(lambda _jobs: self.poller.poll_now()).on_failure(
                self.ctx.fail
            ).run()

    def delete_selected(self) -> None:
        base, quire, chosen = self.ctx.base, self.ctx.quire, self.selected_items()
        if base is None or quire is None or not chosen:
            return
        names = ", ".join(repr(i.name) for i in chosen[:3]) + (" …" if len(chosen) > 3 else "")
        question = f"Delete {names} from {base.name!r}, with everything inside?\nYour original files are not touched."
        if not self.ctx.prompter.confirm(self, "Delete items", question):
            return
        Op(lifecycle.delete_items, quire, base.id, [i.id for i in chosen]).bound_to(self).on_success(
            lambda changes: self._changed(changes, f"Deleted {len(chosen)} item{'s' if len(chosen) != 1 else ''}.")
        ).on_failure(self.ctx.fail).run()

    def reindex_selected(self) -> None:
        """Reindex the selection. The action is disabled where the guard would refuse; the service still guards."""
        base, quire, chosen = self.ctx.base, self.ctx.quire, self.selected_items()
        if base is None or quire is None or not chosen:
            return
        Op(lifecycle.reindex_items, quire, base.id, [i.id for i in chosen]).bound_to(self).on_success(
            lambda changes: self._changed(changes, "Reindex queued.")
        ).on_failure(self.ctx.fail).run()

    def retry_failed(self) -> None:
        """Reindex only the failed items inside the selection (never the skipped ones); the service guards."""
        base, quire, chosen = self.ctx.base, self.ctx.quire, self.selected_items()
        if base is None or quire is None or not chosen:
            return
        Op(lifecycle.reindex_failed, quire, base.id, [i.id for i in chosen]).bound_to(self).on_success(
            lambda retried: self._changed(retried.changes, f"Retrying {len(retried.item_ids)} failed item(s).")
        ).on_failure(self.ctx.fail).run()

    def make_item_menu(self, tree: QWidget, actions: list[QAction]) -> None:
        """The item tree's context menu: ``actions``, then "Keep from agents" and "Allow agents"."""
        self.act_keep_from_agents = QAction("Keep from agents", self)
        self.act_keep_from_agents.setToolTip("Agents (MCP, --as-agent) never see these items or anything inside them")
        self.act_keep_from_agents.triggered.connect(lambda: self.mark_for_agents(True))
        self.act_allow_agents = QAction("Allow agents", self)
        self.act_allow_agents.setToolTip("Let agents see these items again")
        self.act_allow_agents.triggered.connect(lambda: self.mark_for_agents(False))
        separator = QAction(self)
        separator.setSeparator(True)
        tree.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        tree.addActions([*actions, separator, self.act_keep_from_agents, self.act_allow_agents])

    def mark_for_agents(self, excluded: bool) -> None:
        """Keep the selection from agents (``excluded``) or let agents see it again, through the knowledge operation."""
        base, quire, chosen = self.ctx.base, self.ctx.quire, self.selected_items()
        if base is None or quire is None or not chosen:
            return
        Op(_mark_for_agents, quire, base.id, [i.id for i in chosen], excluded).bound_to(self).on_success(
            lambda changed: self._marked_for_agents(len(chosen), changed, excluded)
        ).on_failure(self.ctx.fail).run()

    def _marked_for_agents(self, chosen: int, changed: int, excluded: bool) -> None:
        state = "kept from agents" if excluded else "visible to agents"
        self.ctx.info(f"{chosen} item{'s' if chosen != 1 else ''} {state} ({changed} changed).")
        self.poller.poll_now()


def _mark_for_agents(quire: Quire, base_id: int, item_ids: list[int], excluded: bool) -> int:
    mark = agent_exclusions.exclude_from_agents if excluded else agent_exclusions.include_for_agents
    return sum(mark(quire, base_id, item_id) for item_id in item_ids)
