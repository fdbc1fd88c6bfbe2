"""Widening a CHECK constraint of a SQLite table in place, for the migrations that allow a new value."""

from __future__ import annotations

from sqlalchemy import Connection, text


def edit_check(conn: Connection, table: str, old: str, new: str) -> None:
    """Widen a CHECK constraint of ``table`` in place: ``old`` → ``new`` in its stored SQL.

    SQLite cannot alter a CHECK, and the usual table rebuild is unsafe here: with foreign keys on (they
    cannot be turned off inside the migration's transaction) ``DROP TABLE`` would cascade to the rows
    that reference it (every chunk, for ``items``). A CHECK constraint does not change the on-disk
    format, so SQLite's documented way is to edit the table's SQL in the schema table
    (``writable_schema``) and bump ``schema_version``, so every open connection re-reads it. A no-op
    when the constraint already reads ``new``; refuses a constraint that is not the frozen one.
    """
    query = text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :t")
    sql = conn.execute(query, {"t": table}).scalar_one()
    if new in sql:
        return
    if sql.count(old) != 1:
        raise RuntimeError(f"{table}: the CHECK constraint is not the frozen one; refusing to edit it")
    version = int(conn.execute(text("PRAGMA schema_version")).scalar_one())
    conn.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        conn.execute(
            text("UPDATE sqlite_master SET sql = :sql WHERE type = 'table' AND name = :t"),
            {"sql": sql.replace(old, new), "t": table},
        )
        conn.exec_driver_sql(f"PRAGMA schema_version = {version + 1}")
    finally:
        conn.exec_driver_sql("PRAGMA writable_schema = OFF")
    check = conn.execute(text("PRAGMA quick_check")).scalar_one()
    if check != "ok":
        raise RuntimeError(f"schema check failed after editing {table}: {check}")
