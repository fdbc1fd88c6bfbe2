"""The apsw DB-API adapter under SQLAlchemy: transactions, savepoints, errors, vec0, two writers."""

from __future__ import annotations

import struct
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select, text
from sqlalchemy import exc as sa_exc

from knowledge.errors import StoreError
from knowledge.store.database import Database, raw_apsw
from knowledge.store.migrations import MIGRATIONS, applied_migrations, migrate

md = MetaData()
things = Table("things", md, Column("id", Integer, primary_key=True), Column("name", String, unique=True))


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database.in_dir(tmp_path)
    with database.write() as conn:
        md.create_all(conn)
    return database


def names(db: Database) -> list[str]:
    with db.read() as conn:
        return [r.name for r in conn.execute(select(things).order_by(things.c.id))]


def test_commit_and_rollback(db: Database) -> None:
    with db.write() as conn:
        conn.execute(insert(things).values(name="kept"))
    with pytest.raises(RuntimeError), db.write() as conn:
        conn.execute(insert(things).values(name="dropped"))
        raw = raw_apsw(conn)
        assert raw.in_transaction
        raise RuntimeError("boom")
    assert names(db) == ["kept"]
    # Other connections never see an uncommitted row, so the line above alone would also pass if the
    # failed write's connection went back to the pool still inside its transaction (holding the write
    # lock). That connection itself must have rolled back: no transaction open, and the row gone.
    assert not raw.in_transaction
    assert [r[0] for r in raw.execute("SELECT name FROM things ORDER BY id")] == ["kept"]


def test_nested_write_is_a_savepoint(db: Database) -> None:
    with db.write() as conn:
        conn.execute(insert(things).values(name="outer"))
        with pytest.raises(ValueError), db.write() as inner:
            inner.execute(insert(things).values(name="inner"))
            raise ValueError("undo only the inner part")
        with db.write() as inner:
            inner.execute(insert(things).values(name="inner-kept"))
    assert names(db) == ["outer", "inner-kept"]


def test_explicit_sqlalchemy_savepoint(db: Database) -> None:
    with db.write() as conn:
        conn.execute(insert(things).values(name="a"))
        sp = conn.begin_nested()
        conn.execute(insert(things).values(name="b"))
        sp.rollback()
    assert names(db) == ["a"]


def test_constraint_error_maps_to_sqlalchemy_integrity_error(db: Database) -> None:
    with db.write() as conn:
        conn.execute(insert(things).values(name="dup"))
    with pytest.raises(sa_exc.IntegrityError) as info, db.write() as conn:
        conn.execute(insert(things).values(name="dup"))
    assert "UNIQUE" in str(info.value.orig)
    assert names(db) == ["dup"]


def test_syntax_error_maps_to_operational_error(db: Database) -> None:
    with pytest.raises(sa_exc.OperationalError), db.read() as conn:
        conn.execute(text("SELEC nonsense"))


def test_empty_result_still_describes_columns(db: Database) -> None:
    with db.read() as conn:
        result = conn.execute(select(things.c.id, things.c.name).where(things.c.id < 0))
        assert list(result.keys()) == ["id", "name"]
        assert result.all() == []


def test_rowcount_and_inserted_primary_key(db: Database) -> None:
    with db.write() as conn:
        pk = conn.execute(insert(things).values(name="x")).inserted_primary_key[0]
        conn.execute(insert(things).values(name="y"))
        count = conn.execute(things.update().values(name=things.c.name + "!")).rowcount
    assert pk == 1
    assert count == 2


def test_vec0_queries_through_sqlalchemy(db: Database) -> None:
    def blob(v: list[float]) -> bytes:
        return struct.pack(f"{len(v)}f", *v)

    with db.write() as conn:
        conn.execute(text("CREATE VIRTUAL TABLE v USING vec0(embedding float[3] distance_metric=cosine)"))
        for rowid, vec in [(1, [1, 0, 0]), (2, [0, 1, 0]), (3, [0.9, 0.1, 0])]:
            conn.execute(text("INSERT INTO v (rowid, embedding) VALUES (:r, :e)"), {"r": rowid, "e": blob(vec)})
    with db.read() as conn:
        rows = conn.execute(
            text("SELECT rowid, distance FROM v WHERE embedding MATCH :q AND k = 2 ORDER BY distance"),
            {"q": blob([1, 0, 0])},
        ).all()
    assert [r[0] for r in rows] == [1, 3]
    with pytest.raises(sa_exc.DatabaseError), db.write() as conn:
        conn.execute(text("INSERT INTO v (rowid, embedding) VALUES (:r, :e)"), {"r": 9, "e": blob([1, 2])})


