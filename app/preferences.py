"""The Preferences dialog: every key of ``knowledge.preferences``, and agent access (shown from its own room).

The dialog and ``quire config`` read and write the same values through the same module, so a value set
here is what ``quire config get`` prints, and the other way round. Values load and save in ``Op``s;
a value the module refuses keeps the dialog open with the module's message next to the buttons.

Threading contract: main thread; the database is only touched in ``Op``s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.accessibility import name_controls
from app.context import AppContext
from app.ops import Op
from knowledge import agents, preferences
from knowledge.errors import KnowledgeError
from knowledge.paths import default_data_dir
from knowledge.runtime import Quire

CHOICES = {
    "bases.default_precision": ("auto", "fp32", "bf16"),
    "bases.default_backend": ("auto", "openvino", "torch"),
    "worker.pause_on_battery": ("no", "yes"),
}
INT_RANGES = {
    "bases.default_chunk_size": (16, 254),
    "worker.threads": (1, 16),
    "worker.nice": (0, 19),
    "ingest.max_file_mb": (1, 50),
    "folder_runs.max_descendants": (0, 1_000_000),
    "sync.interval_minutes": (0, 10_080),
}


@dataclass(frozen=True)
class Loaded:
    values: dict[str, Any]
    agents_enabled: bool


def load(quire: Quire) -> Loaded:
    return Loaded(preferences.list_values(quire.db), agents.access.is_enabled(quire))


def save(quire: Quire, changed: dict[str, str]) -> dict[str, Any]:
    """Validate every changed value first, then store them: one bad value stores nothing."""
    for key, text in changed.items():
        preferences.preference(key).parse(text)
    return {key: preferences.set_value(quire.db, key, text) for key, text in changed.items()}


class PreferencesDialog(QDialog):
    """See the module docstring. ``loaded`` / ``saved`` fire when the Op came back (tests wait on them)."""

    loaded = Signal()
    saved = Signal(dict)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle("Preferences")
        self.setObjectName("preferencesDialog")
        self.fields: dict[str, QWidget] = {}
        self.is_loaded = False
        self._shown: dict[str, str] = {}
        form = QFormLayout()
        for key, pref in preferences.PREFERENCES.items():
            field = self._field(key)
            field.setAccessibleName(pref.label)
            field.setToolTip(pref.help + ("" if pref.applies == "at once" else f" — applies {pref.applies}"))
            self.fields[key] = field
            label = pref.label + ("" if pref.applies == "at once" else f" ({pref.applies})")
            form.addRow(label, field)
        self.agent_access = QLabel("…")
        self.agent_access.setAccessibleName("Agent server")
        form.addRow("Agent server (MCP)", self.agent_access)
        self.error = QLabel("")
        self.error.setObjectName("preferencesError")
        self.error.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.apply)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addStretch(1)
        layout.addWidget(self.buttons)
        self.resize(600, 520)
        name_controls(self)

    def _field(self, key: str) -> QWidget:
        if key in CHOICES:
            combo = QComboBox()
            combo.addItems(list(CHOICES[key]))
            return combo
        if key in INT_RANGES:
            spin = QSpinBox()
            spin.setRange(*INT_RANGES[key])
            return spin
        if key == "ingest.ignore_patterns":
            patterns = QPlainTextEdit()
            patterns.setPlaceholderText("one gitignore pattern per line, e.g. *.tmp or build/")
            patterns.setMaximumHeight(90)
            return patterns
        edit = QLineEdit()
        if key == preferences.DATA_DIR:
            edit.setPlaceholderText(f"default: {default_data_dir()}")
        return edit

    def text_of(self, key: str) -> str:
        field = self.fields[key]
        if isinstance(field, QComboBox):
            return field.currentText()
        if isinstance(field, QSpinBox):
            return str(field.value())
        if isinstance(field, QPlainTextEdit):
            return field.toPlainText()
        assert isinstance(field, QLineEdit)
        return field.text()

    def set_text(self, key: str, text: str) -> None:
        field = self.fields[key]
        if isinstance(field, QComboBox):
            field.setCurrentText(text)
        elif isinstance(field, QSpinBox):
            field.setValue(int(text))
        elif isinstance(field, QPlainTextEdit):
            field.setPlainText(text)
        elif isinstance(field, QLineEdit):
            field.setText(text)

    def load(self) -> None:
        self.is_loaded = False
        quire = self.ctx.quire
        if quire is not None:
            Op(load, quire).bound_to(self).on_success(self._loaded).on_failure(self.ctx.fail).run()

    def _loaded(self, loaded: Loaded) -> None:
        for key, value in loaded.values.items():
            text = preferences.PREFERENCES[key].show(value)
            self.set_text(key, text)
            self._shown[key] = self.text_of(key)
        state = "on" if loaded.agents_enabled else "off"
        self.agent_access.setText(f"{state} — change it in the Agent access tab")
        self.is_loaded = True
        self.loaded.emit()

    def apply(self) -> None:
        quire = self.ctx.quire
        if quire is None or not self.is_loaded:
            return
        changed = {key: self.text_of(key) for key in self.fields if self.text_of(key) != self._shown.get(key)}
        if not changed:
            self.accept()
            return
        self.buttons.setEnabled(False)
        Op(save, quire, changed).bound_to(self).on_success(self._saved).on_failure(self._refused).run()

    def _saved(self, stored: dict[str, Any]) -> None:
        self.buttons.setEnabled(True)
        restart = [preferences.PREFERENCES[k].label for k in stored if preferences.PREFERENCES[k].applies != "at once"]
        note = f" ({', '.join(restart)}: applies later, as noted)" if restart else ""
        self.ctx.info(f"Preferences saved{note}.")
        self.saved.emit(stored)
        self.accept()

    def _refused(self, exc: BaseException) -> None:
        self.buttons.setEnabled(True)
        if isinstance(exc, KnowledgeError):
            self.error.setText(str(exc))
        else:
            self.ctx.fail(exc)
