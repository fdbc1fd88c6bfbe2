"""The one place that opens the database: apsw connections with pragmas and sqlite-vec, SQLAlchemy on top.

Decision (how SQLAlchemy shares apsw): SQLAlchemy's pysqlite dialect runs over ``apsw_dbapi`` — a
DB-API face on apsw — with a connection pool whose ``creator`` opens apsw connections here. Each
pooled connection is used by one thread at a time. SQLAlchemy builds and executes statements; it never
decides transaction boundaries. Those are ours:

* ``Database.write()`` checks out a connection and issues ``BEGIN IMMEDIATE``: the writer takes
  SQLite's write lock up front, so a transaction that reads and then writes never fails half-way on
  ``SQLITE_BUSY`` and every check made inside it still holds at commit. Nested ``write()`` on the same
  thread becomes a savepoint on the outer connection (sqlite-utils' ``atomic()``), so helpers can be
  called both standalone and inside a caller's transaction.
* ``Database.read()`` issues a deferred ``BEGIN``: a consistent WAL snapshot for multi-query reads,
  never blocking writers.
* Autocommit statements are for pragmas and maintenance only.
* Side effects outside the database (unlinking a file) wait for the commit: ``after_commit(conn, fn)``
  queues ``fn(database)`` on the open write transaction; it runs after a successful commit, in order,
  outside any transaction, and is dropped on rollback (also when the savepoint it was queued in rolls
  back). A crash between the commit and the hook leaves work a repair scan finishes (the blob sweep).
* A test guard (``Database.forbid_writes_on``) makes ``write()`` refuse to open on one thread — the GUI
  tests name the Qt main thread for calls coming from ``app.``: the window must never wait on SQLite's
  write lock there (its writes run in ``app.ops.Op`` worker threads). Refusals raise
  ``WriteOnForbiddenThread`` (an ``AssertionError``: no ``except KnowledgeError`` turns it into a message)
  and are also recorded, so a refusal swallowed by a broad ``except`` still fails the test that made it.

Other processes (CLI, worker, GUI) share the file through SQLite's own locking with a busy timeout.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import apsw
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import QueuePool

from knowledge.errors import Forbidden, MissingComponent, SecondLiveItem, StoreError
from knowledge.store import apsw_dbapi
from knowledge.store.native import load_vec_extension
from knowledge.store.schema_identity import LIVE_FILE_SOURCE_INDEX

log = logging.getLogger(__name__)

DB_FILENAME = "quire.sqlite3"
_AFTER_COMMIT = "quire_after_commit"
BUSY_TIMEOUT_MS = 15_000


def open_raw_connection(path: Path | str) -> apsw.Connection:
    """An apsw connection with Quire's pragmas and sqlite-vec loaded."""
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    try:
        load_vec_extension(conn)
    except MissingComponent:  # one readable sentence for the person; see knowledge.store.native
        conn.close()
        raise
    # apsw's execute is lazy for row-returning statements: fetch each pragma (FACTS.md #6).
    # Switching to WAL needs a lock; only ask when the file is not in WAL mode already.
    if str(conn.execute("PRAGMA journal_mode").fetchall()[0][0]).lower() != "wal":
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchall()
        if str(mode[0][0]).lower() != "wal" and str(path) != ":memory:":
            raise StoreError(f"could not switch the database to WAL mode (got {mode[0][0]!r})")
    conn.execute("PRAGMA synchronous=NORMAL").fetchall()
    conn.execute("PRAGMA foreign_keys=ON").fetchall()
    conn.execute("PRAGMA cache_size=-16000").fetchall()
    return conn


class WriteOnForbiddenThread(AssertionError):
    """A write transaction was opened on the thread a test guard forbids (the GUI's main thread)."""


