"""Inline, non-modal notices at the top of the window: a message bar and the start-up recovery notice.

A notice never blocks (no modal dialog): the person reads it while working, and tests read ``text()``
and press its buttons. Main thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

LEVELS = ("info", "warning", "error")


class MessageBar(QFrame):
    """One line of text with a level (``info``, ``warning``, ``error``), optional actions and a close button."""

    def __init__(self, object_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(object_name)
        self.level = "info"
        self._label = QLabel()
        self._label.setWordWrap(True)
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(10, 6, 6, 6)
        self._layout.addWidget(self._label, 1)
        self._buttons: dict[str, QPushButton] = {}
        self._close = QPushButton("Dismiss")
        self._close.setFlat(True)
        self._close.clicked.connect(self.dismiss)
        self._layout.addWidget(self._close)
        self.hide()

    def text(self) -> str:
        return "" if self.isHidden() else self._label.text()

    def button(self, label: str) -> QPushButton | None:
        return self._buttons.get(label)

    def show_message(
        self, text: str, level: str = "info", actions: Sequence[tuple[str, Callable[[], None]]] = ()
    ) -> None:
        self.level = level if level in LEVELS else "info"
        self.setProperty("level", self.level)
        self.style().unpolish(self)
        self.style().polish(self)
        self._label.setText(text)
        self._set_actions(actions)
        self.show()

    def _set_actions(self, actions: Sequence[tuple[str, Callable[[], None]]]) -> None:
        for button in self._buttons.values():
            self._layout.removeWidget(button)
            button.deleteLater()
        self._buttons = {}
        for position, (label, callback) in enumerate(actions, start=1):
            button = QPushButton(label)
            button.clicked.connect(callback)
            self._layout.insertWidget(position, button)
            self._buttons[label] = button

    def dismiss(self) -> None:
        self._set_actions(())
        self.hide()
