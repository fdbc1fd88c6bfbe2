"""The derived files' locks (each base's vector file and keyword index): ``flock`` with a bounded wait.

A searching process must never wait without limit on another process's lock: that process may be stopped
(SIGSTOP, a debugger) or slow (a rebuild of a large base takes minutes) while it holds it. So a search asks
with ``wait`` and answers another way when the lock stays taken (:class:`Busy`); a writer's own hook may wait.
"""

from __future__ import annotations

import fcntl
import time


class Busy(OSError):
    """Another process holds the lock longer than the caller would wait."""


def flock(fd: int, kind: int, wait: float | None = None) -> None:
    """Take ``kind`` (``LOCK_SH`` / ``LOCK_EX``) on ``fd``; with ``wait``, raise :class:`Busy` after that many
    seconds instead of waiting on."""
    if wait is None:
        fcntl.flock(fd, kind)
        return
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise Busy("another process holds the file's lock") from None
            time.sleep(0.01)  # flock has no timed wait: poll
