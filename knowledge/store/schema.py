"""The knowledge schema, described with SQLAlchemy Core.

Per-base virtual tables (``vec_base_{id}`` for sqlite-vec, ``fts_base_{id}`` for FTS5) are created by
``knowledge.library.index`` when a base is created, because a vec0 column's dimension is fixed per table and a
base fixes its model and dimension at creation. Their rowid is ``chunks.id``.

Derived data carries what made it: ``items.parser_version``, ``items.chunker_version`` and
``items.model_fingerprint`` say which parser, chunker and model (id, dimension, precision) produced the
item's chunks and vectors, so an index is rebuilt on mismatch rather than migrated.
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

ITEM_TYPES = ("file", "directory", "note")
ACTIVE_STATUSES = ("idle", "preparing", "processing", "reading", "embedding")
# ``skipped``: not read by design (unsupported type, ignored, empty, too large, no text); never a failure.
TERMINAL_STATUSES = ("completed", "failed", "skipped")
ITEM_STATUSES = (*ACTIVE_STATUSES, *TERMINAL_STATUSES, "deleting")

bases = Table(
    "bases",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String, nullable=False),
    Column("model_id", String, nullable=False),
    Column("dimension", Integer, nullable=False),
    Column("precision", String, nullable=False),  # fp32 | bf16: fixed at creation, never mixed
    Column("chunk_size", Integer, nullable=False),
    Column("chunk_overlap", Integer, nullable=False),
    Column("status", String, nullable=False, server_default="ok"),  # ok | failed
    Column("status_reason", Text),
    Column("locked", Integer, nullable=False, server_default="0"),
    # Tesseract language(s) for pages without a text layer and images, e.g. eng, eng+deu (migration 0010)
    Column("ocr_language", String, nullable=False, server_default="eng"),
    # What runs the packaged model: torch | openvino, fixed at creation like the precision (migration 0019)
    Column("backend", String, nullable=False, server_default="torch"),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # NULL: the packaged model. Else JSON: a remote embedder (kind, endpoint, model, dimension, the API
    # key's variable name — never the key — and its call settings); migration base_embedder.
    Column("embedder", Text),
    CheckConstraint("status IN ('ok', 'failed')", name="bases_status"),
    CheckConstraint("chunk_overlap >= 0 AND chunk_overlap < chunk_size", name="bases_overlap"),
    Index("bases_name", text("name COLLATE NOCASE"), unique=True),
)

items = Table(
    "items",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("base_id", Integer, ForeignKey("bases.id", ondelete="CASCADE"), nullable=False),
    Column("parent_id", Integer, ForeignKey("items.id", ondelete="CASCADE")),
    Column("root_id", Integer),  # the top-level item of this subtree (itself for roots)
    Column("type", String, nullable=False),
    Column("name", String, nullable=False),
    Column("source_path", Text),  # where the user's original was (absolute), None for notes
    Column("relative_path", Text),  # path below the root container
    Column("status", String, nullable=False),
    Column("error_code", String),
    Column("error_message", Text),
    Column("content_sha256", String),  # fingerprint of the raw bytes last read
    Column("size", Integer),
    Column("mtime", Float),
    Column("blob_sha256", String),  # knowledge-owned copy of the raw bytes
    Column("text_sha256", String),  # knowledge-owned copy of the extracted text
    Column("note_text", Text),
    Column("parser", String),
    Column("parser_version", String),
    Column("chunker_version", String),
    Column("model_fingerprint", String),
    Column("chunk_count", Integer, nullable=False, server_default="0"),
    Column("metadata", Text),  # JSON of the parser's declared, stored fields
    Column("generation", Integer, nullable=False, server_default="0"),  # bumped on reset: fences late jobs
    Column("job_id", Integer),  # the job currently responsible for advancing it
    Column("run_id", Integer),  # the folder run that created it, if any
    Column("owner", String),  # the identity that owns/authored it (a person or the base's ingest agent)
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # The canonical (resolved absolute) path of a root add_items created: unique among the live roots of
    # a base (partial index items_live_root_source, migration items_source_identity). None for notes,
    # children and folder runs' containers (a run has its own identity per source).
    Column("source_key", Text),
    # How many times the worker died while this item was in flight (``reading``/``embedding``): raised
    # only by recovery of an interrupted index job; at two the item is quarantined. Zero again when its
    # outcome commits and on every reset (reindex, prepare-root, sync). Migration items_deaths.
    Column("deaths", Integer, nullable=False, server_default="0"),
    # 1: the source_path came in an import and no person has vouched for it (``quire base relocate``):
    # reindex reads the owned copy only and never re-walks the folder (migration items_source_unverified).
    Column("source_unverified", Integer, nullable=False, server_default="0"),
    CheckConstraint(f"type IN {ITEM_TYPES}", name="items_type"),
    CheckConstraint(f"status IN {ITEM_STATUSES}", name="items_status"),
    Index("items_base_parent", "base_id", "parent_id"),
    Index("items_root", "root_id"),
    Index("items_base_status", "base_id", "status"),
    Index("items_base_content", "base_id", "content_sha256"),
)

chunks = Table(
    "chunks",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("base_id", Integer, ForeignKey("bases.id", ondelete="CASCADE"), nullable=False),
    Column("item_id", Integer, ForeignKey("items.id", ondelete="CASCADE"), nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("start", Integer, nullable=False),
    Column("end", Integer, nullable=False),
    Column("page", Integer),
    Column("line_start", Integer),
    Column("line_end", Integer),
    Column("token_count", Integer, nullable=False),
    Column("text_sha256", String, nullable=False),
    # A float16 copy of the chunk's vector, read by the in-memory vector search (migration 0007).
    Column("vector_f16", LargeBinary),
    UniqueConstraint("item_id", "ordinal", name="chunks_item_ordinal"),
    Index("chunks_base_hash", "base_id", "text_sha256"),
)

# The ``[[wiki link]]`` targets in each item's metadata (``links``), one row per distinct target, folded the
# way ``knowledge.library.links`` resolves them: backlinks look a document's names up here instead of reading
# every note's JSON. Written with the metadata (migration item_links), gone with the item (cascade).
item_links = Table(
    "item_links",
    metadata,
    Column("item_id", Integer, ForeignKey("items.id", ondelete="CASCADE"), primary_key=True),
    Column("target", Text, primary_key=True),
    Column("base_id", Integer, nullable=False),
    Index("item_links_target", "base_id", "target"),
)

# frozen DDL of migration item_links; the same text on both engines
ITEM_LINKS_DDL = (
    "CREATE TABLE IF NOT EXISTS item_links (item_id INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE, "
    "target TEXT NOT NULL, base_id INTEGER NOT NULL, PRIMARY KEY (item_id, target))",
    "CREATE INDEX IF NOT EXISTS item_links_target ON item_links (base_id, target)",
)

# Items a person keeps from agents (migration 0035): each row hides the item and its whole subtree from an agent
# principal, items added below it later included (``knowledge.library.agent_exclusions``). Gone with the item.
agent_exclusions = Table(
    "agent_exclusions",
    metadata,
    Column("item_id", Integer, ForeignKey("items.id", ondelete="CASCADE"), primary_key=True),
    Column("base_id", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("agent_exclusions_base", "base_id"),
)

# Vectors of chunks whose item was reset for reindex or re-expansion, kept by text hash until the new
# material is written, so unchanged chunks are never embedded again. Swept when no chunk uses them.
vector_cache = Table(
    "vector_cache",
    metadata,
    Column("base_id", Integer, ForeignKey("bases.id", ondelete="CASCADE"), primary_key=True),
    Column("text_sha256", String, primary_key=True),
    Column("embedding", LargeBinary, nullable=False),
    Column("created_at", Float, nullable=False),
    # The model stamp of the item the vector came from (migration vector_cache_stamp); reuse matches it.
    Column("model_fingerprint", String),
)

blobs = Table(
    "blobs",
    metadata,
    Column("sha256", String, primary_key=True),
    Column("size", Integer, nullable=False),
    Column("kind", String, nullable=False),  # raw | text
    Column("created_at", Float, nullable=False),
)

# A team store's owned copies: the bytes themselves, so every worker on every machine reads the same copy
# (a data directory keeps them as files under ``blobs/``; there this table stays empty). Gone with the
# ``blobs`` row that names them, in the same transaction.
blob_contents = Table(
    "blob_contents",
    metadata,
    Column("sha256", String, ForeignKey("blobs.sha256", ondelete="CASCADE"), primary_key=True),
    Column("data", LargeBinary, nullable=False),
)

BLOB_CONTENTS_DDL = (
    "CREATE TABLE IF NOT EXISTS blob_contents (sha256 TEXT PRIMARY KEY REFERENCES blobs(sha256) ON DELETE CASCADE, "
    "data BLOB NOT NULL)",
)

identities = Table(
    "identities",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("base_id", Integer, ForeignKey("bases.id", ondelete="CASCADE")),
    Column("name", String, nullable=False),
    Column("kind", String, nullable=False),  # person | ingest_agent | system
    Column("disabled", Integer, nullable=False, server_default="0"),
    Column("created_at", Float, nullable=False),
    UniqueConstraint("base_id", "kind", "name", name="identities_base_kind_name"),
)

settings = Table(
    "settings",
    metadata,
    Column("key", String, primary_key=True),
    Column("value", Text, nullable=False),
)

# Turns at a remote embedding endpoint, shared by every process of the store (``knowledge.store.endpoint_turns``;
# migration ``0032_endpoint_turns``): the pace of its requests and the requests in flight.
endpoint_pace = Table(
    "endpoint_pace",
    metadata,
    Column("endpoint", String, primary_key=True),  # the endpoint and its limits, hashed
    Column("next_at", Float, nullable=False),  # the pace's theoretical arrival time (seconds since the epoch)
)

endpoint_slots = Table(
    "endpoint_slots",
    metadata,
    Column("endpoint", String, primary_key=True),
    Column("slot", Integer, primary_key=True),  # 0 .. max_concurrency - 1
    Column("holder", String, nullable=False),  # machine:pid:random, so only its taker ends a turn
    Column("until", Float, nullable=False),  # a holder that died frees its slot then
)

ENDPOINT_TURNS_DDL: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS endpoint_pace (endpoint VARCHAR NOT NULL PRIMARY KEY, next_at FLOAT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS endpoint_slots (endpoint VARCHAR NOT NULL, slot INTEGER NOT NULL, "
    "holder VARCHAR NOT NULL, until FLOAT NOT NULL, PRIMARY KEY (endpoint, slot))",
)
