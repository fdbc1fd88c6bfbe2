"""The export file: one SQLite database of its own (written with apsw), read back the same way.

Layout (format version 1): a ``meta`` table (key/value text: format name and version, the base's
settings and model stamp, counts, the content checksum) and one table per kind of exported row. Each
row table has ``seq INTEGER PRIMARY KEY`` giving the order rows were written and are applied in
(items parents-first), then the source columns under their own names. Vectors travel as the float32
bytes of each chunk (``chunks.embedding``); the float16 search copy, the vec0 and FTS5 rows are
derived from them and from the chunk text on import (no model involved). Owned blobs travel as BLOB
rows. The checksum is a SHA-256 over every row of every table in ``seq`` order, then the meta rows.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import apsw

FORMAT_NAME = "quire-base-export"
FORMAT_VERSION = 1
FILE_SUFFIX = ".quirebase"


@dataclass(frozen=True)
class RowTable:
    name: str
    columns: tuple[str, ...]

    def create_sql(self) -> str:
        cols = ", ".join(f'"{c}"' for c in self.columns)
        return f"CREATE TABLE {self.name} (seq INTEGER PRIMARY KEY, {cols})"

    def insert_sql(self) -> str:
        cols = ", ".join(f'"{c}"' for c in self.columns)
        marks = ", ".join("?" for _ in self.columns)
        return f"INSERT INTO {self.name} (seq, {cols}) VALUES (?, {marks})"

    def select_sql(self, *, after_seq: bool = False, limit: bool = False) -> str:
        cols = ", ".join(f'"{c}"' for c in self.columns)
        where = " WHERE seq > ?" if after_seq else ""
        tail = " LIMIT ?" if limit else ""
        return f"SELECT seq, {cols} FROM {self.name}{where} ORDER BY seq{tail}"


ITEM_COLUMNS = (
    "id", "parent_id", "root_id", "type", "name", "source_path", "relative_path", "status", "error_code",
    "error_message", "content_sha256", "size", "mtime", "blob_sha256", "text_sha256", "note_text", "parser",
    "parser_version", "chunker_version", "model_fingerprint", "chunk_count", "metadata", "generation", "job_id",
    "run_id", "owner", "created_at", "updated_at",
)  # fmt: skip
CHUNK_COLUMNS = (
    "id", "item_id", "ordinal", "text", "start", "end", "page", "line_start", "line_end", "token_count",
    "text_sha256", "embedding",
)  # fmt: skip
RUN_COLUMNS = (
    "id", "folder", "idempotency_key", "request_fingerprint", "approved_by", "status", "job_id", "owner_attempt",
    "declared_size", "walked", "container_item_id", "error", "reverted_by", "created_at", "started_at",
    "finished_at", "reverted_at", "updated_at",
)  # fmt: skip

IDENTITIES = RowTable("identities", ("name", "kind", "disabled", "created_at"))
ITEMS = RowTable("items", ITEM_COLUMNS)
CHUNKS = RowTable("chunks", CHUNK_COLUMNS)
FOLDER_RUNS = RowTable("folder_runs", RUN_COLUMNS)
RUN_SOURCES = RowTable(
    "folder_run_sources", ("id", "run_id", "ordinal", "relative_path", "size", "content_sha256", "approved_by")
)
RUN_OUTCOMES = RowTable(
    "folder_run_outcomes",
    ("id", "run_id", "source_id", "disposition", "reason", "item_id", "batch_id", "attempt", "settled_at"),
)
INGEST_BATCHES = RowTable("ingest_batches", ("id", "run_id", "source_id", "item_id", "attempt", "created_at"))
AUDIT = RowTable("audit_log", ("id", "at", "action", "actor", "run_id", "attempt", "payload"))
BLOBS = RowTable("blobs", ("sha256", "kind", "size", "data"))

# Written, checksummed and applied in this order.
ROW_TABLES: tuple[RowTable, ...] = (
    IDENTITIES, FOLDER_RUNS, RUN_SOURCES, INGEST_BATCHES, RUN_OUTCOMES, ITEMS, CHUNKS, BLOBS, AUDIT,
)  # fmt: skip
META_CREATE = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
CHECKSUM_KEY = "checksum"


class RowHasher:
    """A SHA-256 over typed values: a row hashes the same whichever program wrote or read it."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def table(self, name: str) -> None:
        self._h.update(b"T" + name.encode() + b"\0")

    def row(self, values: Sequence[Any]) -> None:
        update = self._h.update
        for v in values:
            if v is None:
                update(b"N")
            elif isinstance(v, bool | int):
                update(b"I" + struct.pack("<q", int(v)))
            elif isinstance(v, float):
                update(b"F" + struct.pack("<d", v))
            elif isinstance(v, str):
                data = v.encode("utf-8", "surrogatepass")
                update(b"S" + struct.pack("<q", len(data)) + data)
            else:
                data = bytes(v)
                update(b"B" + struct.pack("<q", len(data)) + data)
        update(b"\n")

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def hash_meta(hasher: RowHasher, meta: Iterable[tuple[str, str]]) -> None:
    hasher.table("meta")
    for key, value in sorted(meta):
        if key != CHECKSUM_KEY:
            hasher.row((key, value))


def content_checksum(conn: apsw.Connection, page: int = 500) -> str:
    """Recompute the checksum of an export file, streaming every table in ``seq`` order."""
    hasher = RowHasher()
    for table in ROW_TABLES:
        hasher.table(table.name)
        for row in conn.execute(table.select_sql()):
            hasher.row(row[1:])
    hash_meta(hasher, [(str(k), str(v)) for k, v in conn.execute("SELECT key, value FROM meta")])
    return hasher.hexdigest()
