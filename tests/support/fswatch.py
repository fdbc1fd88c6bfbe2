"""Watching what a test's code does to files it should not touch: inotify events and before/after states.

* :class:`Inotify` (Linux) reports every open, read, write, create, delete and metadata change inside the
  folders it watches (recursively, from when it starts). ``stat``/``lstat``/``realpath`` make no event,
  so "no event" proves a folder was not listed and no file in it was opened — which is what
  "nothing was read" means.
* :func:`tree_state` is a folder's entries with their kind, size, mode and modification time: equal
  before and after means nothing was created, changed or deleted there.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

IN_ACCESS = 0x001
IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_OPEN = 0x020
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_ISDIR = 0x40000000
EVERYTHING = IN_ACCESS | IN_MODIFY | IN_ATTRIB | IN_OPEN | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
_HEADER = struct.Struct("iIII")


@dataclass(frozen=True)
class Event:
    path: Path
    mask: int

    @property
    def what(self) -> str:
        names = {IN_ACCESS: "read", IN_MODIFY: "write", IN_ATTRIB: "attrib", IN_OPEN: "open", IN_CREATE: "create"}
        names |= {IN_DELETE: "delete", IN_MOVED_FROM: "moved-from", IN_MOVED_TO: "moved-to"}
        return "+".join(n for bit, n in names.items() if self.mask & bit)


class Inotify:
    """Every folder under ``root`` (and ``root``) watched; :meth:`events` drains what happened since."""

    def __init__(self, root: Path) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self._dirs: dict[int, Path] = {}
        for folder in [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]:
            self._watch(folder)

    def _watch(self, folder: Path) -> None:
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(folder), EVERYTHING)
        if wd >= 0:  # an unreadable folder cannot be watched, but neither can it be listed
            self._dirs[wd] = folder

    def events(self) -> list[Event]:
        found: list[Event] = []
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return found
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
                name = data[offset + _HEADER.size : offset + _HEADER.size + length].rstrip(b"\0")
                offset += _HEADER.size + length
                folder = self._dirs.get(wd)
                if folder is not None:
                    found.append(Event(folder / os.fsdecode(name) if name else folder, mask))

    def close(self) -> None:
        os.close(self.fd)


def tree_state(root: Path, *, skip: Path | None = None) -> dict[str, tuple[str, int, int, int]]:
    """``relative path -> (kind, size, mode, mtime_ns)`` for everything under ``root`` but ``skip``."""
    state: dict[str, tuple[str, int, int, int]] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if skip is None or here / d != skip]
        for name in [*dirs, *files]:
            path = here / name
            info = path.lstat()
            kind = "dir" if stat.S_ISDIR(info.st_mode) else "link" if stat.S_ISLNK(info.st_mode) else "file"
            state[str(path.relative_to(root))] = (kind, info.st_size, stat.S_IMODE(info.st_mode), info.st_mtime_ns)
    return state
