"""What an operator asks of a store's job layer: which machines have a live worker (and when each last beat),
how deep the queue is, and which jobs wait for a named machine (a pinned job is claimed only by its host's
workers, so it waits until one runs there). Read-only queries in the caller's transaction."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, func, select

from jobs.schema import jobs, worker_sessions
from jobs.sessions import is_alive


@dataclass(frozen=True)
class MachineWorkers:
    host: str
    workers: int
    last_heartbeat: float

    def as_dict(self) -> dict[str, object]:
        return {"host": self.host, "workers": self.workers, "last_heartbeat": self.last_heartbeat}


def live_workers(conn: Connection) -> list[MachineWorkers]:
    """Live worker sessions (hosting a worker, not ended, alive by ``jobs.sessions.is_alive``) per machine."""
    c = worker_sessions.c
    rows = conn.execute(
        select(c.host, c.pid, c.process_started_at, c.heartbeat_at, c.ended_at).where(
            c.hosts_worker == 1, c.ended_at.is_(None)
        )
    ).all()
    per_host: dict[str, list[float]] = {}
    for r in rows:
        if is_alive(r.host, r.pid, r.process_started_at, r.heartbeat_at, r.ended_at):
            per_host.setdefault(r.host, []).append(float(r.heartbeat_at))
    return [MachineWorkers(h, len(beats), max(beats)) for h, beats in sorted(per_host.items())]


def queue_depth(conn: Connection) -> dict[str, int]:
    """How many jobs are pending and running."""
    counted: dict[str, int] = dict(
        conn.execute(
            select(jobs.c.status, func.count()).where(jobs.c.status.in_(("pending", "running"))).group_by(jobs.c.status)
        )
        .tuples()
        .all()
    )
    return {status: int(counted.get(status, 0)) for status in ("pending", "running")}


def waiting_for_machines(conn: Connection) -> dict[str, int]:
    """Pending jobs pinned to a machine (``jobs.host``), counted per machine."""
    rows = conn.execute(
        select(jobs.c.host, func.count())
        .where(jobs.c.status == "pending", jobs.c.host.is_not(None))
        .group_by(jobs.c.host)
        .order_by(jobs.c.host)
    ).all()
    return {str(host): int(n) for host, n in rows}
