"""The settings door on a real, migrated database: what is stored comes back, an update replaces in place,
and a typed read of text that does not parse answers the caller's default instead of failing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.store import migrations, settings
from knowledge.store.database import Database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database.in_dir(tmp_path)
    migrations.migrate(database)
    yield database
    database.dispose()


def rows(db: Database, key: str) -> list[str]:
    with db.read() as conn:
        return [r[0] for r in conn.execute(text("SELECT value FROM settings WHERE key = :k"), {"k": key})]


def test_put_then_get_and_an_update_keeps_one_row(db: Database) -> None:
    with db.write() as conn:
        assert settings.get(conn, "t.word") is None
        settings.put(conn, "t.word", "first")
        settings.put(conn, "t.word", "second")
    with db.read() as conn:
        assert settings.get(conn, "t.word") == "second"
    assert rows(db, "t.word") == ["second"]


def test_remove_forgets_the_key(db: Database) -> None:
    with db.write() as conn:
        settings.put(conn, "t.gone", "x")
        settings.remove(conn, "t.gone")
        settings.remove(conn, "t.never")  # removing an unset key is not an error
    assert rows(db, "t.gone") == []


def test_typed_reads_answer_the_default_when_unset_or_unreadable(db: Database) -> None:
    with db.write() as conn:
        settings.put(conn, "t.int", "12")
        settings.put(conn, "t.float", "2.5")
        settings.put(conn, "t.bad", "twelve")
    with db.read() as conn:
        assert settings.get_int(conn, "t.int", 7) == 12
        assert settings.get_float(conn, "t.float", 7.0) == 2.5
        assert settings.get_int(conn, "t.bad", 7) == 7
        assert settings.get_float(conn, "t.bad", 7.5) == 7.5
        assert settings.get_int(conn, "t.unset", -1) == -1


def test_increment_counts_from_one_and_stores_text(db: Database) -> None:
    with db.write() as conn:
        settings.increment(conn, "t.count")
        settings.increment(conn, "t.count")
        settings.increment(conn, "t.count")
    assert rows(db, "t.count") == ["3"]
    with db.read() as conn:
        assert settings.get_int(conn, "t.count", 0) == 3


# A floor that another key sets, standing in for "one above the highest stored chunk id".
FLOOR = "(SELECT coalesce(max(CAST(value AS BIGINT)), 0) + 1 FROM settings WHERE key = 't.highest')"


def test_advance_claims_from_the_higher_of_counter_and_floor_and_at_least_reads_where_it_would_start(
    db: Database,
) -> None:
    with db.write() as conn:
        settings.put(conn, "t.highest", "9")  # unset counter: the floor (10) is where it starts
        assert settings.at_least(conn, "t.next", floor_sql=FLOOR) == 10
        assert settings.advance(conn, "t.next", 5, floor_sql=FLOOR) == 10
        assert settings.at_least(conn, "t.next", floor_sql=FLOOR) == 15  # the counter is above the floor
        assert settings.advance(conn, "t.next", 2, floor_sql=FLOOR) == 15
        settings.put(conn, "t.highest", "40")  # rows written past the counter: the floor wins
        assert settings.at_least(conn, "t.next", floor_sql=FLOOR) == 41
        assert settings.advance(conn, "t.next", 1, floor_sql=FLOOR) == 41
    assert rows(db, "t.next") == ["42"]
    with db.read() as conn:
        assert settings.at_least(conn, "t.next", floor_sql=FLOOR) == 42
