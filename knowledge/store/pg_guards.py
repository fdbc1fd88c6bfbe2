"""The guards SQLite's triggers keep, as PL/pgSQL triggers on a team store (frozen DDL, migration 0026).

The same rules, refused with the same sentences, raised as SQLSTATE 23000 (integrity constraint violation)
so SQLAlchemy reports an ``IntegrityError`` on both engines:

* a folder run's identity, size and job binding never change, its status moves only forward
  (pending → running | failed, running → completed | failed, completed → reverted), its owner attempt never
  goes back, its retry link and retry count are fixed;
* a run's manifest (``folder_run_sources``) is written when the run is created and never updated or deleted
  while its run exists;
* the audit log is append-only — no UPDATE, DELETE or TRUNCATE, whatever rights the role has (a role with
  DELETE on the table could otherwise rewrite history; only the table's owner may disable a trigger);
* a sync root's cursor only moves forward;
* an agent's proposal is decided once and never rewritten.

TRUNCATE fires no row trigger on PostgreSQL (SQLite has no TRUNCATE), so the append-only tables also refuse
it by a statement trigger. Every statement is safe to run again (``create_guards`` in the baseline of a new
store and in migration 0026 of one made before it).

Migration 0028 (:data:`FOLDER_RUN_CANCELLED_PG_DDL`, run after the baseline on every store) widens the status
rule as SQLite's does: pending | running → cancelled, cancelled → reverted; ``cancelled`` is a terminal entry.
"""

from __future__ import annotations

from sqlalchemy import Connection

# one function raises the trigger's own sentence (its argument) for every guard whose test fits in WHEN
_REFUSE = """CREATE OR REPLACE FUNCTION quire_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = TG_ARGV[0], ERRCODE = 'integrity_constraint_violation';
END $$"""

# the manifest's two guards read the run (a subquery, which WHEN cannot hold)
_SOURCES_FIXED = """CREATE OR REPLACE FUNCTION quire_run_sources_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT job_id FROM folder_runs WHERE id = NEW.run_id) IS NOT NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'a folder run''s manifest is fixed when the run is created',
            ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$"""

# a manifest row goes only with its run (the cascade of a run's delete, which is already gone then)
_SOURCES_KEPT = """CREATE OR REPLACE FUNCTION quire_run_sources_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM folder_runs WHERE id = OLD.run_id) THEN
        RAISE EXCEPTION USING MESSAGE = 'a folder run''s manifest is immutable',
            ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN OLD;
END $$"""

_IDENTITY = (
    "NEW.id IS DISTINCT FROM OLD.id OR NEW.base_id IS DISTINCT FROM OLD.base_id"
    " OR NEW.folder IS DISTINCT FROM OLD.folder OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key"
    " OR NEW.request_fingerprint IS DISTINCT FROM OLD.request_fingerprint"
    " OR NEW.approved_by IS DISTINCT FROM OLD.approved_by OR NEW.declared_size IS DISTINCT FROM OLD.declared_size"
    " OR NEW.walked IS DISTINCT FROM OLD.walked OR NEW.created_at IS DISTINCT FROM OLD.created_at"
    " OR (OLD.job_id IS NOT NULL AND NEW.job_id IS DISTINCT FROM OLD.job_id)"
)
_FORWARD = (
    "NEW.status IS DISTINCT FROM OLD.status AND NOT ("
    "(OLD.status = 'pending' AND NEW.status IN ('running', 'failed'))"
    " OR (OLD.status = 'running' AND NEW.status IN ('completed', 'failed'))"
    " OR (OLD.status = 'completed' AND NEW.status = 'reverted'))"
)
_PROPOSAL_FROZEN = (
    "OLD.status <> 'pending' OR NEW.status = 'pending'"
    " OR NEW.kind IS DISTINCT FROM OLD.kind OR NEW.base_id IS DISTINCT FROM OLD.base_id"
    " OR NEW.proposed_by IS DISTINCT FROM OLD.proposed_by OR NEW.folder IS DISTINCT FROM OLD.folder"
    " OR NEW.note_text IS DISTINCT FROM OLD.note_text OR NEW.preview IS DISTINCT FROM OLD.preview"
    " OR NEW.created_at IS DISTINCT FROM OLD.created_at"
)