class Database:
    """Owns the engine for one database file. Create one per process and pass it down.

    ``knowledge.store.postgres.PostgresDatabase`` is the same door onto a team store: it overrides only how
    a write and a read begin (``_begin_write``/``_begin_read``) and how the engine is built.
    """

    dialect_name: ClassVar[str] = "sqlite"
    # Whether machines share this store (a team store): its rows are other machines' and members' word.
    shared_by_machines: ClassVar[bool] = False

    # Test guard, process-wide (off in the product): the thread that may not open a write, the modules
    # whose calls it applies to, and the stacks of the writes it refused.
    _write_forbidden_on: ClassVar[threading.Thread | None] = None
    _write_forbidden_from: ClassVar[str | None] = None
    _refused_writes: ClassVar[list[str]] = []

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self.engine: Engine = create_engine(
            "sqlite+pysqlite://",
            module=apsw_dbapi,
            creator=lambda: apsw_dbapi.connect_with(lambda: open_raw_connection(path)),
            poolclass=QueuePool,
            pool_size=4,
            max_overflow=16,
            pool_reset_on_return="rollback",
        )
        # pysqlite's dialect would otherwise issue its own isolation-level pragmas; we own BEGIN.
        event.listen(self.engine, "connect", _noop_connect)

    @classmethod
    def in_dir(cls, data_dir: Path) -> Database:
        """The data directory's database; a new directory and file are owner-only (0700/0600)."""
        from knowledge.store.permissions import create_private_file, make_private_dir

        make_private_dir(data_dir)
        create_private_file(data_dir / DB_FILENAME)  # SQLite gives -wal/-shm the database file's mode
        return cls(data_dir / DB_FILENAME)

    def dispose(self) -> None:
        self.engine.dispose()

    # -- test guard ---------------------------------------------------------------------------

    @classmethod
    def forbid_writes_on(cls, thread: threading.Thread | None, *, called_from: str | None = None) -> None:
        """Refuse every ``write()`` opened on ``thread``; ``None`` lifts the guard.

        With ``called_from`` (a module-name prefix such as ``"app."``) only writes whose call stack passes
        through such a module are refused: the GUI tests forbid the *window's* main-thread writes while the
        test body itself still sets up data on that thread.
        """
        cls._write_forbidden_on = thread
        cls._write_forbidden_from = called_from

    @classmethod
    def refused_writes(cls) -> list[str]:
        """The call stacks of every write the guard refused in this process, oldest first."""
        return list(cls._refused_writes)

    @classmethod
    def _check_write_thread(cls) -> None:
        forbidden = cls._write_forbidden_on
        if forbidden is None or threading.current_thread() is not forbidden:
            return
        prefix = cls._write_forbidden_from
        if prefix is not None and not _stack_passes_through(prefix):
            return
        stack = "".join(traceback.format_stack(limit=16)[:-2])
        cls._refused_writes.append(stack)
        raise WriteOnForbiddenThread(f"a write transaction was opened on {forbidden.name}:\n{stack}")

    # -- transactions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def write(self, *, store_lock: bool = True) -> Iterator[Connection]:
        """A write transaction (``BEGIN IMMEDIATE``); nested calls on one thread become savepoints.

        ``store_lock=False`` is for a statement that locks the very rows it changes and checks nothing
        else (a job claim, ``jobs.queue.claim_job``): an engine with row locks may then skip the store's one write
        lock. SQLite has only that lock, so it changes nothing there."""
        self._check_write_thread()
        outer: Connection | None = getattr(self._local, "write_conn", None)
        if outer is not None:
            queued = len(_hooks(outer))
            try:
                with _mapped_errors(), outer.begin_nested():
                    yield outer
            except BaseException:
                del _hooks(outer)[queued:]  # the savepoint rolled back: so do its side effects
                raise
            return
        with _mapped_errors(), self.engine.connect() as conn:
            self._begin_write(conn, store_lock=store_lock)
            self._local.write_conn = conn
            _hooks(conn).clear()
            try:
                yield conn
            except BaseException:
                conn.rollback()
                _hooks(conn).clear()
                raise
            finally:
                self._local.write_conn = None
            try:
                conn.commit()
            except BaseException:
                _hooks(conn).clear()
                # SQLite keeps the transaction open when COMMIT fails (a deferred constraint, a busy or
                # full disk), and SQLAlchemy skips the pool's reset after a commit it issued: end it here.
                with contextlib.suppress(Exception):
                    conn.connection.driver_connection.rollback()  # type: ignore[union-attr]
                raise
            hooks = list(_hooks(conn))
            _hooks(conn).clear()
        self._run_after_commit(hooks)

    def _run_after_commit(self, hooks: list[Callable[[Database], object]]) -> None:
        for hook in hooks:
            try:
                hook(self)
            except Exception:  # a side effect must not undo a committed write; repair scans finish it
                log.exception("an after-commit action failed; a repair scan will finish it")

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A read snapshot. Inside a write on the same thread, reads see that write's own changes."""
        outer: Connection | None = getattr(self._local, "write_conn", None)
        if outer is not None:
            yield outer
            return
        with _mapped_errors(), self.engine.connect() as conn:
            self._begin_read(conn)
            try:
                yield conn
            finally:
                conn.rollback()

    def _begin_write(self, conn: Connection, *, store_lock: bool = True) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    def _begin_read(self, conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")

    def current_write(self) -> Connection | None:
        """The write transaction open on this thread, if any."""
        conn: Connection | None = getattr(self._local, "write_conn", None)
        return conn

    @contextlib.contextmanager
    def autocommit(self) -> Iterator[Connection]:
        """A connection with no transaction: for pragmas, VACUUM, integrity checks."""
        with _mapped_errors(), self.engine.connect() as conn:
            yield conn
            conn.rollback()


_Hook = TypeVar("_Hook", bound=Callable[["Database"], object])


def after_commit(conn: Connection, hook: Callable[[Database], object]) -> None:
    """Run ``hook(database)`` once the write transaction open on ``conn`` has committed (see the docstring);
    a hook already registered in this transaction (an equal callable) is not added again."""
    queued_after_commit(conn, hook)


def queued_after_commit(conn: Connection, hook: _Hook) -> _Hook:
    """``after_commit``, answering the hook that will run: the equal one already registered in this
    transaction, if any (so a caller can add to what that one carries), else ``hook``."""
    if not conn.in_transaction():
        raise StoreError("after_commit needs an open write transaction")
    hooks = _hooks(conn)
    for queued in hooks:  # registered twice in one transaction (a ring per enqueued job): run once
        if queued == hook:
            return queued  # equal to the _Hook asked for: the same kind
    hooks.append(hook)
    return hook


def _hooks(conn: Connection) -> list[Callable[[Database], object]]:
    found: list[Callable[[Database], object]] = conn.info.setdefault(_AFTER_COMMIT, [])
    return found


def _stack_passes_through(module_prefix: str) -> bool:
    frame = inspect.currentframe()
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(module_prefix):
            return True
        frame = frame.f_back
    return False


def raw_apsw(conn: Connection) -> apsw.Connection:
    """The apsw connection under a SQLAlchemy connection (for vec0 blobs and huey's task row)."""
    driver = conn.connection.driver_connection
    assert isinstance(driver, apsw_dbapi.Connection)
    return driver.apsw


def _noop_connect(_dbapi_conn: Any, _record: Any) -> None:
    return None


# A team store's refusal of a right the person's database role lacks (SQLSTATE 42501): the transaction rolls
# back whole, so a refused write leaves nothing behind.
INSUFFICIENT_PRIVILEGE = "42501"


def _refused(exc: sa_exc.DatabaseError) -> Forbidden:
    said = " ".join(str(exc.orig).split()).split(" LINE ")[0] if exc.orig is not None else "permission denied"
    return Forbidden(
        f"the team store refused this to your database role ({said}); nothing was changed — "
        "ask the store's owner for the right"
    )


def _second_live_file(exc: sa_exc.IntegrityError) -> bool:
    """The database refused a second live file item for one source (``schema_identity``): PostgreSQL names
    the index, SQLite the columns of its unique key."""
    said = str(exc.orig) if exc.orig is not None else str(exc)
    return LIVE_FILE_SOURCE_INDEX in said or "UNIQUE constraint failed: items.base_id, items.source_path" in said


@contextlib.contextmanager
def _mapped_errors() -> Iterator[None]:
    """Turn lock timeouts, full disks and corruption into an actionable StoreError; a refused right into
    ``Forbidden``, a second live item for one file into ``SecondLiveItem`` (a ``Conflict``)."""
    try:
        yield
    except sa_exc.OperationalError as exc:
        text = str(exc.orig) if exc.orig is not None else str(exc)
        if "locked" in text or "busy" in text:
            raise StoreError("the database is busy (another Quire process holds it); try again") from exc
        if "full" in text:
            raise StoreError("the disk is full; free some space and try again") from exc
        raise
    except sa_exc.DatabaseError as exc:
        if isinstance(exc, sa_exc.IntegrityError) and _second_live_file(exc):
            raise SecondLiveItem(
                "the knowledge base already has a live item for that file (one item per source); nothing was changed"
            ) from exc
        if getattr(exc.orig, "sqlstate", None) == INSUFFICIENT_PRIVILEGE:
            raise _refused(exc) from None
        if "malformed" in str(exc) or "not a database" in str(exc):
            raise StoreError("the database file is damaged; run `quire doctor`") from exc
        raise
