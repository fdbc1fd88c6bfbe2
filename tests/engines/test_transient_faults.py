"""PostgreSQL's own "try the transaction again" answers are transient faults: a deadlock (40P01) and a
serialization failure (40001) end one transaction so the other can go on, and PostgreSQL's documentation asks
the application to retry it. Without that, one such answer under load failed a whole index job's items
``index_error`` (up to 512 of them) instead of trying the batch's write again a moment later.

Both are made for real here, on the session's loopback PostgreSQL, with two connections."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy import exc as sa_exc

from jobs.backoff import is_transient, retry_transient

pytestmark = pytest.mark.engines


def test_a_deadlock_is_transient_and_retried(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE pair (id int PRIMARY KEY, n int)"))
            conn.execute(text("INSERT INTO pair VALUES (1, 0), (2, 0)"))
        first_locked, second_locked = threading.Event(), threading.Event()
        failures: list[BaseException] = []

        def lock(first: int, second: int, mine: threading.Event, theirs: threading.Event) -> None:
            try:
                with engine.begin() as conn:
                    conn.execute(text("UPDATE pair SET n = n + 1 WHERE id = :i"), {"i": first})
                    mine.set()
                    theirs.wait(30)
                    conn.execute(text("UPDATE pair SET n = n + 1 WHERE id = :i"), {"i": second})
            except sa_exc.DBAPIError as exc:
                failures.append(exc)

        threads = [
            threading.Thread(target=lock, args=(1, 2, first_locked, second_locked)),
            threading.Thread(target=lock, args=(2, 1, second_locked, first_locked)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(failures) == 1  # PostgreSQL ended one of the two; the other committed
        assert "deadlock" in str(failures[0]).lower()
        assert is_transient(failures[0])

        tries: list[int] = []

        def once_deadlocked() -> str:
            tries.append(1)
            if len(tries) == 1:
                raise failures[0]
            return "written"

        assert retry_transient(once_deadlocked, sleep=lambda _s: None) == "written" and len(tries) == 2
    finally:
        engine.dispose()


def test_a_serialization_failure_is_transient(postgres_url: str) -> None:
    engine = create_engine(postgres_url, isolation_level="SERIALIZABLE")
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE tally (id int PRIMARY KEY, n int)"))
            conn.execute(text("INSERT INTO tally VALUES (1, 0)"))
        with engine.connect() as a, engine.connect() as b:
            a.begin()
            b.begin()
            assert a.execute(text("SELECT n FROM tally WHERE id = 1")).scalar_one() == 0
            assert b.execute(text("SELECT n FROM tally WHERE id = 1")).scalar_one() == 0
            a.execute(text("UPDATE tally SET n = 1 WHERE id = 1"))
            a.commit()
            with pytest.raises(sa_exc.DBAPIError) as raised:
                b.execute(text("UPDATE tally SET n = 2 WHERE id = 1"))
            b.rollback()
        assert "serializ" in str(raised.value).lower()
        assert is_transient(raised.value)
    finally:
        engine.dispose()


def test_a_real_error_is_still_raised_at_once(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    try:
        with pytest.raises(sa_exc.DBAPIError) as raised, engine.begin() as conn:
            conn.execute(text("SELECT * FROM no_such_table"))
        assert not is_transient(raised.value)
    finally:
        engine.dispose()
