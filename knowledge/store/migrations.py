"""Named, ordered schema migrations, each applied in one write transaction together with its record.

Add a migration by appending a ``Migration`` to ``MIGRATIONS``; never edit or reorder an applied one.
Concurrent processes are safe: the applied set is re-read inside ``BEGIN IMMEDIATE``.
Derived indexes (vectors, FTS) are not migrated: they are stamped and rebuilt (see schema.py). The
exceptions are 0004 and 0007, whose data is derived from the float vectors already in the database (no
model involved), so the migration derives it in place.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, text

from knowledge.errors import StoreError
from knowledge.store import pg_guards, pg_people, schema, schema_agents, schema_portable, schema_runs, schema_sync
from knowledge.store.check_edit import edit_check
from knowledge.store.database import Database
from knowledge.store.initial_ddl import INITIAL_DDL
from knowledge.store.migration_exclusions import agent_exclusions
from knowledge.store.schema_identity import one_live_file_per_source
from knowledge.store.schema_version import refuse_newer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Migration:
    name: str
    apply: Callable[[Connection], None]
    # The same change on a team store (PostgreSQL); required of every migration after pg_schema's baseline.
    apply_postgres: Callable[[Connection], None] | None = None


def _run_all(conn: Connection, statements: tuple[str, ...] | list[str]) -> None:
    for statement in statements:
        conn.exec_driver_sql(statement)


def _initial(conn: Connection) -> None:
    """The job layer's tables, huey's, and the first knowledge tables, as frozen DDL: later changes to
    ``schema.py`` (a column a later migration adds) must never leak into what 0001 creates."""
    _run_all(conn, INITIAL_DDL)


def _vector_cache(conn: Connection) -> None:
    schema.vector_cache.create(conn)


def _folder_runs(conn: Connection) -> None:
    """Folder runs, their manifest, outcomes and ingest batches, and the audit log (frozen DDL)."""
    _run_all(conn, schema_runs.FOLDER_RUNS_DDL)


def _binary_vectors(conn: Connection) -> None:
    """Every base with a float vector table gets its ``bit[dimension]`` twin, filled from the floats. Frozen DDL
    (the names and the column are spelled out here, not taken from ``knowledge.library.index``)."""
    existing = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'")).all()}
    for base_id, dimension in conn.execute(text("SELECT id, dimension FROM bases ORDER BY id")).all():
        floats, bits = f"vec_base_{int(base_id)}", f"vecbits_base_{int(base_id)}"
        if floats not in existing or bits in existing:
            continue  # a failed base without vectors stays as it is (cleanup drops what remains)
        conn.exec_driver_sql(f"CREATE VIRTUAL TABLE {bits} USING vec0(embedding bit[{int(dimension)}])")
        conn.exec_driver_sql(
            f"INSERT INTO {bits} (rowid, embedding) SELECT rowid, vec_quantize_binary(embedding) FROM {floats}"
        )


def _items_parent_index(conn: Connection) -> None:
    """Children by parent: reconciling a folder, walking a subtree, and SQLite's own ON DELETE CASCADE
    lookups from ``items.parent_id`` all search by ``parent_id`` alone, which ``items_base_parent``
    (base_id first) cannot serve: without this index each of them scans the whole table."""
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS items_parent ON items (parent_id)")


def _items_updated_index(conn: Connection) -> None:
    """The app polls "items of this base changed since T" every second or so; without this index that
    poll scans the whole base (measured ~26 ms at 100k items)."""
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS items_base_updated ON items (base_id, updated_at)")


def _agent_proposals(conn: Connection) -> None:
    """Pending proposals agents file and a person accepts or dismisses (frozen DDL)."""
    _run_all(conn, schema_agents.AGENT_PROPOSALS_DDL)


def _search_vectors(conn: Connection) -> None:
    """A float16 copy of every chunk's vector in ``chunks.vector_f16``, read by the in-memory search
    index (``knowledge.search.vector_index``); the ``bit[…]`` vec0 tables of 0004 are dropped — measured,
    sqlite-vec's own KNN over them grows with k and its point reads are slow, so search no longer
    uses them. Frozen DDL; the copies are derived from the float vectors (no model involved)."""
    import numpy as np

    columns = {r[1] for r in conn.execute(text("PRAGMA table_info(chunks)")).all()}
    if "vector_f16" not in columns:
        conn.exec_driver_sql("ALTER TABLE chunks ADD COLUMN vector_f16 BLOB")
    existing = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'")).all()}
    for (base_id,) in conn.execute(text("SELECT id FROM bases ORDER BY id")).all():
        floats = f"vec_base_{int(base_id)}"
        if floats in existing:
            rows = conn.execute(text(f"SELECT rowid, embedding FROM {floats}")).all()
            if not rows:
                continue
            conn.execute(
                text("UPDATE chunks SET vector_f16 = :v WHERE id = :id"),
                [
                    {"id": rowid, "v": np.frombuffer(blob, dtype=np.float32).astype(np.float16).tobytes()}
                    for rowid, blob in rows
                ],
            )
    for (base_id,) in conn.execute(text("SELECT id FROM bases ORDER BY id")).all():
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS vecbits_base_{int(base_id)}")


def _base_imports(conn: Connection) -> None:
    """Imports in progress (``knowledge.portable``): a base being imported stays hidden until done."""
    _run_all(conn, schema_portable.BASE_IMPORTS_DDL)


def _items_source_identity(conn: Connection) -> None:
    """One live root per base and canonical source path (adding a path twice finds the root it already has).

    ``items.source_key`` holds the canonical path of a root ``add_items`` created. Existing roots get
    theirs from ``source_path`` — only the oldest live root of each (base, path), so a base that already
    holds duplicates migrates (the younger copies keep no key; deleting them is the person's choice).
    Folder runs' containers (``run_id`` set) keep no key: a run has its own identity per source."""
    columns = {r[1] for r in conn.execute(text("PRAGMA table_info(items)")).all()}
    if "source_key" not in columns:
        conn.exec_driver_sql("ALTER TABLE items ADD COLUMN source_key TEXT")
    conn.exec_driver_sql(
        "UPDATE items SET source_key = source_path WHERE id IN ("
        " SELECT min(id) FROM items WHERE parent_id IS NULL AND type IN ('file', 'directory')"
        " AND status != 'deleting' AND run_id IS NULL AND source_path IS NOT NULL"
        " GROUP BY base_id, source_path)"
    )
    conn.exec_driver_sql(
        "CREATE UNIQUE INDEX IF NOT EXISTS items_live_root_source ON items (base_id, source_key)"
        " WHERE source_key IS NOT NULL AND parent_id IS NULL AND status != 'deleting'"
    )


def _items_attempts(conn: Connection) -> None:
    """Per-item attempt counts for poison isolation: bumped when an index job marks the item
    ``reading``; an item in flight during two worker deaths is quarantined."""
    columns = {r[1] for r in conn.execute(text("PRAGMA table_info(items)")).all()}
    if "attempts" not in columns:
        conn.exec_driver_sql("ALTER TABLE items ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0")


def _folder_run_retry(conn: Connection) -> None:
    """A person may retry a failed folder run: ``folder_runs.retries``, the status trigger allowing exactly
    failed → pending with it, and one terminal entry per retry (frozen DDL in ``schema_runs``)."""
    _run_all(conn, schema_runs.FOLDER_RUN_RETRY_DDL)


def _base_embedder(conn: Connection) -> None:
    """A base may embed through a remote endpoint: ``bases.embedder`` (JSON; NULL = the packaged model)."""
    conn.exec_driver_sql("ALTER TABLE bases ADD COLUMN embedder TEXT")


def _vector_cache_stamp(conn: Connection) -> None:
    """Cached vectors carry the model stamp they were made with (NULL for older rows: never reused).
    0002 creates ``vector_cache`` from the live table definition, so a new data dir has the column."""
    columns = {r[1] for r in conn.execute(text("PRAGMA table_info(vector_cache)")).all()}
    if "model_fingerprint" not in columns:
        conn.exec_driver_sql("ALTER TABLE vector_cache ADD COLUMN model_fingerprint TEXT")


def _items_skipped_status(conn: Connection) -> None:
    """Allow the terminal item status ``skipped``: not read by design, never a failure."""
    edit_check(conn, "items", "'completed', 'failed', 'deleting'", "'completed', 'failed', 'skipped', 'deleting'")


def _run_outcomes_skipped(conn: Connection) -> None:
    """Allow the folder-run disposition ``skipped``: empty, no text, too large… by design."""
    old, new = "'already_covered', 'rejected')", "'already_covered', 'rejected', 'skipped')"
    edit_check(conn, "folder_run_outcomes", old, new)


def _bases_ocr_language(conn: Connection) -> None:
    """Each base's OCR language, ``eng`` for the bases that exist (frozen DDL)."""
    columns = {r[1] for r in conn.execute(text("PRAGMA table_info(bases)")).all()}
    if "ocr_language" not in columns:
        conn.exec_driver_sql("ALTER TABLE bases ADD COLUMN ocr_language VARCHAR DEFAULT 'eng' NOT NULL")


def _bases_backend(conn: Connection) -> None:
    """Each base's encoder backend; the bases that exist were made by torch (frozen DDL)."""
    columns = {r[1] for r in conn.execute(text("PRAGMA table_info(bases)")).all()}
    if "backend" not in columns:
        conn.exec_driver_sql("ALTER TABLE bases ADD COLUMN backend VARCHAR DEFAULT 'torch' NOT NULL")


def _items_source_unverified(conn: Connection) -> None:
    """An imported item's ``source_path`` came from someone else's file: 1 until a person relocates it, and
    reindex reads only the owned copy meanwhile (a crafted path must never make Quire read a file)."""
    columns = {r[1] for r in conn.execute(text("PRAGMA table_info(items)")).all()}
    if "source_unverified" not in columns:
        conn.exec_driver_sql("ALTER TABLE items ADD COLUMN source_unverified INTEGER DEFAULT 0 NOT NULL")


def _items_deaths(conn: Connection) -> None:
    """Quarantine counts worker deaths, not claims: ``items.attempts`` (bumped on every claim, successful
    ones included) becomes ``items.deaths``, which only recovery raises. What the old column counted is
    not a number of deaths, so every item starts at zero (frozen DDL)."""
    columns = {r[1] for r in conn.execute(text("PRAGMA table_info(items)")).all()}
    if "attempts" in columns and "deaths" not in columns:
        conn.exec_driver_sql("ALTER TABLE items RENAME COLUMN attempts TO deaths")
    elif "deaths" not in columns:
        conn.exec_driver_sql("ALTER TABLE items ADD COLUMN deaths INTEGER NOT NULL DEFAULT 0")
    conn.exec_driver_sql("UPDATE items SET deaths = 0 WHERE deaths != 0")


def _folder_run_deaths(conn: Connection) -> None:
    """A folder run counts worker deaths per source (``folder_run_in_flight``) and settles a source that
    was in flight across two of them ``quarantined`` (the CHECK widened in place; frozen DDL)."""
    _run_all(conn, schema_runs.FOLDER_RUN_DEATHS_DDL)
    old, new = "'already_covered', 'rejected', ", "'already_covered', 'rejected', 'quarantined', "
    edit_check(conn, "folder_run_outcomes", old, new)


def _sync_roots(conn: Connection) -> None:
    """Synced folders: roots with their cursors, pending changes of review roots (frozen DDL)."""
    _run_all(conn, schema_sync.SYNC_DDL)


def _folder_run_retry_of(conn: Connection) -> None:
    """A failed run is retried as a new run (``folder_runs.retry_of``), statuses move forward only, and a
    retry's source the failed run committed is stored as the disposition ``already_committed``."""
    _run_all(conn, schema_runs.FOLDER_RUN_RETRY_OF_DDL)
    old, new = "'rejected', 'skipped')", "'rejected', 'skipped', 'already_committed')"
    edit_check(conn, "folder_run_outcomes", old, new)


def _team_sources(conn: Connection) -> None:
    """Sources that reach every worker: a job may be pinned to the machine that has its files
    (``jobs.host``), and a team store keeps owned copies' bytes in the database (``blob_contents``)."""
    columns = {r[1] for r in conn.execute(text("PRAGMA table_info(jobs)")).all()}
    if "host" not in columns:
        conn.exec_driver_sql("ALTER TABLE jobs ADD COLUMN host TEXT")
    _run_all(conn, schema.BLOB_CONTENTS_DDL)


def _team_sources_postgres(conn: Connection) -> None:
    # a store made after this migration was written has both already (its baseline is today's schema)
    conn.exec_driver_sql("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS host text")
    conn.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS blob_contents (sha256 varchar PRIMARY KEY "
        "REFERENCES blobs (sha256) ON DELETE CASCADE, data bytea NOT NULL)"
    )


def _team_guards(conn: Connection) -> None:
    """SQLite has guarded folder runs, their manifests, the audit log, sync cursors and proposals by triggers
    since the migrations that made those tables; nothing to do here."""


def _team_guards_postgres(conn: Connection) -> None:
    """The same guards as PL/pgSQL triggers on a team store made before they were part of its baseline."""
    from knowledge.store.pg_guards import create_guards

    create_guards(conn)


def _nothing(conn: Connection) -> None:
    """A team store's change only: nothing to do on SQLite."""


def _keyword_term_counts_postgres(conn: Connection) -> None:
    """BM25's counts per base, kept by triggers from now on (``pg_term_counts.create_term_counts``), counted
    here once for the rows each base already has (``create_term_counts`` is safe to run again)."""
    from knowledge.store.pg_term_counts import create_term_counts

    names = conn.exec_driver_sql(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename ~ '^fts_base_[0-9]+$'"
    ).all()
    for (name,) in names:
        create_term_counts(conn, str(name), fill=True)


def _item_links(conn: Connection) -> None:
    """Backlinks by lookup: each item's ``[[wiki link]]`` targets get rows of their own (``item_links``),
    filled here from the metadata that holds them. Frozen: the targets are folded by the rule the links
    module applied when this was written (split on `` | ``, backslashes as slashes, outer slashes and
    blanks dropped, case folded). Runs alike on both engines (on a team store made after it was written the
    baseline already has the table)."""
    _run_all(conn, schema.ITEM_LINKS_DDL)
    rows = conn.execute(
        text("SELECT id, base_id, metadata FROM items WHERE metadata LIKE :m AND type != 'directory'"),
        {"m": '%"links"%'},
    ).all()
    values = [
        {"i": int(item_id), "t": target, "b": int(base_id)}
        for item_id, base_id, metadata in rows
        for target in _frozen_link_targets(metadata)
    ]
    if values:
        conn.execute(text("INSERT INTO item_links (item_id, target, base_id) VALUES (:i, :t, :b)"), values)


def _folder_run_cancelled(conn: Connection) -> None:
    """A person may cancel a run: the status ``cancelled`` (the CHECK widened in place), pending | running →
    cancelled → reverted, and ``cancelled`` among the one terminal entry a run files (frozen DDL)."""
    edit_check(conn, "folder_runs", "'failed', 'reverted')", "'failed', 'reverted', 'cancelled')")
    _run_all(conn, schema_runs.FOLDER_RUN_CANCELLED_DDL)


def _folder_run_cancelled_postgres(conn: Connection) -> None:
    """The same on a team store (no status CHECK there: the trigger and the terminal entries' index)."""
    _run_all(conn, pg_guards.FOLDER_RUN_CANCELLED_PG_DDL)


def _sync_root_host(conn: Connection) -> None:
    """A synced root carries the machine that keeps it in sync (NULL on roots made before: local on SQLite)."""
    _run_all(conn, schema_sync.SYNC_ROOT_HOST_DDL)


def _sync_root_host_postgres(conn: Connection) -> None:
    _run_all(conn, schema_sync.SYNC_ROOT_HOST_PG_DDL)


def _items_source_index(conn: Connection) -> None:
    """Items by source path: a folder run looks up, in every source's transaction, the live item that already
    stands for its file (one live item per source); without this index each lookup scans the whole base.
    Runs alike on both engines."""
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS items_base_source ON items (base_id, source_path)")


def _endpoint_turns(conn: Connection) -> None:
    """A remote endpoint's pace and requests in flight, shared by every process of the store (frozen DDL; a
    team store created after it has the tables from its baseline, hence IF NOT EXISTS). Alike on both engines."""
    _run_all(conn, schema.ENDPOINT_TURNS_DDL)


def _frozen_link_targets(metadata: str | None) -> list[str]:
    try:
        fields = json.loads(metadata) if metadata else {}
    except ValueError:
        return []
    links = fields.get("links") if isinstance(fields, dict) else None
    if not isinstance(links, str):
        return []
    folded = (t.strip().replace("\\", "/").strip("/").casefold() for t in links.split(" | "))
    return list(dict.fromkeys(t for t in folded if t))


MIGRATIONS: list[Migration] = [
    Migration("0001_initial", _initial),
    Migration("0002_vector_cache", _vector_cache),
    Migration("0003_folder_runs", _folder_runs),
    Migration("0004_binary_vectors", _binary_vectors),
    Migration("0005_items_parent_index", _items_parent_index),
    Migration("0006_items_updated_index", _items_updated_index),
    Migration("0007_search_vectors", _search_vectors),
    Migration("0008_agent_proposals", _agent_proposals),
    Migration("0009_base_imports", _base_imports),
    Migration("0010_items_source_identity", _items_source_identity),
    Migration("0011_items_attempts", _items_attempts),
    Migration("0012_folder_run_retry", _folder_run_retry),
    Migration("0013_base_embedder", _base_embedder),
    Migration("0014_vector_cache_stamp", _vector_cache_stamp),
    Migration("0015_items_skipped_status", _items_skipped_status),
    Migration("0016_bases_ocr_language", _bases_ocr_language),
    Migration("0017_run_outcomes_skipped", _run_outcomes_skipped),
    Migration("0018_sync_roots", _sync_roots),
    Migration("0019_bases_backend", _bases_backend),
    Migration("0020_items_source_unverified", _items_source_unverified),
    Migration("0021_folder_run_retry_of", _folder_run_retry_of),
    Migration("0022_items_deaths", _items_deaths),
    Migration("0023_folder_run_deaths", _folder_run_deaths),
    Migration("0024_team_sources", _team_sources, _team_sources_postgres),
    Migration("0025_item_links", _item_links, _item_links),
    Migration("0026_team_guards", _team_guards, _team_guards_postgres),
    Migration("0027_keyword_term_counts", _nothing, _keyword_term_counts_postgres),
    Migration("0028_folder_run_cancelled", _folder_run_cancelled, _folder_run_cancelled_postgres),
    Migration("0029_sync_root_host", _sync_root_host, _sync_root_host_postgres),
    Migration("0030_server_says_who", _nothing, pg_people.create_people_guards),
    Migration("0031_items_source_path", _items_source_index, _items_source_index),
    Migration("0032_endpoint_turns", _endpoint_turns, _endpoint_turns),
    Migration("0033_items_live_file_source", one_live_file_per_source, one_live_file_per_source),
    Migration("0034_agent_proposal_account", schema_agents.add_account, schema_agents.add_account_postgres),
    Migration("0035_agent_exclusions", agent_exclusions, agent_exclusions),
]


def _ensure_record_table(db: Database) -> None:
    with db.write() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
        )


