"""Turns at a remote embedding endpoint, shared by every process of one store: the pace and the cap hold together.

A base's call settings bound its endpoint to ``rate`` requests a second (``burst`` saved up) and ``cap`` requests
in flight. Counted per process, two workers, the window's search and a CLI command would each take the whole
allowance. So a request first takes a *turn* here, in the store every one of those processes opens (the data
directory's SQLite file, or the team store every machine shares):

* **Pace**: one row per endpoint holds the theoretical arrival time of the next request (the generic cell rate
  algorithm: a request may go when that time is at most ``(burst - 1) / rate`` ahead of now, and moves it on by
  ``1 / rate``), so the rate holds across processes without a clock of its own.
* **Requests in flight**: a turn holds one of ``cap`` numbered slots until it ends, or until ``hold`` seconds
  have passed (the request's own deadline, and a margin): a process killed mid-request frees its slot then.

Taking a turn is one short write transaction that locks the endpoint's pace row (``FOR UPDATE`` on PostgreSQL,
so a turn never waits for the store's write lock; SQLite has only that lock), never open across a request. A
process that finds no turn free waits briefly and asks again. Clocks are the machines' own, as job leases'.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import Connection, and_, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from jobs.sessions import this_host
from knowledge.store.database import Database
from knowledge.store.schema import endpoint_pace, endpoint_slots

_FIRST_WAIT = 0.02
_LONGEST_WAIT = 0.5  # asking again when every slot is taken: a turn ends within a request's time


@dataclass(frozen=True)
class Allowance:
    """What an endpoint allows: ``rate`` requests a second with ``burst`` saved up, ``cap`` in flight, and how
    long one request may hold its slot before its taker counts as dead (``hold`` seconds)."""

    endpoint: str
    rate: float
    burst: int
    cap: int
    hold: float

    @property
    def key(self) -> str:
        """The endpoint with its limits (two bases that bound one endpoint differently keep their own turns)."""
        said = f"{self.endpoint}\n{self.rate}\n{self.burst}\n{self.cap}"
        return hashlib.sha256(said.encode("utf-8")).hexdigest()[:32]


def holder_name() -> str:
    """Who takes a turn: this machine and process, and a random part so one process's two threads differ."""
    return f"{this_host()}:{os.getpid()}:{random.getrandbits(32):08x}"


def try_turn(db: Database, allowance: Allowance, holder: str, now: float | None = None) -> tuple[int | None, float]:
    """``(slot, 0.0)`` when ``holder`` now holds a turn; ``(None, seconds)`` to wait before asking again."""
    at = time.time() if now is None else now
    key = allowance.key
    with db.write(store_lock=False) as conn:
        next_at = _locked_pace(conn, key, at)
        early = max(next_at, at) - at - (allowance.burst - 1) / allowance.rate
        if early > 0:
            return None, early
        slot = _free_slot(conn, allowance, at)
        if slot is None:
            return None, -1.0  # every slot is taken: the caller backs off
        conn.execute(
            update(endpoint_pace)
            .where(endpoint_pace.c.endpoint == key)
            .values(next_at=max(next_at, at) + 1 / allowance.rate)
        )
        conn.execute(insert(endpoint_slots).values(endpoint=key, slot=slot, holder=holder, until=at + allowance.hold))
        return slot, 0.0


def _locked_pace(conn: Connection, key: str, at: float) -> float:
    """The endpoint's pace, its row locked for this transaction (made, at ``at``, the first time)."""
    query = select(endpoint_pace.c.next_at).where(endpoint_pace.c.endpoint == key).with_for_update()
    found = conn.execute(query).scalar()
    if found is None:
        conn.execute(insert(endpoint_pace).values(endpoint=key, next_at=at))  # a racer's insert: a key error,
        return at  # retried by the caller's next ask (the pace row exists then)
    return float(found)


def _free_slot(conn: Connection, allowance: Allowance, at: float) -> int | None:
    """The lowest slot no live turn holds (a dead holder's expired turn is cleared first), or None."""
    key = allowance.key
    conn.execute(delete(endpoint_slots).where(and_(endpoint_slots.c.endpoint == key, endpoint_slots.c.until <= at)))
    taken = {
        int(s) for s in conn.execute(select(endpoint_slots.c.slot).where(endpoint_slots.c.endpoint == key)).scalars()
    }
    return next((n for n in range(allowance.cap) if n not in taken), None)


def end_turn(db: Database, allowance: Allowance, slot: int, holder: str) -> None:
    """The request is over: its slot is free (only its own holder's; one cleared as expired is left alone)."""
    with db.write(store_lock=False) as conn:
        conn.execute(
            delete(endpoint_slots).where(
                and_(
                    endpoint_slots.c.endpoint == allowance.key,
                    endpoint_slots.c.slot == slot,
                    endpoint_slots.c.holder == holder,
                )
            )
        )


@contextlib.contextmanager
def turn(db: Database, allowance: Allowance) -> Iterator[None]:
    """Hold a turn at the endpoint for the body (waiting for one as long as it takes)."""
    holder = holder_name()
    backoff = _FIRST_WAIT
    while True:
        slot, wait = _ask(db, allowance, holder)
        if slot is not None:
            break
        if wait < 0:  # every slot taken: ask again soon, a little later each time, never in step with another
            wait, backoff = random.uniform(backoff / 2, backoff), min(_LONGEST_WAIT, backoff * 2)
        time.sleep(wait)  # pacing, or waiting for another process's request to end
    try:
        yield
    finally:
        end_turn(db, allowance, slot, holder)


def _ask(db: Database, allowance: Allowance, holder: str) -> tuple[int | None, float]:
    try:
        return try_turn(db, allowance, holder)
    except IntegrityError:  # two first turns made the pace row at once; the other one's row stands now
        return None, 0.0
