"""Migration 0033_items_live_file_source: one live file item per source path in a base, held by the schema.

A database that already holds duplicates (made here by raw SQL, as the folder-run orders left them before the
code kept one) migrates without losing data: per source the completed, last updated copy stays, the others
(with an archive's members) go ``deleting`` and the normal delete path (the repair scan's cleanup job) removes
them. Afterwards the database itself refuses a second live file item for a source, answered as a Conflict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from sqlalchemy import exc as sa_exc

from knowledge.errors import Conflict
from knowledge.lifecycle.identity import duplicate_sources
from knowledge.lifecycle.recovery import repair_deleting_roots
from knowledge.runtime import Quire
from knowledge.store import migrations as mig
from knowledge.store.database import Database
from knowledge.store.schema_identity import LIVE_FILE_SOURCE_INDEX
from tests.knowledge.helpers import drain, make_base
from tests.support.engine_fixtures import ENGINES, engine_quire
from tests.support.migrations import migrate_before

quire = pytest.fixture(params=ENGINES)(engine_quire)

MIGRATION = "0033_items_live_file_source"

# (id, parent, type, name, source_path, status, updated_at); base filled in. Ids from 1000: the base's own are low.
ROWS = [
    (1001, None, "directory", "d", "/d", "completed", 1.0),  # a folder root ...
    (1002, 1001, "file", "a.txt", "/d/a.txt", "completed", 10.0),  # ... its child, read before an edit
    (1003, None, "directory", "d", "/d", "completed", 1.0),  # a run's container for the same folder
    (1004, 1003, "file", "a.txt", "/d/a.txt", "completed", 20.0),  # the run's item, read after: stays
    (1005, 1003, "file", "b.zip", "/d/b.zip", "completed", 30.0),  # completed: stays
    (1006, 1001, "file", "b.zip", "/d/b.zip", "failed", 40.0),  # newer but failed: goes ...
    (1007, 1006, "file", "m.txt", None, "completed", 40.0),  # ... with its member
    (1008, None, "file", "c.txt", "/x/c.txt", "failed", 5.0),  # a tie: the higher id stays
    (1009, None, "file", "c.txt", "/x/c.txt", "failed", 5.0),
    (1010, 1001, "file", "a.txt", "/d/a.txt", "deleting", 50.0),  # already going: untouched
    (1011, None, "note", "n1", None, "completed", 1.0),  # notes have no source
    (1012, None, "note", "n2", None, "completed", 1.0),
]


def _insert(conn: Connection, base_id: int, rows: list[tuple[object, ...]]) -> None:
    for item_id, parent, kind, name, source, status, updated in rows:
        conn.execute(
            text(
                "INSERT INTO items (id, base_id, parent_id, root_id, type, name, source_path, status,"
                " created_at, updated_at) VALUES (:i, :b, :p, :r, :t, :n, :s, :st, 0, :u)"
            ),
            {"i": item_id, "b": base_id, "p": parent, "r": parent or item_id, "t": kind, "n": name, "s": source,
             "st": status, "u": updated},
        )  # fmt: skip


def _statuses(db: Database) -> dict[int, str]:
    with db.read() as conn:
        rows = conn.execute(text("SELECT id, status FROM items WHERE id > 1000 ORDER BY id")).all()
    return {int(r[0]): str(r[1]) for r in rows}


def _expected_after(before: dict[int, str]) -> dict[int, str]:
    return before | {1002: "deleting", 1006: "deleting", 1007: "deleting", 1008: "deleting"}


@pytest.fixture
def duplicates(quire: Quire) -> Iterator[tuple[Quire, int]]:
    """A base holding duplicates, in a store whose 0033 is still to apply (its index dropped, its record gone)."""
    base = make_base(quire)
    with quire.db.write() as conn:
        conn.exec_driver_sql(f"DROP INDEX {LIVE_FILE_SOURCE_INDEX}")
        conn.execute(text("DELETE FROM schema_migrations WHERE name = :n"), {"n": MIGRATION})
        _insert(conn, base.id, ROWS)
    yield quire, base.id


def test_the_migration_keeps_one_live_item_per_source_and_deletes_the_rest(duplicates: tuple[Quire, int]) -> None:
    quire, base_id = duplicates
    before = _statuses(quire.db)
    with quire.db.read() as conn:
        assert sorted(duplicate_sources(conn, base_id)) == ["/d/a.txt", "/d/b.zip", "/x/c.txt"]

    assert mig.migrate(quire.db) == [MIGRATION]

    assert _statuses(quire.db) == _expected_after(before)
    with quire.db.read() as conn:
        assert duplicate_sources(conn, base_id) == []
    assert mig.migrate(quire.db) == []  # applied once, recorded

    # the normal delete path takes the copies: the repair scan enqueues their cleanup, a worker runs it
    assert repair_deleting_roots(quire.queue, 100) >= 3
    drain(quire)
    assert set(_statuses(quire.db)) == {1001, 1003, 1004, 1005, 1009, 1011, 1012}


def test_the_database_refuses_a_second_live_item_for_a_source(duplicates: tuple[Quire, int]) -> None:
    quire, base_id = duplicates
    mig.migrate(quire.db)
    with pytest.raises(Conflict, match="one item per source") as refused, quire.db.write() as conn:
        _insert(conn, base_id, [(1020, 1001, "file", "a.txt", "/d/a.txt", "processing", 60.0)])
    assert isinstance(refused.value.__cause__, sa_exc.IntegrityError)  # the database's refusal, named
    with pytest.raises(Conflict), quire.db.write() as conn:  # whatever the status, and as a root too
        _insert(conn, base_id, [(1021, None, "file", "c.txt", "/x/c.txt", "skipped", 60.0)])
    with pytest.raises(Conflict), quire.db.write() as conn:  # a copy coming back to life
        conn.execute(text("UPDATE items SET status = 'failed' WHERE id = 1002"))
    with pytest.raises(Conflict), quire.db.write() as conn:  # another item moved onto the file's path
        conn.execute(text("UPDATE items SET source_path = '/d/a.txt' WHERE id = 1005"))
    assert _statuses(quire.db) == _expected_after({r[0]: str(r[5]) for r in ROWS})  # nothing written

    with quire.db.write() as conn:  # outside the key: members, notes, folders, rows being deleted, other bases
        _insert(
            conn,
            base_id,
            [
                (1030, 1004, "file", "m.txt", None, "completed", 60.0),
                (1031, None, "note", "n3", None, "completed", 60.0),
                (1032, None, "directory", "d", "/d", "completed", 60.0),
                (1033, 1001, "file", "a.txt", "/d/a.txt", "deleting", 60.0),
            ],
        )
    second = make_base(quire, "kb2")
    with quire.db.write() as conn:
        _insert(conn, second.id, [(1040, None, "file", "a.txt", "/d/a.txt", "completed", 60.0)])


def test_an_older_database_migrates_its_duplicates(tmp_path: Path) -> None:
    """The path a person's data directory takes: migrated through 0032, duplicates in it, then opened."""
    db = Database.in_dir(tmp_path)
    migrate_before(db, MIGRATION)
    with db.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO bases (id, name, model_id, dimension, precision, chunk_size, chunk_overlap, created_at,"
            " updated_at) VALUES (1, 'kb', 'm', 3, 'fp32', 256, 32, 0, 0)"
        )
        _insert(conn, 1, ROWS)
    before = _statuses(db)

    assert mig.migrate(db)[0] == MIGRATION  # then those after it

    assert _statuses(db) == _expected_after(before)
    with db.read() as conn:
        assert duplicate_sources(conn, 1) == []
        assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
