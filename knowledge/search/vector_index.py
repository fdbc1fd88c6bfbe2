"""The in-memory vector index search uses: per base, sign bits and float16 copies of its vectors in numpy.

Why not sqlite-vec's own KNN. Measured on these machines (sqlite-vec 0.1.9, 100,000 x 384 vectors):
a brute-force cosine scan of the vec0 float table takes 50-75 ms; a KNN over a ``bit[384]`` vec0 table
grows with k (≈ 9 ms at k = 10, 37 ms at k = 100, 66 ms at k = 200) and reading single vectors back
for rescoring costs ~0.6 ms each, so a quantized search through vec0 costs 100 ms and more. The same
work over numpy arrays in memory takes a few milliseconds.

What is held per base: the chunk ids, the vectors' sign bits packed in uint64 words (48 bytes for 384
dimensions) and their float16 copies. On a local store they are views of the base's memory-mapped vector
file (:mod:`knowledge.library.vector_file`, which holds the copies widened to float32, so rescoring
needs no cast), so opening a base reads nothing and only the sign bits a search scans become resident; the
few rows it rescores are read with ``pread`` (:mod:`knowledge.library.vector_rows`), never gathered from the
map, whose fault-around would leave hundreds of megabytes mapped. Without a file (one that cannot be written,
and the benchmarks' in-memory comparison) they are read from ``chunks.vector_f16`` into memory as float16
(about 0.8 KB per chunk). A team store searches in the server instead (:mod:`knowledge.search.vector_server`).

Search: up to ``EXACT_SCAN_MAX`` chunks held, every vector is scored (a float32 matrix of the float16
copies, <= 30 MB, . query) — exact up to float16 rounding (|dcos| < 1e-3, below the bf16 model's own
precision). Above that, the ``OVERSAMPLE * k`` nearest by Hamming distance of the sign bits (a blocked
scan, a counting selection: :func:`hamming`, :func:`nearest_by_distance`) are rescored the same way.
Measured (``tests/benchmarks/vector_recall.py``), recall@10 against the exact scan for a vector search
(k = 20): on SciFact's own vectors (9,821 chunks, 200 queries) x20 0.994, x40 0.999; on the synthetic
1,000,000-chunk base (~100 perturbed copies of each SciFact vector: near-ties, harder than real text; 100
queries) x40 0.954, x80 0.978, x160 0.989 (hybrid's k = 62: 0.986 / 0.994 / 0.997), at 15.4 / 15.6 / 16.6
ms a search (hybrid's k: 16.2 / 17.9 / 21.2 ms; load ~2.5 on 2 cores) — the Hamming scan of 1M rows is
~13 ms of it, so a larger factor costs little and x160 is the one that meets 0.98. A larger ``k``
(hybrid's 62) rescores at most ``RESCORE_ROWS`` (at least x40): :func:`rescored_rows`.

Freshness: every write or clear of a base's chunks bumps its version (:func:`knowledge.library.index.vectors_version`)
in the same transaction, and chunk ids are never reused. A search reads the version inside its own
read snapshot. With a file: a mapping at that version or later serves it (rows its snapshot lacks are
dropped by the join); otherwise the file is mapped again and, if it is still behind (the writer's
after-commit append did not run), synced by the search itself. Without one: the chunks with ids above the
last one held are read and appended as a new segment, and the base is read again from scratch once its
dead chunks are more than a quarter of what is held. Either way deleted chunks may stay held — search
joins every hit to its live chunk row in the same snapshot, so they are never returned. A base is known
by (id, created_at), so a new base that reuses a deleted one's id starts afresh.

Threading: one lock serialises refreshes; the held arrays are never modified, only replaced, so a
search running meanwhile keeps a consistent view.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from knowledge.errors import KnowledgeError
from knowledge.ingest.memory import release_free_memory
from knowledge.library.bases import Base
from knowledge.library.file_locks import Busy
from knowledge.library.index import vectors_version
from knowledge.library.vector_file import VectorFiles
from knowledge.library.vector_format import BaseKey, Mapped, read_rows, sign_bits
from knowledge.library.vector_rows import RowReader

__all__ = [
    "EXACT_SCAN_MAX",
    "OVERSAMPLE",
    "VectorIndex",
    "VectorSearch",
    "VectorsUnavailable",
    "rescored_rows",
    "sign_bits",
]

log = logging.getLogger(__name__)

EXACT_SCAN_MAX = 20_000
OVERSAMPLE = 160  # recall@10 vs the exact scan at 1M (synthetic): x80 0.978, x160 0.989 (BENCHMARKS.md)
# Rows rescored are read one by one (pread), so their number is most of a large search's cost. A small k gets
# the full factor; a larger one (hybrid's k = 62) gets RESCORE_ROWS, but never under OVERSAMPLE_FLOOR x k:
# at 1M, hybrid's recall@10 is 0.986 at x40 and 0.994 at x80, and 3,200 rows are x52 for k = 62.
RESCORE_ROWS = 3_200
OVERSAMPLE_FLOOR = 40
MAX_CANDIDATES = 16_384  # rescored rows at most (25 MB read): a search over-fetching k = 4,096 stays bounded
SCAN_BLOCK = 65_536  # rows of sign bits compared per step (3 MB of temporaries)
COMPACT_SEGMENTS = 16  # merge the appended segments once there are this many
DEAD_SHARE = 0.25  # reload a base whose held chunks are more than this share deleted
LOCK_WAIT = 0.25  # seconds a search waits for another process's lock on a vector file; then it reads around it

Ids = npt.NDArray[np.int64]
Bits = npt.NDArray[np.uint64]
Halves = npt.NDArray[np.float16]
Floats = npt.NDArray[np.float32]
Vectors = Halves | Floats  # float32 mapped from a file, float16 read into memory


class VectorsUnavailable(KnowledgeError):
    """A base's vector index cannot be read (its file cut short, unreadable): meaning search is unavailable."""

    code = "vectors_unavailable"


