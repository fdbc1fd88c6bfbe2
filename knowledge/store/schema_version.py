"""Where a store's schema stands against this Quire's migrations: current, older (migrations still to apply)
or newer (a migration this Quire does not know, applied by a newer Quire). A newer store is refused on
opening: this Quire's code would read and write tables it does not understand."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, text

from knowledge.errors import SchemaMismatch
from knowledge.store.database import Database


@dataclass(frozen=True)
class SchemaState:
    applied: list[str]
    unknown: list[str]  # applied by a newer Quire
    missing: list[str]  # this Quire's migrations not applied yet

    @property
    def last(self) -> str | None:
        return self.applied[-1] if self.applied else None

    @property
    def current(self) -> bool:
        return bool(self.applied) and not self.unknown and not self.missing

    def as_dict(self) -> dict[str, object]:
        return {
            "last": self.last,
            "current": self.current,
            "newer": self.unknown,
            "pending": self.missing,
        }


def schema_state(conn: Connection, known: list[str]) -> SchemaState:
    """The applied migrations (in name order) compared with ``known``, this Quire's list."""
    if conn.dialect.name == "postgresql":
        exists = conn.exec_driver_sql("SELECT to_regclass('schema_migrations') IS NOT NULL").scalar()
    else:
        exists = conn.exec_driver_sql(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        ).scalar()
    applied = [r[0] for r in conn.execute(text("SELECT name FROM schema_migrations ORDER BY name"))] if exists else []
    names = set(applied)
    return SchemaState(applied, [n for n in applied if n not in set(known)], [n for n in known if n not in names])


def refuse_newer(db: Database, known: list[str]) -> None:
    """Raise :class:`SchemaMismatch` when the store holds a migration this Quire (``known``) does not know."""
    with db.read() as conn:
        unknown = schema_state(conn, known).unknown
    if unknown:
        where = "team store" if db.dialect_name == "postgresql" else "data directory"
        raise SchemaMismatch(f"this {where} was upgraded by a newer Quire (migration {unknown[-1]}); upgrade Quire")


def refuse_older(db: Database, known: list[str]) -> None:
    """Raise :class:`SchemaMismatch` for a team store that holds bases at an older schema: only ``quire store
    upgrade`` migrates it (one deliberate step, not whichever client opens it first). A store without bases
    (just created, or being created by another process) is migrated on opening as before."""
    with db.read() as conn:
        state = schema_state(conn, known)
        if state.unknown or not state.applied or not state.missing:
            return
        if not conn.exec_driver_sql("SELECT EXISTS (SELECT 1 FROM bases)").scalar():
            return
    raise SchemaMismatch(
        f"this team store is at an older schema ({state.last}, {len(state.missing)} migration(s) behind this "
        "Quire): run `quire store upgrade`"
    )
