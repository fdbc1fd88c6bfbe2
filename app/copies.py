"""Private copies of a base's documents, for the desktop to open when the original is gone.

A shared, predictable place (``/tmp/quire-copies/<id>/<name>``) would let another user of the machine
read a private document, or plant a link there that Quire then writes through. So each window keeps one
folder made by ``tempfile.mkdtemp`` (mode 0700, a name nobody can predict), created on the first copy and
removed with everything in it when the window closes. Every copy gets its own ``mkdtemp`` sub-folder
(two items may share a name) and is created ``O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW`` with mode 0600.
Qt-free: the copy is written inside an ``Op``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

from knowledge.errors import InvalidInput

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
FILE_MODE = 0o600


class PrivateCopies:
    """One window's copies: a private folder made on first use, removed by :meth:`remove`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._root: Path | None = None
        self._closed = False

    @property
    def root(self) -> Path | None:
        return self._root

    def write(self, name: str, source: Path) -> Path:
        """Copy ``source`` to a new private file called ``name`` (its last component) and return its path."""
        safe = Path(name).name
        if safe in ("", ".", "..") or "\0" in safe:
            raise InvalidInput(f"{name!r} is not a file name a copy can have")
        with self._lock:
            if self._closed:
                raise InvalidInput("the window is closing: no copy is made")
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="quire-copies-"))
            folder = Path(tempfile.mkdtemp(dir=self._root))
        target = folder / safe
        fd = os.open(target, _CREATE_FLAGS, FILE_MODE)
        with os.fdopen(fd, "wb") as out, open(source, "rb") as original:
            os.fchmod(out.fileno(), FILE_MODE)  # whatever the umask
            shutil.copyfileobj(original, out)
        return target

    def remove(self) -> None:
        """Remove every copy (the window is closing); later writes are refused."""
        with self._lock:
            root, self._root, self._closed = self._root, None, True
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
