"""Reading files from disk safely: sources (handed to :func:`parse_bytes`) and the small files Quire
reads by its own choice (a folder's ``.quireignore``).

Every read follows the same steps, so no caller can skip one:

* The path is resolved first (``realpath``). With a ``root`` — the folder the file was found in — the
  resolved path must lie under the root's real path: a link pointing out of the folder is not followed
  (``symlink_not_followed``) and its target is never opened. Without a root (a file a person named
  directly) a link is followed, as they asked.
* The resolved file is judged by ``os.stat`` *before* anything opens it: opening a FIFO for reading
  blocks until a writer appears, opening some devices has effects, and neither is a document.
* The resolved path is opened ``O_RDONLY|O_NONBLOCK|O_NOFOLLOW`` — with a root, component by component
  from the root's descriptor (``openat``), every folder on the way ``O_NOFOLLOW`` too: a file or folder
  swapped for a link after the resolve fails the open instead of being followed, so nothing outside the
  root is ever opened, and a FIFO swapped in cannot block. The descriptor is checked with ``fstat``.
* At most ``limit + 1`` bytes are read, so a file that grows after the ``stat`` is still refused rather
  than read whole. Sources: the size limit of a base (``max_bytes``). Quire's own small files:
  :data:`SMALL_FILE_BYTES` (64 KiB); a bigger one is refused ``too_large``, never read in part.

OS errors become ``unreadable`` with a reason naming the kind of failure, never the path.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from knowledge.sources.dispatch import (
    DEFAULT_MAX_BYTES,
    SNIFF_BYTES,
    check_size,
    parse_bytes,
    require_format,
    require_text,
)
from knowledge.sources.model import ParsedDocument, SourceRejected

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_BINARY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
# a folder on the way is opened only to open below it: O_PATH (Linux) needs no read permission on it
_DIR_FLAGS = (
    getattr(os, "O_PATH", os.O_RDONLY)
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_LINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK})  # O_NOFOLLOW met a link (Linux: ELOOP, BSD: EMLINK)

SMALL_FILE_BYTES = 64 * 1024  # a file Quire reads by its own choice (an ignore file) is at most this
LINK_OUTSIDE = "a link pointing outside the folder is not followed"
BECAME_LINK = "its path turned into a link while it was being read; the link is not followed"


def parse_source(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, root: Path | None = None) -> ParsedDocument:
    """Parse the file at ``path``; raise :class:`SourceRejected` when it cannot be ingested."""
    data = read_source(path, max_bytes=max_bytes, root=root)
    return parse_bytes(data, name=Path(path).name, max_bytes=max_bytes)


def read_source(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, root: Path | None = None) -> bytes:
    """The file's bytes, after the checks that need no reading: inside ``root`` (when given), regular
    file, supported type, size. A file no suffix names is refused on its first bytes when they are not text,
    before the rest is read."""
    real = resolve_within(path, root)
    info = _stat(real)
    _require_regular(info.st_mode)
    name = Path(path).name
    fmt = require_format(name)
    check_size(info.st_size, max_bytes)
    with _open_checked(real, root) as handle:
        head = _read(handle, min(SNIFF_BYTES, max_bytes + 1))
        if fmt is None:
            require_text(name, head)
        data = head + _read(handle, max_bytes + 1 - len(head))
    check_size(len(data), max_bytes)
    return data


def read_small_file(path: Path, *, root: Path, max_bytes: int = SMALL_FILE_BYTES) -> bytes:
    """A file Quire reads by its own choice, not as a source: a regular file (or a link to one inside
    ``root``) of at most ``max_bytes``. Anything else raises :class:`SourceRejected`, unread."""
    real = resolve_within(path, root)
    info = _stat(real)
    _require_regular(info.st_mode)
    if info.st_size > max_bytes:
        raise _small_too_large(max_bytes)
    data = _read_at_most(real, max_bytes + 1, root)
    if len(data) > max_bytes:
        raise _small_too_large(max_bytes)
    return data


def open_regular(path: Path, *, root: Path | None) -> BinaryIO:
    """An open handle on the regular file at ``path`` (inside ``root`` when given), for a caller that
    streams it (hashing); the same checks as :func:`read_source`, without the format and size ones."""
    real = resolve_within(path, root)
    _require_regular(_stat(real).st_mode)
    return _open_checked(real, root)


def resolve_within(path: Path, root: Path | None) -> str:
    """The real path of ``path``; with a ``root``, refused unless it lies under the root's real path."""
    try:
        real = os.path.realpath(path)
        root_real = None if root is None else os.path.realpath(root)
    except (OSError, ValueError) as exc:
        raise _unreadable(exc) from exc
    if root_real is not None and not _is_under(real, root_real):
        raise SourceRejected("symlink_not_followed", LINK_OUTSIDE)
    return real


def _is_under(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip("/") + "/")


def _stat(path: str | Path) -> os.stat_result:
    try:
        return os.stat(path)  # of the resolved path: a dangling link is unreadable
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


def _read_at_most(real: str | Path, limit: int, root: Path | None = None) -> bytes:
    with _open_checked(real, root) as handle:
        return _read(handle, limit)


def _read(handle: BinaryIO, limit: int) -> bytes:
    try:
        return handle.read(limit) if limit > 0 else b""
    except OSError as exc:
        raise _unreadable(exc) from exc


def _open_checked(real: str | Path, root: Path | None) -> BinaryIO:
    """Open without following a link and without blocking, then check what was opened."""
    fd = _open_nofollow(str(real), root)
    handle = os.fdopen(fd, "rb")
    try:
        _require_regular(os.fstat(fd).st_mode)
    except BaseException:
        handle.close()
        raise
    return handle


def _open_nofollow(real: str, root: Path | None) -> int:
    """With a root, the path is opened component by component from the root's descriptor, each with
    ``O_NOFOLLOW``: a folder on the way swapped for a link after the resolve stops the open there, and
    nothing outside the root is ever opened (``O_NOFOLLOW`` alone guards only the last component)."""
    if root is None or os.open not in os.supports_dir_fd:  # no openat (Windows): the resolve is the defence
        return _open_at(real, _OPEN_FLAGS, None)
    root_real = os.path.realpath(root)
    parts = [] if real == root_real else real[len(root_real.rstrip("/")) + 1 :].split("/")
    fd = _open_at(root_real, _DIR_FLAGS, None)
    try:
        for name in parts[:-1]:
            next_fd = _open_at(name, _DIR_FLAGS, fd)
            os.close(fd)
            fd = next_fd
        return _open_at(parts[-1] if parts else root_real, _OPEN_FLAGS, fd)
    finally:
        os.close(fd)


def _open_at(name: str, flags: int, dir_fd: int | None) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS or (exc.errno == errno.ENOTDIR and _is_link(name, dir_fd)):
            raise SourceRejected("symlink_not_followed", BECAME_LINK) from exc
        raise _unreadable(exc) from exc


def _is_link(name: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _small_too_large(max_bytes: int) -> SourceRejected:
    return SourceRejected("too_large", f"larger than {max_bytes // 1024} KiB")


def _unreadable(exc: BaseException) -> SourceRejected:
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return SourceRejected("unreadable", "file does not exist or cannot be read")
    if isinstance(exc, PermissionError):
        return SourceRejected("unreadable", "file cannot be read (permission denied)")
    code = errno.errorcode.get(exc.errno, "") if isinstance(exc, OSError) and exc.errno else ""
    return SourceRejected("unreadable", f"file cannot be read ({code or 'invalid path'})")
