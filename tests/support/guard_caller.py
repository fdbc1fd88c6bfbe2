"""A module outside ``tests.store`` that opens a write, so the guard's ``called_from`` filter has a caller to match."""

from __future__ import annotations

from sqlalchemy import text

from knowledge.store.database import Database


def write_one(db: Database, name: str) -> None:
    with db.write() as conn:
        conn.execute(text("INSERT INTO things (name) VALUES (:n)"), {"n": name})
