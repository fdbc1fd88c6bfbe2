"""Each base's search vectors in one memory-mapped file: ``<data dir>/vectors/base-<id>.vec``.

Why a file. Vector search scans the sign bits of every chunk and rescores candidates with their float
vectors (:mod:`knowledge.search.vector_index`). Read out of SQLite rows at a process's first search, that
cost 57 s and 2 GB of RSS on a 1,000,000-chunk base (the rows hold the chunk texts too, so the read walks
the whole table). Mapped from a file laid out for the scan, a search process opens the vectors in
milliseconds and only the pages it touches become resident (the sign bits: 48 bytes a chunk).

The layout (a CRC-checked header, then ids, sign bits and float copies) is :mod:`knowledge.library.vector_format`'s.

Records ``[0, count)`` are valid and, once written, never change: chunk ids are never reused and a
chunk's vector never changes (material is replaced by new chunks), so a reader may keep using a mapping
while records are appended behind it.

The database stays the truth. The header carries the base (id, created_at, dimension), ``version`` — the
base's ``vectors_version`` in the snapshot the file was brought up to — and ``last_id``, the highest chunk
id in it. :meth:`VectorFiles.sync` brings a file up to date under an exclusive lock (``base-<id>.lock``),
reading a snapshot taken *after* the lock: it appends the rows above ``last_id`` (the writer queues this
after the commit of every material write: :mod:`knowledge.library.index`), and rebuilds from rows when
the file is missing, not a regular file, unreadable, foreign (another base, a re-created one, another
dimension), truncated (shorter than its header says), from another history (its version above the
database's, its last id not below the next chunk id, or its last record not its row's vector), or — when
asked after a delete — more than ``DEAD_SHARE`` dead. A search that finds the file behind its own
snapshot syncs it itself, so nothing depends on the writer's hook having run.

Crash safety: an append writes its records first and the header (one ``pwrite``, CRC-checked) last, so
a SIGKILL leaves the old count or the new one; records beyond the count are overwritten by the next
append. A crash between the database commit and the append leaves the file behind, which the next sync
catches up. Growth and rebuilds write a new file beside and rename it over the old: a reader that mapped
the old one keeps a consistent view. Deleted chunks stay in the file until a rebuild; search joins every
hit to its live row in its own snapshot, so they are never returned.

Trust: the ``vectors`` directory and every file are opened relative to the data directory without
following links and must be a directory and regular files; anything else at those names (a link, a
device) is unlinked — the link itself, never its target — and the file rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import mmap
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import Connection, text

from knowledge.library import chunk_ids
from knowledge.library.file_locks import Busy, flock
from knowledge.library.index_syncs import Sync, gathered_or_run
from knowledge.library.vector_format import (
    HEADER_SIZE,
    BaseKey,
    Bits,
    Floats,
    Header,
    Ids,
    Mapped,
    Rows,
    base_key,
    read_rows,
    sign_bits,
    vectors_version,
)
from knowledge.library.vector_rows import RowReader

if TYPE_CHECKING:
    from knowledge.store.database import Database

log = logging.getLogger(__name__)

DIRNAME = "vectors"
MIN_CAPACITY = 1024
DEAD_SHARE = 0.25  # rebuild (after a delete) when more than this share of the records are dead
READ_BATCH = 50_000  # rows read per query while rebuilding (bounds the temporaries)
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class VectorFiles:
    """The vector files of one data directory (its database's: ``db.path``'s directory)."""

    def __init__(self, db: Database, data_dir: Path | None = None) -> None:
        self.db = db
        self.data_dir = Path(data_dir) if data_dir is not None else Path(db.path).parent

    # -- names and descriptors ------------------------------------------------------------------

    @staticmethod
    def name(base_id: int) -> str:
        return f"base-{int(base_id)}.vec"

    def path(self, base_id: int) -> Path:
        return self.data_dir / DIRNAME / self.name(base_id)

    @contextlib.contextmanager
    def _dir(self) -> Iterator[int]:
        """A descriptor of ``vectors/`` (made if missing; anything else at that name is unlinked first)."""
        data_fd = os.open(self.data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for _attempt in range(3):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(DIRNAME, 0o700, dir_fd=data_fd)
                try:
                    fd = os.open(DIRNAME, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=data_fd)
                except (NotADirectoryError, OSError) as error:
                    if isinstance(error, FileNotFoundError):
                        continue
                    log.warning("%s in the data directory is not a directory: replaced", DIRNAME)
                    os.unlink(DIRNAME, dir_fd=data_fd)
                    continue
                try:
                    yield fd
                finally:
                    os.close(fd)
                return
            raise OSError(f"cannot make the {DIRNAME} directory")
        finally:
            os.close(data_fd)

    @staticmethod
    def _open_regular(dir_fd: int, name: str, flags: int, *, create: bool = False) -> int | None:
        """``name`` opened without following links, or None if absent; a non-regular entry is unlinked."""
        try:
            fd = os.open(name, flags | _NOFOLLOW | (os.O_CREAT if create else 0), 0o600, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError:  # ELOOP: a symbolic link (or something we may not open) stands there
            log.warning("%s is not a regular file: removed", name)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
            return VectorFiles._open_regular(dir_fd, name, flags, create=create) if create else None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            log.warning("%s is not a regular file: removed", name)
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(name, dir_fd=dir_fd)
            return None
        return fd

    @contextlib.contextmanager
    def _locked(self, dir_fd: int, base_id: int, kind: int, wait: float | None = None) -> Iterator[None]:
        """The base's lock (``wait``: give up with ``Busy`` after that many seconds instead of waiting)."""
        fd = self._open_regular(dir_fd, f"base-{int(base_id)}.lock", os.O_RDWR, create=True)
        if fd is None:
            raise OSError("cannot open the vector file's lock")
        try:
            flock(fd, kind, wait)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    # -- reading --------------------------------------------------------------------------------

    def peek(self, key: BaseKey, *, wait: float | None = None) -> Mapped | None:
        """The file as it is (under a shared lock), if it is valid and the base's; None otherwise.
        ``wait``: raise ``Busy`` rather than wait longer than that for a writer."""
        try:
            with self._dir() as dir_fd, self._locked(dir_fd, key.base_id, fcntl.LOCK_SH, wait):
                return self._map(dir_fd, key)
        except Busy:
            raise
        except OSError:
            log.warning("the vector file of base %s could not be read", key.base_id, exc_info=True)
            return None

    def map_unlocked(self, key: BaseKey) -> Mapped | None:
        """The file as it is, mapped without the lock (for a search whose ``peek`` found it ``Busy``).

        Safe without the lock because of how the file is written: records ``[0, count)`` never change once
        written, an append writes its records before the header (one ``pwrite``, CRC-checked: a torn read of
        it is no header), and growth or a rebuild renames a whole new file over the old one, never truncating
        or rewriting it in place. So whatever another process is doing, the mapping's records are valid; it
        may only be behind, ahead of, or (a file being rebuilt) not of this snapshot's history."""
        try:
            with self._dir() as dir_fd:
                return self._map(dir_fd, key)
        except OSError:
            log.warning("the vector file of base %s could not be read", key.base_id, exc_info=True)
            return None

    def _map(self, dir_fd: int, key: BaseKey) -> Mapped | None:
        fd = self._open_regular(dir_fd, self.name(key.base_id), os.O_RDONLY)
        if fd is None:
            return None
        try:
            info = os.fstat(fd)
            header = Header.unpack(os.pread(fd, HEADER_SIZE, 0))
            if header is None or header.key != key or info.st_size < header.file_size:
                os.close(fd)
                return None
            mapping = mmap.mmap(fd, header.file_size, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(fd)
            raise
        ids_at, bits_at, floats_at = header.offsets()
        rows = RowReader(fd, floats_at, key.dimension)  # owns fd from here on
        n = header.count
        ids = np.frombuffer(mapping, dtype=np.int64, count=n, offset=ids_at)
        bits = np.frombuffer(mapping, dtype=np.uint64, count=n * header.words, offset=bits_at)
        floats = np.frombuffer(mapping, dtype=np.float32, count=n * key.dimension, offset=floats_at)
        if n and int(ids[-1]) != header.last_id:
            return None
        return Mapped(
            header,
            (info.st_dev, info.st_ino),
            ids,
            bits.reshape(n, header.words),
            floats.reshape(n, key.dimension),
            rows,
        )

    def matches_rows(self, conn: Connection, mapped: Mapped) -> bool:
        """The file's last record is its row's vector, if that row is in ``conn``'s snapshot (a cheap
        check that catches a file from another history of the database)."""
        if mapped.header.count == 0:
            return True
        last = int(mapped.ids[-1])
        found = read_rows(conn, mapped.header.key, last - 1, last_at_most=last)
        if len(found.ids) == 0:
            return True
        same = np.array_equal(found.halves[0].astype(np.float32).view(np.uint32), mapped.floats[-1].view(np.uint32))
        return bool(found.ids[0] == last and same)

    # -- writing --------------------------------------------------------------------------------

    def sync(self, base_id: int, *, check_dead: bool = False, wait: float | None = None) -> Mapped | None:
        """Bring the base's file up to the database (see the module docstring); None if the base is gone
        (its files are removed). Reads its own snapshot, taken after the exclusive lock. ``wait``: raise
        ``Busy`` rather than wait longer than that for another writer."""
        with self._dir() as dir_fd, self._locked(dir_fd, base_id, fcntl.LOCK_EX, wait), self.db.read() as conn:
            key = base_key(conn, base_id)
            if key is None:
                self._remove(dir_fd, base_id)
                return None
            version = vectors_version(conn, base_id)
            current = self._map(dir_fd, key)
            reason = None if current is None else self._history_differs(conn, current, version)
            if current is None or reason is not None:
                log.info("vector file of base %s rebuilt from rows (%s)", base_id, reason or "missing or invalid")
                return self._rebuild(dir_fd, conn, key, version)
            if current.version == version:
                return current
            new = read_rows(conn, key, current.header.last_id)
            if check_dead and self._too_dead(conn, base_id, current.header.count + len(new.ids)):
                log.info("vector file of base %s rebuilt from rows (more than a quarter dead)", base_id)
                return self._rebuild(dir_fd, conn, key, version)
            return self._append(dir_fd, current, new, version)

    def remove(self, base_id: int) -> None:
        """Remove a base's files (the base was deleted)."""
        with self._dir() as dir_fd:
            self._remove(dir_fd, base_id)

    def remove_orphans(self, live_base_ids: set[int]) -> list[int]:
        """Remove the files of bases that no longer exist (a crash before a deleted base's hook ran)."""
        with self._dir() as dir_fd:
            found = {b for b in (_base_id_of(name) for name in os.listdir(dir_fd)) if b is not None}
            orphans = sorted(found - live_base_ids)
            for base_id in orphans:
                self._remove(dir_fd, base_id)
        return orphans

    def _remove(self, dir_fd: int, base_id: int) -> None:
        for name in (self.name(base_id), self.name(base_id) + ".tmp", f"base-{int(base_id)}.lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)

    def _history_differs(self, conn: Connection, current: Mapped, version: int) -> str | None:
        header = current.header
        if header.version > version:
            return f"its version {header.version} is above the database's {version}"
        if header.count and header.last_id >= chunk_ids.next_unissued(conn):
            return "its last chunk id was never issued"
        if not self.matches_rows(conn, current):
            return "its last record is not its row's vector"
        return None

    @staticmethod
    def _too_dead(conn: Connection, base_id: int, held: int) -> bool:
        live = int(conn.execute(text("SELECT count(*) FROM chunks WHERE base_id = :b"), {"b": base_id}).scalar_one())
        return held - live > DEAD_SHARE * max(live, 1) and held - live > 100

    def _append(self, dir_fd: int, current: Mapped, new: Rows, version: int) -> Mapped | None:
        header = current.header
        count = header.count + len(new.ids)
        last_id = int(new.ids[-1]) if len(new.ids) else header.last_id
        if count > header.capacity:  # grow: a new file with twice the room, renamed over
            grown = Header(header.key, max(2 * header.capacity, count), count, last_id, version)
            self._write_new(dir_fd, grown, [(current.ids, current.bits, current.floats), _sections(new)])
            return self._map(dir_fd, header.key)
        fd = self._open_regular(dir_fd, self.name(header.key.base_id), os.O_RDWR)
        if fd is None:
            return None
        try:
            if len(new.ids):
                _write_records(fd, header, header.count, *_sections(new))
            os.pwrite(fd, Header(header.key, header.capacity, count, last_id, version).pack(), 0)  # last
        finally:
            os.close(fd)
        return self._map(dir_fd, header.key)

    def _rebuild(self, dir_fd: int, conn: Connection, key: BaseKey, version: int) -> Mapped | None:
        live, last = conn.execute(
            text("SELECT count(*), coalesce(max(id), 0) FROM chunks WHERE base_id = :b"), {"b": key.base_id}
        ).one()
        header = Header(key, max(MIN_CAPACITY, live + live // 4), int(live), int(last), version)
        self._write_new(dir_fd, header, _batches(conn, key))
        return self._map(dir_fd, key)

    def _write_new(self, dir_fd: int, header: Header, parts: Iterable[tuple[Ids, Bits, Floats]]) -> None:
        """Write a whole file beside (``.tmp``) and rename it over the base's file."""
        name = self.name(header.key.base_id)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name + ".tmp", dir_fd=dir_fd)
        fd = os.open(name + ".tmp", os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=dir_fd)
        try:
            os.ftruncate(fd, header.file_size)
            at = 0
            for ids, bits, floats in parts:
                if at + len(ids) > header.count:
                    raise OSError("more rows than counted in the same snapshot")
                _write_records(fd, header, at, ids, bits, floats)
                at += len(ids)
            if at != header.count:
                raise OSError("fewer rows than counted in the same snapshot")
            os.pwrite(fd, header.pack(), 0)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name + ".tmp", dir_fd=dir_fd)
            raise
        os.close(fd)
        os.rename(name + ".tmp", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _batches(conn: Connection, key: BaseKey) -> Iterator[tuple[Ids, Bits, Floats]]:
    """Every row of the base in id order, ``READ_BATCH`` at a time (so a rebuild never holds them all)."""
    after = 0
    while True:
        rows = read_rows(conn, key, after, limit=READ_BATCH)
        if len(rows.ids) == 0:
            return
        yield _sections(rows)
        after = int(rows.ids[-1])


def _base_id_of(name: str) -> int | None:
    """The base id in one of our file names (``base-<id>.vec``, ``.vec.tmp``, ``.lock``), else None."""
    stem = name.split(".", 1)[0]
    if not stem.startswith("base-") or not stem[5:].isdigit():
        return None
    return int(stem[5:]) if name.split(".", 1)[-1] in ("vec", "vec.tmp", "lock") else None


def _sections(rows: Rows) -> tuple[Ids, Bits, Floats]:
    return rows.ids, sign_bits(rows.halves), rows.halves.astype(np.float32)


def _write_records(fd: int, header: Header, at: int, ids: Ids, bits: Bits, floats: Floats) -> None:
    ids_at, bits_at, floats_at = header.offsets()
    _pwrite_all(fd, np.ascontiguousarray(ids, dtype=np.int64), ids_at + at * 8)
    _pwrite_all(fd, np.ascontiguousarray(bits, dtype=np.uint64), bits_at + at * header.words * 8)
    _pwrite_all(fd, np.ascontiguousarray(floats, dtype=np.float32), floats_at + at * header.key.dimension * 4)


def _pwrite_all(fd: int, array: np.ndarray, offset: int) -> None:
    view = array.data.cast("B")
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def check_files(db: Database) -> list[dict[str, object]]:
    """``quire doctor``: each base's vector file against its rows; one that does not match them is synced
    (caught up, or rebuilt from the rows) and says what it was."""
    files = VectorFiles(db)
    states: list[tuple[BaseKey, str]] = []
    with db.read() as conn:
        for row in conn.execute(text("SELECT id, created_at, dimension FROM bases ORDER BY id")).all():
            key = BaseKey(int(row[0]), float(row[1]), int(row[2]))
            states.append((key, _state(conn, files, key)))
    files.remove_orphans({key.base_id for key, _state_ in states})
    report: list[dict[str, object]] = []
    for key, state in states:
        entry: dict[str, object] = {"base_id": key.base_id, "state": state}
        if state != "current":
            mapped = files.sync(key.base_id)
            entry["synced_to_version"] = None if mapped is None else mapped.version
        report.append(entry)
    return report


def _state(conn: Connection, files: VectorFiles, key: BaseKey) -> str:
    mapped = files.peek(key)
    version = vectors_version(conn, key.base_id)
    if mapped is None:
        return "missing or invalid"
    if mapped.version < version:
        return "behind its rows"
    if mapped.version > version:
        return "ahead of its rows"
    if not files.matches_rows(conn, mapped):
        return "not its rows' vectors"
    return "current"


@dataclass
class SyncAfterCommit:
    """An after-commit hook: append a base's new rows to its file (equal hooks run once per transaction), at
    once or gathered with later commits' (:mod:`knowledge.library.index_syncs`)."""

    base_id: int
    check_dead: bool = False

    def __call__(self, db: Database) -> None:
        gathered_or_run(db, self)

    def run(self, db: Database) -> None:
        VectorFiles(db).sync(self.base_id, check_dead=self.check_dead)

    def absorb(self, later: Sync) -> None:
        self.check_dead = self.check_dead or (isinstance(later, SyncAfterCommit) and later.check_dead)


@dataclass(frozen=True)
class RemoveAfterCommit:
    """An after-commit hook: a deleted base's file goes too."""

    base_id: int

    def __call__(self, db: Database) -> None:
        VectorFiles(db).remove(self.base_id)
