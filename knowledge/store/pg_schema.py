"""The team store's schema on PostgreSQL: the same tables as SQLite's, recorded under the same migration names.

SQLite reached today's schema through the named migrations (``knowledge.store.migrations``), most of them
frozen SQLite DDL that edits tables in place. A team store starts empty, so it is created in one step at the
schema those migrations end in — the tables as ``knowledge.store.schema*``/``jobs.schema`` describe them,
compiled for PostgreSQL, plus the indexes the migrations made (the partial unique ones are invariants, not
speed-ups) — and records every migration name up to ``BASELINE_THROUGH`` as applied. A migration added after
that runs on a team store only through its own PostgreSQL step (``Migration.apply_postgres``); one without it
stops ``migrate`` with a clear error instead of leaving a store half-migrated. The baseline compiles today's
tables (and guards), so a store created now already has what those later steps add: each step must be safe to
run on such a store (``IF NOT EXISTS``, ``CREATE OR REPLACE``) as well as on one created before it.

What differs, and why:

* ``bases.name`` is unique without case through ``lower(name)`` (SQLite: ``COLLATE NOCASE``); lookups
  already compare ``lower(name)``.
* JSON in index expressions reads ``payload::jsonb ->> 'retry'`` (SQLite: ``json_extract``).
* The vector extension (pgvector) is created here; a base's vector and keyword tables are made with the
  base (``knowledge.library.index_postgres``).
* SQLite's guard triggers (folder runs' identity and forward-only status, manifests fixed at creation, the
  append-only audit log, forward-only sync cursors, proposals decided once) are PL/pgSQL triggers
  (``knowledge.store.pg_guards``), raising the same sentences as integrity errors; a new store gets them with
  its baseline, a store made before them through migration 0026. TRUNCATE is refused on the append-only
  tables too (it passes row triggers).
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, MetaData, text
from sqlalchemy.schema import CreateTable

from jobs import schema as job_schema
from knowledge.store import schema, schema_agents, schema_portable, schema_runs, schema_sync
from knowledge.store.pg_guards import create_guards
from knowledge.store.pg_people import create_people_guards
from knowledge.store.schema_identity import LIVE_FILE_SOURCE_DDL

BASELINE_THROUGH = "0023_folder_run_deaths"

_METADATA: tuple[MetaData, ...] = (
    job_schema.metadata,
    schema.metadata,
    schema_runs.metadata,
    schema_agents.metadata,
    schema_portable.metadata,
    schema_sync.metadata,
)

# The indexes SQLite's migrations made, spelled for PostgreSQL (frozen; see the module docstring).
INDEXES: tuple[str, ...] = (
    "CREATE INDEX agent_proposals_status ON agent_proposals (status, id)",
    "CREATE UNIQUE INDEX audit_log_one_created ON audit_log (run_id) WHERE action = 'ingest.folder_run.created'",
    "CREATE UNIQUE INDEX audit_log_one_retried ON audit_log (run_id, ((payload::jsonb ->> 'retry'))) "
    "WHERE action = 'ingest.folder_run.retried'",
    "CREATE UNIQUE INDEX audit_log_one_revert ON audit_log (run_id) WHERE action = 'ingest.folder_run.reverted'",
    "CREATE UNIQUE INDEX audit_log_one_started_per_attempt ON audit_log (run_id, attempt) "
    "WHERE action = 'ingest.folder_run.started'",
    "CREATE UNIQUE INDEX audit_log_one_terminal ON audit_log (run_id, (coalesce(payload::jsonb ->> 'retry', '0'))) "
    "WHERE action IN ('ingest.folder_run.completed', 'ingest.folder_run.failed')",
    "CREATE INDEX audit_log_run ON audit_log (run_id, id)",
    "CREATE UNIQUE INDEX bases_name ON bases (lower(name))",
    "CREATE INDEX chunks_base_hash ON chunks (base_id, text_sha256)",
    "CREATE INDEX chunks_item ON chunks (item_id)",
    "CREATE INDEX folder_runs_base ON folder_runs (base_id, id)",
    "CREATE INDEX folder_runs_folder ON folder_runs (folder, id)",
    "CREATE UNIQUE INDEX folder_runs_one_retry ON folder_runs (retry_of) WHERE retry_of IS NOT NULL",
    "CREATE INDEX folder_runs_status ON folder_runs (status, id)",
    "CREATE INDEX items_base_content ON items (base_id, content_sha256)",
    "CREATE INDEX items_base_parent ON items (base_id, parent_id)",
    "CREATE INDEX items_base_status ON items (base_id, status)",
    "CREATE INDEX items_base_updated ON items (base_id, updated_at)",
    "CREATE UNIQUE INDEX items_live_root_source ON items (base_id, source_key) "
    "WHERE source_key IS NOT NULL AND parent_id IS NULL AND status != 'deleting'",
    LIVE_FILE_SOURCE_DDL,  # one live file item per source path (migration 0033 makes it on older stores)
    "CREATE INDEX items_parent ON items (parent_id)",
    "CREATE INDEX items_root ON items (root_id)",
    "CREATE INDEX items_root_relative ON items (root_id, relative_path)",
    "CREATE INDEX jobs_base_status ON jobs (base_id, status)",
    "CREATE UNIQUE INDEX jobs_live_key ON jobs (idempotency_key) "
    "WHERE idempotency_key IS NOT NULL AND status IN ('pending', 'running')",
    "CREATE INDEX jobs_status_available ON jobs (status, available_at, id)",
    "CREATE INDEX sync_roots_base ON sync_roots (base_id)",
)


def create_baseline(conn: Connection, migration_names: list[str]) -> None:
    """Create the whole schema in the caller's write transaction and record the baseline migrations."""
    conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
    for metadata in _METADATA:
        for table in metadata.sorted_tables:
            conn.execute(CreateTable(table))  # the tables' own indexes come from INDEXES, spelled for PG
    for ddl in INDEXES:
        conn.exec_driver_sql(ddl)
    create_guards(conn)
    create_people_guards(conn)  # a person's name in a row is the connected role's
    now = time.time()
    conn.execute(
        text("INSERT INTO schema_migrations (name, applied_at) VALUES (:n, :t)"),
        [{"n": name, "t": now} for name in migration_names],
    )


def baseline_names(all_names: list[str]) -> list[str]:
    """The migration names the baseline stands for: every one up to and including ``BASELINE_THROUGH``."""
    return all_names[: all_names.index(BASELINE_THROUGH) + 1]
