"""Chosen rows of a vector file's float section, read with ``pread`` instead of through its mapping.

Why not the mapping. A search rescores a few thousand rows scattered over the whole float section (1.5 GB
at 1,000,000 chunks). Gathered out of the map, each row faults in the pages around it (the kernel's
fault-around maps up to 64 KiB per fault, and ``MADV_RANDOM`` does not stop it for a file mapping), and
those pages stay in the process: 630 MB of the window's RSS after one search at 1,000,000 chunks. ``pread``
copies exactly the rows' bytes into a fresh array and maps nothing (measured: the rows of one search in
~10 ms, the same order as the gather's page faults).

The reader keeps its own descriptor of the file it was made for, closed when the reader is collected: a
file renamed over meanwhile (growth, a rebuild) leaves it reading the old one, whose records never change,
as the old mapping does.
"""

from __future__ import annotations

import os
import weakref

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
Positions = npt.NDArray[np.intp]


class RowReader:
    """Reads float32 rows ``positions`` of the section at ``offset`` (rows of ``dimension`` floats)."""

    def __init__(self, fd: int, offset: int, dimension: int) -> None:
        self._fd = fd
        self._offset = offset
        self.dimension = dimension
        self._closer = weakref.finalize(self, os.close, fd)

    def read(self, positions: Positions) -> Floats:
        """The rows at ``positions`` (ascending), in that order; runs of adjacent rows in one call each."""
        out = np.empty((len(positions), self.dimension), dtype=np.float32)
        if len(positions) == 0:
            return out
        row_bytes = self.dimension * 4
        view = out.data.cast("B")
        breaks = np.flatnonzero(np.diff(positions) != 1) + 1
        starts = np.concatenate(([0], breaks)).tolist()
        ends = np.concatenate((breaks, [len(positions)])).tolist()
        first = positions[starts].tolist()
        for start, end, row in zip(starts, ends, first, strict=True):
            self._read_into(view[start * row_bytes : end * row_bytes], self._offset + row * row_bytes)
        return out

    def _read_into(self, target: memoryview, at: int) -> None:
        while target:
            got = os.preadv(self._fd, [target], at)
            if got <= 0:
                raise OSError("the vector file ended before its header's count")
            target, at = target[got:], at + got

    def close(self) -> None:
        self._closer()