@dataclass(frozen=True)
class _Segment:
    ids: Ids
    bits: Bits  # (n, dimension / 64)
    vectors: Vectors  # (n, dimension)
    rows: RowReader | None = None  # a mapped file's rows by pread: rescoring never gathers from the map

    def gather(self, positions: npt.NDArray[np.intp]) -> Vectors:
        """The vectors at ``positions`` (ascending)."""
        return self.vectors[positions] if self.rows is None else self.rows.read(positions)

    @classmethod
    def build(cls, ids: Ids, halves: Halves) -> _Segment:
        return cls(np.asarray(ids, dtype=np.int64), sign_bits(halves), halves)


@dataclass(frozen=True)
class _Held:
    key: tuple[int, float]  # (base id, created_at)
    version: int
    last_id: int
    segments: tuple[_Segment, ...]
    # up to EXACT_SCAN_MAX chunks, all of them in float32 (≤ 30 MB), for the exact scan
    exact: tuple[Ids, Floats] | None = None

    @classmethod
    def build(cls, key: tuple[int, float], version: int, last_id: int, segments: tuple[_Segment, ...]) -> _Held:
        exact = None
        if 0 < sum(len(s.ids) for s in segments) <= EXACT_SCAN_MAX:
            ids, vectors = _concat(segments)
            exact = (ids, vectors.astype(np.float32))
        return cls(key, version, last_id, segments, exact)

    @property
    def size(self) -> int:
        return sum(len(s.ids) for s in self.segments)


class VectorSearch(Protocol):
    """What search asks of a process's vectors: this module's index (a data directory) or the server's
    (``knowledge.search.vector_server``, a team store)."""

    def nearest(
        self, conn: Connection, base: Base, vector: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]: ...

    def held_count(self, base_id: int) -> int: ...

    def forget(self, base_id: int) -> None: ...


def rescored_rows(k: int) -> int:
    """How many sign-bit candidates a search for the ``k`` nearest rescores exactly."""
    budget = max(k * OVERSAMPLE_FLOOR, min(k * OVERSAMPLE, RESCORE_ROWS))
    return max(k, min(budget, MAX_CANDIDATES))


