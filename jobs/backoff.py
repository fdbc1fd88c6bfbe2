"""Bounded retries of transient faults, with exponential backoff and full jitter.

:func:`full_jitter` is the one backoff formula: the worker's delay before a failed ``retry`` job's next
attempt (``jobs/runtime.py``) and :func:`retry_transient`'s waits both draw from it.

A transient fault is one that a moment later may not happen again: the database busy or locked past its
busy timeout (apsw ``BusyError``/``LockedError``, SQLAlchemy ``OperationalError`` saying so), a timeout, and
PostgreSQL's own "try again" answers, a deadlock (SQLSTATE 40P01) or a serialization failure (40001), which end
one transaction so another can go on and which its documentation asks the application to retry.
Everything else is raised at once: retrying a real error only delays the reason a person needs.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import exc as sa_exc

log = logging.getLogger(__name__)

T = TypeVar("T")
_RNG = random.Random()

_TRANSIENT_NAMES = frozenset({"BusyError", "LockedError", "TimeoutError"})
_TRANSIENT_WORDS = ("database is locked", "database is busy", "database table is locked")
_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected


def is_transient(exc: BaseException) -> bool:
    if type(exc).__name__ in _TRANSIENT_NAMES:
        return True
    if isinstance(exc, sa_exc.OperationalError):
        original = exc.orig if exc.orig is not None else exc
        if getattr(original, "sqlstate", None) in _TRANSIENT_SQLSTATES:  # psycopg's code for the answer
            return True
        return type(original).__name__ in _TRANSIENT_NAMES or any(w in str(original).lower() for w in _TRANSIENT_WORDS)
    return False


def full_jitter(attempt: int, *, base: float, cap: float, rng: random.Random | None = None) -> float:
    """A full-jitter backoff: ``uniform(0, min(cap, base * 2**attempt))`` — spread so that things that failed
    together do not all come back at the same moment."""
    return (rng or _RNG).uniform(0, min(cap, base * 2 ** min(attempt, 64)))


def retry_transient(
    fn: Callable[[], T],
    *,
    attempts: int = 5,
    base_delay: float = 0.05,
    max_delay: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> T:
    """Call ``fn``; on a transient fault wait ``uniform(0, min(max_delay, base_delay * 2**n))`` and try
    again, at most ``attempts`` times in all; the last fault (or any other) is raised."""
    chooser = rng or random.Random()
    for n in range(attempts):
        try:
            return fn()
        except Exception as exc:
            if n == attempts - 1 or not is_transient(exc):
                raise
            delay = full_jitter(n, base=base_delay, cap=max_delay, rng=chooser)
            log.info("transient fault (%s); retry %d of %d in %.3f s", type(exc).__name__, n + 1, attempts - 1, delay)
            sleep(delay)
    raise AssertionError("unreachable")
