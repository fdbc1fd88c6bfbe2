"""The test guard that keeps the GUI's main thread from opening write transactions (tests/app runs under it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.store.database import Database, WriteOnForbiddenThread
from tests.support import guard_caller


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database.in_dir(tmp_path)
    with database.write() as conn:
        conn.execute(text("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT)"))
    yield database
    Database.forbid_writes_on(None)
    database.dispose()


def names(db: Database) -> list[str]:
    with db.read() as conn:
        return [r[0] for r in conn.execute(text("SELECT name FROM things ORDER BY id"))]


def in_thread(fn: object) -> list[BaseException]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()  # type: ignore[operator]
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return errors


def test_a_write_on_the_forbidden_thread_raises_records_and_writes_nothing(db: Database) -> None:
    refused_before = len(Database.refused_writes())
    Database.forbid_writes_on(threading.current_thread())
    with pytest.raises(WriteOnForbiddenThread, match="write transaction was opened on"), db.write() as conn:
        conn.execute(text("INSERT INTO things (name) VALUES ('main')"))
    refused = Database.refused_writes()[refused_before:]
    assert len(refused) == 1 and "test_a_write_on_the_forbidden_thread" in refused[0]
    # other threads still write, and reads on the forbidden thread are untouched
    assert in_thread(lambda: guard_caller.write_one(db, "worker")) == []
    assert names(db) == ["worker"]


def test_lifting_the_guard_lets_the_thread_write_again(db: Database) -> None:
    Database.forbid_writes_on(threading.current_thread())
    with pytest.raises(WriteOnForbiddenThread):
        guard_caller.write_one(db, "refused")
    Database.forbid_writes_on(None)
    guard_caller.write_one(db, "allowed")
    assert names(db) == ["allowed"]


def test_called_from_refuses_only_writes_whose_stack_passes_through_that_module(db: Database) -> None:
    Database.forbid_writes_on(threading.current_thread(), called_from="tests.support.guard_caller")
    with db.write() as conn:  # this test module is not the named caller: allowed
        conn.execute(text("INSERT INTO things (name) VALUES ('direct')"))
    with pytest.raises(WriteOnForbiddenThread):
        guard_caller.write_one(db, "through the guarded module")
    assert in_thread(lambda: guard_caller.write_one(db, "other thread")) == []
    assert names(db) == ["direct", "other thread"]
