"""Knowledge-owned copies: content-addressed files under ``<data dir>/blobs/ab/cdef…``.

A base keeps the raw bytes of each source and its extracted text, so chunk viewing and reindex never
depend on the original still being where it was. Identical content is stored once.

Side effects after commit: the purge deletes a blob's row inside the caller's transaction and unlinks
the file only after that transaction committed (``store.database.after_commit``), so a rollback or a
failed commit leaves every file in place. The unlink itself runs in a short write transaction of its
own that re-checks no ``blobs`` row came back meanwhile; a crash between the commit and the unlink
leaves a file with no row, which the orphan sweep removes.

Race rule between writers and the purge: a writer writes the file first (outside any transaction, the
common path) and then, inside its own write transaction, re-checks the file and rewrites it if a purge
removed it in between, and records the row. The unlink holds SQLite's write lock for its check, so a
committed reference always has its file. Temporary names carry the pid, the thread and a random part,
so two threads writing the same blob never share one.

On a team store (PostgreSQL) the bytes also live in the database (``blob_contents``, one row per ``blobs``
row, dropped with it by the foreign key's cascade), because workers on other machines must read the same copy:
a person's machine uploads a file's bytes before its job is enqueued (:func:`upload`), and a reader that has
no local file fetches them (:func:`read_owned`), checks that they hash to their name — a row is any team
member's word — and keeps them under its own ``blobs/`` as a cache. Measured against a shared folder in
docs/BENCHMARKS.md "Where a team store's owned copies live".

Names are trusted nowhere: a blob's name (its SHA-256, 64 lowercase hex digits) may come from an export,
a backup or a damaged database, so :func:`blob_path` — the one place a name becomes a path — refuses
anything else (``../x`` or ``ab/../../y`` would otherwise reach outside the blobs folder). Purges skip
such names (their rows go, no file is touched) and the orphan sweep never follows a link.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import stat
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

from sqlalchemy import Connection, and_, delete, insert, or_, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from knowledge.errors import InvalidInput
from knowledge.store.database import Database, after_commit
from knowledge.store.permissions import make_private_dir, write_private_bytes
from knowledge.store.schema import blob_contents, blobs, items

log = logging.getLogger(__name__)

BLOB_NAME = re.compile(r"[0-9a-f]{64}")


class InvalidBlobName(InvalidInput):
    """A blob name that is not a SHA-256 in lowercase hex: a damaged or tampered store, export or backup."""

    code = "invalid_blob_name"

    def __init__(self, name: object) -> None:
        shown = repr(name)[:40]
        super().__init__(f"{shown} is not a valid owned-copy name (a damaged or tampered file); nothing was read")


def is_blob_name(name: object) -> bool:
    return isinstance(name, str) and BLOB_NAME.fullmatch(name) is not None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob_path(root: Path, sha: str) -> Path:
    """Where blob ``sha`` lives under ``root``; raises :class:`InvalidBlobName` for anything not a hash."""
    if not is_blob_name(sha):
        raise InvalidBlobName(sha)
    return root / sha[:2] / sha[2:]


def write_file(root: Path, sha: str, data: bytes) -> None:
    """Write a blob atomically (tmp + rename); a no-op when it is already there."""
    target = blob_path(root, sha)
    if target.exists():
        return
    make_private_dir(target.parent)  # owned copies of a person's documents: owner-only
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:8]}.tmp")
    write_private_bytes(tmp, data)
    os.replace(tmp, target)


def record(conn: Connection, root: Path, sha: str, data: bytes, kind: str) -> None:
    """Inside a write transaction: make sure the blob's row and file both exist (on a team store the file
    is this machine's cache, and the bytes are stored in the database too)."""
    record_many(conn, root, [(sha, data, kind)])


def record_many(conn: Connection, root: Path, blobs_to_record: Sequence[tuple[str, bytes, str]]) -> None:
    """:func:`record` for several ``(sha, data, kind)`` (an index batch's owned copies and texts): each file
    re-checked, the missing rows inserted in one statement (a row already there is left as it is)."""
    wanted: dict[str, tuple[bytes, str]] = {}
    for sha, data, kind in blobs_to_record:
        write_file(root, sha, data)  # re-check under the write lock (see the module docstring)
        wanted.setdefault(sha, (data, kind))
    if not wanted:
        return
    if _shared(conn):  # a team store also uploads each copy: one at a time, as record does
        for sha, (data, kind) in wanted.items():
            _record_row(conn, sha, data, kind)
        return
    now = time.time()
    rows = [{"sha256": sha, "size": len(data), "kind": kind, "created_at": now} for sha, (data, kind) in wanted.items()]
    conn.execute(sqlite_insert(blobs).on_conflict_do_nothing(index_elements=[blobs.c.sha256]), rows)


def upload(conn: Connection, sha: str, data: bytes, kind: str = "raw") -> None:
    """Inside a write transaction on a team store: store a source's bytes (its owned copy) for every worker."""
    if not is_blob_name(sha) or sha256_bytes(data) != sha:
        raise InvalidBlobName(sha)
    _record_row(conn, sha, data, kind)


def _record_row(conn: Connection, sha: str, data: bytes, kind: str) -> None:
    exists = conn.execute(select(blobs.c.sha256).where(blobs.c.sha256 == sha)).first()
    if exists is None:
        conn.execute(insert(blobs).values(sha256=sha, size=len(data), kind=kind, created_at=time.time()))
    if not _shared(conn):
        return
    # checked first, so a copy already uploaded is not sent over the wire again
    if conn.execute(select(blob_contents.c.sha256).where(blob_contents.c.sha256 == sha)).first() is None:
        conn.execute(insert(blob_contents).values(sha256=sha, data=data))


