"""Private by default: a data directory, its database files, blobs, exports and backups are owner-only.

Directories are created 0700 and files 0600 whatever the process umask says (a desktop's umask is
usually 022, which would let every local user read the owned copies of a person's documents). SQLite
creates the ``-wal`` and ``-shm`` files with the mode of the database file, so creating the database
file 0600 before SQLite first opens it makes those private too. Existing directories are not
tightened behind the person's back; ``quire doctor`` reports them with the command that fixes them.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) owner-only; a directory that already exists is left as is."""
    if path.is_dir():
        return
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=DIR_MODE)
            os.chmod(directory, DIR_MODE)  # mkdir's mode is filtered by the umask


def create_private_file(path: Path) -> None:
    """Create an empty owner-only file if there is none (so that SQLite keeps its mode for -wal/-shm)."""
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        os.close(fd)


def write_private_bytes(path: Path, data: bytes) -> None:
    """Write a new owner-only file (truncating one that exists, and making it owner-only)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


def make_private(path: Path) -> None:
    """Owner-only for one existing file or directory."""
    os.chmod(path, DIR_MODE if path.is_dir() else FILE_MODE)


@dataclass(frozen=True)
class Exposure:
    """A path other local users can read (or enter)."""

    path: str
    mode: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "mode": self.mode}


def exposed(path: Path, *, limit: int = 20, walk_files: bool = True) -> list[Exposure]:
    """Paths under ``path`` (itself included) that group or others can read; at most ``limit``."""
    found: list[Exposure] = []

    def check(p: Path) -> None:
        try:
            mode = p.lstat().st_mode
        except OSError:
            return
        if stat.S_ISLNK(mode):
            return
        if mode & 0o077 and len(found) < limit:
            found.append(Exposure(str(p), oct(stat.S_IMODE(mode))))

    check(path)
    if walk_files and path.is_dir():
        for root, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                check(Path(root) / name)
                if len(found) >= limit:
                    return found
    return found


def fix_command(path: Path) -> str:
    """The shell command that makes ``path`` owner-only again."""
    quoted = str(path).replace("'", "'\\''")
    return f"chmod -R go-rwx '{quoted}'"
