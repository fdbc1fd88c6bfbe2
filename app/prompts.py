"""Everything that asks the person something, behind one small interface the window is given.

The desktop uses ``QtPrompter`` (modal dialogs, file choosers, ``QDesktopServices``). Tests hand the
window a scripted prompter instead, so no modal dialog ever blocks a test and every answer is explicit.
All methods are called on the Qt main thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QProcess, QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QInputDialog,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.open_at import OpenRequest, refusal


class Prompter(Protocol):
    def confirm(self, parent: QWidget, title: str, text: str) -> bool: ...
    def ask_text(self, parent: QWidget, title: str, label: str, text: str = "") -> str | None: ...
    def ask_note(self, parent: QWidget) -> tuple[str, str] | None: ...
    def choose_files(self, parent: QWidget) -> list[Path]: ...
    def choose_folder(self, parent: QWidget, title: str) -> Path | None: ...
    def open_path(self, path: Path) -> bool: ...
    def choose_save_file(self, parent: QWidget, title: str, suggested: str) -> Path | None: ...
    def choose_open_file(self, parent: QWidget, title: str) -> Path | None: ...
    def open_at(self, request: OpenRequest) -> bool: ...


class NoteDialog(QDialog):
    """A title and a body: what ``add note`` asks for."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add a note")
        self.title = QLineEdit(placeholderText="Title (optional)")
        self.body = QPlainTextEdit(placeholderText="Write the note…")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        for widget in (self.title, self.body, buttons):
            layout.addWidget(widget)
        self.resize(480, 320)


class QtPrompter:
    """The real thing: modal dialogs on the main thread."""

    def confirm(self, parent: QWidget, title: str, text: str) -> bool:
        buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
        return QMessageBox.question(parent, title, text, buttons) == QMessageBox.StandardButton.Yes

    def ask_text(self, parent: QWidget, title: str, label: str, text: str = "") -> str | None:
        value, ok = QInputDialog.getText(parent, title, label, QLineEdit.EchoMode.Normal, text)
        return value if ok else None

    def ask_note(self, parent: QWidget) -> tuple[str, str] | None:
        dialog = NoteDialog(parent)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return None
        return dialog.title.text(), dialog.body.toPlainText()

    def choose_files(self, parent: QWidget) -> list[Path]:
        names, _filter = QFileDialog.getOpenFileNames(parent, "Add files")
        return [Path(n) for n in names]

    def choose_folder(self, parent: QWidget, title: str) -> Path | None:
        name = QFileDialog.getExistingDirectory(parent, title)
        return Path(name) if name else None

    def open_path(self, path: Path) -> bool:
        if refusal(path) is not None:  # never a program or launcher, whoever asks (app.open_at)
            return False
        return bool(QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))))

    def choose_save_file(self, parent: QWidget, title: str, suggested: str) -> Path | None:
        name, _filter = QFileDialog.getSaveFileName(parent, title, suggested, "Quire base (*.quirebase)")
        return Path(name) if name else None

    def choose_open_file(self, parent: QWidget, title: str) -> Path | None:
        name, _filter = QFileDialog.getOpenFileName(parent, title, "", "Quire base (*.quirebase);;All files (*)")
        return Path(name) if name else None

    def open_at(self, request: OpenRequest) -> bool:
        """Hand the request to the platform; copy the location where the viewer may not honour it."""
        if request.refused is not None:
            return False
        if request.clipboard:
            clipboard = QGuiApplication.clipboard()
            if clipboard is not None:
                clipboard.setText(request.clipboard)
        if request.argv and QProcess.startDetached(request.argv[0], list(request.argv[1:]))[0]:
            return True
        if request.url is not None:
            return bool(QDesktopServices.openUrl(QUrl(request.url)))
        return self.open_path(request.path)


class YesPrompter:
    """Answers yes and opens nothing: for scripts that drive the window themselves (screenshots, probes)."""

    def confirm(self, parent: QWidget, title: str, text: str) -> bool:
        return True

    def ask_text(self, parent: QWidget, title: str, label: str, text: str = "") -> str | None:
        return None

    def ask_note(self, parent: QWidget) -> tuple[str, str] | None:
        return None

    def choose_files(self, parent: QWidget) -> list[Path]:
        return []

    def choose_folder(self, parent: QWidget, title: str) -> Path | None:
        return None

    def open_path(self, path: Path) -> bool:
        return True

    def choose_save_file(self, parent: QWidget, title: str, suggested: str) -> Path | None:
        return None

    def choose_open_file(self, parent: QWidget, title: str) -> Path | None:
        return None

    def open_at(self, request: OpenRequest) -> bool:
        return True
