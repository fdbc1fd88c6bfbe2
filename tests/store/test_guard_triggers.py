"""The database's own guards, on both engines: SQLite's triggers and their PL/pgSQL twins on a team store.

Each statement here is one a role with plain INSERT/UPDATE/DELETE rights could send; the store must refuse it
with the guard's sentence, as an integrity error, and keep the row as it was. Nothing is indexed (no worker
runs), so the PostgreSQL half stays quick.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from knowledge import folder_runs, sync
from knowledge.agents import proposals
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.principal import Principal, acting_as
from knowledge.runtime import Quire
from knowledge.store.migrations import migrate
from knowledge.store.postgres import PostgresDatabase
from tests.folder_runs.helpers import PERSON, make_base, make_docs
from tests.support.engine_fixtures import ENGINES, engine_quire

quire = pytest.fixture(params=ENGINES)(engine_quire)  # every test here runs on SQLite and on PostgreSQL


def refused(quire: Quire, sql: str, match: str, **params: object) -> None:
    with pytest.raises(sa_exc.IntegrityError, match=match), quire.db.write() as conn:
        conn.execute(text(sql), params)


def allowed(quire: Quire, sql: str, **params: object) -> None:
    with quire.db.write() as conn:
        conn.execute(text(sql), params)


def scalar(quire: Quire, sql: str, **params: object) -> object:
    with quire.db.read() as conn:
        return conn.execute(text(sql), params).scalar_one()


@pytest.fixture
def run_id(quire: Quire, tmp_path: Path) -> int:
    """A pending folder run of three sources, its job enqueued (nothing runs it)."""
    make_base(quire)
    return folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "docs", 3), key="k").run_id


def test_a_runs_identity_and_manifest_never_change(quire: Quire, run_id: int) -> None:
    identity = "identity, size and job binding are immutable"
    for column, value in (("folder", "'/elsewhere'"), ("declared_size", "99"), ("approved_by", "'person:eve'")):
        refused(quire, f"UPDATE folder_runs SET {column} = {value} WHERE id = :r", identity, r=run_id)
    refused(quire, "UPDATE folder_runs SET job_id = job_id + 1 WHERE id = :r", identity, r=run_id)
    refused(quire, "UPDATE folder_runs SET retry_of = :r WHERE id = :r", "retry link is fixed", r=run_id)
    refused(quire, "UPDATE folder_runs SET retries = 1 WHERE id = :r", "retry count only goes up", r=run_id)
    manifest = "manifest is immutable"
    refused(quire, "UPDATE folder_run_sources SET content_sha256 = 'x' WHERE run_id = :r", manifest, r=run_id)
    refused(quire, "DELETE FROM folder_run_sources WHERE run_id = :r", manifest, r=run_id)
    refused(
        quire,
        "INSERT INTO folder_run_sources (run_id, ordinal, relative_path, size, content_sha256, approved_by) "
        "VALUES (:r, 99, 'late.txt', 1, 'x', 'person:ada')",
        "fixed when the run is created",
        r=run_id,
    )
    assert scalar(quire, "SELECT count(*) FROM folder_run_sources WHERE run_id = :r", r=run_id) == 3
    assert scalar(quire, "SELECT declared_size FROM folder_runs WHERE id = :r", r=run_id) != 99


def test_a_runs_status_and_owner_only_move_forward(quire: Quire, run_id: int) -> None:
    illegal = "illegal folder run status transition"
    refused(quire, "UPDATE folder_runs SET status = 'completed' WHERE id = :r", illegal, r=run_id)  # skips running
    allowed(quire, "UPDATE folder_runs SET status = 'running', owner_attempt = 2 WHERE id = :r", r=run_id)
    refused(quire, "UPDATE folder_runs SET status = 'pending' WHERE id = :r", illegal, r=run_id)
    refused(quire, "UPDATE folder_runs SET owner_attempt = 1 WHERE id = :r", "owner attempt never goes back", r=run_id)
    refused(quire, "UPDATE folder_runs SET owner_attempt = NULL WHERE id = :r", "never goes back", r=run_id)
    allowed(quire, "UPDATE folder_runs SET owner_attempt = 3, updated_at = 1 WHERE id = :r", r=run_id)
    allowed(quire, "UPDATE folder_runs SET status = 'completed' WHERE id = :r", r=run_id)
    refused(quire, "UPDATE folder_runs SET status = 'failed' WHERE id = :r", illegal, r=run_id)
    allowed(quire, "UPDATE folder_runs SET status = 'reverted' WHERE id = :r", r=run_id)
    assert scalar(quire, "SELECT status FROM folder_runs WHERE id = :r", r=run_id) == "reverted"


def test_the_audit_log_is_append_only_even_to_a_role_that_may_delete(quire: Quire, run_id: int) -> None:
    entries = scalar(quire, "SELECT count(*) FROM audit_log")
    assert entries  # the run's created entry
    refused(quire, "UPDATE audit_log SET actor = 'someone else'", "append-only")
    refused(quire, "DELETE FROM audit_log", "append-only")
    if isinstance(quire.db, PostgresDatabase):  # TRUNCATE passes row triggers: refused by its own
        refused(quire, "TRUNCATE audit_log", "append-only")
        refused(quire, "TRUNCATE folder_run_sources CASCADE", "manifest is immutable")
    assert scalar(quire, "SELECT count(*) FROM audit_log") == entries
    assert scalar(quire, "SELECT count(*) FROM audit_log WHERE actor = 'someone else'") == 0


def test_a_manifest_goes_with_its_run_only(quire: Quire, run_id: int) -> None:
    """Once the run is gone its manifest may go (SQLite's cascade; a team store's tables carry no foreign
    keys, so there the rows are deleted after the run); while it exists, nothing may delete them."""
    for table in ("folder_run_outcomes", "ingest_batches", "folder_run_in_flight"):
        allowed(quire, f"DELETE FROM {table} WHERE run_id = :r", r=run_id)
    allowed(quire, "DELETE FROM folder_runs WHERE id = :r", r=run_id)
    allowed(quire, "DELETE FROM folder_run_sources WHERE run_id = :r", r=run_id)
    assert scalar(quire, "SELECT count(*) FROM folder_run_sources WHERE run_id = :r", r=run_id) == 0


def test_a_sync_cursor_only_moves_forward(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = operations.add_items(quire, "kb", [PathInput(make_docs(tmp_path / "synced", 1))]).created[0]
    with acting_as(PERSON):
        root = sync.enable_sync(quire, "kb", folder)
    allowed(quire, "UPDATE sync_roots SET scan_generation = 5, cursor_generation = 4 WHERE id = :i", i=root.id)
    refused(quire, "UPDATE sync_roots SET cursor_generation = 3 WHERE id = :i", "only moves forward", i=root.id)
    allowed(quire, "UPDATE sync_roots SET cursor_generation = 5 WHERE id = :i", i=root.id)
    assert scalar(quire, "SELECT cursor_generation FROM sync_roots WHERE id = :i", i=root.id) == 5


def test_a_proposal_is_decided_once(quire: Quire) -> None:
    make_base(quire)
    note = proposals.propose_note(quire, Principal.agent("claude"), "kb", "keep the receipts")
    frozen = "decided once and never rewritten"
    refused(quire, "UPDATE agent_proposals SET preview = '{}' WHERE id = :i", frozen, i=note.id)
    refused(quire, "UPDATE agent_proposals SET status = 'pending' WHERE id = :i", frozen, i=note.id)
    proposals.dismiss_proposal(quire, PERSON, note.id)
    refused(quire, "UPDATE agent_proposals SET status = 'accepted' WHERE id = :i", frozen, i=note.id)
    assert scalar(quire, "SELECT status FROM agent_proposals WHERE id = :i", i=note.id) == "dismissed"


@pytest.mark.engines
def test_a_team_store_made_before_its_guards_gets_them_by_migration(
    postgres_url: str, data_dir: Path, tmp_path: Path
) -> None:
    from knowledge.compose import open_team_quire
    from knowledge.store.pg_guards import GUARD_TRIGGERS

    store = open_team_quire(postgres_url, data_dir=data_dir)
    try:
        with store.db.write() as conn:  # the store as a release before the guards left it
            for name, table in conn.execute(
                text("SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal")
            ).all():
                conn.exec_driver_sql(f"DROP TRIGGER {name} ON {table}")
            conn.execute(text("DELETE FROM schema_migrations WHERE name = '0026_team_guards'"))
        allowed(store, "INSERT INTO audit_log (at, action, actor, payload) VALUES (1, 'test', 'person:ada', '{}')")
        allowed(store, "DELETE FROM audit_log")  # unguarded: what the migration closes
        assert migrate(store.db) == ["0026_team_guards"]
        with store.db.read() as conn:
            present = {r[0] for r in conn.execute(text("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal"))}
        assert present == set(GUARD_TRIGGERS)
        allowed(store, "INSERT INTO audit_log (at, action, actor, payload) VALUES (1, 'test', 'person:ada', '{}')")
        refused(store, "DELETE FROM audit_log", "append-only")
    finally:
        store.close()


def test_a_run_may_end_cancelled_and_then_only_be_reverted(quire: Quire, run_id: int) -> None:
    illegal = "illegal folder run status transition"
    allowed(quire, "UPDATE folder_runs SET status = 'running', owner_attempt = 1 WHERE id = :r", r=run_id)
    allowed(quire, "UPDATE folder_runs SET status = 'cancelled' WHERE id = :r", r=run_id)
    for status in ("pending", "running", "completed", "failed"):
        refused(quire, f"UPDATE folder_runs SET status = '{status}' WHERE id = :r", illegal, r=run_id)
    terminal = "INSERT INTO audit_log (at, action, actor, run_id, payload) VALUES (1, :a, 'system', :r, '{}')"
    allowed(quire, terminal, a="ingest.folder_run.cancelled", r=run_id)
    for action in ("ingest.folder_run.cancelled", "ingest.folder_run.completed", "ingest.folder_run.failed"):
        refused(quire, terminal, "(?i)unique", a=action, r=run_id)  # one terminal entry, cancelled among them
    allowed(quire, "UPDATE folder_runs SET status = 'reverted' WHERE id = :r", r=run_id)
    assert scalar(quire, "SELECT status FROM folder_runs WHERE id = :r", r=run_id) == "reverted"
