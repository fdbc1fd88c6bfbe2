"""How to open a source at a hit's location: the URL or the command handed to the platform's opener.

Pure functions (no Qt), so tests assert exactly what would be handed over:

* a PDF opens through the desktop with ``file:///x.pdf#page=N`` — the open-parameters fragment that
  Acrobat, Firefox/Chromium's viewers, Evince (recent) and Okular accept; a viewer that ignores it
  still opens the file, and the location is copied to the clipboard too;
* a text file opens in the person's editor at the line when ``$VISUAL``/``$EDITOR`` names one whose line
  argument is known (VS Code ``-g file:line``, Sublime ``file:line``, vim/nvim/emacs/nano/gedit
  ``+line file``, Kate ``--line N file``); otherwise the file opens through the desktop and
  ``file:line`` is copied to the clipboard.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from knowledge.library import Location


@dataclass(frozen=True)
class OpenRequest:
    path: Path
    url: str | None = None  # open through the desktop (QDesktopServices.openUrl)
    argv: tuple[str, ...] = ()  # or start this program (detached)
    clipboard: str | None = None  # the location, copied where the viewer may not honour it

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
    target = str(path)
    if style == "goto":
        return (*words, "-g", f"{target}:{line}")
    if style == "colon":
        return (*words, f"{target}:{line}")
    if style == "plus":
        return (*words, f"+{line}", target)
    if style == "kate":
        return (*words, "--line", str(line), target)
    return None


def open_request(path: Path, location: Location, env: Mapping[str, str] | None = None) -> OpenRequest:
    """What to hand the platform to open ``path`` at ``location`` (see the module docstring)."""
    env = os.environ if env is None else env
    if location.page is not None and path.suffix.lower() == ".pdf":
        return OpenRequest(
            path, url=f"{_file_url(path)}#page={location.page}", clipboard=f"{path} page {location.page}"
        )
    if location.line_start is not None:
        for name in ("VISUAL", "EDITOR"):
            argv = _editor_argv(env.get(name, ""), path, location.line_start)
            if argv is not None:
                return OpenRequest(path, argv=argv)
        return OpenRequest(path, url=_file_url(path), clipboard=f"{path}:{location.line_start}")
    return OpenRequest(path, url=_file_url(path))
