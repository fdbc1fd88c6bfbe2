"""The window's folder-sync actions: "Keep in sync" on the selected folder and "Apply sync changes" for a
review folder, with the folder's sync state (watching / polling / pending changes) as their tooltips.

Threading contract: main thread; the toggle, the apply and the state read run in ``Op``s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from app.context import why_base_refuses_changes
from app.ops import Op
from app.startup import person
from knowledge import sync
from knowledge.library import Base, Item

if TYPE_CHECKING:
    from app.window_face import WindowFace


class SyncActions(QObject):
    def __init__(self, window: WindowFace) -> None:
        super().__init__(window)
        self.window = window
        self.act_toggle = window.action("Keep in sync", self.toggle_selected)
        self.act_apply = window.action("Apply sync changes", self.apply_selected)
        self.states: dict[int, sync.SyncState] = {}

    @staticmethod
    def refusal(base: Base | None, chosen: list[Item]) -> str | None:
        if base is None or len(chosen) != 1 or not chosen[0].is_container or not chosen[0].source_path:
            return "Select one folder added from disk to keep it in sync"
        return why_base_refuses_changes(base)

    def update(self, base: Base | None, chosen: list[Item], not_ready: str | None) -> None:
        """Enable the toggle where sync can be turned on or off (``not_ready``: why nothing can be yet)."""
        refusal = not_ready or self.refusal(base, chosen)
        self.act_toggle.setEnabled(refusal is None)
        self.act_toggle.setToolTip(refusal or self.act_toggle.text())
        self._label()

    def toggle_selected(self) -> None:
        """Turn folder sync on or off for the selected folder (the worker's watcher does the rest)."""
        ctx, chosen = self.window.ctx, self.window.selected_items()
        base, quire = ctx.base, ctx.quire
        if base is None or quire is None or len(chosen) != 1:
            return
        folder = chosen[0]

        def done(root: object) -> None:
            text = f"{folder.name!r} is kept in sync." if root is not None else f"{folder.name!r} is no longer synced."
            ctx.info(text)
            self.show_states()

        Op(sync.toggle_sync, quire, base.id, folder.id).bound_to(self).on_success(done).on_failure(ctx.fail).run()

    def show_states(self) -> None:
        """Read the sync state of the base's synced folders; the selected folder's shows in the tooltips."""
        ctx = self.window.ctx
        base, quire = ctx.base, ctx.quire
        if base is None or quire is None:
            return

        def shown(states: dict[int, sync.SyncState]) -> None:
            self.states = states
            self._label()

        Op(sync.states_by_item, quire, base.id).bound_to(self).on_success(shown).on_failure(ctx.fail).run()

    def _label(self) -> None:
        """The toggle reads "Stop syncing", with the folder's sync state as tooltip, on a synced folder;
        "Apply sync changes" is enabled, listing them, on a review folder with changes pending."""
        chosen = self.window.selected_items()
        state = self.states.get(chosen[0].id) if len(chosen) == 1 else None
        self.act_toggle.setText("Stop syncing" if state else "Keep in sync")
        if state and self.act_toggle.isEnabled():
            self.act_toggle.setToolTip(state.line)
        pending = state.pending if state else ()
        self.act_apply.setEnabled(bool(pending) and self.act_toggle.isEnabled())
        self.act_apply.setToolTip("\n".join(pending) if pending else "No sync changes waiting for review")

    def apply_selected(self) -> None:
        """Apply the selected review folder's pending changes (a person's decision, audited)."""
        ctx, chosen = self.window.ctx, self.window.selected_items()
        base, quire = ctx.base, ctx.quire
        state = self.states.get(chosen[0].id) if len(chosen) == 1 else None
        if base is None or quire is None or state is None:
            return

        def done(outcome: sync.Outcome) -> None:
            ctx.info(outcome.stood_down or f"Applied {outcome.applied} change(s).")
            self.show_states()

        Op(sync.apply_pending, quire, state.root_id, person()).bound_to(self).on_success(done).on_failure(
            ctx.fail
        ).run()
