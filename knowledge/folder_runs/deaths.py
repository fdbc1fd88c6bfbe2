"""Worker deaths per source of a folder run: the run's poison isolation (``items.deaths`` is the index job's).

An attempt marks in ``folder_run_in_flight`` exactly the sources it is working on at each moment
(:class:`Flight`): a group's sources from their chunking until their encode is done, the one being settled
(or read again), and one whose parse is slow (its answer not back within
:data:`knowledge.ingest.parse_worker.SLOW_ANSWER_SECONDS`). When a later attempt enters the run (recovery
handed the job back after the worker died, or a stale claim was taken over), every unsettled source an
earlier attempt left in flight counts one death; at :data:`DEATHS_BEFORE_QUARANTINE` it settles
``quarantined`` (with its one outcome row, like any other disposition) and the run goes on. A source that
died once is worked on alone from then on (nothing else in flight with it), so a second death names it
exactly. A source the dead attempt had not reached, had only read or quickly parsed, or had finished with
while it worked on another, counts nothing.

The marks ride on transactions the run takes anyway where they can: the next source's mark on the settling
transaction of the one before; a group's chunking and the move from its embedding to its first source to
settle take one small write each per group, and a slow parse one more. Reading and parsing a group write
nothing.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence, Set
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, and_, select, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from jobs.queue import JobRecord
from jobs.runtime import JobContext
from knowledge.folder_runs.ledger import add_outcome
from knowledge.store.database import Database, after_commit
from knowledge.store.schema_runs import folder_run_in_flight, folder_run_outcomes

QUARANTINED = "quarantined"
QUARANTINED_REASON = "quarantined: the worker stopped twice while this file was being read or embedded"
DEATHS_BEFORE_QUARANTINE = 2


def count_deaths(conn: Connection, run_id: int, attempt: int) -> dict[int, int]:
    """Count one death for every unsettled source an earlier attempt left in flight; return the deaths of
    every unsettled source that has any."""
    settled = {r[0] for r in conn.execute(select(folder_run_outcomes.c.source_id).where(
        folder_run_outcomes.c.run_id == run_id)).all()}  # fmt: skip
    rows = conn.execute(select(folder_run_in_flight).where(folder_run_in_flight.c.run_id == run_id)).all()
    deaths: dict[int, int] = {}
    for row in rows:
        if row.source_id in settled:
            continue
        died = row.attempt is not None and row.attempt < attempt
        deaths[row.source_id] = row.deaths + (1 if died else 0)
        if died:
            conn.execute(
                update(folder_run_in_flight)
                .where(and_(folder_run_in_flight.c.run_id == run_id, folder_run_in_flight.c.source_id == row.source_id))
                .values(attempt=None, deaths=folder_run_in_flight.c.deaths + 1)
            )
    return {s: d for s, d in deaths.items() if d}


def release_marks(conn: Connection, record: JobRecord) -> None:
    """A stopping worker hands the run's job back (a graceful stop, not a death): the attempt's in-flight
    marks are cleared with their death counts kept, so the next attempt counts no death for them."""
    run_id = record.payload.get("run_id")
    if isinstance(run_id, int):
        conn.execute(
            update(folder_run_in_flight)
            .where(and_(folder_run_in_flight.c.run_id == run_id, folder_run_in_flight.c.attempt == record.attempt))
            .values(attempt=None)
        )


def settle_quarantined(conn: Connection, run_id: int, source_id: int, attempt: int) -> None:
    add_outcome(
        conn, run_id=run_id, source_id=source_id, disposition=QUARANTINED, reason=QUARANTINED_REASON,
        attempt=attempt, settled_at=time.time(),
    )  # fmt: skip


def set_in_flight(
    conn: Connection, run_id: int, attempt: int, source_ids: Sequence[int], marked: Set[int] | None = None
) -> None:
    """This attempt now has exactly ``source_ids`` in flight: they are marked, the rest it had are not (their
    death counts stay). ``marked``: exactly the marks this attempt's last committed write left (then only the
    difference is written; a run settles one source per transaction, so this is most writes); None: unknown,
    every other mark of the attempt is cleared."""
    wanted = list(dict.fromkeys(source_ids))
    mine = and_(folder_run_in_flight.c.run_id == run_id, folder_run_in_flight.c.attempt == attempt)
    if marked is None:
        conn.execute(
            update(folder_run_in_flight)
            .where(mine, folder_run_in_flight.c.source_id.not_in(wanted))
            .values(attempt=None)
        )
    else:
        keep = set(wanted)
        gone = [s for s in marked if s not in keep]
        if gone:
            conn.execute(
                update(folder_run_in_flight)
                .where(mine, folder_run_in_flight.c.source_id.in_(gone))
                .values(attempt=None)
            )
    rows = [{"run_id": run_id, "source_id": s, "attempt": attempt} for s in wanted if marked is None or s not in marked]
    if rows:
        # one statement executed for many rows: compiled once and cached (a multi-row VALUES compiles per size)
        conn.execute(_mark_statement(conn.dialect.name), rows)


@functools.cache
def _mark_statement(dialect: str) -> Any:
    upsert = postgres_insert if dialect == "postgresql" else sqlite_insert  # the same ON CONFLICT
    statement = upsert(folder_run_in_flight)
    return statement.on_conflict_do_update(
        index_elements=["run_id", "source_id"], set_={"attempt": statement.excluded.attempt}
    )


@dataclass
class Flight:
    """The in-flight marks of one attempt of one run, kept by the job's thread: the sources it works on itself
    (the one being settled, or read again, or a parse that is slow) and the groups it *holds* — chunked in
    its thread, then embedded on the encoder's thread until that encode is done. Every mark it writes is
    exactly their union, so a group whose encode ended is no longer marked by the next write."""

    ctx: JobContext
    run_id: int
    _held: dict[int, Future[Any] | None] = field(default_factory=dict)  # source -> its group's encode
    _committed: frozenset[int] = frozenset()  # the marks as this attempt's last committed write left them

    def hold(self, source_ids: Sequence[int]) -> None:
        """These sources are in flight from now until :meth:`release` or their encode is done (one write)."""
        if source_ids:
            self._held.update((source_id, None) for source_id in source_ids)
            self.move([])

    def encoding(self, source_ids: Sequence[int], encode: Future[Any]) -> None:
        """The held ``source_ids`` are being embedded by ``encode``: in flight while it runs (no write)."""
        self._held.update((source_id, encode) for source_id in source_ids if source_id in self._held)

    def release(self, source_ids: Sequence[int]) -> None:
        """No longer held (the next write says so)."""
        for source_id in source_ids:
            self._held.pop(source_id, None)

    def marked(self, source_ids: Sequence[int]) -> list[int]:
        done = [s for s, encode in self._held.items() if encode is not None and encode.done()]
        self.release(done)
        return list(dict.fromkeys([*source_ids, *self._held]))

    def now(self, conn: Connection, source_ids: Sequence[int]) -> None:
        """Mark ``source_ids`` and the held ones (only) in a transaction the caller takes anyway; only the
        marks that change are written (a held group is written once, not with every source settled)."""
        marks = self.marked(source_ids)
        set_in_flight(conn, self.run_id, self.ctx.attempt, marks, self._committed)
        after_commit(conn, _Committed(self, frozenset(marks)))

    def move(self, source_ids: Sequence[int]) -> None:
        """Mark ``source_ids`` and the held ones (only) in a transaction of their own (fenced on this attempt
        owning the job)."""
        with self.ctx.write() as conn:
            self.now(conn, source_ids)


@dataclass(frozen=True, eq=False)
class _Committed:
    """After commit: the marks a :class:`Flight` wrote are the ones in the database (a rollback keeps the old)."""

    flight: Flight
    marks: frozenset[int]

    def __call__(self, _db: Database) -> None:
        self.flight._committed = self.marks


def clear_in_flight(db: Database, run_id: int, attempt: int) -> None:
    """This attempt stops without dying (cancelled, superseded, a fault): what it had in flight did not kill
    anything. Only a process that vanishes leaves its marks for the next attempt to count."""
    with db.write() as conn:
        conn.execute(
            update(folder_run_in_flight)
            .where(and_(folder_run_in_flight.c.run_id == run_id, folder_run_in_flight.c.attempt == attempt))
            .values(attempt=None)
        )
