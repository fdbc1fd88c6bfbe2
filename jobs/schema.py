"""The durable job tables. The ``jobs`` row is the source of truth; huey's message only wakes a worker.

``worker_sessions`` records every process that runs jobs or enqueues them, so recovery can tell a
job held by a live process from one left behind by a dead one (pid + process start time, not just a
lease clock: a killed worker's lease must not have to expire before the next start can recover it).
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    text,
)

metadata = MetaData()

LIVE_STATUSES = ("pending", "running")
TERMINAL_STATUSES = ("completed", "failed", "cancelled")

worker_sessions = Table(
    "worker_sessions",
    metadata,
    Column("id", String, primary_key=True),  # host/pid/start-time token
    Column("host", String, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("process_started_at", Float, nullable=False),
    Column("hosts_worker", Integer, nullable=False, server_default="0"),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("ended_at", Float),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("type", String, nullable=False),
    Column("base_id", Integer),
    Column("payload", Text, nullable=False, server_default="{}"),  # JSON, ids only
    Column("idempotency_key", String),
    Column("status", String, nullable=False, server_default="pending"),
    Column("attempt", Integer, nullable=False, server_default="0"),
    Column("recovery", String, nullable=False),  # abandon | retry
    Column("max_attempts", Integer, nullable=False, server_default="5"),
    Column("lease_owner", String, ForeignKey("worker_sessions.id", ondelete="SET NULL")),
    Column("lease_expires_at", Float),
    Column("available_at", Float, nullable=False, server_default="0"),
    Column("cancel_requested", Integer, nullable=False, server_default="0"),
    Column("progress_done", Integer, nullable=False, server_default="0"),
    Column("progress_total", Integer, nullable=False, server_default="0"),
    Column("progress_label", String, nullable=False, server_default=""),
    Column("last_error", Text),
    Column("result", Text),
    Column("enqueued_by", String),
    # The machine a job must run on (a team store): one that reads this machine's files — a folder's walk,
    # a sync scan, a folder run. NULL: any worker may claim it.
    Column("host", String),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("started_at", Float),
    Column("finished_at", Float),
    # At most one live job per idempotency key; a finished key may be used again (a second reindex).
    Index(
        "jobs_live_key",
        "idempotency_key",
        unique=True,
        sqlite_where=text("idempotency_key IS NOT NULL AND status IN ('pending', 'running')"),
    ),
    Index("jobs_status_available", "status", "available_at", "id"),
    Index("jobs_base_status", "base_id", "status"),
)
