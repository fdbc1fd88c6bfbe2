"""What ``quire doctor`` reads of the database: integrity, journal mode, sqlite-vec and the migrations."""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import sqlalchemy

from knowledge.store.database import Database
from knowledge.store.migrations import applied_migrations


@dataclass(frozen=True)
class DatabaseHealth:
    integrity: str
    journal_mode: str
    sqlite: str
    apsw: str
    sqlite_vec: str
    sqlalchemy: str
    migrations: list[str]

    @property
    def ok(self) -> bool:
        return self.integrity == "ok"


def database_health(db: Database) -> DatabaseHealth:
    with db.read() as conn:
        integrity = conn.exec_driver_sql("PRAGMA integrity_check").scalar()
        vec_version = conn.exec_driver_sql("SELECT vec_version()").scalar()
        journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
        migrations = applied_migrations(conn)
    return DatabaseHealth(
        integrity=str(integrity),
        journal_mode=str(journal),
        sqlite=apsw.sqlite_lib_version(),
        apsw=apsw.apsw_version(),
        sqlite_vec=str(vec_version),
        sqlalchemy=sqlalchemy.__version__,
        migrations=list(migrations),
    )
