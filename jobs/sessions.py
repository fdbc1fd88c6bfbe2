"""Process sessions: who enqueues and who runs jobs, and whether that process is still alive. The only writer
of ``worker_sessions``.

A session id is ``host/pid/process-start-time/n``. Liveness on this host is decided by the pid *and*
its start time (so a reused pid is not mistaken for the old process); a session on another host is
alive while its heartbeat is fresh. This is what lets startup recovery act at once after a SIGKILL
instead of waiting for a lease to run out, while never touching a live worker's jobs.

A pid means nothing on another machine, so a job *running* under another host's session is judged by its
lease alone (``jobs.recovery``): left behind once the lease ran out, never before. The host is the name
this machine goes by in the store, ``QUIRE_HOST`` if set, else its hostname — set ``QUIRE_HOST`` where
machines sharing one store also share a hostname (containers), or their pids would be compared.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from dataclasses import dataclass

import psutil
from sqlalchemy import Connection, and_, insert, select, update

from jobs.schema import worker_sessions

_counter = itertools.count(1)
STALE_HEARTBEAT_SECONDS = 120.0
HOST_ENV = "QUIRE_HOST"


def this_host() -> str:
    """The name this machine goes by in the store's sessions (see the module docstring)."""
    return os.environ.get(HOST_ENV) or socket.gethostname()


def host_of(session_id: str) -> str:
    """The host part of a session id (``host/pid/start/n``)."""
    return session_id.rsplit("/", 3)[0]


def process_start_time(pid: int) -> float:
    return float(psutil.Process(pid).create_time())


@dataclass(frozen=True)
class Session:
    id: str
    host: str
    pid: int
    process_started_at: float
    hosts_worker: bool

    @classmethod
    def for_this_process(cls, *, hosts_worker: bool) -> Session:
        pid = os.getpid()
        started = process_start_time(pid)
        host = this_host()
        return cls(f"{host}/{pid}/{started:.3f}/{next(_counter)}", host, pid, started, hosts_worker)

    def register(self, conn: Connection) -> None:
        now = time.time()
        existing = conn.execute(select(worker_sessions.c.id).where(worker_sessions.c.id == self.id)).first()
        if existing is None:
            conn.execute(
                insert(worker_sessions).values(
                    id=self.id,
                    host=self.host,
                    pid=self.pid,
                    process_started_at=self.process_started_at,
                    hosts_worker=int(self.hosts_worker),
                    started_at=now,
                    heartbeat_at=now,
                )
            )

    def end(self, conn: Connection) -> None:
        conn.execute(update(worker_sessions).where(worker_sessions.c.id == self.id).values(ended_at=time.time()))

    def host_worker(self, conn: Connection) -> None:
        """Mark this process as one that runs jobs (recovery treats what it enqueued as interrupted work)."""
        conn.execute(update(worker_sessions).where(worker_sessions.c.id == self.id).values(hosts_worker=1))

    def beat(self, conn: Connection, now: float) -> None:
        """The heartbeat that keeps this session alive to other hosts (they cannot ask for its pid)."""
        conn.execute(update(worker_sessions).where(worker_sessions.c.id == self.id).values(heartbeat_at=now))


def is_alive(host: str, pid: int, process_started_at: float, heartbeat_at: float, ended_at: float | None) -> bool:
    """Whether the process behind a session row still runs (an ended session is not alive)."""
    if ended_at is not None:
        return False
    if host != this_host():
        return time.time() - heartbeat_at < STALE_HEARTBEAT_SECONDS
    try:
        return abs(process_start_time(pid) - process_started_at) < 1.0
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True


def live_session_ids(conn: Connection) -> set[str]:
    rows = conn.execute(
        select(
            worker_sessions.c.id,
            worker_sessions.c.host,
            worker_sessions.c.pid,
            worker_sessions.c.process_started_at,
            worker_sessions.c.heartbeat_at,
            worker_sessions.c.ended_at,
        ).where(worker_sessions.c.ended_at.is_(None))
    ).all()
    return {r.id for r in rows if is_alive(r.host, r.pid, r.process_started_at, r.heartbeat_at, r.ended_at)}


def worker_hosting_ids(conn: Connection) -> set[str]:
    """The sessions that hosted a worker and did not end on their own (a graceful stop records its end; a
    crash or a kill cannot): what such a session enqueued is interrupted work only if it did not."""
    hosted = and_(worker_sessions.c.hosts_worker == 1, worker_sessions.c.ended_at.is_(None))
    return {r.id for r in conn.execute(select(worker_sessions.c.id).where(hosted)).all()}
