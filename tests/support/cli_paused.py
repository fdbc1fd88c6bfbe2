"""``python -m tests.support.cli_paused POINT COUNT MARKER ARGS`` is ``quire ARGS`` that stops for good at
the COUNT-th POINT, after writing MARKER, so a test can SIGKILL it exactly there (a test-only entry; the
product never reads it).

Points, both inside an open write transaction of ``quire add``:

- ``create``: an item has just been written by the add's one creating transaction;
- ``enqueue``: a job has just been enqueued by one of the add's scheduling transactions (before its items
  point at it and before that transaction commits).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.cli.main import main
from jobs.queue import JobQueue
from knowledge.lifecycle import operations


def _stop_at(count: int, marker: Path, fn: Callable[..., Any]) -> Callable[..., Any]:
    calls = 0

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        answer = fn(*args, **kwargs)
        calls += 1
        if calls == count:
            partial = marker.with_suffix(".partial")
            partial.write_text(f"{os.getpid()} {calls}\n")
            partial.replace(marker)  # the test sees the marker whole or not at all
            threading.Event().wait()  # here until the test kills the process
        return answer

    return counted


def install(point: str, count: int, marker: Path) -> None:
    if point == "create":
        operations.create_item = _stop_at(count, marker, operations.create_item)  # type: ignore[assignment]
    elif point == "enqueue":
        JobQueue.enqueue = _stop_at(count, marker, JobQueue.enqueue)  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown pause point {point!r}")


if __name__ == "__main__":
    install(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]))
    sys.exit(main(sys.argv[4:]))
