"""Opening files that came from elsewhere (an export, a backup): nothing in them is trusted.

* A database is opened read-only, never through a link, only when its header says it is a plain
  rollback-journal SQLite file (a WAL header would make SQLite create ``-wal``/``-shm`` files beside it),
  with ``trusted_schema`` off, defensive mode, no triggers or views, ``cell_size_check`` on, memory
  mapping off and tight ``sqlite3_limit`` caps, so a crafted schema cannot run functions, build huge
  statements or attach anything.
* A small file (a manifest) is read only if it is a regular file (no link, FIFO or device) of bounded size.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import apsw

SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_ROW_BYTES = 600 * 1024 * 1024  # an owned copy travels as one BLOB row (sources are capped below this)
MAX_SMALL_FILE = 64 * 1024

# The caps a foreign database is opened with: room for what an export or backup holds, nothing more.
LIMITS = {
    apsw.SQLITE_LIMIT_LENGTH: MAX_ROW_BYTES,
    apsw.SQLITE_LIMIT_SQL_LENGTH: 100_000,
    apsw.SQLITE_LIMIT_COLUMN: 100,
    apsw.SQLITE_LIMIT_EXPR_DEPTH: 100,
    apsw.SQLITE_LIMIT_COMPOUND_SELECT: 8,
    apsw.SQLITE_LIMIT_VDBE_OP: 1_000_000,
    apsw.SQLITE_LIMIT_FUNCTION_ARG: 8,
    apsw.SQLITE_LIMIT_ATTACHED: 0,
    apsw.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 100,
    apsw.SQLITE_LIMIT_VARIABLE_NUMBER: 100,
    apsw.SQLITE_LIMIT_TRIGGER_DEPTH: 1,
    apsw.SQLITE_LIMIT_WORKER_THREADS: 0,
}


class ForeignFileRefused(Exception):
    """The file is not what a Quire export or backup writes; ``reason`` says what is wrong."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _open_no_follow(path: Path) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError:
        raise ForeignFileRefused("it is a link or cannot be opened") from None


def read_small_file(path: Path, limit: int = MAX_SMALL_FILE) -> bytes:
    """The bytes of a small regular file (no link, FIFO or device), at most ``limit`` of them."""
    fd = _open_no_follow(path)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ForeignFileRefused("it is not a regular file")
        if info.st_size > limit:
            raise ForeignFileRefused(f"it is larger than {limit} bytes")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit + 1)[:limit]
    finally:
        os.close(fd)


def check_database_file(path: Path) -> None:
    """A regular file (not a link) whose header is a rollback-journal SQLite database."""
    fd = _open_no_follow(path)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ForeignFileRefused("it is not a regular file")
        header = os.pread(fd, 100, 0)
    finally:
        os.close(fd)
    if len(header) < 100 or header[:16] != SQLITE_MAGIC:
        raise ForeignFileRefused("it is not a database")
    if header[18] != 1 or header[19] != 1:  # 2 = WAL: SQLite would create files beside it
        raise ForeignFileRefused("it is not a plain database file (write-ahead log mode)")


def open_database(path: Path) -> apsw.Connection:
    """Read-only and defensive (module docstring). Raises :class:`ForeignFileRefused` or ``apsw.Error``."""
    check_database_file(path)
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_NOFOLLOW)
    try:
        conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
        conn.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_VIEW, 0)
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0)
        for limit, value in LIMITS.items():
            conn.limit(limit, value)
        conn.execute("PRAGMA cell_size_check=ON").fetchall()
        conn.execute("PRAGMA mmap_size=0").fetchall()
        conn.execute("PRAGMA query_only=ON").fetchall()
    except BaseException:
        conn.close()
        raise
    return conn
