"""huey on SQLite, through apsw, as the wake-up transport for jobs.

huey delivers at most once (its SQLite storage deletes the task row as it dequeues it; FACTS.md #2), so
a huey message carries only a job id and means "look at the jobs table". Durability is the ``jobs`` row.

``enlisted(dbapi_conn)`` makes ``Huey.enqueue`` write its ``task`` row through the caller's open
connection, inside the caller's transaction (FACTS.md #3): commit keeps both the job row and the
message, rollback drops both. Outside ``enlisted`` the storage uses its own apsw connection.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from huey import Huey
from huey.storage import SqliteStorage
from sqlalchemy import Connection

QUEUE_NAME = "quire"
WAKE_TASK_NAME = "quire.wake_job"
HUEY_DDL: tuple[str, ...] = tuple(SqliteStorage.ddl)

_enlisted: contextvars.ContextVar[Any | None] = contextvars.ContextVar("quire_enlisted_conn", default=None)


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


class WakeTransport(Protocol):
    """What the job layer needs of a wake-up transport: huey on the store's SQLite file (``Transport``), or
    huey on Redis for a team store (``jobs.redis_transport.RedisTransport``)."""

    def wake(self, conn: Connection, job_id: int) -> None: ...
    def wake_now(self, job_id: int) -> None: ...
    def next_job_id(self) -> int | None: ...
    def pending_messages(self) -> int: ...
    def close(self) -> None: ...


class HueyWakes:
    """What both huey transports share: the wake task registered on their huey, and reading its messages.
    A subclass says how a wake-up joins a transaction (``wake``) and how its storage closes."""

    def __init__(self, huey: Any) -> None:
        self.huey = huey

        @huey.task(name=WAKE_TASK_NAME)  # type: ignore[untyped-decorator]
        def wake_job(job_id: int) -> int:  # never executed by huey: our worker reads the id
            return job_id

        self._wake = wake_job

    def wake_now(self, job_id: int) -> None:
        """Enqueue a wake-up at once, outside any store transaction."""
        self._wake(job_id)

    def next_job_id(self) -> int | None:
        """Take one message off the queue; its job id, or None when the queue is empty."""
        task = self.huey.dequeue()
        if task is None:
            return None
        return int(task.args[0])

    def pending_messages(self) -> int:
        return int(self.huey.pending_count())


class Transport(HueyWakes):
    """One huey instance per database; wakes workers with job ids."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        super().__init__(Huey(QUEUE_NAME, results=False, storage_class=ApswSqliteStorage, connect=connect))

    def wake(self, conn: Connection, job_id: int) -> None:
        """Enqueue a wake-up for ``job_id`` inside the transaction open on ``conn``."""
        with enlisted(conn.connection.driver_connection):
            self._wake(job_id)

    def close(self) -> None:
        self.huey.storage.close()
