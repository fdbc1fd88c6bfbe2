"""Outages of the store (PostgreSQL) or the queue (Redis): waited out with backoff, never an exit 0.

Any server may restart at any moment. A worker thread whose call to a server fails marks that server's
:class:`Link` down and waits :meth:`Link.failed`'s delay (0.2 s doubling to 10 s, each delay drawn from its
upper half so that workers that lost the server together do not all come back at the same moment) before it
tries again; the first failure of an outage is logged once and the end of the outage once, never each retry.

* The queue carries only wake-ups: while it is down a worker skips it (until the link's next try) and finds
  work by scanning the ``jobs`` table, and a wake-up that cannot be pushed after a commit is logged, never an
  error (the job is committed; workers poll).
* The store is the truth: while it is down nothing can be claimed or recorded, so threads wait. An outage
  longer than the budget (``QUIRE_OUTAGE_SECONDS``, default :data:`DEFAULT_OUTAGE_SECONDS`) makes the worker
  give up with :class:`OutageTooLong`; ``quire worker`` then exits with :data:`EXIT_TEMPFAIL` so a service
  manager restarts it. A job whose attempt lost the store is handed back when it returns, or taken over by
  its lease (recovery) if the worker gave up first.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable

from sqlalchemy import exc as sa_exc

log = logging.getLogger(__name__)

OUTAGE_ENV = "QUIRE_OUTAGE_SECONDS"
DEFAULT_OUTAGE_SECONDS = 300.0
EXIT_TEMPFAIL = 75  # sysexits.h EX_TEMPFAIL: a temporary failure, try again later
BACKOFF_BASE_SECONDS = 0.2
BACKOFF_CAP_SECONDS = 10.0
_RNG = random.Random()


class OutageTooLong(Exception):
    """A server stayed away longer than the worker's outage budget: the worker stops (not a clean exit)."""


def outage_budget() -> float:
    """Seconds a worker waits out an outage before it gives up (``QUIRE_OUTAGE_SECONDS``)."""
    raw = os.environ.get(OUTAGE_ENV, "").strip()
    if not raw:
        return DEFAULT_OUTAGE_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        log.warning("%s is not a positive number of seconds; using %g", OUTAGE_ENV, DEFAULT_OUTAGE_SECONDS)
        return DEFAULT_OUTAGE_SECONDS
    return seconds


def backoff_delay(failures: int, rng: random.Random | None = None) -> float:
    """The wait after the ``failures``-th consecutive failure: from the upper half of 0.2 s · 2^n, capped."""
    ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** min(failures, 32))
    return (rng or _RNG).uniform(ceiling / 2, ceiling)


def is_link_error(exc: BaseException) -> bool:
    """Whether ``exc`` says a server could not be reached or dropped the connection (not a refused or bad
    statement): a PostgreSQL connection fault or shutdown, a Redis connection fault or timeout."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return True
        for cls in type(current).__mro__:
            package = cls.__module__.split(".")[0]
            if package == "psycopg" and cls.__name__ == "OperationalError":
                return True
            if package == "redis" and cls.__name__ in ("ConnectionError", "TimeoutError"):
                return True
        todo += [getattr(current, "orig", None), current.__cause__, current.__context__]
    return False


def describe(exc: BaseException) -> str:
    """One short line for the log: the error's type and the first line of its message."""
    said = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {said}" if said else type(exc).__name__


class Link:
    """One server as this process's threads see it: up, or down since a moment, with a backoff to wait."""

    def __init__(self, name: str, budget: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.budget = budget
        self._clock = clock
        self._lock = threading.Lock()
        self.since: float | None = None  # when this outage began (None: up)
        self.failures = 0
        self.retry_at = 0.0
        self.outages = 0

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException) -> float:
        """Record a failure; the delay to wait before the next try. Logged once per outage."""
        with self._lock:
            now = self._clock()
            if self.since is None:
                self.since, self.failures = now, 0
                self.outages += 1
                what, budget = describe(exc), self.budget
                log.warning("lost the %s (%s); retrying with backoff, giving up after %g s", self.name, what, budget)
            delay = backoff_delay(self.failures)
            self.failures += 1
            self.retry_at = now + delay
            return delay

    def restored(self) -> None:
        """A call went through: the outage, if there was one, is over (logged once)."""
        if self.since is None:
            return
        with self._lock:
            if self.since is None:
                return
            log.warning("the %s is back after %.1f s", self.name, self._clock() - self.since)
            self.since, self.failures, self.retry_at = None, 0, 0.0

    def ready(self) -> bool:
        """Whether a try is due (always while up)."""
        return self.since is None or self._clock() >= self.retry_at

    def over_budget(self) -> bool:
        since = self.since
        return since is not None and self._clock() - since > self.budget

    def give_up_message(self) -> str:
        return f"the {self.name} stayed unreachable for more than {self.budget:g} s ({OUTAGE_ENV}); giving up"
