"""Chosen rows of a vector file's float section, read with ``pread`` instead of through its mapping.

Why not the mapping. A search rescores a few thousand rows scattered over the whole float section (1.5 GB
at 1,000,000 chunks). Gathered out of the map, each row faults in the pages around it (the kernel's
fault-around maps up to 64 KiB per fault, and ``MADV_RANDOM`` does not stop it for a file mapping), and
those pages stay in the process: 630 MB of the window's RSS after one search at 1,000,000 chunks. ``pread``
copies exactly the rows' bytes into a fresh array and maps nothing. Its cost is one syscall a run of
adjacent rows (~3 us idle); many runs are shared among ``READ_THREADS`` threads, whose calls overlap (each
releases the GIL). Measured on a 300,000-chunk file at load 18 on 2 cores: 9,920 scattered rows (hybrid's)
137-153 ms on one thread, 97-105 ms on two; 2,080 rows 30-33 ms on one, 4-6 ms on two.

The reader keeps its own descriptor of the file it was made for, closed when the reader is collected: a
file renamed over meanwhile (growth, a rebuild) leaves it reading the old one, whose records never change,
as the old mapping does.
"""

from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
Positions = npt.NDArray[np.intp]

READ_THREADS = 2  # see the module docstring
PARALLEL_FROM = 1024  # runs; fewer are read on the caller's thread (a vector search's ~3,200 rows and up split)
_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="quire-rows"))
        return _POOL[0]


class RowReader:
    """Reads float32 rows ``positions`` of the section at ``offset`` (rows of ``dimension`` floats)."""

    def __init__(self, fd: int, offset: int, dimension: int) -> None:
        self._fd = fd
        self._offset = offset
        self.dimension = dimension
        self._closer = weakref.finalize(self, os.close, fd)

    def read(self, positions: Positions) -> Floats:
        """The rows at ``positions`` (ascending), in that order; runs of adjacent rows in one call each, the
        runs shared among ``READ_THREADS`` threads when there are many (each call is a syscall that
        releases the GIL, so the threads' calls overlap)."""
        out = np.empty((len(positions), self.dimension), dtype=np.float32)
        if len(positions) == 0:
            return out
        view = out.data.cast("B")
        breaks = np.flatnonzero(np.diff(positions) != 1) + 1
        starts = np.concatenate(([0], breaks)).tolist()
        ends = np.concatenate((breaks, [len(positions)])).tolist()
        runs = list(zip(starts, ends, positions[starts].tolist(), strict=True))
        if len(runs) < PARALLEL_FROM:
            self._read_runs(view, runs)
            return out
        share = -(-len(runs) // READ_THREADS)
        parts = [runs[n : n + share] for n in range(0, len(runs), share)]
        for done in [_pool().submit(self._read_runs, view, part) for part in parts]:
            done.result()
        return out

    def _read_runs(self, view: memoryview, runs: list[tuple[int, int, int]]) -> None:
        row_bytes = self.dimension * 4
        for start, end, row in runs:
            self._read_into(view[start * row_bytes : end * row_bytes], self._offset + row * row_bytes)

    def _read_into(self, target: memoryview, at: int) -> None:
        while target:
            got = os.preadv(self._fd, [target], at)
            if got <= 0:
                raise OSError("the vector file ended before its header's count")
            target, at = target[got:], at + got

    def close(self) -> None:
        self._closer()
