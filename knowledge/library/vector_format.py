"""What a base's vector file holds, and the rows it mirrors (:mod:`knowledge.library.vector_file` writes and
maps it).

Layout (little-endian): a ``HEADER_SIZE`` header, then three sections sized by the file's capacity — chunk
ids (int64), sign bits (uint64 words), and the rows' float16 copies widened to float32 (the same values).
Why float32 on disk, twice the bytes: numpy widens float16 one element at a time (~8 ns an element here,
measured), so rescoring 2,480 candidates (hybrid's 62 x 40) cost 6-8 ms in the cast alone, against
~0.2 ms to gather and score float32 rows; the file is only read where candidates fall.

The header names the base (id, created_at, dimension: :class:`BaseKey`), the capacity, the count of valid
records, the highest chunk id in them and the base's ``vectors_version`` the file was brought up to, and ends
in a CRC-32 of itself: a torn or foreign header is no header.

The rows are the truth: a chunk's float16 copy (``chunks.vector_f16``), the base's version (bumped in every
transaction that writes or clears its chunks) and the next chunk id (ids are never reused).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from knowledge.library.vector_rows import RowReader
from knowledge.store import settings

MAGIC = b"QUIREVEC"
FORMAT = 2  # 1: float16 copies in the third section (rebuilt from rows when met)
HEADER_SIZE = 4096
# magic, format, dimension, words, base id, created_at, capacity, count, last id, version (then a CRC-32)
_FIELDS = struct.Struct("<8sIIIqdqqqq")
_CRC = struct.Struct("<I")

Ids = npt.NDArray[np.int64]
Bits = npt.NDArray[np.uint64]
Halves = npt.NDArray[np.float16]
Floats = npt.NDArray[np.float32]


def sign_bits(vectors: npt.NDArray[np.floating]) -> Bits:
    """One bit per dimension (positive → 1), packed little-endian into uint64 words."""
    packed = np.packbits(np.asarray(vectors) > 0, axis=-1, bitorder="little")
    pad = (-packed.shape[-1]) % 8
    if pad:
        packed = np.pad(packed, [(0, 0)] * (packed.ndim - 1) + [(0, pad)])
    return np.ascontiguousarray(packed).view(np.uint64)


def words_for(dimension: int) -> int:
    return (int(dimension) + 63) // 64


@dataclass(frozen=True)
class BaseKey:
    """What a file must belong to: a base is known by (id, created_at), so a re-created id starts afresh."""

    base_id: int
    created_at: float
    dimension: int


@dataclass(frozen=True)
class Header:
    key: BaseKey
    capacity: int
    count: int
    last_id: int
    version: int

    @property
    def words(self) -> int:
        return words_for(self.key.dimension)

    @property
    def record_size(self) -> int:
        return 8 + self.words * 8 + self.key.dimension * 4

    @property
    def file_size(self) -> int:
        return HEADER_SIZE + self.capacity * self.record_size

    def offsets(self) -> tuple[int, int, int]:
        """Where the ids, sign bits and float sections start."""
        bits_at = HEADER_SIZE + self.capacity * 8
        return HEADER_SIZE, bits_at, bits_at + self.capacity * self.words * 8

    def pack(self) -> bytes:
        k = self.key
        body = _FIELDS.pack(
            MAGIC, FORMAT, k.dimension, self.words, k.base_id, k.created_at,
            self.capacity, self.count, self.last_id, self.version,
        )  # fmt: skip
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def unpack(cls, raw: bytes) -> Header | None:
        """The header, or None if it is not one of ours (wrong magic, format or checksum)."""
        size = _FIELDS.size
        if len(raw) < size + _CRC.size or _CRC.unpack_from(raw, size)[0] != zlib.crc32(raw[:size]):
            return None
        magic, fmt, dimension, words, base_id, created_at, capacity, count, last_id, version = _FIELDS.unpack_from(raw)
        if magic != MAGIC or fmt != FORMAT or dimension <= 0 or words != words_for(dimension):
            return None
        if not 0 <= count <= capacity:
            return None
        return cls(BaseKey(base_id, created_at, dimension), capacity, count, last_id, version)


@dataclass(frozen=True)
class Mapped:
    """A read-only mapping of a valid file: views of its first ``count`` records."""

    header: Header
    inode: tuple[int, int]
    ids: Ids
    bits: Bits  # (count, words)
    floats: Floats  # (count, dimension): the rows' float16 copies, widened
    rows: RowReader  # the same rows by pread: what a search rescores (gathering from the map bloats RSS)

    @property
    def version(self) -> int:
        return self.header.version


@dataclass(frozen=True)
class Rows:
    ids: Ids
    halves: Halves


# -- rows (the truth) ---------------------------------------------------------------------------


def base_key(conn: Connection, base_id: int) -> BaseKey | None:
    row = conn.execute(text("SELECT created_at, dimension FROM bases WHERE id = :b"), {"b": base_id}).first()
    return None if row is None else BaseKey(int(base_id), float(row[0]), int(row[1]))


def vectors_version(conn: Connection, base_id: int) -> int:
    return settings.get_int(conn, f"vectors.version.{int(base_id)}", 0)


def read_rows(
    conn: Connection, key: BaseKey, after: int, *, last_at_most: int | None = None, limit: int | None = None
) -> Rows:
    """The base's chunk ids above ``after`` (up to ``last_at_most``) and their float16 copies, by id."""
    sql = "SELECT id, vector_f16 FROM chunks WHERE base_id = :b AND id > :after"
    params: dict[str, int] = {"b": key.base_id, "after": after}
    if last_at_most is not None:
        sql += " AND id <= :upto"
        params["upto"] = last_at_most
    sql += " ORDER BY id"
    if limit is not None:
        sql += " LIMIT :n"
        params["n"] = limit
    rows = conn.execute(text(sql), params).all()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    halves = np.empty((len(rows), key.dimension), dtype=np.float16)
    for n, (cid, blob) in enumerate(rows):
        if blob is not None:
            halves[n] = np.frombuffer(blob, dtype=np.float16)
        else:  # written by a process older than migration 0007: the float vector
            vec = f"vec_base_{int(key.base_id)}"
            found = conn.execute(text(f"SELECT embedding FROM {vec} WHERE rowid = :id"), {"id": cid}).first()
            halves[n] = 0 if found is None else np.frombuffer(found[0], dtype=np.float32).astype(np.float16)
    return Rows(ids, halves)
