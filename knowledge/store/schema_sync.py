"""Synced folders: the tables of migration ``0018_sync_roots`` (frozen DDL + a mirror for queries).

``sync_roots`` marks a folder item of a base as kept in sync with its folder on disk. Its *cursor*
(``cursor_generation`` + ``cursor_state``) is the last scan generation whose whole diff was applied; it
moves forward only with a compare-and-swap in the transaction that commits the last change it covers.
``scan_generation``/``scan_owner`` is the claim of the reconcile applying now (knowledge/sync/claim.py).
``sync_pending`` holds what a ``review`` root found and has not applied, and dismissals (with the
fingerprint of the file as it was dismissed, so a dismissal sticks until the file changes again).
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text

metadata = MetaData()

SYNC_MODES = ("auto", "review")
WATCHER_STATES = ("watching", "polling", "off")
PENDING_STATUSES = ("pending", "dismissed")

sync_roots = Table(
    "sync_roots",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("item_id", Integer, nullable=False, unique=True),
    Column("base_id", Integer, nullable=False),
    Column("mode", String, nullable=False),
    Column("cursor_generation", Integer, nullable=False, server_default="0"),
    Column("cursor_state", Text),  # JSON: counts and fingerprint of the diff last applied
    Column("scan_generation", Integer, nullable=False, server_default="0"),
    Column("scan_owner", String),  # the session id of the reconcile holding scan_generation
    Column("scan_started_at", Float),
    Column("watcher_state", String, nullable=False, server_default="off"),
    Column("watcher_reason", Text),
    Column("dirty_seq", Integer, nullable=False, server_default="0"),  # bumped by the watcher on events
    Column("last_synced_at", Float),
    Column("pending_count", Integer, nullable=False, server_default="0"),
    Column("last_error", Text),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # The machine that keeps it in sync (``QUIRE_HOST`` or the hostname of the person who turned sync on; migration
    # ``0029_sync_root_host``). A team store's workers elsewhere never scan it; NULL on a root made before.
    Column("host", String),
)

sync_pending = Table(
    "sync_pending",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("root_id", Integer, nullable=False),
    Column("relative_path", Text, nullable=False),
    Column("kind", String, nullable=False),  # added | changed | removed | moved
    Column("fingerprint", Text, nullable=False),
    Column("detail", Text),  # JSON: moved_from, sizes
    Column("status", String, nullable=False),
    Column("updated_at", Float, nullable=False),
)

SYNC_DDL: tuple[str, ...] = (
    """CREATE TABLE sync_roots (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        item_id INTEGER NOT NULL UNIQUE REFERENCES items(id) ON DELETE CASCADE,
        base_id INTEGER NOT NULL REFERENCES bases(id) ON DELETE CASCADE,
        mode TEXT NOT NULL CHECK (mode IN ('auto', 'review')),
        cursor_generation INTEGER NOT NULL DEFAULT 0,
        cursor_state TEXT,
        scan_generation INTEGER NOT NULL DEFAULT 0,
        scan_owner TEXT,
        scan_started_at REAL,
        watcher_state TEXT NOT NULL DEFAULT 'off' CHECK (watcher_state IN ('watching', 'polling', 'off')),
        watcher_reason TEXT,
        dirty_seq INTEGER NOT NULL DEFAULT 0,
        last_synced_at REAL,
        pending_count INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        CHECK (cursor_generation <= scan_generation)
    )""",
    "CREATE INDEX sync_roots_base ON sync_roots (base_id)",
    # The cursor never moves backwards.
    """CREATE TRIGGER sync_roots_cursor_forward BEFORE UPDATE OF cursor_generation ON sync_roots
    WHEN NEW.cursor_generation < OLD.cursor_generation
    BEGIN SELECT RAISE(ABORT, 'a sync cursor only moves forward'); END""",
    """CREATE TABLE sync_pending (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        root_id INTEGER NOT NULL REFERENCES sync_roots(id) ON DELETE CASCADE,
        relative_path TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('added', 'changed', 'removed', 'moved')),
        fingerprint TEXT NOT NULL,
        detail TEXT,
        status TEXT NOT NULL CHECK (status IN ('pending', 'dismissed')),
        updated_at REAL NOT NULL,
        UNIQUE (root_id, relative_path)
    )""",
    # A reconcile pages a root's item rows by relative path.
    "CREATE INDEX IF NOT EXISTS items_root_relative ON items (root_id, relative_path)",
)

# Migration ``0029_sync_root_host`` (frozen): a synced root carries its machine.
SYNC_ROOT_HOST_DDL: tuple[str, ...] = ("ALTER TABLE sync_roots ADD COLUMN host TEXT",)
SYNC_ROOT_HOST_PG_DDL: tuple[str, ...] = ("ALTER TABLE sync_roots ADD COLUMN IF NOT EXISTS host TEXT",)
