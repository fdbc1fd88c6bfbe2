"""Where the app's icons, style sheet and sample data are (a source checkout or a PyInstaller bundle)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from PySide6.QtGui import QIcon

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


def style_sheet() -> str:
    path = resources_dir() / "quire.qss"
    return path.read_text(encoding="utf-8") if path.is_file() else ""
