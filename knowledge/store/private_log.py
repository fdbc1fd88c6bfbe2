"""The worker's log file in the data directory: owner-only and rotated, so it never grows without bound.

``worker.log`` holds what the window's worker process logs (warnings and errors, which may name a
person's files). It is rotated at ``MAX_LOG_BYTES`` keeping ``LOG_BACKUPS`` older files
(``worker.log.1`` … ``.3``), and every one of them is ``0600``: the live file is opened with that mode
(and made so if an older one was not), and a rotation renames files, which keeps their mode.
"""

from __future__ import annotations

import contextlib
import logging
import os
from io import TextIOWrapper
from logging.handlers import RotatingFileHandler
from pathlib import Path

from knowledge.store.permissions import FILE_MODE, make_private_dir

WORKER_LOG = "worker.log"
MAX_LOG_BYTES = 10 * 1024 * 1024
LOG_BACKUPS = 3
LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


class PrivateRotatingFileHandler(RotatingFileHandler):
    """A ``RotatingFileHandler`` whose files are owner-only whatever the umask."""

    def _open(self) -> TextIOWrapper:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.baseFilename, flags, FILE_MODE)
        os.fchmod(fd, FILE_MODE)
        return os.fdopen(fd, "a", encoding=self.encoding or "utf-8", errors=self.errors)

    def doRollover(self) -> None:
        super().doRollover()
        for n in range(1, self.backupCount + 1):  # backups left by an older, less careful version
            with contextlib.suppress(FileNotFoundError):
                os.chmod(f"{self.baseFilename}.{n}", FILE_MODE)


def worker_log_handler(
    data_dir: Path, *, max_bytes: int = MAX_LOG_BYTES, backups: int = LOG_BACKUPS
) -> PrivateRotatingFileHandler:
    """The handler for ``<data dir>/worker.log`` (the data directory made owner-only first if new)."""
    make_private_dir(data_dir)
    handler = PrivateRotatingFileHandler(
        data_dir / WORKER_LOG, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    return handler
