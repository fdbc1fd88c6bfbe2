"""Job types used by the job-layer tests, run by real worker processes (tests/support/worker_proc.py).

``test.steps`` (retry) and ``test.abandonable`` (abandon) write one fenced row per step into
``test_writes``. An attempt named in ``block_attempt`` stops after ``block_after`` steps and waits for
a gate file that the test never creates, so the test can SIGKILL it at a known point.
"""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import Connection, text

from jobs.queue import JobRecord
from jobs.registry import JobType
from jobs.runtime import JobContext
from knowledge.runtime import Quire

DDL = (
    "CREATE TABLE IF NOT EXISTS test_writes (id INTEGER PRIMARY KEY, job_id INT, attempt INT, step INT)",
    "CREATE TABLE IF NOT EXISTS test_hooks (id INTEGER PRIMARY KEY, job_id INT)",
)


def _wait_for_gate(ctx: JobContext) -> None:
    gate = Path(ctx.payload["gate"])
    deadline = time.monotonic() + ctx.payload.get("gate_timeout", 60)
    while not gate.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("gate never opened")
        time.sleep(0.02)  # the handler is simulating slow work here, not synchronising a test


def steps_handler(ctx: JobContext) -> dict[str, int]:
    steps = int(ctx.payload["steps"])
    for step in range(steps):
        blocked_attempts = [ctx.payload.get("block_attempt"), *ctx.payload.get("block_attempts", [])]
        blocked = ctx.attempt in blocked_attempts
        if blocked and step == ctx.payload.get("block_after"):
            _wait_for_gate(ctx)
        with ctx.write() as conn:
            conn.execute(
                text("INSERT INTO test_writes (job_id, attempt, step) VALUES (:j, :a, :s)"),
                {"j": ctx.job_id, "a": ctx.attempt, "s": step},
            )
        ctx.progress(step + 1, steps, f"step {step + 1}")
    return {"steps": steps}


def abandon_hook(conn: Connection, record: JobRecord) -> None:
    conn.execute(text("INSERT INTO test_hooks (job_id) VALUES (:j)"), {"j": record.id})


def register(quire: Quire) -> None:
    with quire.db.write() as conn:
        for ddl in DDL:
            conn.exec_driver_sql(ddl)
    quire.registry.register(JobType("test.steps", steps_handler, "retry", max_attempts=5))
    quire.registry.register(JobType("test.fragile", steps_handler, "retry", max_attempts=2))
    quire.registry.register(JobType("test.abandonable", steps_handler, "abandon", on_abandon=abandon_hook))
