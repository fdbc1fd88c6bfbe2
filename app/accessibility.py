"""Accessible names for screen readers: every control a person can reach gets one.

Panels name their important controls explicitly (``setAccessibleName``); ``name_controls`` then gives
every control still without a name the best text it has — its label, tool tip or placeholder — so no
control is announced as just "button" or "edit". ``unnamed_controls`` is what the tests check.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSpinBox,
    QComboBox,
    QHeaderView,
    QLineEdit,
    QPlainTextEdit,
    QStackedWidget,
    QTabBar,
    QTabWidget,
    QTextEdit,
    QWidget,
)

CONTROLS = (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSpinBox,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QTabBar,
    QTextEdit,
)


def _best_text(widget: QWidget) -> str:
    for getter in ("text", "placeholderText", "toolTip", "windowTitle"):
        value = getattr(widget, getter, None)
        text = value() if callable(value) else None
        if isinstance(text, str) and text.strip():
            return text.replace("&", "").strip()
    action = widget.defaultAction() if hasattr(widget, "defaultAction") else None
    if action is not None and action.text():
        return str(action.text()).replace("&", "")
    return widget.objectName()


KINDS = (
    (QComboBox, "choice"),
    (QAbstractItemView, "list"),
    (QPlainTextEdit, "text"),
    (QTextEdit, "text"),
    (QLineEdit, "field"),
)


def _internal(widget: QWidget) -> bool:
    """Parts Qt names itself: headers, a combo box's pop-up list, a line edit's clear button."""
    parent = widget.parentWidget()
    if isinstance(widget, QHeaderView):
        return True
    while parent is not None:
        if isinstance(parent, QComboBox | QLineEdit):
            return True
        parent = parent.parentWidget()
    return False


def _context(widget: QWidget) -> str:
    """Where the control is: the label of the tab it sits in, or the panel's title."""
    child, parent = widget, widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QStackedWidget) and isinstance(parent.parentWidget(), QTabWidget):
            tabs = parent.parentWidget()
            assert isinstance(tabs, QTabWidget)
            index = tabs.indexOf(child)
            if index >= 0:
                return tabs.tabText(index).replace("&", "")
        child, parent = parent, parent.parentWidget()
    window = widget.window()
    return window.windowTitle() if window is not None else ""


def controls(root: QWidget) -> list[QWidget]:
    return [w for w in root.findChildren(QWidget) if isinstance(w, CONTROLS) and not _internal(w)]


def name_controls(root: QWidget) -> None:
    for widget in controls(root):
        if widget.accessibleName():
            continue
        text = _best_text(widget)
        if not text:
            kind = next((k for cls, k in KINDS if isinstance(widget, cls)), "control")
            text = f"{_context(widget)} {kind}".strip()
        widget.setAccessibleName(text)


def unnamed_controls(root: QWidget) -> list[QWidget]:
    return [w for w in controls(root) if not w.accessibleName()]
