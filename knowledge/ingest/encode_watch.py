"""A bound on a local encoder call: one that hangs ends the worker process, so it counts as a worker death.

The packaged model runs in the worker's own threads (torch or OpenVINO native code), where nothing can
interrupt a stuck call. So every local encode call runs under :func:`bounded`: past a generous
wall-clock limit — ``QUIRE_ENCODE_TIMEOUT`` seconds (default 300, which covers a cold model load) plus
``QUIRE_ENCODE_SECONDS_PER_TEXT`` (default 1.0) per text — the process writes every thread's stack to
stderr and exits with status 1. A hang then behaves exactly like a crash, which the product already
handles: recovery counts one death for each item that was in flight (two deaths: quarantined), a folder
run counts its in-flight sources the same way, and the window restarts its worker.

Why not encode in a child process, as parsing does: a timed-out batch names no item, so the child would
still need the culprit found — by bisection, each step a fresh child, a model load (~13 s measured) and,
for a hanging half, a full timeout — where the death count finds it with two deaths (in-flight items are
retried one job each). Sending texts and vectors over a pipe is cheap (0.14 ms for 128 texts), so the cost
that decided is the narrowing, not the IPC. What killing the process costs instead: the batch's other
items count one death each, which quarantines none of them unless one dies again beside another culprit
(a worker with several threads can put it there). Measurements: docs/ARCHITECTURE.md "Poison isolation".

The timer is :func:`faulthandler.dump_traceback_later`: its watchdog is a C thread that needs no GIL, so it
fires even while the stuck native call holds it. There is one such timer per process, so this module keeps
the deadline of every open call and arms the timer for the earliest one.
"""

from __future__ import annotations

import faulthandler
import itertools
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

STDERR_FD = 2  # a descriptor, not sys.stderr: a test runner may have replaced that object


@dataclass(frozen=True)
class EncodeLimits:
    base_seconds: float = 300.0
    seconds_per_text: float = 1.0  # measured 0.16 s per 600-token text on a loaded 2-core machine

    @classmethod
    def from_env(cls) -> EncodeLimits:
        return cls(
            base_seconds=float(os.environ.get("QUIRE_ENCODE_TIMEOUT", "300")),
            seconds_per_text=float(os.environ.get("QUIRE_ENCODE_SECONDS_PER_TEXT", "1.0")),
        )

    def seconds_for(self, texts: int) -> float:
        return self.base_seconds + self.seconds_per_text * texts


_lock = threading.Lock()
_deadlines: dict[int, float] = {}  # open calls of this process: token -> monotonic deadline
_tokens = itertools.count()


@contextmanager
def bounded(texts: int, limits: EncodeLimits | None = None) -> Iterator[None]:
    """Run the body (one encode call of ``texts`` texts) under the limit; past it, the process ends."""
    seconds = (limits or EncodeLimits.from_env()).seconds_for(texts)
    token = next(_tokens)
    with _lock:
        # monotonic: a laptop asleep mid-call does not count towards the limit
        _deadlines[token] = time.monotonic() + seconds
        _arm()
    try:
        yield
    finally:
        with _lock:
            del _deadlines[token]
            _arm()


def _arm() -> None:
    """Point the process's one timer at the earliest open deadline (called with ``_lock`` held)."""
    if not _deadlines:
        faulthandler.cancel_dump_traceback_later()
        return
    remaining = max(min(_deadlines.values()) - time.monotonic(), 0.001)
    faulthandler.dump_traceback_later(remaining, exit=True, file=STDERR_FD)
