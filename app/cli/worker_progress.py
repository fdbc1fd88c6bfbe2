"""``quire worker``'s progress: on a terminal a line redrawn every second (files done / total, chunks, the
rates, the time left, the file in hand); otherwise one summary line now and then (a log, a service's journal).

It reads what the window's status bar reads (``lifecycle.work_totals``, one bounded read snapshot per tick)
on a thread of its own and writes to stderr: stdout stays the command's answer (``--json`` included).
"""

from __future__ import annotations

import shutil
import threading
import time
from typing import TextIO

from knowledge.lifecycle import ProgressTracker, progress_text, work_totals
from knowledge.runtime import Quire

TERMINAL_SECONDS = 1.0
SUMMARY_SECONDS = 30.0
CLEAR_LINE = "\r\x1b[K"


def default_interval(stream: TextIO) -> float:
    return TERMINAL_SECONDS if stream.isatty() else SUMMARY_SECONDS


class ProgressLine:
    """Reports progress every ``interval`` seconds until :meth:`stop` (0: never starts)."""

    def __init__(self, quire: Quire, stream: TextIO, interval: float) -> None:
        self.quire, self.stream, self.interval = quire, stream, interval
        self.redraw = stream.isatty()  # one line redrawn in place; else one line per report
        self.tracker = ProgressTracker()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="quire-progress", daemon=True)
        self._last = ""

    def start(self) -> ProgressLine:
        if self.interval > 0:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self.redraw and self._last:
            self.stream.write(CLEAR_LINE)
            self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.report()
            except Exception:  # a busy or restarting store: the next tick tries again
                continue

    def report(self) -> None:
        progress = self.tracker.update(work_totals(self.quire), time.monotonic())
        line = progress_text(progress, in_hand=True)
        if self.redraw:
            width = shutil.get_terminal_size((100, 20)).columns - 1
            self.stream.write(CLEAR_LINE + line[:width])
        elif progress.waiting or line != self._last:  # idle and unchanged: say it once
            self.stream.write(f"progress: {line}\n")
        else:
            return
        self._last = line
        self.stream.flush()
