"""The schema migration ``0001_initial`` created, frozen as DDL (dumped from SQLite after the original
migration ran): later schema changes are later migrations and never show up here.

The jobs and huey tables come first (the job layer's own schema), then the knowledge tables.
"""

INITIAL_DDL: tuple[str, ...] = (
    """
CREATE TABLE worker_sessions (
    id VARCHAR NOT NULL,
    host VARCHAR NOT NULL,
    pid INTEGER NOT NULL,
    process_started_at FLOAT NOT NULL,
    hosts_worker INTEGER DEFAULT '0' NOT NULL,
    started_at FLOAT NOT NULL,
    heartbeat_at FLOAT NOT NULL,
    ended_at FLOAT,
    PRIMARY KEY (id)
)
""",
    """
CREATE TABLE jobs (
    id INTEGER NOT NULL,
    type VARCHAR NOT NULL,
    base_id INTEGER,
    payload TEXT DEFAULT '{}' NOT NULL,
    idempotency_key VARCHAR,
    status VARCHAR DEFAULT 'pending' NOT NULL,
    attempt INTEGER DEFAULT '0' NOT NULL,
    recovery VARCHAR NOT NULL,
    max_attempts INTEGER DEFAULT '5' NOT NULL,
    lease_owner VARCHAR,
    lease_expires_at FLOAT,
    available_at FLOAT DEFAULT '0' NOT NULL,
    cancel_requested INTEGER DEFAULT '0' NOT NULL,
    progress_done INTEGER DEFAULT '0' NOT NULL,
    progress_total INTEGER DEFAULT '0' NOT NULL,
    progress_label VARCHAR DEFAULT '' NOT NULL,
    last_error TEXT,
    result TEXT,
    enqueued_by VARCHAR,
    created_at FLOAT NOT NULL,
    updated_at FLOAT NOT NULL,
    started_at FLOAT,
    finished_at FLOAT,
    PRIMARY KEY (id),
    FOREIGN KEY(lease_owner) REFERENCES worker_sessions (id) ON DELETE SET NULL
)
""",
    (
        "CREATE UNIQUE INDEX jobs_live_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL AND "
        "status IN ('pending', 'running')"
    ),
    "CREATE INDEX jobs_status_available ON jobs (status, available_at, id)",
    "CREATE INDEX jobs_base_status ON jobs (base_id, status)",
    (
        "CREATE TABLE kv (queue text not null, key text not null, value blob not null, primary key(queue, "
        "key))"
    ),
    (
        "CREATE TABLE schedule (id integer not null primary key, queue text not null, data blob not null, "
        "timestamp real not null)"
    ),
    "CREATE INDEX schedule_queue_timestamp on schedule (queue, timestamp)",
    (
        "CREATE TABLE task (id integer not null primary key, queue text not null, data blob not null, "
        "priority real not null default 0.0)"
    ),
    "CREATE INDEX task_queue_priority_id on task (queue, priority desc, id)",
    (
        "CREATE TABLE counter (queue text not null, key text not null, value integer not null default 0, "
        "primary key(queue, key))"
    ),
    """
CREATE TABLE bases (
    id INTEGER NOT NULL,
    name VARCHAR NOT NULL,
    model_id VARCHAR NOT NULL,
    dimension INTEGER NOT NULL,
    precision VARCHAR NOT NULL,
    chunk_size INTEGER NOT NULL,
    chunk_overlap INTEGER NOT NULL,
    status VARCHAR DEFAULT 'ok' NOT NULL,
    status_reason TEXT,
    locked INTEGER DEFAULT '0' NOT NULL,
    created_at FLOAT NOT NULL,
    updated_at FLOAT NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT bases_status CHECK (status IN ('ok', 'failed')),
    CONSTRAINT bases_overlap CHECK (chunk_overlap >= 0 AND chunk_overlap < chunk_size)
)
""",
    "CREATE UNIQUE INDEX bases_name ON bases (name COLLATE NOCASE)",
    """
CREATE TABLE blobs (
    sha256 VARCHAR NOT NULL,
    size INTEGER NOT NULL,
    kind VARCHAR NOT NULL,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (sha256)
)
""",
    """
CREATE TABLE settings (
    "key" VARCHAR NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY ("key")
)
""",
    """
CREATE TABLE items (
    id INTEGER NOT NULL,
    base_id INTEGER NOT NULL,
    parent_id INTEGER,
    root_id INTEGER,
    type VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    source_path TEXT,
    relative_path TEXT,
    status VARCHAR NOT NULL,
    error_code VARCHAR,
    error_message TEXT,
    content_sha256 VARCHAR,
    size INTEGER,
    mtime FLOAT,
    blob_sha256 VARCHAR,
    text_sha256 VARCHAR,
    note_text TEXT,
    parser VARCHAR,
    parser_version VARCHAR,
    chunker_version VARCHAR,
    model_fingerprint VARCHAR,
    chunk_count INTEGER DEFAULT '0' NOT NULL,
    metadata TEXT,
    generation INTEGER DEFAULT '0' NOT NULL,
    job_id INTEGER,
    run_id INTEGER,
    owner VARCHAR,
    created_at FLOAT NOT NULL,
    updated_at FLOAT NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT items_type CHECK (type IN ('file', 'directory', 'note')),
    CONSTRAINT items_status CHECK (status IN ('idle', 'preparing', 'processing', 'reading', 'embedding', 'completed', 'failed', 'deleting')),
    FOREIGN KEY(base_id) REFERENCES bases (id) ON DELETE CASCADE,
    FOREIGN KEY(parent_id) REFERENCES items (id) ON DELETE CASCADE
)
""",
    "CREATE INDEX items_base_status ON items (base_id, status)",
    "CREATE INDEX items_base_parent ON items (base_id, parent_id)",
    "CREATE INDEX items_root ON items (root_id)",
    "CREATE INDEX items_base_content ON items (base_id, content_sha256)",
    """
CREATE TABLE identities (
    id INTEGER NOT NULL,
    base_id INTEGER,
    name VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    disabled INTEGER DEFAULT '0' NOT NULL,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT identities_base_kind_name UNIQUE (base_id, kind, name),
    FOREIGN KEY(base_id) REFERENCES bases (id) ON DELETE CASCADE
)
""",
    """
CREATE TABLE chunks (
    id INTEGER NOT NULL,
    base_id INTEGER NOT NULL,
    item_id INTEGER NOT NULL,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    page INTEGER,
    line_start INTEGER,
    line_end INTEGER,
    token_count INTEGER NOT NULL,
    text_sha256 VARCHAR NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT chunks_item_ordinal UNIQUE (item_id, ordinal),
    FOREIGN KEY(base_id) REFERENCES bases (id) ON DELETE CASCADE,
    FOREIGN KEY(item_id) REFERENCES items (id) ON DELETE CASCADE
)
""",
    "CREATE INDEX chunks_base_hash ON chunks (base_id, text_sha256)",
)
