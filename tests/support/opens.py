"""Whether any process opened or read a file, seen by the kernel (Linux inotify through ctypes).

Security tests use it to show that Quire never opened a file outside what it was given: the watch sees
opens by child processes (the CLI, the worker) as well as by the test's own process. ``prove_it_sees``
is the positive control: it opens the files once itself and checks the watch reported it, so an
assertion of "never opened" cannot pass because the watch saw nothing at all.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from pathlib import Path
from types import TracebackType

IN_ACCESS = 0x00000001
IN_OPEN = 0x00000020
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


class OpenWatch:
    """Counts IN_OPEN / IN_ACCESS events on the given files (not following links: watch targets)."""

    def __init__(self, *paths: Path) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.names: dict[int, str] = {}
        for path in paths:
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), IN_OPEN | IN_ACCESS)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch failed for {path.name}")
            self.names[wd] = path.name

    def opened(self) -> list[str]:
        """Names of watched files opened or read since the last call (each event once)."""
        seen: list[str] = []
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return seen
            offset = 0
            while offset < len(data):
                wd, _mask, _cookie, length = _EVENT.unpack_from(data, offset)
                seen.append(self.names.get(wd, "?"))
                offset += _EVENT.size + length

    def prove_it_sees(self, *paths: Path) -> None:
        """Open each (regular) file once and check the watch reported it; then start from nothing."""
        for path in paths:
            with open(path, "rb") as handle:
                handle.read(1)
        seen = set(self.opened())
        missing = {p.name for p in paths} - seen
        assert not missing, f"the watch did not see opens of {sorted(missing)}"

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> OpenWatch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