def _shared(conn: Connection) -> bool:
    """Whether this store is shared by machines (a team store): owned copies live in the database."""
    return conn.dialect.name == "postgresql"


def read(root: Path, sha: str) -> bytes:
    return blob_path(root, sha).read_bytes()


class TamperedBlob(InvalidInput):
    """An owned copy in a team store whose bytes do not hash to its name: never used."""

    code = "tampered_blob"


def read_owned(db: Database, root: Path, sha: str) -> bytes | None:
    """An owned copy's bytes: this machine's file, else (a team store) the database's, checked against their
    name and then kept as this machine's file. ``None`` when there is none."""
    path = blob_path(root, sha)
    if path.is_file():
        return path.read_bytes()
    if db.dialect_name != "postgresql":
        return None
    with db.read() as conn:
        data = conn.execute(select(blob_contents.c.data).where(blob_contents.c.sha256 == sha)).scalar()
    if data is None:
        return None
    data = bytes(data)
    if sha256_bytes(data) != sha:
        raise TamperedBlob(f"the team store's copy {sha[:12]}… does not match its name; not used")
    write_file(root, sha, data)
    return data


class UnsafeBlobFile(InvalidInput):
    """A blob in a folder Quire does not own (a backup, a damaged data directory) that is a link, not a
    regular file, or resolves outside that folder: never read."""

    code = "unsafe_blob_file"


def read_foreign(root: Path, sha: str) -> bytes | None:
    """The bytes of blob ``sha`` under ``root`` when ``root`` came from elsewhere: ``None`` when absent;
    :class:`InvalidBlobName` or :class:`UnsafeBlobFile` when it must not be read. Never follows a link:
    the prefix folder must resolve to itself under ``root`` and the file is opened ``O_NOFOLLOW``."""
    path = blob_path(root, sha)
    if not path.parent.exists():
        return None
    if os.path.realpath(path.parent) != os.path.join(os.path.realpath(root), sha[:2]):
        raise UnsafeBlobFile(f"the owned copy {sha[:12]}… lies behind a link out of its folder; not read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:  # ELOOP: the file itself is a link
        raise UnsafeBlobFile(f"the owned copy {sha[:12]}… is a link or cannot be opened; not read") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeBlobFile(f"the owned copy {sha[:12]}… is not a regular file; not read")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


def purge_unreferenced(conn: Connection, root: Path, candidates: Iterable[str]) -> int:
    """Inside a write transaction: drop the rows of blobs among ``candidates`` no item references any more.

    Their files are unlinked after the transaction commits (module docstring); nothing on rollback.
    """
    purged: list[str] = []
    for sha in set(c for c in candidates if c):
        if _referenced(conn, sha):
            continue
        conn.execute(delete(blobs).where(blobs.c.sha256 == sha))
        if is_blob_name(sha):  # a tampered name loses its row; no file is ever unlinked for it
            purged.append(sha)
        else:
            log.warning("dropped the row of an owned copy with an invalid name; no file touched")
    if purged:
        after_commit(conn, lambda db: unlink_unrecorded(db, root, purged))
    return len(purged)


def unlink_unrecorded(db: Database, root: Path, shas: Iterable[str]) -> int:
    """Unlink the files of ``shas`` that have no ``blobs`` row and no reference, checked under the write lock."""
    removed = 0
    with db.write() as conn:
        for sha in shas:
            recorded = conn.execute(select(blobs.c.sha256).where(blobs.c.sha256 == sha)).first()
            if recorded is not None or _referenced(conn, sha):
                continue  # a writer recorded it again since the purge committed
            with contextlib.suppress(FileNotFoundError):
                blob_path(root, sha).unlink()
                removed += 1
    return removed


def _referenced(conn: Connection, sha: str) -> bool:
    row = conn.execute(
        select(items.c.id).where(or_(items.c.blob_sha256 == sha, items.c.text_sha256 == sha)).limit(1)
    ).first()
    return row is not None


def shas_of_items(conn: Connection, item_ids: Iterable[int]) -> set[str]:
    ids = list(item_ids)
    found: set[str] = set()
    for start in range(0, len(ids), 500):
        rows = conn.execute(
            select(items.c.blob_sha256, items.c.text_sha256).where(items.c.id.in_(ids[start : start + 500]))
        ).all()
        for raw, txt in rows:
            found.update(s for s in (raw, txt) if s)
    return found


def sweep_orphan_files(conn: Connection, root: Path, limit: int = 1000) -> int:
    """Inside a write transaction: remove blob files with no ``blobs`` row (left by a crash mid-write)."""
    if not root.exists():
        return 0
    removed = 0
    for sub in sorted(root.iterdir()):
        # only our own two-hex-digit folders, never through a link (the sweep unlinks what it finds)
        if sub.is_symlink() or not sub.is_dir() or re.fullmatch(r"[0-9a-f]{2}", sub.name) is None:
            continue
        # the rows of this prefix in one range read (hex digits sort before "g"), not one query per file
        known = {
            r[0]
            for r in conn.execute(
                select(blobs.c.sha256).where(and_(blobs.c.sha256 >= sub.name, blobs.c.sha256 < sub.name + "g"))
            ).all()
        }
        for f in sub.iterdir():
            if removed >= limit:
                return removed
            if f.name.startswith("."):
                if time.time() - f.lstat().st_mtime > 3600:
                    f.unlink(missing_ok=True)
                continue
            if sub.name + f.name not in known:
                f.unlink(missing_ok=True)
                removed += 1
    return removed
