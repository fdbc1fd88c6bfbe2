"""One GUI per data directory: an advisory lock file held for the window's lifetime.

CLI commands and workers do not take it (SQLite's locking keeps them safe beside the GUI); a second
window on the same data directory would run a second in-process worker and recovery, and confuse the
person, so it is refused with a clear message. The OS drops the lock when the process dies.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from knowledge.errors import DataDirInUse

LOCK_NAME = "gui.lock"


class GuiInstanceLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_NAME
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 - held open for the process lifetime
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