class VectorIndex:
    """The held vectors of every base this process searched (see the module docstring)."""

    def __init__(self, files: VectorFiles | None = None) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, _Held] = {}
        # None: read every base's vectors out of its rows into memory (no vector files: benchmarks, tests)
        self._files = files

    def nearest(self, conn: Connection, base: Base, vector: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The k nearest held chunks as (chunk id, cosine distance), nearest first (deleted ones included);
        ``VectorsUnavailable`` when the base's vector file cannot be read (search answers by keyword)."""
        try:
            return self._nearest(conn, base, vector, k)
        except OSError as exc:  # a file cut short or unreadable (the rows' own reads raise no OSError)
            raise VectorsUnavailable(f"the vector index of knowledge base {base.id} cannot be read") from exc

    def _nearest(
        self, conn: Connection, base: Base, vector: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]:
        held = self._current(conn, base)
        total = held.size
        if total == 0 or k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        if held.exact is not None:
            ids, floats = held.exact
            scores = floats @ query
        else:
            count = min(total, rescored_rows(k))
            ids, vectors = _candidates(held.segments, sign_bits(query[None, :])[0], count)
            scores = vectors.astype(np.float32, copy=False) @ query
        keep = min(k, len(scores))
        top = np.argpartition(-scores, keep - 1)[:keep]
        order = top[np.lexsort((ids[top], -scores[top]))]
        return [(int(ids[i]), float(1.0 - scores[i])) for i in order]

    def held_count(self, base_id: int) -> int:
        held = self._held.get(base_id)
        return 0 if held is None else held.size

    def forget(self, base_id: int) -> None:
        with self._lock:
            self._held.pop(base_id, None)

    # -- freshness ----------------------------------------------------------------------------

    def _current(self, conn: Connection, base: Base) -> _Held:
        key = (base.id, base.created_at)
        version = vectors_version(conn, base.id)
        held = self._held.get(base.id)
        if held is not None and held.key == key and self._fresh(held, version):
            return held
        with self._lock:
            held = self._held.get(base.id)
            if held is not None and held.key == key and self._fresh(held, version):
                return held
            if self._files is not None:
                held = self._from_file(conn, base, key, version)
            elif held is None or held.key != key:
                held = _load(conn, base, key, version)
            elif held.version != version:
                held = _refresh(conn, base, held, version)
            self._held[base.id] = held
            return held

    def _fresh(self, held: _Held, version: int) -> bool:
        """A file may be ahead of the caller's snapshot (appended after a later commit): the rows it does
        not see are dropped by the join to live chunks, so the mapping serves older snapshots too."""
        return held.version == version or (self._files is not None and held.version > version)

    def _from_file(self, conn: Connection, base: Base, key: tuple[int, float], version: int) -> _Held:
        """The base's vector file mapped, synced first if it is behind this snapshot or not the rows'."""
        assert self._files is not None
        files = self._files
        try:
            mapped = files.peek(BaseKey(base.id, base.created_at, base.dimension), wait=LOCK_WAIT)
            if mapped is None or mapped.version < version or not files.matches_rows(conn, mapped):
                mapped = files.sync(base.id, wait=LOCK_WAIT)
        except Busy:  # another process holds the file's lock (appending, rebuilding, or stopped meanwhile)
            log.info("vector file of base %s locked by another process: its rows complete it", base.id)
            return self._beside_writer(conn, base, key, version)
        except OSError:  # no room, no permission: search from rows in memory, as without files
            log.warning("the vector file of base %s could not be written; reading rows", base.id, exc_info=True)
            return _load(conn, base, key, version)
        if mapped is None or mapped.version < version:  # the base is gone, or the file lags still
            return _load(conn, base, key, version)
        return _Held.build(key, mapped.version, mapped.header.last_id, _mapped_segments(mapped))

    def _beside_writer(self, conn: Connection, base: Base, key: tuple[int, float], version: int) -> _Held:
        """The file as it is, mapped without its lock (``VectorFiles.map_unlocked`` says why that is safe), and
        the rows of this snapshot above its last record, read into memory: exactly this snapshot's vectors
        (chunks it no longer has are dropped by the join, as always). A file that is not this snapshot's
        history (one being rebuilt) is passed by and every row read."""
        assert self._files is not None
        mapped = self._files.map_unlocked(BaseKey(base.id, base.created_at, base.dimension))
        if mapped is None or not self._files.matches_rows(conn, mapped):
            return _load(conn, base, key, version)
        segments = _mapped_segments(mapped)
        if mapped.version >= version:
            return _Held.build(key, mapped.version, mapped.header.last_id, segments)
        tail, last_id = _after(conn, base, mapped.header.last_id)
        return _Held.build(key, version, last_id, segments + tail)


def _mapped_segments(mapped: Mapped) -> tuple[_Segment, ...]:
    return (_Segment(mapped.ids, mapped.bits, mapped.floats, mapped.rows),) if mapped.header.count else ()


def _after(conn: Connection, base: Base, after: int) -> tuple[tuple[_Segment, ...], int]:
    """The base's rows above chunk id ``after`` in ``conn``'s snapshot as one segment (none when there are none),
    and the last chunk id they hold (``after`` when none)."""
    rows = read_rows(conn, BaseKey(base.id, base.created_at, base.dimension), after)
    if not len(rows.ids):
        return (), after
    return (_Segment.build(rows.ids, rows.halves),), int(rows.ids[-1])


def _load(conn: Connection, base: Base, key: tuple[int, float], version: int) -> _Held:
    segments, last_id = _after(conn, base, 0)
    held = _Held.build(key, version, last_id, segments)
    release_free_memory()  # the rows read: ~100 MB freed but resident at 100k chunks (memory_probe window)
    return held


def _refresh(conn: Connection, base: Base, held: _Held, version: int) -> _Held:
    tail, last_id = _after(conn, base, held.last_id)
    segments = held.segments + tail
    live = int(conn.execute(text("SELECT count(*) FROM chunks WHERE base_id = :b"), {"b": base.id}).scalar_one())
    size = sum(len(s.ids) for s in segments)
    if size - live > DEAD_SHARE * max(live, 1) and size - live > 100:
        return _load(conn, base, held.key, version)
    if len(segments) > COMPACT_SEGMENTS:
        all_ids, all_vectors = _concat(segments)
        segments = (_Segment(all_ids, np.concatenate([s.bits for s in segments]), all_vectors),)
    return _Held.build(held.key, version, last_id, segments)


def _concat(segments: tuple[_Segment, ...]) -> tuple[Ids, Vectors]:
    if len(segments) == 1:
        return segments[0].ids, segments[0].vectors
    return np.concatenate([s.ids for s in segments]), np.concatenate([s.vectors for s in segments])


def _candidates(segments: tuple[_Segment, ...], query_bits: Bits, count: int) -> tuple[Ids, Vectors]:
    """The ``count`` held vectors nearest to the query by Hamming distance of their sign bits (ties: the
    lower position first)."""
    distances = np.concatenate([hamming(s.bits, query_bits) for s in segments])
    chosen = nearest_by_distance(distances, count, int(query_bits.shape[0]) * 64)
    starts = np.cumsum([0] + [len(s.ids) for s in segments])
    ids = np.empty(len(chosen), dtype=np.int64)
    vectors = np.empty((len(chosen), segments[0].vectors.shape[1]), dtype=segments[0].vectors.dtype)
    where = np.searchsorted(starts, chosen, side="right") - 1
    for n, segment in enumerate(segments):
        mask = where == n
        if mask.any():
            local = chosen[mask] - starts[n]
            ids[mask] = segment.ids[local]
            vectors[mask] = segment.gather(local)
    return ids, vectors


def hamming(bits: Bits, query_bits: Bits) -> npt.NDArray[np.uint16]:
    """Hamming distance of each row of ``bits`` (n, words) to ``query_bits``, ``SCAN_BLOCK`` rows at a time.

    Why blocks: the one-shot ``bitwise_count(bits ^ q).sum(axis=1)`` makes two (n, words) uint64
    temporaries (96 MB at 1M chunks) and a slow reduction over a 6-wide axis; per block the temporaries
    stay in cache and the words are added column by column. Measured at 1M chunks: 44 ms against 109 ms
    (loaded machine, same run)."""
    n, words = bits.shape
    out = np.empty(n, dtype=np.uint16)
    block = max(1, min(SCAN_BLOCK, n))
    xored = np.empty((block, words), dtype=np.uint64)
    counts = np.empty((block, words), dtype=np.uint8)
    for start in range(0, n, block):
        part = bits[start : start + block]
        m = len(part)
        c = np.bitwise_count(np.bitwise_xor(part, query_bits, out=xored[:m]), out=counts[:m])
        total = out[start : start + m]
        if words == 1:
            total[:] = c[:, 0]
            continue
        np.add(c[:, 0], c[:, 1], out=total, dtype=np.uint16)
        for w in range(2, words):
            np.add(total, c[:, w], out=total, dtype=np.uint16)
    return out


def nearest_by_distance(distances: npt.NDArray[np.uint16], count: int, most: int) -> npt.NDArray[np.intp]:
    """The positions of the ``count`` smallest distances (each in ``[0, most]``), ascending by position.

    A counting selection: distances are small integers, so a histogram finds the threshold distance and
    two linear passes take everything below it and the first ties at it — ~2 ms at 1M chunks, against
    ~20 ms for ``argpartition``."""
    if count >= len(distances):
        return np.arange(len(distances))
    cumulative = np.cumsum(np.bincount(distances, minlength=most + 1))
    threshold = int(np.searchsorted(cumulative, count))  # the first distance with `count` at or below it
    below = np.flatnonzero(distances < threshold)
    ties = np.flatnonzero(distances == threshold)[: count - len(below)]
    return np.sort(np.concatenate([below, ties]))