# (name, table, timing and event, WHEN condition or None, function call)
_TRIGGERS: tuple[tuple[str, str, str, str | None, str], ...] = (
    (
        "folder_runs_identity_immutable",
        "folder_runs",
        "BEFORE UPDATE",
        _IDENTITY,
        "quire_refuse('a folder run''s identity, size and job binding are immutable')",
    ),
    (
        "folder_runs_status_moves_forward",
        "folder_runs",
        "BEFORE UPDATE OF status",
        _FORWARD,
        "quire_refuse('illegal folder run status transition')",
    ),
    (
        "folder_runs_owner_monotonic",
        "folder_runs",
        "BEFORE UPDATE OF owner_attempt",
        "OLD.owner_attempt IS NOT NULL AND (NEW.owner_attempt IS NULL OR NEW.owner_attempt < OLD.owner_attempt)",
        "quire_refuse('a folder run''s owner attempt never goes back')",
    ),
    (
        "folder_runs_retries_only_with_a_retry",
        "folder_runs",
        "BEFORE UPDATE OF retries",
        "NEW.retries IS DISTINCT FROM OLD.retries AND NOT ("
        "OLD.status = 'failed' AND NEW.status = 'pending' AND NEW.retries = OLD.retries + 1)",
        "quire_refuse('a folder run''s retry count only goes up with a retry')",
    ),
    (
        "folder_runs_retry_of_immutable",
        "folder_runs",
        "BEFORE UPDATE OF retry_of",
        "NEW.retry_of IS DISTINCT FROM OLD.retry_of",
        "quire_refuse('a folder run''s retry link is fixed at creation')",
    ),
    (
        "folder_run_sources_no_update",
        "folder_run_sources",
        "BEFORE UPDATE",
        None,
        "quire_refuse('a folder run''s manifest is immutable')",
    ),
    ("folder_run_sources_no_delete", "folder_run_sources", "BEFORE DELETE", None, "quire_run_sources_kept()"),
    ("folder_run_sources_fixed_at_creation", "folder_run_sources", "BEFORE INSERT", None, "quire_run_sources_fixed()"),
    ("audit_log_no_update", "audit_log", "BEFORE UPDATE", None, "quire_refuse('the audit log is append-only')"),
    ("audit_log_no_delete", "audit_log", "BEFORE DELETE", None, "quire_refuse('the audit log is append-only')"),
    (
        "sync_roots_cursor_forward",
        "sync_roots",
        "BEFORE UPDATE OF cursor_generation",
        "NEW.cursor_generation < OLD.cursor_generation",
        "quire_refuse('a sync cursor only moves forward')",
    ),
    (
        "agent_proposals_frozen",
        "agent_proposals",
        "BEFORE UPDATE",
        _PROPOSAL_FROZEN,
        "quire_refuse('a proposal is decided once and never rewritten')",
    ),
)

# TRUNCATE passes every row trigger: the tables whose rows may never go are guarded per statement too
_NO_TRUNCATE: tuple[tuple[str, str], ...] = (
    ("audit_log_no_truncate", "audit_log"),
    ("folder_run_sources_no_truncate", "folder_run_sources"),
)
_TRUNCATE_REFUSAL = {
    "audit_log": "the audit log is append-only",
    "folder_run_sources": "a folder run''s manifest is immutable",
}


def guard_ddl() -> list[str]:
    """Every statement, in order (functions first); each may run again on a store that has it."""
    statements = [_REFUSE, _SOURCES_FIXED, _SOURCES_KEPT]
    for name, table, event, condition, call in _TRIGGERS:
        when = f" WHEN ({condition})" if condition else ""
        statements.append(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        statements.append(f"CREATE TRIGGER {name} {event} ON {table} FOR EACH ROW{when} EXECUTE FUNCTION {call}")
    for name, table in _NO_TRUNCATE:
        statements.append(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        statements.append(
            f"CREATE TRIGGER {name} BEFORE TRUNCATE ON {table} FOR EACH STATEMENT "
            f"EXECUTE FUNCTION quire_refuse('{_TRUNCATE_REFUSAL[table]}')"
        )
    return statements


def create_guards(conn: Connection) -> None:
    """Create (or replace) every guard in the caller's write transaction."""
    for ddl in guard_ddl():
        conn.exec_driver_sql(ddl)


GUARD_TRIGGERS: tuple[str, ...] = tuple(t[0] for t in _TRIGGERS) + tuple(t[0] for t in _NO_TRUNCATE)


# Migration 0028_folder_run_cancelled on a team store (frozen; each statement safe to run again)
FOLDER_RUN_CANCELLED_PG_DDL: tuple[str, ...] = (
    "DROP TRIGGER IF EXISTS folder_runs_status_moves_forward ON folder_runs",
    "CREATE TRIGGER folder_runs_status_moves_forward BEFORE UPDATE OF status ON folder_runs FOR EACH ROW WHEN ("
    "NEW.status IS DISTINCT FROM OLD.status AND NOT ("
    "(OLD.status = 'pending' AND NEW.status IN ('running', 'failed', 'cancelled'))"
    " OR (OLD.status = 'running' AND NEW.status IN ('completed', 'failed', 'cancelled'))"
    " OR (OLD.status IN ('completed', 'cancelled') AND NEW.status = 'reverted'))"
    ") EXECUTE FUNCTION quire_refuse('illegal folder run status transition')",
    "DROP INDEX IF EXISTS audit_log_one_terminal",
    "CREATE UNIQUE INDEX audit_log_one_terminal ON audit_log (run_id, (coalesce(payload::jsonb ->> 'retry', '0'))) "
    "WHERE action IN ('ingest.folder_run.completed', 'ingest.folder_run.failed', 'ingest.folder_run.cancelled')",
)
