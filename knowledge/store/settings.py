"""The one door to the ``settings`` table: every stored key/value goes in and out through here.

Values are text. Typed reads (``get_int``, ``get_float``) answer the caller's default when the key is unset
*or* its stored text does not parse, so a hand-edited or older value never stops a process starting; what
a value may be is judged where it is set (``knowledge.preferences`` for the dialog and ``quire config``).

Writes are one upsert statement (``INSERT … ON CONFLICT (key) DO UPDATE``), which SQLite and PostgreSQL
both speak, instead of delete-then-insert: one statement cannot leave the key missing between the two.
Each call runs in the caller's transaction; the caller chooses read or write.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

_UPSERT = text("INSERT INTO settings (key, value) VALUES (:k, :v) ON CONFLICT (key) DO UPDATE SET value = :v")
_INCREMENT = text(
    "INSERT INTO settings (key, value) VALUES (:k, '1') "
    "ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(settings.value AS INTEGER) + 1 AS TEXT)"
)


def get(conn: Connection, key: str) -> str | None:
    """The stored text, or ``None`` when the key is unset."""
    row = conn.execute(text("SELECT value FROM settings WHERE key = :k"), {"k": key}).first()
    return None if row is None else str(row[0])


def get_int(conn: Connection, key: str, default: int) -> int:
    raw = get(conn, key)
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def get_float(conn: Connection, key: str, default: float) -> float:
    raw = get(conn, key)
    try:
        return float(raw) if raw is not None else default
    except ValueError:
        return default


def put(conn: Connection, key: str, value: str) -> None:
    conn.execute(_UPSERT, {"k": key, "v": value})


def remove(conn: Connection, key: str) -> None:
    conn.execute(text("DELETE FROM settings WHERE key = :k"), {"k": key})


def advance(conn: Connection, key: str, count: int, *, floor_sql: str) -> int:
    """Advance an integer-valued key by ``count`` from itself or from ``floor_sql`` (a scalar subquery), whichever
    is higher, in one statement; answer where it started. An unset key starts at the floor."""
    start = _higher(_STORED_INT, floor_sql)
    statement = text(
        f"INSERT INTO settings (key, value) VALUES (:k, CAST({floor_sql} + :n AS TEXT)) "
        f"ON CONFLICT (key) DO UPDATE SET value = CAST({start} + :n AS TEXT) "
        "RETURNING CAST(value AS BIGINT) - :n"
    )
    return int(conn.execute(statement, {"k": key, "n": count}).scalar_one())


def at_least(conn: Connection, key: str, *, floor_sql: str) -> int:
    """Where :func:`advance` would start: the key or ``floor_sql``, whichever is higher, read in one statement."""
    stored = "(SELECT CAST(value AS BIGINT) FROM settings WHERE key = :k)"
    return int(conn.execute(text(f"SELECT {_higher(stored, floor_sql)}"), {"k": key}).scalar_one())


_STORED_INT = "CAST(settings.value AS BIGINT)"


def _higher(stored: str, floor_sql: str) -> str:
    # An unset key (NULL) compares as unknown, so the floor wins.
    return f"CASE WHEN {stored} > {floor_sql} THEN {stored} ELSE {floor_sql} END"


def increment(conn: Connection, key: str) -> None:
    """Add one to an integer-valued key (``1`` when unset), in one statement."""
    conn.execute(_INCREMENT, {"k": key})
