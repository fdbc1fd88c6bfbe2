"""A doorbell that wakes an idle worker the moment a job is committed, in this process or another.

Without it an idle worker finds new work by polling the jobs table every ``poll_interval`` (0.5 s), so a
dropped note waits up to that long before anyone looks at it. With it, whoever commits a job rings
(after the commit: a ring before it would wake the worker to find nothing), and the worker's doorbell
thread sets the executor's wake event.

The bell is a datagram socket in Linux's abstract namespace, named after the data directory's real
path: nothing on disk to clean up after a crash, no path-length limit, and a ring nobody listens to
costs one failed ``sendto``. One worker per data directory holds the bell (the window's, or a
``quire worker``); a second one cannot bind it and keeps polling. Elsewhere (macOS, Windows) there is
no bell and workers poll; nothing else changes.

A ring is only a hint, like huey's message: a lost or spurious datagram costs a poll interval or one
empty look at the jobs table, never a job.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import socket
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)


def bell_address(directory: Path) -> bytes | None:
    """The abstract socket name of ``directory``'s bell, or None where there are no abstract sockets."""
    if not sys.platform.startswith("linux"):
        return None
    digest = hashlib.sha256(str(directory.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return b"\0quire-bell-" + digest.encode("ascii")


class Doorbell:
    """Ring or listen for one data directory's bell (see the module docstring)."""

    def __init__(self, address: bytes | None) -> None:
        self.address = address

    @classmethod
    def for_directory(cls, directory: Path) -> Doorbell:
        return cls(bell_address(directory))

    def ring(self) -> bool:
        """Wake the listening worker, if there is one; never blocks, never raises."""
        if self.address is None:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.setblocking(False)
                sock.sendto(b"!", self.address)
        except OSError:  # nobody listens (ECONNREFUSED), or the listener's buffer is full: it is awake
            return False
        return True

    def listen(self) -> Listener | None:
        """Hold the bell; None when there is no bell here or another worker holds it."""
        if self.address is None:
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(self.address)
        except OSError:
            sock.close()
            log.info("another worker holds this data directory's doorbell; polling for new jobs")
            return None
        return Listener(sock)

    def answer(self, wake: threading.Event, stop: threading.Event) -> Listener | None:
        """Hold the bell and, on a thread of its own, set ``wake`` at every ring until ``stop`` is set;
        None when there is no bell to hold (the caller keeps polling)."""
        listener = self.listen()
        if listener is not None:
            threading.Thread(target=listener.forward, args=(wake, stop), name="quire-doorbell", daemon=True).start()
        return listener


class Listener:
    """The bound end of a bell. ``wait`` returns True when rung (all pending rings are drained)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def wait(self, timeout: float) -> bool:
        try:  # a closed bell (settimeout raises too) is never rung
            self._sock.settimeout(timeout)
            self._sock.recv(64)
            self._sock.setblocking(False)
        except (TimeoutError, OSError):
            return False
        with contextlib.suppress(OSError):  # many rings for one burst of jobs: one wake is enough
            while self._sock.recv(64):
                pass
        return True

    def forward(self, wake: threading.Event, stop: threading.Event) -> None:
        """Set ``wake`` at every ring until ``stop`` is set (checked at least once a second) or the bell is
        closed; no error ends it otherwise (a ring is a hint: the executors poll without one)."""
        while not stop.is_set() and self._sock.fileno() != -1:
            if self.wait(1.0):
                wake.set()

    def close(self) -> None:
        """Release the bell; a ``forward`` loop sees its stop at its next look."""
        self._sock.close()
