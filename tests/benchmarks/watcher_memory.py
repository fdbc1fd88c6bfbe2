"""The sync watcher's own memory on a large tree: ``python -m tests.benchmarks.watcher_memory FOLDER``.

Run in a fresh process per tree (``bench_sync`` calls it for 10,000 and 100,000 files). It watches
``FOLDER`` exactly as :class:`knowledge.sync.watcher.SyncWatcher` does (``watchfiles.watch`` with the same
options), waits for the watch's first yield (the watch is up: one inotify watch per directory), then edits
one file and waits until the watch reports it (so the watch is live, not merely started). Prints one JSON
line: resident memory before ``watchfiles`` is imported, before the watch, once it is up and after the
event; the process's inotify watches (from ``/proc/self/fdinfo``); and the seconds to the watch's first
yield (at most its 1 s timeout). What the kernel holds per inotify watch is not in the process's RSS
(about 1 KB a watch, kernel memory).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS in /proc/self/status")


def inotify_watches() -> int:
    """Watches held by this process's inotify descriptors (one ``inotify wd:`` line each in fdinfo)."""
    count = 0
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            text = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue
        count += text.count("inotify wd:")
    return count


def main(argv: list[str]) -> int:
    bare = rss_mb()
    import watchfiles

    folder = Path(argv[0])
    target = next(p for p in sorted(folder.rglob("*.txt")))
    stop = threading.Event()
    before = rss_mb()
    t0 = time.perf_counter()
    up: dict[str, float] = {}
    seen_event = False
    # The same options as SyncWatcher._watch; ``stop`` ends it once the edit has been seen.
    for changes in watchfiles.watch(
        folder,
        stop_event=stop,
        debounce=200,
        step=20,
        rust_timeout=1000,
        yield_on_timeout=True,
        raise_interrupt=False,
        ignore_permission_denied=True,
    ):
        if not up:
            up = {"seconds": time.perf_counter() - t0, "rss": rss_mb(), "watches": inotify_watches()}
            target.write_text(target.read_text() + "edited\n")
            continue
        if any(Path(p) == target for _kind, p in changes):
            seen_event = True
            stop.set()
        elif time.perf_counter() - t0 > 120:
            stop.set()
    after = rss_mb()
    files = sum(1 for _ in folder.rglob("*.txt"))
    dirs = sum(1 for p in folder.rglob("*") if p.is_dir()) + 1
    print(
        json.dumps(
            {
                "files": files,
                "directories": dirs,
                "rss_bare_mb": bare,
                "rss_before_mb": before,
                "rss_watching_mb": up["rss"],
                "rss_after_event_mb": after,
                "watcher_mb": round(max(up["rss"], after) - before, 1),
                "inotify_watches": up["watches"],
                "seconds_to_first_yield": round(up["seconds"], 3),
                "event_seen": seen_event,
            }
        )
    )
    return 0 if seen_event else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
