"""Whose turn it is to call a remote endpoint: the rate limit and concurrency cap of a base's call settings.

Two ways to take a turn, one shape (``TurnTaker``: the endpoint's allowance in — its URL, rate, burst, cap — and a
context held around the request itself out):

* :func:`local_turn` bounds this process alone: a token bucket and a semaphore per endpoint. For a call no store
  is behind (the one dimension probe while a base is created).
* :func:`shared_turns` bounds every process of the store together (``knowledge.store.endpoint_turns``), so two
  workers, the window's search and a command never exceed the cap or the rate between them. This process's own
  threads first queue on the local semaphore, so they do not all poll the store. A role the team store lets
  only read (a reader's search) cannot write a turn: its process falls back to its own limits and says so
  once in the log (one query's vector at a time, the search's own pace).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from knowledge.errors import Forbidden

if TYPE_CHECKING:  # the store's turns are imported where they are taken: a search process imports no SQL layer
    from knowledge.store.database import Database
    from knowledge.store.endpoint_turns import Allowance

log = logging.getLogger(__name__)

TurnTaker = Callable[["Allowance"], contextlib.AbstractContextManager[None]]


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up; ``take`` waits for one."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self._tokens = float(burst)
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
                self._at = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self.rate
            time.sleep(wait)  # pacing a rate, not synchronisation


_LIMITS: dict[tuple[str, float, int, int], tuple[TokenBucket, threading.BoundedSemaphore]] = {}
_LIMITS_LOCK = threading.Lock()


def _limits(a: Allowance) -> tuple[TokenBucket, threading.BoundedSemaphore]:
    key = (a.endpoint, a.rate, a.burst, a.cap)
    with _LIMITS_LOCK:
        if key not in _LIMITS:
            _LIMITS[key] = (TokenBucket(a.rate, a.burst), threading.BoundedSemaphore(a.cap))
        return _LIMITS[key]


@contextlib.contextmanager
def local_turn(allowance: Allowance) -> Iterator[None]:
    """A turn counted in this process only."""
    bucket, slots = _limits(allowance)
    bucket.take()
    with slots:
        yield


def shared_turns(db: Database) -> TurnTaker:
    """Turns counted in ``db``, across every process that opens it."""
    from knowledge.store import endpoint_turns

    refused: set[str] = set()  # endpoints whose turns this role may not record

    @contextlib.contextmanager
    def shared_turn(allowance: Allowance) -> Iterator[None]:
        bucket, slots = _limits(allowance)
        url = allowance.endpoint
        with slots, contextlib.ExitStack() as held:
            if url not in refused:
                try:
                    held.enter_context(endpoint_turns.turn(db, allowance))
                except Forbidden:
                    refused.add(url)
                    log.warning(
                        "this database role may not record turns at the embedding endpoint: this process keeps "
                        "to the endpoint's limits on its own (a writer's role shares them)"
                    )
            if url in refused:
                bucket.take()
            yield

    return shared_turn
