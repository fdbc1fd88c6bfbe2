"""The GUI tests' prompter: answers the window's questions from a script and records what it was asked.

Unlike ``app.prompts.YesPrompter`` (which says yes to everything, for scripts that drive the window),
this one lets a test choose each answer and then check which questions were put. ``parent`` is typed
``object`` (wider than the protocol's ``QWidget``, so it still satisfies ``app.prompts.Prompter``): this
module stays Qt-free like the rest of ``tests/support``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ScriptedPrompter:
    """Answers the window's questions from a script and records what it was asked."""

    confirm_answers: list[bool] = field(default_factory=list)
    texts: list[str | None] = field(default_factory=list)
    notes: list[tuple[str, str] | None] = field(default_factory=list)
    files: list[list[Path]] = field(default_factory=list)
    folders: list[Path | None] = field(default_factory=list)
    save_files: list[Path | None] = field(default_factory=list)
    open_files: list[Path | None] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    opened: list[Path] = field(default_factory=list)
    opened_at: list[object] = field(default_factory=list)  # app.open_at.OpenRequest values

    def confirm(self, parent: object, title: str, text: str) -> bool:
        self.asked.append(text)
        return self.confirm_answers.pop(0) if self.confirm_answers else True

    def ask_text(self, parent: object, title: str, label: str, text: str = "") -> str | None:
        self.asked.append(title)
        return self.texts.pop(0) if self.texts else None

    def ask_note(self, parent: object) -> tuple[str, str] | None:
        return self.notes.pop(0) if self.notes else None

    def choose_files(self, parent: object) -> list[Path]:
        return self.files.pop(0) if self.files else []

    def choose_folder(self, parent: object, title: str) -> Path | None:
        return self.folders.pop(0) if self.folders else None

    def open_path(self, path: Path) -> bool:
        self.opened.append(path)
        return True

    def choose_save_file(self, parent: object, title: str, suggested: str) -> Path | None:
        self.asked.append(title)
        return self.save_files.pop(0) if self.save_files else None

    def choose_open_file(self, parent: object, title: str) -> Path | None:
        self.asked.append(title)
        return self.open_files.pop(0) if self.open_files else None

    def open_at(self, request: object) -> bool:
        self.opened_at.append(request)
        return True
