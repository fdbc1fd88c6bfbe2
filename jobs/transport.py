"""huey on SQLite, through apsw, as the wake-up transport for jobs.

huey delivers at most once (its SQLite storage deletes the task row as it dequeues it; FACTS.md #2), so
a message carries only a job id and means "look at the jobs table". Durability is the ``jobs`` row.

Only huey's *storage* is used, never its task machinery: huey's messages are pickles, and anyone who can
write to the queue (the ``task`` table of a restored file, a shared Redis list) would run code in every
worker that unpickled one. A Quire message is a small JSON document, ``{"job": 42}`` (``wake_message``),
and a worker reads a message only through ``job_id_of``: bounded, strict JSON, a positive id. Anything
else (a pickle, an old-format message, garbage) is dropped with one warning that does not echo it, and
the next message is taken. A forged wake-up can only make a worker look at the ``jobs`` table early.

``enlisted(dbapi_conn)`` makes the storage's ``enqueue`` write its ``task`` row through the caller's open
connection, inside the caller's transaction (FACTS.md #3): commit keeps both the job row and the
message, rollback drops both. Outside ``enlisted`` the storage uses its own apsw connection.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, Protocol

from huey import Huey
from huey.serializer import Serializer
from huey.storage import SqliteStorage
from sqlalchemy import Connection

log = logging.getLogger(__name__)

QUEUE_NAME = "quire"
HUEY_DDL: tuple[str, ...] = tuple(SqliteStorage.ddl)
MAX_MESSAGE_BYTES = 64  # '{"job": 9223372036854775807}' is 28: anything longer is not ours
MAX_JOB_ID = 2**63 - 1
MAX_DROPS_PER_TAKE = 100  # a flooded queue cannot hold a worker away from the jobs table

_enlisted: contextvars.ContextVar[Any | None] = contextvars.ContextVar("quire_enlisted_conn", default=None)


def wake_message(job_id: int) -> bytes:
    """The one message Quire writes: ``{"job": <id>}``."""
    if isinstance(job_id, bool) or not 0 < int(job_id) <= MAX_JOB_ID:
        raise ValueError("a wake-up names a positive job id")
    return json.dumps({"job": int(job_id)}).encode("ascii")


def job_id_of(data: object) -> int | None:
    """The job id of a wake-up message, or None for anything that is not exactly one (never unpickled)."""
    if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) > MAX_MESSAGE_BYTES:
        return None
    try:  # an object comes back as a tuple of its (key, value) pairs (arrays are lists): a repeated key shows
        message = json.loads(bytes(data).decode("ascii"), parse_constant=_refuse_constant, object_pairs_hook=tuple)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(message, tuple) or len(message) != 1 or message[0][0] != "job":
        return None
    job_id = message[0][1]
    if type(job_id) is not int or not 0 < job_id <= MAX_JOB_ID:
        return None
    return job_id


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"not a number: {name}")


class RefusingSerializer(Serializer):  # type: ignore[misc]
    """Given to every Huey Quire builds, so that no huey code path can pickle or unpickle a message."""

    def _serialize(self, data: Any) -> NoReturn:
        raise TypeError("Quire writes wake-ups as JSON through the storage, never through huey's serializer")

    def _deserialize(self, data: Any) -> NoReturn:
        raise TypeError("Quire never unpickles a queue message")


class ApswSqliteStorage(SqliteStorage):  # type: ignore[misc]
    """huey's SQLite storage with connections from Quire's store (apsw + the DB-API adapter)."""

    def __init__(self, name: str, connect: Callable[[], Any], **kwargs: Any) -> None:
        self._connect = connect
        super().__init__(name=name, filename="", create_tables=False, **kwargs)

    def _create_connection(self) -> Any:
        return self._connect()

    def enqueue(self, data: bytes, priority: float | None = None) -> None:
        conn = _enlisted.get()
        if conn is None:
            super().enqueue(data, priority)
            return
        conn.execute(
            "INSERT INTO task (queue, data, priority) VALUES (?, ?, ?)",
            (self.name, bytes(data), priority or 0),
        )


@contextlib.contextmanager
def enlisted(dbapi_conn: Any) -> Iterator[None]:
    token = _enlisted.set(dbapi_conn)
    try:
        yield
    finally:
        _enlisted.reset(token)


def discard_messages(conn: Connection) -> int:
    """Empty huey's tables in the caller's transaction (a restored database's queue is its maker's word; the
    ``jobs`` table says what is to run). Returns how many messages were queued."""
    dropped = conn.exec_driver_sql("DELETE FROM task").rowcount
    for table in ("schedule", "kv", "counter"):
        conn.exec_driver_sql(f"DELETE FROM {table}")
    return int(dropped or 0)


class WakeTransport(Protocol):
    """What the job layer needs of a wake-up transport: huey on the store's SQLite file (``Transport``), or
    huey on Redis for a team store (``jobs.redis_transport.RedisTransport``)."""

    def wake(self, conn: Connection, job_id: int) -> None: ...
    def wake_now(self, job_id: int) -> None: ...
    def next_job_id(self) -> int | None: ...
    def pending_messages(self) -> int: ...
    def close(self) -> None: ...


class HueyWakes:
    """What both huey transports share: writing and reading JSON wake-ups through huey's storage only.
    A subclass says how a wake-up joins a transaction (``wake``) and how its storage closes."""

    def __init__(self, huey: Any) -> None:
        self.huey = huey

    def _send(self, job_id: int) -> None:
        self.huey.storage.enqueue(wake_message(job_id), None)

    def wake_now(self, job_id: int) -> None:
        """Enqueue a wake-up at once, outside any store transaction."""
        self._send(job_id)

    def next_job_id(self) -> int | None:
        """Take messages off the queue until one is a wake-up; its job id, or None when the queue is empty
        (or only foreign messages were taken: the worker then scans the jobs table)."""
        for _ in range(MAX_DROPS_PER_TAKE):
            data = self.huey.storage.dequeue()
            if data is None:
                return None
            job_id = job_id_of(data)
            if job_id is not None:
                return job_id
            size = len(data) if isinstance(data, (bytes, bytearray, memoryview)) else -1
            log.warning("dropped a queue message that is not a Quire wake-up (%d bytes)", size)
        return None

    def pending_messages(self) -> int:
        return int(self.huey.storage.queue_size())


class Transport(HueyWakes):
    """One huey storage per database; wakes workers with job ids."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        huey = Huey(
            QUEUE_NAME, results=False, serializer=RefusingSerializer(), storage_class=ApswSqliteStorage, connect=connect
        )
        super().__init__(huey)

    def wake(self, conn: Connection, job_id: int) -> None:
        """Enqueue a wake-up for ``job_id`` inside the transaction open on ``conn``."""
        with enlisted(conn.connection.driver_connection):
            self._send(job_id)

    def close(self) -> None:
        self.huey.storage.close()
