"""The repair scan for ``deleting`` roots: a root whose cleanup no live delete job covers gets one; a root a
live job covers — on any page of the live jobs, alone or among other roots — is left alone, and one whose job
ended is not covered. Every read of the live delete jobs is bounded (a page), however many there are."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, select, text

from jobs.schema import jobs
from knowledge.lifecycle import operations, recovery
from knowledge.lifecycle.scheduling import DELETE_SUBTREE, enqueue_delete
from knowledge.runtime import Quire
from tests.knowledge.helpers import make_base

PAGE = 2  # the live delete jobs are read this many at a time here


@contextmanager
def job_reads(quire: Quire) -> Iterator[list[tuple[str, Any]]]:
    """Every statement (and its parameters) that reads the jobs' payloads inside the block."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "jobs.payload" in statement:
            seen.append((statement, parameters))

    event.listen(quire.db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(quire.db.engine, "before_cursor_execute", record)


def _live_delete_roots(quire: Quire) -> list[list[int]]:
    with quire.db.read() as conn:
        rows = conn.execute(
            select(jobs.c.payload)
            .where(jobs.c.type == DELETE_SUBTREE, jobs.c.status.in_(("pending", "running")))
            .order_by(jobs.c.id)
        ).all()
    return [json.loads(r.payload)["root_ids"] for r in rows]


def test_only_roots_no_live_delete_job_covers_get_one(quire: Quire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recovery, "LIVE_DELETE_PAGE", PAGE)
    base = make_base(quire, "kb")
    notes = [operations.NoteInput(f"note {n}", f"n{n}") for n in range(8)]
    roots = operations.add_items(quire, base.id, notes).created
    with quire.db.write() as conn:
        conn.execute(text(f"UPDATE items SET status = 'deleting' WHERE id IN ({','.join(map(str, roots))})"))
        # live jobs for roots 0-4 and 7 (five jobs: three pages of two), one for two roots; root 5's job ended
        for covered in ([roots[0]], [roots[1]], [roots[2], roots[3]], [roots[4]]):
            enqueue_delete(quire.queue, conn, base.id, covered)
        ended = enqueue_delete(quire.queue, conn, base.id, [roots[5]])
        conn.execute(text("UPDATE jobs SET status = 'cancelled' WHERE id = :j"), {"j": ended})
        enqueue_delete(quire.queue, conn, base.id, [roots[4], roots[7]])  # root 7: on the last page only
    before = _live_delete_roots(quire)

    with job_reads(quire) as reads:
        assert recovery.repair_deleting_roots(quire.queue, 100) == 2
    assert _live_delete_roots(quire) == [*before, [roots[5]], [roots[6]]]
    with job_reads(quire) as reads_again:
        assert recovery.repair_deleting_roots(quire.queue, 100) == 0  # every root is covered now
    for statement, parameters in reads + reads_again:  # each read of the live delete jobs: one page at most
        assert "LIMIT" in statement and PAGE in tuple(parameters), statement
    assert len(reads) == 3  # the five live jobs, two a page (the last page short)
