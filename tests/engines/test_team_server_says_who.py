"""The server says who: on a team store a person's gestures are audited under the role that connected, and a row
naming another person — an item's owner, an audit entry's actor, a run's approver — is refused by the server
(``knowledge/store/pg_people.py``), whatever the client sends.

Two real writer roles on the loopback server, ``alice`` and ``bob``, each granted the tables' rights.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import psycopg
import pytest

from knowledge.store.pg_people import PEOPLE_TRIGGERS
from tests.engines.test_team_cli import answered, run, secret_of
from tests.engines.test_team_people import make_role, rows

pytestmark = pytest.mark.engines

_roles = itertools.count(1)

_ITEM = (
    "INSERT INTO items (base_id, type, name, status, created_at, updated_at, owner) "
    "VALUES (%s, 'note', 'forged', 'completed', 0, 0, %s)"
)
_ENTRY = "INSERT INTO audit_log (at, action, actor, payload) VALUES (0, 'items.added', %s, '{}')"


def test_quire_audit_names_the_role_behind_an_add_and_a_delete(postgres_url: str, tmp_path: Path) -> None:
    n = next(_roles)
    secret, local = secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    answered(run("--store", postgres_url, "base", "create", "kb", "--precision", "fp32", data_dir=local), secret)
    alice_url = make_role(postgres_url, f"sw_alice_{n}", "pw-alice-2", writes=True)
    (tmp_path / "lone.md").write_text("A lighthouse keeper trims the wick before the fog rolls in.\n")

    added = answered(run("--store", alice_url, "add", "kb", str(tmp_path / "lone.md"), data_dir=local), "pw-alice-2")
    item = added["outcomes"][0]["item_id"]
    answered(run("--store", alice_url, "delete", "kb", str(item), data_dir=local), "pw-alice-2")

    shown = answered(run("--store", postgres_url, "audit", data_dir=local), secret)["entries"]
    mine = [(e["action"], e["actor"]) for e in shown if e["action"].startswith("items.")]
    assert mine == [("items.added", f"person:sw_alice_{n}"), ("items.deleted", f"person:sw_alice_{n}")], shown
    (created,) = [e for e in shown if e["action"] == "base.created"]
    assert created["actor"].startswith("person:") and created["actor"] != f"person:sw_alice_{n}"  # the store's owner
    added_entry = next(e for e in shown if e["action"] == "items.added")
    assert added_entry["payload"]["counts"] == {"created": 1}


def test_a_writer_cannot_file_a_row_under_another_persons_name(postgres_url: str, tmp_path: Path) -> None:
    n = next(_roles)
    secret, local = secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    answered(run("--store", postgres_url, "base", "create", "kb", "--precision", "fp32", data_dir=local), secret)
    make_role(postgres_url, f"sw_alice_{n}", "pw-alice-3", writes=True)
    bob_url = make_role(postgres_url, f"sw_bob_{n}", "pw-bob-3", writes=True)
    ((base_id,),) = rows(postgres_url, "SELECT id FROM bases")
    alice, bob = f"person:sw_alice_{n}", f"person:sw_bob_{n}"

    with psycopg.connect(bob_url, autocommit=True) as conn:
        for forged in (alice, f"Person: sw_alice_{n}"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="the server says who"):
                conn.execute(_ITEM, (base_id, forged))
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="the server says who"):
                conn.execute(_ENTRY, (forged,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO folder_runs (base_id, folder, idempotency_key, request_fingerprint, approved_by, "
                "status, declared_size, walked, created_at, updated_at) "
                "VALUES (%s, '/f', 'k', 'fp', %s, 'pending', 0, 0, 0, 0)",
                (base_id, alice),
            )
        # bob's own name, a name that is no person's, and no owner at all are his to write
        conn.execute(_ITEM, (base_id, bob))
        conn.execute(_ITEM, (base_id, None))
        conn.execute(_ENTRY, (bob,))
        conn.execute(_ENTRY, ("system",))
        conn.execute(_ENTRY, ("agent:desktop",))
        ((mine,),) = conn.execute("SELECT id FROM items WHERE owner = %s", (bob,)).fetchall()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE items SET owner = %s WHERE id = %s", (alice, mine))
        # a file inside a folder carries the folder's owner, whoever's worker walked it
        with psycopg.connect(postgres_url, autocommit=True) as owner:
            ((folder,),) = owner.execute(
                "INSERT INTO items (base_id, type, name, status, created_at, updated_at, owner) "
                "VALUES (%s, 'directory', 'hers', 'completed', 0, 0, %s) RETURNING id",
                (base_id, alice),
            ).fetchall()
        conn.execute(
            "INSERT INTO items (base_id, parent_id, root_id, type, name, status, created_at, updated_at, owner) "
            "VALUES (%s, %s, %s, 'file', 'inside', 'completed', 0, 0, %s)",
            (base_id, folder, folder, alice),
        )
    assert rows(postgres_url, "SELECT count(*) FROM audit_log WHERE actor ILIKE '%%alice%%'") == [(0,)]
    assert rows(postgres_url, "SELECT count(*) FROM items WHERE name = 'forged' AND owner ILIKE '%%alice%%'") == [(0,)]


def test_a_store_made_before_gets_the_checks_by_migration(postgres_url: str, tmp_path: Path) -> None:
    secret, local = secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for name, table in _trigger_tables(conn):
            conn.execute(f"DROP TRIGGER {name} ON {table}")
        conn.execute("DELETE FROM schema_migrations WHERE name = '0030_server_says_who'")
    answered(run("--store", postgres_url, "base", "list", data_dir=local), secret)  # opening migrates
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert sorted(name for name, _ in _trigger_tables(conn)) == sorted(PEOPLE_TRIGGERS)
        applied = conn.execute("SELECT applied_at FROM schema_migrations WHERE name = '0030_server_says_who'")
        assert applied.fetchone()[0] > time.time() - 600  # type: ignore[index]


def _trigger_tables(conn: psycopg.Connection) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    found = conn.execute(
        "SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal AND tgname = ANY(%s)",
        (list(PEOPLE_TRIGGERS),),
    ).fetchall()
    return [(str(a), str(b)) for a, b in found]
