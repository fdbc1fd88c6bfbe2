"""Reading a source file from disk safely, then handing its bytes to :func:`parse_bytes`.

The file is judged by ``os.stat`` *before* anything opens it: opening a FIFO for reading blocks until a
writer appears, and a device or socket is no document. The open itself uses ``O_NONBLOCK`` and the
opened descriptor is checked again with ``fstat``, so a path swapped for a FIFO between the two steps
still cannot hang the worker. At most ``max_bytes + 1`` bytes are read, so a file that grows after the
``stat`` is still refused rather than read whole.

OS errors become ``unreadable`` with a reason naming the kind of failure, never the path.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from knowledge.sources.dispatch import DEFAULT_MAX_BYTES, check_size, parse_bytes, require_format
from knowledge.sources.model import ParsedDocument, SourceRejected

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def parse_source(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ParsedDocument:
    """Parse the file at ``path``; raise :class:`SourceRejected` when it cannot be ingested."""
    data = read_source(path, max_bytes=max_bytes)
    return parse_bytes(data, name=Path(path).name, max_bytes=max_bytes)


def read_source(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The file's bytes, after the checks that need no reading: regular file, supported type, size."""
    info = _stat(path)
    _require_regular(info.st_mode)
    require_format(Path(path).name)
    check_size(info.st_size, max_bytes)
    data = _read_at_most(path, max_bytes + 1)
    check_size(len(data), max_bytes)
    return data


def _stat(path: Path) -> os.stat_result:
    try:
        return os.stat(path)  # follows symlinks: a link to a regular file is fine, a dangling one is not
    except (OSError, ValueError) as exc:
        raise _unreadable(exc) from exc


def _require_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise SourceRejected("not_regular_file", f"not a regular file (it is {_kind(mode)})")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _read_at_most(path: Path, limit: int) -> bytes:
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise _unreadable(exc) from exc
    with os.fdopen(fd, "rb") as handle:
        _require_regular(os.fstat(handle.fileno()).st_mode)
        try:
            return handle.read(limit)
        except OSError as exc:
            raise _unreadable(exc) from exc


def _unreadable(exc: BaseException) -> SourceRejected:
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return SourceRejected("unreadable", "file does not exist or cannot be read")
    if isinstance(exc, PermissionError):
        return SourceRejected("unreadable", "file cannot be read (permission denied)")
    code = errno.errorcode.get(exc.errno, "") if isinstance(exc, OSError) and exc.errno else ""
    return SourceRejected("unreadable", f"file cannot be read ({code or 'invalid path'})")
