"""``quire store status``: what an operator asks of a store, read in one snapshot — the schema against this
Quire's migrations, the machines with a live worker and their last heartbeat, the queue's depth, and the
jobs waiting for a named machine (with whether a worker runs there)."""

from __future__ import annotations

from typing import Any

from jobs.overview import live_workers, queue_depth, waiting_for_machines
from knowledge.store.database import Database
from knowledge.store.schema_version import schema_state


def store_status(db: Database) -> dict[str, Any]:
    """The store's status as plain data (see the module docstring); a store without a schema has no jobs."""
    from knowledge.store.migrations import MIGRATIONS

    with db.read() as conn:
        schema = schema_state(conn, [m.name for m in MIGRATIONS])
        if not schema.applied:
            return {"schema": schema.as_dict(), "workers": [], "queue": {"pending": 0, "running": 0}, "waiting": []}
        workers = live_workers(conn)
        depth = queue_depth(conn)
        waiting = waiting_for_machines(conn)
    running_on = {w.host for w in workers}
    return {
        "schema": schema.as_dict(),
        "workers": [w.as_dict() for w in workers],
        "queue": depth,
        "waiting": [{"host": h, "jobs": n, "worker_running": h in running_on} for h, n in waiting.items()],
    }
