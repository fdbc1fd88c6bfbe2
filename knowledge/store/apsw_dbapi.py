"""A small DB-API 2.0 face over apsw, so SQLAlchemy (and huey's SQL storage) run on apsw.

Why: apsw embeds its own SQLite and can load sqlite-vec; the stdlib ``sqlite3`` cannot load
extensions here, and two SQLite copies in one process do not see each other's locks (FACTS.md #1).
So every in-process connection goes through apsw, and this adapter is how libraries written for
DB-API drivers use it.

Transaction contract: the adapter runs apsw in its natural autocommit mode. Nothing begins a
transaction implicitly; callers issue ``BEGIN`` / ``BEGIN IMMEDIATE`` themselves (the store does this
in ``Database.write()`` / ``Database.read()``). ``commit()`` and ``rollback()`` end a transaction if
one is open and are no-ops otherwise. Savepoints are plain SQL and pass straight through.

Errors: apsw exceptions are re-raised as this module's DB-API classes, so SQLAlchemy wraps them in
its own ``IntegrityError`` / ``OperationalError`` exactly as it does for pysqlite.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import apsw

apilevel = "2.0"
threadsafety = 1
paramstyle = "qmark"
sqlite_version = apsw.sqlite_lib_version()
sqlite_version_info = tuple(int(part) for part in sqlite_version.split("."))
version_info = (2, 6, 0)  # the pysqlite dialect reads this; we behave like a modern pysqlite
version = "2.6.0"

# SQLAlchemy's pysqlite dialect registers adapters on import of the DB-API module.
PARSE_DECLTYPES = 1
PARSE_COLNAMES = 2


class Warning(Exception):
    pass


class Error(Exception):
    pass


class InterfaceError(Error):
    pass


class DatabaseError(Error):
    pass


class DataError(DatabaseError):
    pass


class OperationalError(DatabaseError):
    pass


class IntegrityError(DatabaseError):
    pass


class InternalError(DatabaseError):
    pass


class ProgrammingError(DatabaseError):
    pass


class NotSupportedError(DatabaseError):
    pass


Binary = bytes
Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime


def register_adapter(*_args: Any) -> None:
    """pysqlite compatibility shim: apsw binds Python values itself."""


def register_converter(*_args: Any) -> None:
    """pysqlite compatibility shim."""


def _map_error(exc: apsw.Error) -> Error:
    if isinstance(exc, apsw.ConstraintError):
        return IntegrityError(str(exc))
    if isinstance(exc, apsw.SQLError):
        return OperationalError(str(exc))
    if isinstance(exc, apsw.BusyError | apsw.LockedError | apsw.CantOpenError | apsw.IOError | apsw.FullError):
        return OperationalError(str(exc))
    if isinstance(exc, apsw.MismatchError | apsw.TooBigError | apsw.RangeError):
        return DataError(str(exc))
    if isinstance(exc, apsw.CorruptError | apsw.NotADBError):
        return DatabaseError(str(exc))
    if isinstance(exc, apsw.BindingsError | apsw.ExecutionCompleteError):
        return ProgrammingError(str(exc))
    return OperationalError(str(exc))


def _translate(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except apsw.Error as exc:
        raise _map_error(exc) from exc


class Cursor:
    """A DB-API cursor over one apsw cursor. Results are fetched eagerly (see FACTS.md #6)."""

    arraysize = 1

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._rows: list[tuple[Any, ...]] = []
        self._pos = 0
        self.description: list[tuple[Any, ...]] | None = None
        self.rowcount = -1
        self.lastrowid: int | None = None

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> Cursor:
        raw = self.connection.apsw
        before = raw.total_changes()
        cursor = raw.cursor()
        described: list[tuple[tuple[str, str | None], ...]] = []

        # The column names must be read while the statement is prepared: a query with no rows has
        # already completed when execute() returns, and apsw no longer describes it then.
        def trace(cur: apsw.Cursor, _sql: str, _bindings: Any) -> bool:
            described.append(cur.get_description())
            return True

        cursor.exec_trace = trace

        def run() -> list[tuple[Any, ...]]:
            return list(cursor.execute(sql, parameters or ()))

        self._rows = _translate(run)
        self._pos = 0
        desc = described[-1] if described else ()
        self.description = [(name, None, None, None, None, None, None) for name, _d in desc] or None
        changed = raw.total_changes() - before
        self.rowcount = raw.changes() if changed else (0 if self.description is None else -1)
        self.lastrowid = raw.last_insert_rowid()
        return self

    def executemany(self, sql: str, seq_of_parameters: Sequence[Sequence[Any] | dict[str, Any]]) -> Cursor:
        raw = self.connection.apsw
        before = raw.total_changes()
        _translate(lambda: raw.cursor().executemany(sql, list(seq_of_parameters)))
        self._rows, self._pos, self.description = [], 0, None
        self.rowcount = raw.total_changes() - before
        self.lastrowid = raw.last_insert_rowid()
        return self

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._pos >= len(self._rows):
            return None
        row = self._rows[self._pos]
        self._pos += 1
        return row

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        size = size or self.arraysize
        rows = self._rows[self._pos : self._pos + size]
        self._pos += len(rows)
        return rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows = self._rows[self._pos :]
        self._pos = len(self._rows)
        return rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while (row := self.fetchone()) is not None:
            yield row

    def close(self) -> None:
        self._rows = []

    def setinputsizes(self, *_args: Any) -> None:
        pass

    def setoutputsize(self, *_args: Any) -> None:
        pass


class Connection:
    """A DB-API connection owning one apsw connection (autocommit unless the caller said BEGIN)."""

    def __init__(self, raw: apsw.Connection) -> None:
        self.apsw = raw

    @property
    def in_transaction(self) -> bool:
        return not self.apsw.get_autocommit()

    def cursor(self) -> Cursor:
        return Cursor(self)

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> Cursor:
        return self.cursor().execute(sql, parameters)

    def commit(self) -> None:
        if self.in_transaction:
            _translate(lambda: self.apsw.execute("COMMIT"))

    def rollback(self) -> None:
        if self.in_transaction:
            _translate(lambda: self.apsw.execute("ROLLBACK"))

    def close(self) -> None:
        self.apsw.close()

    def create_function(self, name: str, num_params: int, func: Callable[..., Any], **_kw: Any) -> None:
        self.apsw.create_scalar_function(name, func, num_params)


def connect(database: str = ":memory:", **_kwargs: Any) -> Connection:
    """Open a plain apsw connection (the store's ``open_raw_connection`` adds pragmas and sqlite-vec)."""
    return Connection(_translate(lambda: apsw.Connection(database)))


def connect_with(opener: Callable[[], apsw.Connection]) -> Connection:
    """Wrap a configured apsw connection; its errors surface as DB-API errors like any driver's."""
    return Connection(_translate(opener))
