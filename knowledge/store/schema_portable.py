"""Imports in progress: the table of migration ``base_imports`` (frozen DDL below, mirrored for queries).

A base with a ``base_imports`` row is being imported: it exists (its rows are written in bounded
transactions) but ``knowledge.library.bases`` hides it from listing and lookup, so nothing can search, add to or
show it until the import's last transaction deletes the row. The row carries the owning process (for
startup cleanup after a crash) and how far the import got (to resume).
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text

metadata = MetaData()

base_imports = Table(
    "base_imports",
    metadata,
    Column("base_id", Integer, primary_key=True),
    Column("name", Text, nullable=False),  # the name the base takes when the import completes
    Column("checksum", String, nullable=False),  # the export file's content checksum
    Column("stage", String, nullable=False),
    Column("cursor", Integer, nullable=False),  # last export row applied in this stage
    Column("item_offset", Integer, nullable=False),  # new item id = exported id + item_offset
    Column("chunk_offset", Integer, nullable=False),  # new chunk id = exported id + chunk_offset
    Column("host", String, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("process_started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("started_at", Float, nullable=False),
)

BASE_IMPORTS_DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS base_imports (
        base_id INTEGER PRIMARY KEY REFERENCES bases(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        checksum TEXT NOT NULL,
        stage TEXT NOT NULL,
        cursor INTEGER NOT NULL DEFAULT 0,
        item_offset INTEGER NOT NULL,
        chunk_offset INTEGER NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        process_started_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL,
        started_at REAL NOT NULL
    )""",
)
