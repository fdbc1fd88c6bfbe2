"""How to open a source at a hit's location: the URL or the command handed to the platform's opener.

Pure functions (no Qt), so tests assert exactly what would be handed over:

* a PDF opens through the desktop with ``file:///x.pdf#page=N`` — the open-parameters fragment that
  Acrobat, Firefox/Chromium's viewers, Evince (recent) and Okular accept; a viewer that ignores it
  still opens the file, and the location is copied to the clipboard too;
* a text file opens in the person's editor at the line when ``$VISUAL``/``$EDITOR`` names one whose line
  argument is known (VS Code ``-g file:line``, Sublime ``file:line``, vim/nvim/emacs/nano/gedit
  ``+line file``, Kate ``--line N file``); otherwise the file opens through the desktop and
  ``file:line`` is copied to the clipboard.

Nothing that could run is ever handed over: the desktop gets only document types Quire reads (text,
Markdown, PDF, Word, EPUB, HTML, images: :data:`DESKTOP_SUFFIXES`), checked on the path and on where a
link leads, since the desktop picks a program by the name and would *run* an ``x.desktop``, ``.sh`` or
``.exe``. Source code Quire reads (``.py``, ``.sh``…) opens only in the person's own editor. Anything
else comes back ``refused`` with the reason, for the window to show. Editor command lines put ``--``
before the path, so no name is ever taken for an option.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from knowledge.library import Location
from knowledge.sources import SUPPORTED_SUFFIXES

# documents the desktop may open: a viewer or an office program, never an interpreter or a launcher
DESKTOP_SUFFIXES = SUPPORTED_SUFFIXES & frozenset(
    {
        *(".txt", ".text", ".log", ".csv", ".tsv", ".rst", ".org", ".adoc", ".asciidoc", ".tex", ".bib"),
        *(".srt", ".vtt", ".md", ".markdown", ".mdown", ".mkd", ".pdf", ".docx", ".epub"),
        *(".html", ".htm", ".xhtml", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp", ".gif"),
        *(".heic", ".heif"),
    }
)


@dataclass(frozen=True)
class OpenRequest:
    path: Path
    url: str | None = None  # open through the desktop (QDesktopServices.openUrl)
    argv: tuple[str, ...] = ()  # or start this program (detached)
    clipboard: str | None = None  # the location, copied where the viewer may not honour it
    refused: str | None = None  # why nothing is handed over (then url and argv are empty)

    @property
    def description(self) -> str:
        return self.clipboard or str(self.path)


_LINE_STYLES = {
    "code": "goto",
    "codium": "goto",
    "subl": "colon",
    "vim": "plus",
    "nvim": "plus",
    "vi": "plus",
    "emacs": "plus",
    "nano": "plus",
    "gedit": "plus",
    "kate": "kate",
}


def _file_url(path: Path) -> str:
    return path.resolve().as_uri()


def _editor_argv(editor: str, path: Path, line: int) -> tuple[str, ...] | None:
    try:
        words = shlex.split(editor)
    except ValueError:
        return None
    if not words:
        return None
    style = _LINE_STYLES.get(Path(words[0]).name)
    target = str(path.absolute())
    if style == "goto":
        return (*words, "-g", "--", f"{target}:{line}")
    if style == "colon":
        return (*words, "--", f"{target}:{line}")
    if style == "plus":
        return (*words, f"+{line}", "--", target)
    if style == "kate":
        return (*words, "--line", str(line), "--", target)
    return None


def _suffixes(path: Path) -> set[str]:
    """The path's own suffix and, for a link, its target's: the desktop may judge either."""
    found = {path.suffix.lower()}
    with contextlib.suppress(OSError, RuntimeError):  # a link loop: its own suffix decides
        found.add(path.resolve().suffix.lower())
    return found


def refusal(path: Path, *, editor: bool = False) -> str | None:
    """Why ``path`` is not handed over (None: it may be); ``editor``: to the person's own editor."""
    suffixes = _suffixes(path)
    allowed = SUPPORTED_SUFFIXES if editor else DESKTOP_SUFFIXES
    if suffixes <= allowed:
        return None
    shown = ", ".join(sorted(s or "(no extension)" for s in suffixes - allowed))
    if not editor and suffixes <= SUPPORTED_SUFFIXES:
        return f"{path.name} is not opened: a {shown} file could run as a program; set $EDITOR to open it there"
    return f"{path.name} is not opened: a {shown} file is no document Quire reads and could run as a program"


def open_request(path: Path, location: Location, env: Mapping[str, str] | None = None) -> OpenRequest:
    """What to hand the platform to open ``path`` at ``location`` (see the module docstring)."""
    env = os.environ if env is None else env
    refused = refusal(path, editor=True)
    if refused is not None:
        return OpenRequest(path, refused=refused)
    if location.page is not None and path.suffix.lower() == ".pdf" and refusal(path) is None:
        return OpenRequest(
            path, url=f"{_file_url(path)}#page={location.page}", clipboard=f"{path} page {location.page}"
        )
    if location.line_start is not None:
        for name in ("VISUAL", "EDITOR"):
            argv = _editor_argv(env.get(name, ""), path, location.line_start)
            if argv is not None:
                return OpenRequest(path, argv=argv)
    refused = refusal(path)
    if refused is not None:
        return OpenRequest(path, refused=refused)
    if location.line_start is not None:
        return OpenRequest(path, url=_file_url(path), clipboard=f"{path}:{location.line_start}")
    return OpenRequest(path, url=_file_url(path))
