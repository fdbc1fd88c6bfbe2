"""The server says who: on a team store a person's name in a row is the connected role's, checked by PL/pgSQL.

Every column that names a person — an item's ``owner``, an audit entry's ``actor``, a folder run's
``approved_by``, a proposal's ``decided_by`` — is written by the client as ``person:<role>`` (the role the
server says connected, ``Quire.person_name``). Any writer could send another name, so a trigger checks it
against ``session_user`` (the login role; ``SET ROLE`` does not change it) before the row is stored.

* **A mismatch is refused, not overwritten** (SQLSTATE 42501, which the client reports as ``Forbidden``, exit
  5, with nothing written): rewriting the name would file the row anyway under a name the writer did not
  send, hiding that someone tried; a refusal leaves the attempt visible to the one who made it and keeps the
  stored row exactly what the client said.
* **Names that are not a person's pass**: ``system``, ``agent:…`` (an MCP agent, the base's ingest agent),
  ``NULL``. A worker connects with some person's role and files transitions as ``system``; an accepted
  proposal's items are owned by the agent that proposed them. None of these can put a person's name on a row.
  Anything that looks like a person (``person:``, in any case, with blanks) must be exactly
  ``person:`` || ``session_user``.
* **An item may carry its parent's owner**: a folder's files are owned by whoever owns the folder, and the
  worker that walks it (or applies its sync) may be another person's process. The parent's owner was itself
  checked when the parent was stored, so this names no one who did not add the folder.
* **The store's administrator passes** (a role that owns the table, or a superuser): it can disable any trigger
  anyway, so binding it would buy nothing, and it is the role that files others' names on purpose — an imported
  base's history, a repair. A person's own login is not the administrator (``docs/SECURITY.md``).

Every statement is safe to run again: a new store gets these with its baseline, one made before them through
migration ``0030_server_says_who``.
"""

from __future__ import annotations

from sqlalchemy import Connection

_PERSON_IS_SESSION = r"""CREATE OR REPLACE FUNCTION quire_person_is_session() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    named text := to_jsonb(NEW) ->> TG_ARGV[0];
    parent bigint;
BEGIN
    IF named IS NULL OR named !~* '^\s*person\s*:' OR named = 'person:' || session_user THEN
        RETURN NEW;
    END IF;
    IF TG_TABLE_NAME = 'items' THEN
        parent := (to_jsonb(NEW) ->> 'parent_id')::bigint;
        IF parent IS NOT NULL AND named = (SELECT owner FROM items WHERE id = parent) THEN
            RETURN NEW;
        END IF;
    END IF;
    IF pg_has_role(session_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION USING
        MESSAGE = TG_TABLE_NAME || '.' || TG_ARGV[0] || ' may name only the person connected (person:'
            || session_user || '), not ' || named || '; the server says who',
        ERRCODE = 'insufficient_privilege';
END $$"""

# (trigger, table, timing and event, WHEN condition or None, the column that names a person)
_TRIGGERS: tuple[tuple[str, str, str, str | None, str], ...] = (
    ("items_owner_is_session", "items", "BEFORE INSERT", None, "owner"),
    (
        "items_owner_change_is_session",
        "items",
        "BEFORE UPDATE OF owner",
        "NEW.owner IS DISTINCT FROM OLD.owner",
        "owner",
    ),
    ("audit_log_actor_is_session", "audit_log", "BEFORE INSERT", None, "actor"),
    ("folder_runs_approver_is_session", "folder_runs", "BEFORE INSERT", None, "approved_by"),
    (
        "agent_proposals_decider_is_session",
        "agent_proposals",
        "BEFORE UPDATE OF decided_by",
        "NEW.decided_by IS DISTINCT FROM OLD.decided_by",
        "decided_by",
    ),
)

PEOPLE_TRIGGERS: tuple[str, ...] = tuple(t[0] for t in _TRIGGERS)


def people_ddl() -> list[str]:
    """Every statement, in order (the function first); each may run again on a store that has it."""
    statements = [_PERSON_IS_SESSION]
    for name, table, event, condition, column in _TRIGGERS:
        when = f" WHEN ({condition})" if condition else ""
        statements.append(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        statements.append(
            f"CREATE TRIGGER {name} {event} ON {table} FOR EACH ROW{when} "
            f"EXECUTE FUNCTION quire_person_is_session('{column}')"
        )
    return statements


def create_people_guards(conn: Connection) -> None:
    """Create (or replace) the checks in the caller's write transaction (baseline and migration 0030)."""
    for ddl in people_ddl():
        conn.exec_driver_sql(ddl)
