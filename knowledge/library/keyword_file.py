"""Each base's keyword index: a tantivy index in ``<data dir>/keywords/base-<id>/``, derived from the chunk rows.

Why. FTS5 scores every chunk that matches any query term before it can sort: at 1,000,000 chunks a
keyword search took ~300 ms (p95), most of it scoring chunks that never reach the top ten. tantivy keeps
per-block maximum scores in its postings and its top-k (block-max WAND) skips the blocks that cannot
enter the current top k; its segments are memory-mapped, so opening one reads almost nothing. Numbers
in docs/BENCHMARKS.md ("Keyword search at scale").

The analyzer is FTS5's own. Text is cut and stemmed by SQLite's ``porter unicode61 remove_diacritics 2``
tokenizer (:data:`knowledge.library.index.FTS_TOKENIZER`, reached through apsw: :func:`analyze`) and
handed to tantivy as space-separated tokens, which tantivy splits on whitespace only. So a term, a phrase
and a folded accent mean exactly what they mean to the FTS5 table, which stays the truth for phrases and
exclusions (:mod:`knowledge.search.scope`) and the path a team store or a missing index falls back to.

Documents: one per chunk — ``id`` (the chunk id: indexed, fast), ``item`` (its item, for narrow
filters), ``text`` (the tokens, with positions for phrases) — and one stamp document (``id`` 0, chunk ids
start at 1) whose stored JSON says which base (id, created_at), which ``vectors.version`` of it the index
was brought up to, and the highest chunk id it holds with that chunk's text hash. The stamp is written in
the same tantivy commit as the documents it describes, so the two can never disagree: a SIGKILL leaves
the previous commit whole (tantivy replaces its ``meta.json`` atomically).

The database stays the truth. :meth:`KeywordFiles.sync` brings an index up to date under an exclusive
lock (``keywords/base-<id>.lock``), reading a snapshot taken after the lock: it deletes the documents of
chunks the writer cleared (when they are gone in that snapshot: chunk ids are never reused, so a gone
chunk is gone for good), adds the rows above the stamp's last id, and rebuilds from rows when the index is
missing, unreadable, foreign (another base, a re-created one, another format), from another history (its
version above the database's, its last id never issued, or its last chunk's text not the row's), or more
than ``DEAD_SHARE`` dead. The writer queues the sync after every commit that wrote or cleared material
(:mod:`knowledge.library.index`), carrying the chunk ids it cleared; a search that finds the index behind
its own snapshot syncs it itself (:mod:`knowledge.search.keyword_index`). A crash between a commit and its
sync loses only the deletes it carried: those documents stay until a rebuild, and search joins every hit
to its live row in its own snapshot, so they are never returned.

Readers take the shared lock while they open an index (tantivy opens every segment file then), so a
writer's merge never removes a file between a reader's reading ``meta.json`` and its opening the segments;
once open, a reader keeps its mapped files whatever the writer removes. A rebuild writes a new directory
beside (``base-<id>.new``) and swaps it in under the exclusive lock.

Trust: ``keywords/`` and each index directory must be real directories (not links); anything else at
those names is removed (the link itself, never its target) and the index rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tantivy
from sqlalchemy import Connection, bindparam, text

from knowledge.library import chunk_ids
from knowledge.library.file_locks import Busy, flock
from knowledge.library.index_syncs import Sync, gathered_or_run
from knowledge.library.keyword_schema import (
    ANALYZER,
    FORMAT,
    SCHEMA,
    STAMP_ID,
    Opened,
    Stamp,
    analyze,
    prepared,
    read_stamp,
    write_stamp,
)
from knowledge.library.vector_format import BaseKey, base_key, vectors_version

if TYPE_CHECKING:
    from knowledge.store.database import Database

log = logging.getLogger(__name__)

DIRNAME = "keywords"
WRITER_HEAP = 64_000_000  # bytes of tantivy's indexing buffer for an append
REBUILD_HEAP = 256_000_000  # and for a rebuild, split over REBUILD_THREADS
REBUILD_THREADS = 2
READ_BATCH = 5_000  # rows read per query while adding (bounds the texts held)
DEAD_SHARE = 0.25  # rebuild (after a delete) when more than this share of the documents are dead
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


# -- the files ----------------------------------------------------------------------------------------


class KeywordFiles:
    """The keyword indexes of one data directory (its database's: ``db.path``'s directory)."""

    def __init__(self, db: Database, data_dir: Path | None = None) -> None:
        self.db = db
        self.data_dir = Path(data_dir) if data_dir is not None else Path(db.path).parent

    @staticmethod
    def name(base_id: int) -> str:
        return f"base-{int(base_id)}"

    def path(self, base_id: int) -> Path:
        return self.data_dir / DIRNAME / self.name(base_id)

    def _root(self) -> Path:
        """``keywords/``, made if missing; anything else at that name (a link, a file) is removed first."""
        root = self.data_dir / DIRNAME
        _only_a_directory(root)
        with contextlib.suppress(FileExistsError):
            root.mkdir(mode=0o700)
        _only_a_directory(root)
        if not root.is_dir():
            raise OSError(f"cannot make the {DIRNAME} directory")
        return root

    @contextlib.contextmanager
    def _locked(self, base_id: int, kind: int, wait: float | None = None) -> Iterator[None]:
        """The base's lock (``wait``: give up with ``Busy`` after that many seconds instead of waiting)."""
        name = self._root() / f"{self.name(base_id)}.lock"
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600)
        except OSError:  # a link or something we may not open stands there
            name.unlink(missing_ok=True)
            fd = os.open(name, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600)
        try:
            flock(fd, kind, wait)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    # -- reading ----------------------------------------------------------------------------------

    def peek(self, key: BaseKey, *, wait: float | None = None) -> Opened | None:
        """The index as it is (opened under the shared lock), if it is valid and the base's; else None.
        ``wait``: raise ``Busy`` rather than wait longer than that for a writer (a rebuild takes minutes)."""
        try:
            with self._locked(key.base_id, fcntl.LOCK_SH, wait):
                return self._open(key)
        except Busy:
            raise
        except OSError:
            log.warning("the keyword index of base %s could not be read", key.base_id, exc_info=True)
            return None

    def _open(self, key: BaseKey) -> Opened | None:
        path = self.path(key.base_id)
        if not _only_a_directory(path) or not (path / "meta.json").is_file():
            return None
        try:
            index = prepared(tantivy.Index.open(str(path)))
            index.reload()
            stamp = read_stamp(index)
        except (OSError, ValueError) as error:
            log.info("keyword index of base %s unreadable: %s", key.base_id, error)
            return None
        if stamp is None or stamp.key != key or stamp.format != FORMAT or stamp.analyzer != ANALYZER:
            return None
        return Opened(index, stamp)

    def held_ids(self, opened: Opened) -> set[int]:
        """Every chunk id the index holds (a check for tests and ``doctor``; reads the whole id column)."""
        searcher = opened.searcher()
        total = int(searcher.num_docs)
        if total == 0:
            return set()
        hits = searcher.search(tantivy.Query.all_query(), total, count=False).hits
        ids = searcher.fast_field_values("id", [address for _score, address in hits])
        return {int(i) for i in ids if i is not None and int(i) != STAMP_ID}

    # -- writing ----------------------------------------------------------------------------------

    def sync(
        self,
        base_id: int,
        cleared: Iterable[int] = (),
        *,
        rebuild_at_most: int | None = None,
        wait: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Opened | None:
        """Bring the base's index up to the database (see the module docstring); None if the base is gone
        (its index is removed) or, with ``rebuild_at_most``, if it would need a rebuild of more chunks than
        that (a search then ranks with FTS5 instead of waiting for the build). ``wait``: raise ``Busy`` rather
        than wait longer for another writer; ``stop``: asked between batches of rows, true abandons the
        write (``Stopped``; nothing of it is committed)."""
        with self._locked(base_id, fcntl.LOCK_EX, wait), self.db.read() as conn:
            key = base_key(conn, base_id)
            if key is None:
                self._remove(base_id)
                return None
            version = vectors_version(conn, base_id)
            current = self._open(key)
            reason = (
                "missing, unreadable or foreign" if current is None else history_differs(conn, current.stamp, version)
            )
            if current is None or reason is not None:
                if rebuild_at_most is not None and _live_count(conn, base_id) > rebuild_at_most:
                    return None
                log.info("keyword index of base %s rebuilt from rows (%s)", base_id, reason)
                return self._rebuild(conn, key, version, stop)
            gone = _gone(conn, cleared)
            if current.stamp.version == version and not gone:
                return current
            updated = self._append(conn, current, gone, version, stop)
            if gone and _too_dead(conn, base_id, updated.documents()):
                log.info("keyword index of base %s rebuilt from rows (more than a quarter dead)", base_id)
                return self._rebuild(conn, key, version, stop)
            return updated

    def remove(self, base_id: int) -> None:
        """Remove a base's index (the base was deleted)."""
        with self._locked(base_id, fcntl.LOCK_EX):
            self._remove(base_id)

    def remove_orphans(self, live_base_ids: set[int]) -> list[int]:
        """Remove the indexes of bases that no longer exist (a crash before a deleted base's hook ran)."""
        root = self._root()
        found = {b for b in (_base_id_of(name) for name in os.listdir(root)) if b is not None}
        orphans = sorted(found - live_base_ids)
        for base_id in orphans:
            self._remove(base_id)
        return orphans

    def _remove(self, base_id: int) -> None:
        root = self._root()
        for name in (self.name(base_id), self.name(base_id) + ".new", self.name(base_id) + ".lock"):
            _remove_entry(root / name)

    def _append(
        self, conn: Connection, current: Opened, gone: list[int], version: int, stop: Callable[[], bool] | None
    ) -> Opened:
        writer = current.index.writer(WRITER_HEAP, 1)
        try:
            for chunk_id in gone:
                writer.delete_documents_by_term("id", chunk_id)
            last_id, last_sha = _add_rows(writer, conn, current.stamp.key.base_id, current.stamp.last_id, stop)
            stamp = Stamp(
                current.stamp.key, version, last_id or current.stamp.last_id, last_sha or current.stamp.last_sha
            )
            write_stamp(writer, stamp)
            writer.commit()
        except BaseException:
            writer.rollback()
            raise
        writer.wait_merging_threads()
        _owner_only(self.path(current.stamp.key.base_id))
        current.index.reload()
        return Opened(current.index, stamp)

    def _rebuild(self, conn: Connection, key: BaseKey, version: int, stop: Callable[[], bool] | None) -> Opened | None:
        """Every row of the base into a new index beside, swapped in whole."""
        final, new = self.path(key.base_id), self.path(key.base_id).with_name(self.name(key.base_id) + ".new")
        _remove_entry(new)
        new.mkdir(mode=0o700)
        index = prepared(tantivy.Index(SCHEMA, str(new), reuse=False))
        writer = index.writer(REBUILD_HEAP, REBUILD_THREADS)
        try:
            last_id, last_sha = _add_rows(writer, conn, key.base_id, 0, stop)
            write_stamp(writer, Stamp(key, version, last_id, last_sha))
            writer.commit()
        except BaseException:
            writer.rollback()
            del index, writer
            _remove_entry(new)
            raise
        writer.wait_merging_threads()
        del index, writer
        _owner_only(new)
        _remove_entry(final)
        new.rename(final)
        return self._open(key)


class Stopped(Exception):
    """A sync abandoned at its caller's request (the process is closing); nothing of it was committed."""


def _owner_only(directory: Path) -> None:
    """tantivy creates its segment files with the process umask (0644 on most desktops): inside the 0700
    index directory no one else can reach them, but the data directory's rule is owner-only files too
    (``quire doctor`` checks every file), so each file a commit or merge wrote is narrowed here."""
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mode & 0o077:
                with contextlib.suppress(FileNotFoundError):  # a merge may have removed it meanwhile
                    os.chmod(entry.path, 0o600, follow_symlinks=False)


def _add_rows(
    writer: tantivy.IndexWriter, conn: Connection, base_id: int, after: int, stop: Callable[[], bool] | None = None
) -> tuple[int, str]:
    """Add the base's chunks above ``after``, in id order; (the last id added, its text hash) or (0, "")."""
    last: tuple[int, str] = (0, "")
    for rows in _row_batches(conn, base_id, after):
        if stop is not None and stop():
            raise Stopped("the keyword index's sync was stopped")
        for chunk_id, item_id, body, _sha in rows:
            writer.add_document(tantivy.Document(id=int(chunk_id), item=int(item_id), text=" ".join(analyze(body))))
        last = (int(rows[-1][0]), str(rows[-1][3]))
    return last


def _row_batches(conn: Connection, base_id: int, after: int) -> Iterator[Sequence[Any]]:
    query = text(
        "SELECT id, item_id, text, text_sha256 FROM chunks WHERE base_id = :b AND id > :after ORDER BY id LIMIT :n"
    )
    while True:
        rows = conn.execute(query, {"b": base_id, "after": after, "n": READ_BATCH}).all()
        if not rows:
            return
        yield rows
        after = int(rows[-1][0])


def history_differs(conn: Connection, stamp: Stamp, version: int) -> str | None:
    if stamp.version > version:
        return f"its version {stamp.version} is above the database's {version}"
    if stamp.last_id and stamp.last_id >= chunk_ids.next_unissued(conn):
        return "its last chunk id was never issued"
    if stamp.last_id:
        row = conn.execute(text("SELECT text_sha256 FROM chunks WHERE id = :i"), {"i": stamp.last_id}).first()
        if row is not None and str(row[0]) != stamp.last_sha:
            return "its last chunk is not its row's text"
    return None


_LIVE = text("SELECT id FROM chunks WHERE id IN :ids").bindparams(bindparam("ids", expanding=True))


def _gone(conn: Connection, cleared: Iterable[int]) -> list[int]:
    """The ``cleared`` chunk ids with no row in this snapshot (a cleared chunk whose transaction rolled back
    a savepoint is still live: its document stays)."""
    wanted = sorted(set(cleared))
    gone: list[int] = []
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        live = {int(r[0]) for r in conn.execute(_LIVE, {"ids": part}).all()}
        gone.extend(cid for cid in part if cid not in live)
    return gone


def _live_count(conn: Connection, base_id: int) -> int:
    return int(conn.execute(text("SELECT count(*) FROM chunks WHERE base_id = :b"), {"b": base_id}).scalar_one())


def _too_dead(conn: Connection, base_id: int, held: int) -> bool:
    live = _live_count(conn, base_id)
    return held - live > DEAD_SHARE * max(live, 1) and held - live > 100


def _only_a_directory(path: Path) -> bool:
    """Whether ``path`` is a real directory; a link or anything else there is removed (never its target)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        return True
    log.warning("%s is not a directory: removed", path.name)
    path.unlink(missing_ok=True)
    return False


def _remove_entry(path: Path) -> None:
    if _only_a_directory(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _base_id_of(name: str) -> int | None:
    """The base id in one of our names (``base-<id>``, ``.new``, ``.lock``), else None."""
    stem, _dot, suffix = name.partition(".")
    if not stem.startswith("base-") or not stem[5:].isdigit() or suffix not in ("", "new", "lock"):
        return None
    return int(stem[5:])


# -- the writer's hooks ------------------------------------------------------------------------------


@dataclass(eq=False)
class SyncAfterCommit:
    """An after-commit hook: bring a base's index up to the rows, deleting the chunks ``cleared`` carries.

    One per base and transaction (hooks equal by base): the transaction's clears add their chunk ids to the
    one queued (``knowledge.store.database.after_commit`` answers it). Run at once or gathered with later
    commits' (:mod:`knowledge.library.index_syncs`)."""

    base_id: int
    cleared: set[int] = field(default_factory=set)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SyncAfterCommit) and other.base_id == self.base_id

    def __hash__(self) -> int:
        return hash((SyncAfterCommit, self.base_id))

    def __call__(self, db: Database) -> None:
        gathered_or_run(db, self)

    def run(self, db: Database) -> None:
        KeywordFiles(db).sync(self.base_id, self.cleared)

    def absorb(self, later: Sync) -> None:
        if isinstance(later, SyncAfterCommit):
            self.cleared |= later.cleared


@dataclass(frozen=True)
class RemoveAfterCommit:
    """An after-commit hook: a deleted base's index goes too."""

    base_id: int

    def __call__(self, db: Database) -> None:
        KeywordFiles(db).remove(self.base_id)
