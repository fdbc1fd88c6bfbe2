"""A team store's BM25 counts per base: the statements that create and fill them (used by
``knowledge.library.index_postgres`` when a base's tables are made, and by migration 0027 for bases made
before; kept in the store layer so the migration needs nothing above it).

terms_{fts}: per lexeme, how many rows hold it (df); the row of lexeme '' holds the row count (df) and the
sum of the rows' lengths (words). Kept by statement triggers on the keyword table, in the writing
transaction (writers hold the store's write lock, so the counts never race). Reading them is a primary-key
lookup per query term; counting them in SQL at query time read every matching row's heap page (1.5 s of a
4.6 s query at 420,000 chunks).
"""

from __future__ import annotations

from sqlalchemy import Connection

__all__ = ["create_term_counts", "drop_term_counts", "row_count", "terms_table"]


def terms_table(fts: str) -> str:
    return f"terms_{fts}"


def _count_change_sql(fts: str, rows: str, sign: str) -> str:
    terms = terms_table(fts)
    return (
        f"INSERT INTO {terms} (lexeme, df, words) "
        f"SELECT u.lexeme, {sign}count(*), 0 FROM {rows} AS r, unnest(r.tsv) AS u GROUP BY u.lexeme "
        f"UNION ALL SELECT '', {sign}count(*), {sign}coalesce(sum(r.words), 0) FROM {rows} AS r "
        f"ON CONFLICT (lexeme) DO UPDATE SET df = {terms}.df + EXCLUDED.df, words = {terms}.words + EXCLUDED.words"
    )


def create_term_counts(conn: Connection, fts: str, *, fill: bool) -> None:
    """The counts table of a keyword table and the triggers that keep it; ``fill``: count the rows already
    there (a base made before the counts were kept)."""
    terms = terms_table(fts)
    conn.exec_driver_sql(
        f"CREATE TABLE IF NOT EXISTS {terms} (lexeme text PRIMARY KEY, df bigint NOT NULL, words bigint NOT NULL)"
    )
    for event, rows, sign in (("INSERT", "added", ""), ("DELETE", "removed", "-")):
        function = f"{terms}_{event.lower()}"
        conn.exec_driver_sql(
            f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN {_count_change_sql(fts, rows, sign)}; RETURN NULL; END $$"
        )
        transition = "NEW TABLE AS added" if event == "INSERT" else "OLD TABLE AS removed"
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {function} ON {fts}")
        conn.exec_driver_sql(
            f"CREATE TRIGGER {function} AFTER {event} ON {fts} REFERENCING {transition} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
        )
    conn.exec_driver_sql(
        f"CREATE OR REPLACE FUNCTION {terms}_update() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION 'keyword rows are replaced, never updated' USING ERRCODE = '23000'; END $$"
    )
    conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {terms}_update ON {fts}")
    conn.exec_driver_sql(
        f"CREATE TRIGGER {terms}_update BEFORE UPDATE ON {fts} FOR EACH STATEMENT EXECUTE FUNCTION {terms}_update()"
    )
    if fill:
        conn.exec_driver_sql(f"DELETE FROM {terms}")
        conn.exec_driver_sql(_count_change_sql(fts, fts, ""))


def row_count(conn: Connection, fts: str) -> int:
    """How many rows the keyword table holds (a base's chunks), read from its counts: no row of it is read."""
    found = conn.exec_driver_sql(f"SELECT df FROM {terms_table(fts)} WHERE lexeme = ''").scalar()
    return int(found or 0)


def drop_term_counts(conn: Connection, fts: str) -> None:
    terms = terms_table(fts)
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {terms}")
    for suffix in ("insert", "delete", "update"):
        conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {terms}_{suffix}() CASCADE")
