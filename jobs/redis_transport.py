"""huey on Redis (``RedisHuey``): the wake-up transport of a team store, whose workers run on many machines.

The ``jobs`` table stays the truth; a Redis message only wakes a worker with a job id, exactly as on SQLite
(huey delivers at most once and never acknowledges, on Redis too). A message is the JSON wake-up of
``jobs.transport`` (``{"job": 42}``), pushed and popped through huey's storage only: whoever holds the queue
URL can push anything into the list ``huey.redis.quire``, and a worker never unpickles it; it drops
whatever is not a wake-up, with a warning, so a queue holder can wake workers and nothing more. What differs: a
Redis push cannot join the store's transaction, so a wake-up is pushed only **after** the transaction that
made the job runnable committed (``defer``, the store's after-commit hook, handed in by the composition
root — the job layer imports nothing of the store). A crash between the commit and the push loses only
the wake-up: idle workers also scan the ``jobs`` table (the poll interval), so no job is stranded. So a push
that fails (Redis restarting, unreachable) is logged once per outage, never raised: the job is committed. A wake-up
queued inside a savepoint that rolls back may still be pushed; a worker that dequeues it finds nothing
pending under that id and goes on.

``PollingTransport`` is the transport of a team store given no queue URL: no messages at all, workers find
jobs by scanning the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from huey import RedisHuey
from redis import ConnectionPool
from sqlalchemy import Connection

from jobs.outage import Link, outage_budget
from jobs.transport import QUEUE_NAME, HueyWakes, RefusingSerializer

# a server that does not answer (a dropped route) fails a call in seconds, like one that refuses it
SOCKET_TIMEOUT_SECONDS = 5.0

# (the transaction, its job ids): the ids to push once that transaction commits
_PENDING = "quire_redis_wakes"

Defer = Callable[[Connection, Callable[[Any], object]], None]


class RedisTransport(HueyWakes):
    """One ``RedisHuey`` per process, on the queue URL; wakes workers with job ids after commit."""

    def __init__(self, url: str, defer: Defer) -> None:
        pool = ConnectionPool.from_url(
            url, socket_connect_timeout=SOCKET_TIMEOUT_SECONDS, socket_timeout=SOCKET_TIMEOUT_SECONDS
        )
        super().__init__(RedisHuey(QUEUE_NAME, connection_pool=pool, results=False, serializer=RefusingSerializer()))
        self._defer = defer
        self.pushes = Link("queue, for wake-ups after a commit", outage_budget())

    def wake(self, conn: Connection, job_id: int) -> None:
        """Push a wake-up for ``job_id`` once the transaction open on ``conn`` has committed."""
        transaction = conn.get_transaction()
        held = conn.info.get(_PENDING)
        if held is None or held[0] is not transaction:
            ids: list[int] = []
            conn.info[_PENDING] = (transaction, ids)
            self._defer(conn, lambda _db: self._push_all(ids))
        conn.info[_PENDING][1].append(int(job_id))

    def _push_all(self, ids: list[int]) -> None:
        """Push after the commit, best effort: a failure is logged once per outage (workers poll the table)."""
        try:
            for job_id in ids:
                self._send(job_id)
        except Exception as exc:
            self.pushes.failed(exc)
            return
        self.pushes.restored()

    def close(self) -> None:
        self.huey.storage.conn.close()


class PollingTransport:
    """No messages: workers find runnable jobs by scanning the ``jobs`` table (a team store without Redis)."""

    def wake(self, conn: Connection, job_id: int) -> None:
        return None

    def wake_now(self, job_id: int) -> None:
        return None

    def next_job_id(self) -> int | None:
        return None

    def pending_messages(self) -> int:
        return 0

    def close(self) -> None:
        return None
