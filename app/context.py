"""What the window's panels share: the open ``Quire``, the bases, the selected base, and messages.

Threading contract: an ``AppContext`` lives on the main thread and its signals are emitted there
(from ``Op`` callbacks or widget handlers). ``quire`` is ``None`` until the background start-up has
opened the data directory; panels check ``ready`` before starting an ``Op``.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.ops import describe_error
from app.prompts import Prompter
from knowledge.library import Base, bases
from knowledge.lifecycle import Changes
from knowledge.runtime import Quire


class AppContext(QObject):
    ready_changed = Signal(bool)
    bases_changed = Signal(list)  # list[Base]
    base_changed = Signal(object)  # Base | None: the selected base (or its new state)
    changes_made = Signal(object)  # Changes: every mutation the GUI made, for views to refresh from
    message = Signal(str, str)  # level, text

    def __init__(self, data_dir: Path, prompter: Prompter, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.data_dir = data_dir
        self.prompter = prompter
        self.quire: Quire | None = None
        self.bases: list[Base] = []
        self.base: Base | None = None

    @property
    def ready(self) -> bool:
        return self.quire is not None

    def attach(self, quire: Quire) -> None:
        self.quire = quire
        self.ready_changed.emit(True)

    def detach(self) -> Quire | None:
        quire, self.quire = self.quire, None
        self.ready_changed.emit(False)
        return quire

    def set_bases(self, bases: list[Base]) -> None:
        """A fresh list of bases; keeps the selection (by id) and re-announces it if it changed."""
        changed = [b.as_dict() for b in bases] != [b.as_dict() for b in self.bases]
        self.bases = list(bases)
        if changed:
            self.bases_changed.emit(self.bases)
        current = self.base
        fresh = next((b for b in bases if current is not None and b.id == current.id), None)
        if fresh is None and current is not None:
            self.select_base(bases[0] if bases else None)
        elif fresh is not None and current is not None and fresh != current:
            self.base = fresh
            self.base_changed.emit(fresh)

    def select_base(self, base: Base | None) -> None:
        if base == self.base:
            return
        self.base = base
        self.base_changed.emit(base)

    def base_by_id(self, base_id: int) -> Base | None:
        return next((b for b in self.bases if b.id == base_id), None)

    def announce(self, changes: Changes) -> None:
        self.changes_made.emit(changes)

    def info(self, text: str) -> None:
        self.message.emit("info", text)

    def warn(self, text: str) -> None:
        self.message.emit("warning", text)

    def fail(self, exc: BaseException) -> None:
        self.message.emit("error", describe_error(exc))


def why_base_refuses_changes(base: Base | None) -> str | None:
    """Why nothing can be added to this base right now (the service would refuse it the same way)."""
    if base is None:
        return "Select or create a knowledge base first."
    refusal = bases.failed_refusal(base) or bases.locked_refusal(base, "add to it")
    return None if refusal is None else f"{refusal[0].upper()}{refusal[1:]}."