def test_vec0_rows_roll_back_with_the_transaction(db: Database) -> None:
    with db.write() as conn:
        conn.execute(text("CREATE VIRTUAL TABLE v USING vec0(embedding float[2])"))
    with pytest.raises(RuntimeError), db.write() as conn:
        conn.execute(text("INSERT INTO v (rowid, embedding) VALUES (1, '[1, 0]')"))
        raise RuntimeError
    with db.read() as conn:
        assert conn.execute(text("SELECT count(*) FROM v")).scalar() == 0


def test_two_threads_writing(db: Database) -> None:
    errors: list[BaseException] = []

    def writer(prefix: str) -> None:
        try:
            for n in range(150):
                with db.write() as conn:
                    conn.execute(insert(things).values(name=f"{prefix}{n}"))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(p,)) for p in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(names(db)) == 300


def test_raw_apsw_is_the_same_transaction(db: Database) -> None:
    with db.write() as conn:
        raw_apsw(conn).execute("INSERT INTO things (name) VALUES ('via-apsw')")
        assert conn.execute(select(things.c.name)).scalar() == "via-apsw"
    assert names(db) == ["via-apsw"]
    # the rollback leg: a write that fails takes its raw apsw statements back with its SQLAlchemy ones
    with pytest.raises(RuntimeError, match="boom"), db.write() as conn:
        raw_apsw(conn).execute("INSERT INTO things (name) VALUES ('raw, rolled back')")
        conn.execute(insert(things).values(name="orm, rolled back"))
        assert sorted(names_in(conn)) == ["orm, rolled back", "raw, rolled back", "via-apsw"]
        raise RuntimeError("boom")
    assert names(db) == ["via-apsw"]


def names_in(conn: Any) -> list[str]:
    return [r.name for r in conn.execute(select(things))]


def test_wal_and_foreign_keys_are_on(db: Database) -> None:
    with db.read() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_busy_database_becomes_a_store_error(tmp_path: Path) -> None:
    import apsw

    db = Database.in_dir(tmp_path)
    blocker = apsw.Connection(str(db.path))
    blocker.execute("BEGIN IMMEDIATE")
    from knowledge.store import database as database_module

    original = database_module.BUSY_TIMEOUT_MS
    database_module.BUSY_TIMEOUT_MS = 50
    try:
        fast = Database(db.path)
        with pytest.raises(StoreError, match="busy"), fast.write():
            pass
    finally:
        database_module.BUSY_TIMEOUT_MS = original
        blocker.execute("ROLLBACK")


def test_migrations_are_recorded_and_idempotent(tmp_path: Path) -> None:
    db = Database.in_dir(tmp_path)
    first = migrate(db)
    assert first == [m.name for m in MIGRATIONS]
    assert migrate(db) == []
    with db.read() as conn:
        assert applied_migrations(conn) == [m.name for m in MIGRATIONS]
        tables = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"jobs", "task", "bases", "items", "chunks", "schema_migrations"} <= tables


def test_failed_migration_leaves_no_record(tmp_path: Path) -> None:
    from knowledge.store import migrations as mig

    def broken(conn: object) -> None:
        from sqlalchemy import Connection

        assert isinstance(conn, Connection)
        conn.exec_driver_sql("CREATE TABLE half_done (x INT)")
        raise RuntimeError("migration bug")

    db = Database.in_dir(tmp_path)
    migrate(db)
    mig.MIGRATIONS.append(mig.Migration("9999_broken", broken))
    try:
        with pytest.raises(RuntimeError):
            migrate(db)
    finally:
        mig.MIGRATIONS.pop()
    with db.read() as conn:
        assert "9999_broken" not in applied_migrations(conn)
        assert conn.exec_driver_sql("SELECT count(*) FROM sqlite_master WHERE name='half_done'").scalar() == 0
