"""The encoder's own thread, so an index job's other stages overlap its encoding.

An index job holds several batches. While the encoder works on batch k in this thread, the job's thread
writes batch k-1 (its one fenced transaction, as before) and reads, parses and chunks batch k+1 — work
that used to leave a core idle between two encodes. The queue is bounded by the job itself: it hands
over one batch, waits for it, then hands over the next, so at most three batches' material are held
(being written, being encoded, prepared).

One thread per process: encodes of several executor threads queue here in order, as they queued on the
model lock before. The thread is long-lived and a daemon; an encode that hangs ends the process
(:mod:`knowledge.ingest.encode_watch`), whichever thread runs it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Stage:
    """One daemon thread running the calls submitted to it, one at a time, in order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
        self._calls.put((future, fn, args))
        return future

    def _run(self) -> None:
        while True:
            future, fn, args = self._calls.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the waiting job thread, which raises it there
                future.set_exception(exc)
            else:
                future.set_result(result)


ENCODE_STAGE = Stage("quire-encode")
