"""One GUI per data directory: an advisory lock file held for the window's lifetime.

CLI commands and workers do not take it (SQLite's locking keeps them safe beside the GUI); a second
window on the same data directory would run a second in-process worker and recovery, and confuse the
person, so it is refused with a clear message. The OS drops the lock when the process dies.

Private from the first second: a new data directory is created owner-only (0700) *before* the lock file
is made in it, and the lock file is created 0600 (and made 0600 if an older one was not), whatever the
umask — the window takes this lock before anything else touches the data directory.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from knowledge.errors import DataDirInUse
from knowledge.store.permissions import FILE_MODE, make_private_dir

LOCK_NAME = "gui.lock"


class GuiInstanceLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_NAME
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        make_private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        os.fchmod(fd, FILE_MODE)
        handle = os.fdopen(fd, "r+")  # held open for the process lifetime
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise DataDirInUse(
                f"Quire is already open on this data directory ({self.path.parent}), in process {holder}. "
                "Switch to that window, or start with --data-dir pointing elsewhere."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