def applied_migrations(conn: Connection) -> list[str]:
    rows = conn.execute(text("SELECT name FROM schema_migrations ORDER BY name")).all()
    return [r[0] for r in rows]


def migrate(db: Database) -> list[str]:
    """Apply every pending migration in order; return the names applied now (a newer store: refused)."""
    refuse_newer(db, [m.name for m in MIGRATIONS])
    if db.dialect_name == "postgresql" and _is_current(db):
        return []  # a team store at today's schema is opened without a write: a read-only role may open it
    _ensure_record_table(db)
    applied_now = _postgres_baseline(db) if db.dialect_name == "postgresql" else []
    for migration in MIGRATIONS:
        with db.write() as conn:
            if migration.name in applied_migrations(conn):
                continue
            _apply(db, migration, conn)
            conn.execute(
                text("INSERT INTO schema_migrations (name, applied_at) VALUES (:n, :t)"),
                {"n": migration.name, "t": time.time()},
            )
        log.info("applied migration %s", migration.name)
        applied_now.append(migration.name)
    return applied_now


def _is_current(db: Database) -> bool:
    with db.read() as conn:
        if conn.exec_driver_sql("SELECT to_regclass('schema_migrations') IS NULL").scalar():
            return False
        return set(applied_migrations(conn)) >= {m.name for m in MIGRATIONS}


def _postgres_baseline(db: Database) -> list[str]:
    """An empty team store gets the whole schema at once (``knowledge.store.pg_schema``)."""
    from knowledge.store import pg_schema

    names = pg_schema.baseline_names([m.name for m in MIGRATIONS])
    with db.write() as conn:
        if applied_migrations(conn):
            return []
        pg_schema.create_baseline(conn, names)
    log.info("created the team store's schema through %s", names[-1])
    return names


def _apply(db: Database, migration: Migration, conn: Connection) -> None:
    if db.dialect_name == "sqlite":
        migration.apply(conn)
        return
    if migration.apply_postgres is None:
        raise StoreError(f"migration {migration.name} has no PostgreSQL step; this team store cannot be migrated")
    migration.apply_postgres(conn)
