"""Done / total, a measured rate and an ETA from successive :class:`WorkTotals` polls: what the window's
status bar and ``quire worker``'s progress line say (one place, so both say the same).

The rate is measured, not guessed: :class:`ProgressTracker` keeps the settled-file counts of the recent polls
and divides what changed by the time between them. "Done / total" counts from the moment work appeared
(files waiting went from none to some), so a new batch starts at 0 / N.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from knowledge.lifecycle.progress import WorkTotals

WINDOW_SECONDS = 30.0  # the rate is measured over about this much recent time


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    chunks: int
    files_per_second: float | None
    eta_seconds: float | None
    waiting: int
    paused: bool
    in_hand: str | None = None
    chunks_per_second: float | None = None


class ProgressTracker:
    """Turns successive ``WorkTotals`` into done / total, files and chunks per second, and an ETA."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int, int]] = deque()  # (at, settled, chunks)
        self.start_settled: int | None = None
        self.best_done = 0  # done never goes back while a batch lasts (a run that ends takes its skips along)

    def update(self, work: WorkTotals, at: float) -> Progress:
        settled = work.settled
        if work.waiting and self.start_settled is None:
            self.start_settled = settled
        if not work.waiting:
            self.start_settled = None
            self.samples.clear()
            self.best_done = 0
        self.samples.append((at, settled, work.chunks))
        while len(self.samples) > 2 and at - self.samples[0][0] > WINDOW_SECONDS:
            self.samples.popleft()
        done = settled - (self.start_settled if self.start_settled is not None else settled)
        self.best_done = done = max(0, done, self.best_done)
        rate, chunk_rate = self.rates()
        eta = work.waiting / rate if rate and work.waiting and not work.paused else None
        return Progress(
            done, done + work.waiting, work.chunks, rate, eta, work.waiting, work.paused, work.in_hand, chunk_rate
        )

    def rates(self) -> tuple[float | None, float | None]:
        """Files and chunks per second over the kept samples (None until something moved)."""
        if len(self.samples) < 2:
            return None, None
        (t0, n0, c0), (t1, n1, c1) = self.samples[0], self.samples[-1]
        if t1 <= t0:
            return None, None
        return ((n1 - n0) / (t1 - t0) if n1 > n0 else None), ((c1 - c0) / (t1 - t0) if c1 > c0 else None)


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def progress_text(p: Progress, *, in_hand: bool = False) -> str:
    """One line: files done / total, chunks, the rates, the time left (``in_hand``: and the file being read)."""
    if p.paused and p.waiting:
        return f"Paused — {p.waiting:,} file{'s' if p.waiting != 1 else ''} waiting"
    if p.paused:
        return "Paused — nothing waiting"
    if not p.waiting:
        return f"Idle · {p.chunks:,} chunks indexed"
    parts = [f"{p.done:,}/{p.total:,} files", f"{p.chunks:,} chunks"]
    if p.files_per_second:
        parts.append(f"{p.files_per_second:.1f} files/s")
        if p.chunks_per_second:
            parts.append(f"{p.chunks_per_second:.0f} chunks/s")
    else:
        parts.append("measuring rate…")
    if p.eta_seconds is not None:
        parts.append(f"about {duration(p.eta_seconds)} left")
    if in_hand and p.in_hand:
        parts.append(p.in_hand)
    return " · ".join(parts)
