"""``python -m tests.support.cli_with_ticks ARGS`` is ``quire ARGS`` with one more job type, ``test.tick``, so a
test can drain many small jobs through real ``quire worker`` processes without the embedding model (a test-only
entry; the product never reads it).

A tick waits its payload's ``work`` seconds (simulated work), then writes one fenced row ``(job_id, attempt,
host)`` into ``tick_writes``: a tick that ran twice, or an attempt that wrote after losing its job, shows there.
"""

from __future__ import annotations

import sys
import time

from sqlalchemy import text

from jobs.registry import JobType
from jobs.runtime import JobContext
from knowledge import compose
from knowledge.runtime import Quire

TICK = "test.tick"
TABLE_DDL = "CREATE TABLE IF NOT EXISTS tick_writes (job_id BIGINT, attempt INT, host TEXT)"


def tick(ctx: JobContext) -> dict[str, int]:
    time.sleep(float(ctx.payload.get("work", 0)))  # simulated work, not synchronisation
    with ctx.write() as conn:
        conn.execute(
            text("INSERT INTO tick_writes (job_id, attempt, host) VALUES (:j, :a, :h)"),
            {"j": ctx.job_id, "a": ctx.attempt, "h": ctx.worker.session.host},
        )
    return {"n": int(ctx.payload.get("n", 0))}


def register(quire: Quire) -> None:
    quire.registry.register(JobType(TICK, tick, "retry", max_attempts=5))


def install() -> None:
    every_type = compose.register_job_types

    def with_ticks(quire: Quire) -> None:
        every_type(quire)
        register(quire)

    compose.register_job_types = with_ticks


if __name__ == "__main__":
    from app.cli.main import main

    install()
    sys.exit(main(sys.argv[1:]))
