"""``quire store grant ROLE reader|writer|admin``: a person's database role gets the rights its level needs on a
team store, on the tables there now and on the tables made later (a base's own vector, keyword and term-count
tables are created with the base).

* **reader**: ``SELECT`` on every table (search, list, status; opening a store at today's schema writes nothing).
* **writer**: reader + ``INSERT, UPDATE, DELETE`` and the sequences (``USAGE, SELECT, UPDATE``): adding, syncing,
  running folder runs, running a worker.
* **admin**: writer + ``CREATE`` on the schema, what creating a base needs (its tables, their triggers).

"Made later" is ``ALTER DEFAULT PRIVILEGES``, which PostgreSQL keys by the role that creates the table: the
defaults are set for the role running the grant (the store's owner, who made the schema) and for every admin
role this session may act for (a member of it, or a superuser), since an admin's bases are its own tables.
One an admin made before a grant is covered by the grant on existing tables; one it makes later when this
session could not set its defaults is listed under ``not_covered`` (grant again as a superuser).

The role is a plain PostgreSQL name (letters, digits, ``_``; it must exist) and is quoted by the driver's
identifier quoting in every statement: nothing a person types reaches SQL as text.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Connection, text

from knowledge.errors import InvalidInput, NotFound
from knowledge.store.database import Database

LEVELS = ("reader", "writer", "admin")
PLAIN_ROLE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_TABLES = {"reader": "SELECT", "writer": "SELECT, INSERT, UPDATE, DELETE", "admin": "SELECT, INSERT, UPDATE, DELETE"}
_SEQUENCES = {"reader": "SELECT", "writer": "USAGE, SELECT, UPDATE", "admin": "USAGE, SELECT, UPDATE"}


def check_role_name(role: str) -> str:
    """``role`` when it is a plain role name (lower-case letters, digits, ``_``, at most 63), else refused."""
    if not PLAIN_ROLE.fullmatch(role):
        raise InvalidInput(
            f"{role[:70]!r} is not a plain role name: use lower-case letters, digits and _ (at most 63), "
            "starting with a letter or _"
        )
    return role


def _quoted(conn: Connection, name: str) -> str:
    from psycopg import sql

    raw = conn.connection.dbapi_connection
    return sql.Identifier(name).as_string(raw)  # type: ignore[arg-type]


def grant(db: Database, role: str, level: str) -> dict[str, Any]:
    """Grant ``level``'s rights to ``role`` on the store's tables now and later (see the module docstring)."""
    check_role_name(role)
    if level not in LEVELS:
        raise InvalidInput(f"the level is one of {', '.join(LEVELS)}, not {level!r}")
    with db.write() as conn:
        if conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first() is None:
            raise NotFound(f"no role {role!r} on this server: create it first (CREATE ROLE {role} LOGIN PASSWORD …)")
        who = _quoted(conn, role)
        for statement in _grants(who, level):
            conn.exec_driver_sql(statement)
        creators, not_covered = _creators(conn, role if level == "admin" else None)
        for creator in creators:
            for statement in _defaults(_quoted(conn, creator), who, level):
                conn.exec_driver_sql(statement)
        if level == "admin":  # its bases' tables are its own: every role granted before must reach them too
            for grantee, granted in _granted_before(conn, role):
                for statement in _defaults(who, _quoted(conn, grantee), granted):
                    conn.exec_driver_sql(statement)
    return {"role": role, "level": level, "defaults_for": creators, "not_covered": not_covered}


def _grants(who: str, level: str) -> list[str]:
    statements = [
        f"GRANT USAGE ON SCHEMA public TO {who}",
        f"GRANT {_TABLES[level]} ON ALL TABLES IN SCHEMA public TO {who}",
        f"GRANT {_SEQUENCES[level]} ON ALL SEQUENCES IN SCHEMA public TO {who}",
    ]
    if level == "admin":
        statements.append(f"GRANT CREATE ON SCHEMA public TO {who}")
    return statements


def _defaults(creator: str, who: str, level: str) -> list[str]:
    prefix = f"ALTER DEFAULT PRIVILEGES FOR ROLE {creator} IN SCHEMA public GRANT"
    return [f"{prefix} {_TABLES[level]} ON TABLES TO {who}", f"{prefix} {_SEQUENCES[level]} ON SEQUENCES TO {who}"]


def _creators(conn: Connection, new_admin: str | None) -> tuple[list[str], list[str]]:
    """The roles that make tables whose defaults this grant sets (this session's role, the admins, the new
    admin), and the admins this session may not act for."""
    admins = [
        str(r[0])
        for r in conn.execute(
            text(
                "SELECT rolname FROM pg_roles WHERE has_schema_privilege(rolname, 'public', 'CREATE') "
                "AND NOT rolsuper AND rolname !~ '^pg_' AND rolname <> current_user ORDER BY rolname"
            )
        )
    ]
    if new_admin is not None and new_admin not in admins:
        admins.append(new_admin)
    may = {
        a
        for a in admins
        if conn.execute(text("SELECT pg_has_role(current_user, :a, 'MEMBER')"), {"a": a}).scalar()
        or conn.execute(text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).scalar()
    }
    creators = [str(conn.execute(text("SELECT current_user")).scalar())] + [a for a in admins if a in may]
    return creators, [a for a in admins if a not in may]


def _granted_before(conn: Connection, admin: str) -> list[tuple[str, str]]:
    """The roles this session's own defaults already grant to, with their level (for a new admin's tables)."""
    rows = conn.execute(
        text(
            "SELECT g.rolname, array_agg(DISTINCT a.privilege_type) FROM pg_default_acl d "
            "CROSS JOIN LATERAL aclexplode(d.defaclacl) a JOIN pg_roles g ON g.oid = a.grantee "
            "WHERE d.defaclrole = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND d.defaclobjtype = 'r' "
            "AND g.rolname <> :admin GROUP BY g.rolname ORDER BY g.rolname"
        ),
        {"admin": admin},
    ).all()
    return [(str(name), "writer" if "INSERT" in privileges else "reader") for name, privileges in rows]
