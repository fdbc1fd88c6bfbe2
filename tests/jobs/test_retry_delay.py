"""A failed ``retry`` job waits a full-jitter backoff before its next attempt: uniform(0, min(60, 0.5 · 2^attempt)),
so jobs that fail together (an endpoint down, a busy disk) do not come back in lockstep."""

from __future__ import annotations

import random

from sqlalchemy import text

from jobs.backoff import full_jitter
from jobs.registry import JobType
from jobs.runtime import JobContext
from knowledge.runtime import Quire

JOBS = 20


def test_retry_delays_are_jittered_within_the_exponential_bound(quire: Quire) -> None:
    def always_fails(ctx: JobContext) -> None:
        raise RuntimeError("transient trouble")

    quire.registry.register(JobType("test.flaky", always_fails, "retry", max_attempts=50))
    with quire.db.write() as conn:
        for n in range(JOBS):
            quire.queue.enqueue(conn, "test.flaky", {"n": n})
    quire.make_worker(poll_interval=0.01).run(until_idle=True, timeout=120)  # idle: every job waits its delay

    with quire.db.read() as conn:
        rows = conn.execute(
            text("SELECT attempt, available_at - updated_at FROM jobs WHERE type = 'test.flaky' AND status = 'pending'")
        ).all()
    assert len(rows) == JOBS
    delays = [float(delay) for _attempt, delay in rows]
    for attempt, delay in rows:
        assert 0 <= delay <= min(60.0, 0.5 * 2 ** int(attempt)) + 1e-6
    assert len({round(d, 6) for d in delays}) > JOBS // 2  # spread out, not one delay for all


def test_full_jitter_draws_over_the_whole_range() -> None:
    rng = random.Random(7)
    draws = [full_jitter(3, base=0.5, cap=60.0, rng=rng) for _ in range(2000)]
    assert 0 <= min(draws) < 0.2 and 3.8 < max(draws) <= 4.0  # uniform over [0, 0.5 * 2^3]
    assert all(full_jitter(30, base=0.5, cap=60.0, rng=rng) <= 60.0 for _ in range(100))  # capped
