"""Folder runs and the audit log: the tables of migration ``0002_folder_runs``, for building queries.

The DDL itself is frozen text in :data:`FOLDER_RUNS_DDL` (a migration never changes once applied); the
``Table`` objects below mirror it for SQLAlchemy and a test keeps the two in step.

What the database enforces, so that no code path can get it wrong:

* ``folder_runs.idempotency_key`` is unique: at most one run per key. Ids are ``AUTOINCREMENT`` so a run
  id is never reused after its base is deleted (audit entries outlive their runs).
* A run's identity (destination, folder, key, request fingerprint, approver, declared size, creation
  time) never changes, its job binding is set once, its status only moves
  ``pending → running → completed → reverted`` (or ``pending|running → failed``, or — migration
  ``0028_folder_run_cancelled`` — ``pending|running → cancelled → reverted``), and its owner stamp
  (``owner_attempt``) never goes back.
* The manifest (``folder_run_sources``) is written in the creating transaction and then frozen: no
  update, no delete while its run exists (a base deletion still cascades), no insert once the run is
  bound to its job.
* A source settles once (``folder_run_outcomes`` unique on ``(run_id, source_id)``) and has at most one
  ingest batch (``ingest_batches`` unique on ``(run_id, source_id)``).
* ``audit_log`` is append-only; a run has at most one ``created`` entry, one ``started`` entry per
  attempt, and one terminal (``completed``, ``failed`` or ``cancelled``) entry.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text

metadata = MetaData()

# What migration 0003 created the status CHECK with (frozen: its DDL below must never change); ``cancelled``
# (migration 0028_folder_run_cancelled): a person stopped the run; it keeps what it committed and may be reverted.
_RUN_STATUSES_0003 = ("pending", "running", "completed", "failed", "reverted")
RUN_STATUSES = (*_RUN_STATUSES_0003, "cancelled")
TERMINAL_RUN_STATUSES = ("completed", "failed", "reverted", "cancelled")
REVERTIBLE_RUN_STATUSES = ("completed", "cancelled")
CANCELLABLE_RUN_STATUSES = ("pending", "running")
# What migration 0003 created the CHECK with (frozen: its DDL below must never change).
_DISPOSITIONS_0003 = (
    "committed",
    "source_unavailable",
    "outside_run_root",
    "excluded",
    "already_covered",
    "rejected",
)
# ``skipped`` (migration 0011): read and not indexed by design (empty, no text, too large…), the word the
# items use; ``rejected`` stays for a source that could not be parsed (something went wrong).
# ``already_committed`` (migration folder_run_retry_of): a retry's source that the failed run it retries
# already committed (the outcome names that run's item; nothing is written for it twice).
# ``quarantined`` (migration folder_run_deaths): the worker died twice while this source was in flight.
DISPOSITIONS = (*_DISPOSITIONS_0003, "skipped", "already_committed", "quarantined")

folder_runs = Table(
    "folder_runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("base_id", Integer, nullable=False),
    Column("folder", Text, nullable=False),  # resolved absolute path
    Column("idempotency_key", String, nullable=False, unique=True),
    Column("request_fingerprint", String, nullable=False),  # sha256 of folder + payload + actor
    Column("approved_by", String, nullable=False),  # the person who started it
    Column("status", String, nullable=False),
    Column("job_id", Integer),
    Column("owner_attempt", Integer),  # the queue attempt that owns the run (the fence)
    Column("declared_size", Integer, nullable=False),  # manifest size
    Column("walked", Integer, nullable=False),  # descendants the preview walked
    Column("container_item_id", Integer),  # the directory item the run's files live under
    Column("error", Text),  # sanitized reason of a failed run
    Column("reverted_by", String),
    Column("created_at", Float, nullable=False),
    Column("started_at", Float),
    Column("finished_at", Float),
    Column("reverted_at", Float),
    Column("updated_at", Float, nullable=False),
    # How many times a person retried this failed run (migration folder_run_retry).
    Column("retries", Integer, nullable=False, server_default="0"),
    # The failed run this run retries (migration folder_run_retry_of); set at creation, never changed.
    Column("retry_of", Integer),
)

folder_run_sources = Table(
    "folder_run_sources",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("relative_path", Text, nullable=False),
    Column("size", Integer, nullable=False),
    Column("content_sha256", String, nullable=False),
    Column("approved_by", String, nullable=False),
)

folder_run_outcomes = Table(
    "folder_run_outcomes",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, nullable=False),
    Column("source_id", Integer, nullable=False),
    Column("disposition", String, nullable=False),
    Column("reason", Text),
    Column("item_id", Integer),
    Column("batch_id", Integer),
    Column("attempt", Integer, nullable=False),
    Column("settled_at", Float, nullable=False),
)

ingest_batches = Table(
    "ingest_batches",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, nullable=False),
    Column("source_id", Integer, nullable=False),
    Column("item_id", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
)

# Sources a run's attempt had in flight (read, parsed or embedded, not settled yet) and how many attempts
# ended while they were (migration folder_run_deaths): a source in flight across two worker deaths settles
# ``quarantined`` and the run goes on.
folder_run_in_flight = Table(
    "folder_run_in_flight",
    metadata,
    Column("run_id", Integer, primary_key=True),
    Column("source_id", Integer, primary_key=True),
    Column("attempt", Integer),  # the attempt that has it in flight now (None: none)
    Column("deaths", Integer, nullable=False, server_default="0"),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("at", Float, nullable=False),
    Column("action", String, nullable=False),
    Column("actor", String, nullable=False),
    Column("base_id", Integer),
    Column("run_id", Integer),
    Column("attempt", Integer),
    Column("payload", Text, nullable=False),
)

_STATUS_LIST = ", ".join(f"'{s}'" for s in _RUN_STATUSES_0003)
_DISPOSITION_LIST = ", ".join(f"'{d}'" for d in _DISPOSITIONS_0003)

FOLDER_RUNS_DDL: tuple[str, ...] = (
    f"""CREATE TABLE folder_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        base_id INTEGER NOT NULL REFERENCES bases(id) ON DELETE CASCADE,
        folder TEXT NOT NULL,
        idempotency_key TEXT NOT NULL UNIQUE,
        request_fingerprint TEXT NOT NULL,
        approved_by TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ({_STATUS_LIST})),
        job_id INTEGER,
        owner_attempt INTEGER,
        declared_size INTEGER NOT NULL CHECK (declared_size >= 0),
        walked INTEGER NOT NULL,
        container_item_id INTEGER,
        error TEXT,
        reverted_by TEXT,
        created_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        reverted_at REAL,
        updated_at REAL NOT NULL
    )""",
    "CREATE INDEX folder_runs_folder ON folder_runs (folder, id)",
    "CREATE INDEX folder_runs_base ON folder_runs (base_id, id)",
    "CREATE INDEX folder_runs_status ON folder_runs (status, id)",
    """CREATE TRIGGER folder_runs_identity_immutable BEFORE UPDATE ON folder_runs
    WHEN NEW.id IS NOT OLD.id OR NEW.base_id IS NOT OLD.base_id OR NEW.folder IS NOT OLD.folder
      OR NEW.idempotency_key IS NOT OLD.idempotency_key OR NEW.request_fingerprint IS NOT OLD.request_fingerprint
      OR NEW.approved_by IS NOT OLD.approved_by OR NEW.declared_size IS NOT OLD.declared_size
      OR NEW.walked IS NOT OLD.walked OR NEW.created_at IS NOT OLD.created_at
      OR (OLD.job_id IS NOT NULL AND NEW.job_id IS NOT OLD.job_id)
    BEGIN SELECT RAISE(ABORT, 'a folder run''s identity, size and job binding are immutable'); END""",
    """CREATE TRIGGER folder_runs_status_moves_forward BEFORE UPDATE OF status ON folder_runs
    WHEN NEW.status IS NOT OLD.status AND NOT (
        (OLD.status = 'pending' AND NEW.status IN ('running', 'failed'))
        OR (OLD.status = 'running' AND NEW.status IN ('completed', 'failed'))
        OR (OLD.status = 'completed' AND NEW.status = 'reverted'))
    BEGIN SELECT RAISE(ABORT, 'illegal folder run status transition'); END""",
    """CREATE TRIGGER folder_runs_owner_monotonic BEFORE UPDATE OF owner_attempt ON folder_runs
    WHEN OLD.owner_attempt IS NOT NULL AND (NEW.owner_attempt IS NULL OR NEW.owner_attempt < OLD.owner_attempt)
    BEGIN SELECT RAISE(ABORT, 'a folder run''s owner attempt never goes back'); END""",
    """CREATE TABLE folder_run_sources (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id INTEGER NOT NULL REFERENCES folder_runs(id) ON DELETE CASCADE,
        ordinal INTEGER NOT NULL,
        relative_path TEXT NOT NULL,
        size INTEGER NOT NULL,
        content_sha256 TEXT NOT NULL,
        approved_by TEXT NOT NULL,
        UNIQUE (run_id, ordinal),
        UNIQUE (run_id, relative_path)
    )""",
    """CREATE TRIGGER folder_run_sources_no_update BEFORE UPDATE ON folder_run_sources
    BEGIN SELECT RAISE(ABORT, 'a folder run''s manifest is immutable'); END""",
    """CREATE TRIGGER folder_run_sources_no_delete BEFORE DELETE ON folder_run_sources
    WHEN EXISTS (SELECT 1 FROM folder_runs WHERE id = OLD.run_id)
    BEGIN SELECT RAISE(ABORT, 'a folder run''s manifest is immutable'); END""",
    """CREATE TRIGGER folder_run_sources_fixed_at_creation BEFORE INSERT ON folder_run_sources
    WHEN (SELECT job_id FROM folder_runs WHERE id = NEW.run_id) IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'a folder run''s manifest is fixed when the run is created'); END""",
    f"""CREATE TABLE folder_run_outcomes (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES folder_runs(id) ON DELETE CASCADE,
        source_id INTEGER NOT NULL REFERENCES folder_run_sources(id) ON DELETE CASCADE,
        disposition TEXT NOT NULL CHECK (disposition IN ({_DISPOSITION_LIST})),
        reason TEXT,
        item_id INTEGER,
        batch_id INTEGER,
        attempt INTEGER NOT NULL,
        settled_at REAL NOT NULL,
        UNIQUE (run_id, source_id)
    )""",
    """CREATE TABLE ingest_batches (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES folder_runs(id) ON DELETE CASCADE,
        source_id INTEGER NOT NULL REFERENCES folder_run_sources(id) ON DELETE CASCADE,
        item_id INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        created_at REAL NOT NULL,
        UNIQUE (run_id, source_id)
    )""",
    """CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at REAL NOT NULL,
        action TEXT NOT NULL,
        actor TEXT NOT NULL,
        base_id INTEGER,
        run_id INTEGER,
        attempt INTEGER,
        payload TEXT NOT NULL DEFAULT '{}'
    )""",
    "CREATE INDEX audit_log_run ON audit_log (run_id, id)",
    """CREATE UNIQUE INDEX audit_log_one_created ON audit_log (run_id)
    WHERE action = 'ingest.folder_run.created'""",
    """CREATE UNIQUE INDEX audit_log_one_started_per_attempt ON audit_log (run_id, attempt)
    WHERE action = 'ingest.folder_run.started'""",
    """CREATE UNIQUE INDEX audit_log_one_terminal ON audit_log (run_id)
    WHERE action IN ('ingest.folder_run.completed', 'ingest.folder_run.failed')""",
    """CREATE UNIQUE INDEX audit_log_one_revert ON audit_log (run_id)
    WHERE action = 'ingest.folder_run.reverted'""",
    """CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    """CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
)


# Migration ``folder_run_retry`` (frozen DDL): a failed run may go back to ``pending`` exactly when a
# person retries it (``retries`` goes up by one in the same update), and each retry may file its own one
# terminal entry (entries carry ``retry`` in their payload; none means 0). Nothing else moves backwards.
FOLDER_RUN_RETRY_DDL: tuple[str, ...] = (
    "ALTER TABLE folder_runs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0",
    "DROP TRIGGER folder_runs_status_moves_forward",
    """CREATE TRIGGER folder_runs_status_moves_forward BEFORE UPDATE OF status ON folder_runs
    WHEN NEW.status IS NOT OLD.status AND NOT (
        (OLD.status = 'pending' AND NEW.status IN ('running', 'failed'))
        OR (OLD.status = 'running' AND NEW.status IN ('completed', 'failed'))
        OR (OLD.status = 'completed' AND NEW.status = 'reverted')
        OR (OLD.status = 'failed' AND NEW.status = 'pending' AND NEW.retries = OLD.retries + 1))
    BEGIN SELECT RAISE(ABORT, 'illegal folder run status transition'); END""",
    """CREATE TRIGGER folder_runs_retries_only_with_a_retry BEFORE UPDATE OF retries ON folder_runs
    WHEN NEW.retries IS NOT OLD.retries AND NOT (
        OLD.status = 'failed' AND NEW.status = 'pending' AND NEW.retries = OLD.retries + 1)
    BEGIN SELECT RAISE(ABORT, 'a folder run''s retry count only goes up with a retry'); END""",
    "DROP INDEX audit_log_one_terminal",
    """CREATE UNIQUE INDEX audit_log_one_terminal ON audit_log
    (run_id, coalesce(json_extract(payload, '$.retry'), 0))
    WHERE action IN ('ingest.folder_run.completed', 'ingest.folder_run.failed')""",
    """CREATE UNIQUE INDEX audit_log_one_retried ON audit_log (run_id, json_extract(payload, '$.retry'))
    WHERE action = 'ingest.folder_run.retried'""",
)


# Migration ``folder_run_retry_of`` (frozen DDL): a failed run is retried as a *new* run linked to it
# (``retry_of``, at most one retry per failed run, fixed at creation); statuses move forward only again
# (the backwards ``failed → pending`` of the old in-place retry is gone). Runs retried in place before this
# migration keep their entries; their ``retries`` column is frozen with them.
FOLDER_RUN_RETRY_OF_DDL: tuple[str, ...] = (
    "ALTER TABLE folder_runs ADD COLUMN retry_of INTEGER REFERENCES folder_runs(id)",
    "CREATE UNIQUE INDEX folder_runs_one_retry ON folder_runs (retry_of) WHERE retry_of IS NOT NULL",
    """CREATE TRIGGER folder_runs_retry_of_immutable BEFORE UPDATE OF retry_of ON folder_runs
    WHEN NEW.retry_of IS NOT OLD.retry_of
    BEGIN SELECT RAISE(ABORT, 'a folder run''s retry link is fixed at creation'); END""",
    "DROP TRIGGER folder_runs_status_moves_forward",
    """CREATE TRIGGER folder_runs_status_moves_forward BEFORE UPDATE OF status ON folder_runs
    WHEN NEW.status IS NOT OLD.status AND NOT (
        (OLD.status = 'pending' AND NEW.status IN ('running', 'failed'))
        OR (OLD.status = 'running' AND NEW.status IN ('completed', 'failed'))
        OR (OLD.status = 'completed' AND NEW.status = 'reverted'))
    BEGIN SELECT RAISE(ABORT, 'illegal folder run status transition'); END""",
)

FOLDER_RUN_DEATHS_DDL: tuple[str, ...] = (
    """CREATE TABLE folder_run_in_flight (
        run_id INTEGER NOT NULL REFERENCES folder_runs(id) ON DELETE CASCADE,
        source_id INTEGER NOT NULL REFERENCES folder_run_sources(id) ON DELETE CASCADE,
        attempt INTEGER,
        deaths INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, source_id)
    )""",
)


# Migration ``0028_folder_run_cancelled`` (frozen DDL; the status CHECK is widened in place by the migration): a
# pending or running run may end ``cancelled``, a cancelled run may be reverted, and ``cancelled`` is one of the
# terminal entries a run files exactly one of.
FOLDER_RUN_CANCELLED_DDL: tuple[str, ...] = (
    "DROP TRIGGER folder_runs_status_moves_forward",
    """CREATE TRIGGER folder_runs_status_moves_forward BEFORE UPDATE OF status ON folder_runs
    WHEN NEW.status IS NOT OLD.status AND NOT (
        (OLD.status = 'pending' AND NEW.status IN ('running', 'failed', 'cancelled'))
        OR (OLD.status = 'running' AND NEW.status IN ('completed', 'failed', 'cancelled'))
        OR (OLD.status IN ('completed', 'cancelled') AND NEW.status = 'reverted'))
    BEGIN SELECT RAISE(ABORT, 'illegal folder run status transition'); END""",
    "DROP INDEX audit_log_one_terminal",
    """CREATE UNIQUE INDEX audit_log_one_terminal ON audit_log
    (run_id, coalesce(json_extract(payload, '$.retry'), 0))
    WHERE action IN ('ingest.folder_run.completed', 'ingest.folder_run.failed', 'ingest.folder_run.cancelled')""",
)
