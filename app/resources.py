"""Where the app's icons, style sheet and sample data are (a source checkout or a PyInstaller bundle),
and the theme: light or dark after the platform's colour scheme. Icons are SVG (sharp at any DPI)."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPalette
from PySide6.QtWidgets import QApplication

from knowledge.library import Item
from knowledge.sources.formats import format_for

_PARSER_ICONS = {
    "pdf": "pdf",
    "html": "web",
    "code": "code",
    "epub": "book",
    "docx": "word",
    "markdown": "markdown",
    "text": "file",
}


def resources_dir() -> Path:
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle is not None:
        return Path(bundle) / "resources"
    return Path(__file__).resolve().parent.parent / "resources"


@functools.cache
def icon(name: str) -> QIcon:
    """An icon from ``resources/icons`` (``quire`` is the app icon). Call on the main thread."""
    if name == "quire":
        return QIcon(str(resources_dir() / "quire.svg"))
    return QIcon(str(resources_dir() / "icons" / f"{name}.svg"))


def icon_name_for(item: Item) -> str:
    if item.type == "directory":
        return "folder"
    if item.type == "note":
        return "note"
    fmt = format_for(item.name)
    return _PARSER_ICONS.get(fmt.parser, "file") if fmt is not None else "unknown"


# The style sheet is written for light palettes; in a dark one each colour is swapped for its
# counterpart here (surfaces darken, text lightens, the status tints keep their meaning).
DARK_COLOURS = {
    "#ffffff": "#1f232b",
    "#f6f7fb": "#181b21",
    "#f8f9fc": "#20242c",
    "#eef1f7": "#262b35",
    "#eef3fd": "#233049",
    "#e7f0fe": "#233049",
    "#e3e9f5": "#2b3342",
    "#dce7fb": "#2e4a7a",
    "#d6dbe6": "#3a4150",
    "#a5adbd": "#6b7385",
    "#9fb3d9": "#5a72a3",
    "#5b6b85": "#a3afc4",
    "#3a4760": "#c9d2e3",
    "#24324a": "#dde5f3",
    "#1b2a44": "#eef3fc",
    "#3b6fd6": "#6d9bf0",
    "#fff4d6": "#4a3f1e",
    "#fde4e1": "#4d2622",
}


def is_dark(palette: QPalette) -> bool:
    """Whether the platform's palette is dark (window background darker than its text)."""
    return (
        palette.color(QPalette.ColorRole.Window).lightness() < palette.color(QPalette.ColorRole.WindowText).lightness()
    )


def system_is_dark() -> bool:
    hints = QGuiApplication.styleHints()
    scheme = hints.colorScheme() if hints is not None else Qt.ColorScheme.Unknown
    if scheme != Qt.ColorScheme.Unknown:
        return scheme == Qt.ColorScheme.Dark
    return is_dark(QGuiApplication.palette())


def style_sheet(dark: bool = False) -> str:
    """The style sheet, in its dark variant when ``dark`` (the window follows the platform's scheme)."""
    path = resources_dir() / "quire.qss"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if dark:
        text = re.sub(r"#[0-9a-fA-F]{6}", lambda m: DARK_COLOURS.get(m.group(0).lower(), m.group(0)), text)
    return text


def dark_palette() -> QPalette:
    """A dark palette for platforms whose style does not supply one (e.g. Fusion on Linux)."""
    palette = QPalette()
    for role, colour in (
        (QPalette.ColorRole.Window, "#181b21"),
        (QPalette.ColorRole.WindowText, "#e6ebf5"),
        (QPalette.ColorRole.Base, "#1f232b"),
        (QPalette.ColorRole.AlternateBase, "#262b35"),
        (QPalette.ColorRole.Text, "#e6ebf5"),
        (QPalette.ColorRole.Button, "#262b35"),
        (QPalette.ColorRole.ButtonText, "#e6ebf5"),
        (QPalette.ColorRole.Highlight, "#2e4a7a"),
        (QPalette.ColorRole.HighlightedText, "#ffffff"),
        (QPalette.ColorRole.ToolTipBase, "#262b35"),
        (QPalette.ColorRole.ToolTipText, "#e6ebf5"),
        (QPalette.ColorRole.PlaceholderText, "#8a93a6"),
    ):
        palette.setColor(role, QColor(colour))
    return palette


def apply_theme(app: QApplication, dark: bool | None = None) -> bool:
    """Style the application for the platform's scheme (or the one asked for); returns whether dark."""
    dark = system_is_dark() if dark is None else dark
    if dark and not is_dark(app.palette()):
        app.setPalette(dark_palette())
    app.setStyleSheet(style_sheet(dark))
    return dark
