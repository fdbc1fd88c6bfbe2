"""The search panel's tag control: one of the tags the base's documents carry, or any.

Choosing a tag is the same filter as typing ``tag:NAME`` (``knowledge.search.tag_name`` reads it the way the
typed syntax does): the panel narrows it with the typed filters inside the search, so a chosen tag and a typed
``tag:`` widen to either, as two typed ones do. The list is ``knowledge.search.base_tags``: every tag stored
in the base's items (front-matter and inline ``#tags`` of Markdown notes), most used first, with its count.

Threading contract: main thread. The tags are read in an ``Op`` when the base changes, when the GUI changed
items, and each time the list is opened (the worker may have indexed tagged notes since); the list is
refilled when the answer arrives, only if it changed, keeping the chosen tag. A chosen tag no longer
carried by any document stays chosen (marked so) until changed: a filter never drops out by itself.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QWidget

from app.context import AppContext
from app.ops import Op
from knowledge.library import Base
from knowledge.search import base_tags

log = logging.getLogger(__name__)

ANY_TAG = "Any tag"


class TagFilter(QComboBox):
    """``tag()`` is the chosen tag (``None``: any); ``filled`` is emitted after each refill (tests wait on it)."""

    filled = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._base_id: int | None = None
        self._entries: list[tuple[str, str]] = []  # (label, tag) after "any", as listed now
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.setToolTip("Only documents with this tag (the same as typing tag:name)")
        self.addItem(ANY_TAG, None)
        ctx.base_changed.connect(self._base_changed)
        ctx.changes_made.connect(lambda _changes: self.refresh())

    def tag(self) -> str | None:
        data = self.currentData()
        return data if isinstance(data, str) else None

    def refresh(self) -> None:
        base, quire = self.ctx.base, self.ctx.quire
        if base is None or quire is None:
            return
        Op(base_tags, quire, base.id).bound_to(self).on_success(lambda tags: self._fill(base.id, tags)).on_failure(
            lambda exc: log.info("the base's tags could not be listed: %s", exc)
        ).run()

    def showPopup(self) -> None:
        self.refresh()
        super().showPopup()

    def _base_changed(self, base: Base | None) -> None:
        base_id = None if base is None else base.id
        if base_id != self._base_id:  # another base's tags are not this one's: back to any, nothing listed
            self._base_id = base_id
            self._show([], None)
        self.refresh()

    def _fill(self, base_id: int, tags: list[tuple[str, int]]) -> None:
        if base_id != self._base_id:
            return  # the answer for a base no longer shown
        chosen = self.tag()
        entries = [(f"{name} ({count})", name) for name, count in tags]
        if chosen is not None and chosen not in {name for name, _count in tags}:
            entries.append((f"{chosen} (no document)", chosen))
        if entries != self._entries:
            self._show(entries, chosen)
        self.filled.emit()

    def _show(self, entries: list[tuple[str, str]], chosen: str | None) -> None:
        """Refill the list without a change signal: the chosen tag stays what it was."""
        self.blockSignals(True)
        self.clear()
        self.addItem(ANY_TAG, None)
        for label, name in entries:
            self.addItem(label, name)
        self.setCurrentIndex(max(0, self.findData(chosen)) if chosen is not None else 0)
        self.blockSignals(False)
        self._entries = entries
