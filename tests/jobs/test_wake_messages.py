"""A wake-up message is ``{"job": <id>}`` as JSON, written and read through huey's storage only: nothing
in the queue is ever unpickled, and whatever is not a wake-up is dropped with one warning that does not
echo it (issue 45 item 1). The crafted messages are written straight into the real ``task`` table."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import text

from jobs.transport import MAX_DROPS_PER_TAKE, job_id_of
from knowledge.runtime import Quire
from tests.support import jobtypes
from tests.support.pickles import touching_pickle


@pytest.fixture
def q(quire: Quire) -> Quire:
    jobtypes.register(quire)
    return quire


def push_raw(q: Quire, *messages: bytes, priority: float = 5.0) -> None:
    """What anyone able to write the queue could put there (ahead of Quire's own wake-ups)."""
    with q.db.write() as conn:
        for data in messages:
            conn.execute(
                text("INSERT INTO task (queue, data, priority) VALUES ('quire', :d, :p)"), {"d": data, "p": priority}
            )


def raw_messages(q: Quire) -> list[bytes]:
    with q.db.read() as conn:
        return [bytes(r[0]) for r in conn.execute(text("SELECT data FROM task ORDER BY id"))]


def test_every_message_quire_writes_is_a_json_job_id(q: Quire) -> None:
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.steps", {"steps": 1})
    q.transport.wake_now(job.job_id)
    assert raw_messages(q) == [f'{{"job": {job.job_id}}}'.encode()] * 2
    assert q.transport.next_job_id() == job.job_id


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"null",
        b"42",
        b'{"job": 0}',
        b'{"job": -3}',
        b'{"job": true}',
        b'{"job": 4.0}',
        b'{"job": "4"}',
        b'{"job": NaN}',
        b'{"job": 9223372036854775808}',
        b'{"job": 4, "run": "rm -rf ~"}',
        b'{"job": 4, "job": 5}',
        b'[{"job": 4}]',
        b'[["job", 4]]',
        b'{"job": 4}' + b" " * 64,
        '{"job": 4, "x": "\u00e9"}'.encode(),
        b"\x80\x04\x95",
    ],
)
def test_anything_but_a_positive_id_in_small_strict_json_is_not_a_wake_up(data: bytes) -> None:
    assert job_id_of(data) is None


def test_a_pickle_is_never_read(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    assert job_id_of(touching_pickle(marker)) is None
    assert not marker.exists()


def test_foreign_messages_are_dropped_with_one_warning_each_and_the_next_taken(
    q: Quire, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "unpickled"
    crafted = [touching_pickle(marker), b"garbage", b'{"job": -1}']
    push_raw(q, *crafted)
    with q.db.write() as conn:
        job = q.queue.enqueue(conn, "test.steps", {"steps": 1})
    with caplog.at_level(logging.WARNING, logger="jobs.transport"):
        assert q.transport.next_job_id() == job.job_id
    assert not marker.exists()
    dropped = [r for r in caplog.records if "not a Quire wake-up" in r.getMessage()]
    assert len(dropped) == len(crafted)
    assert not any(str(marker) in r.getMessage() or "garbage" in r.getMessage() for r in caplog.records)
    assert q.transport.pending_messages() == 0


def test_a_flooded_queue_hands_the_worker_back_to_the_jobs_table(q: Quire) -> None:
    push_raw(q, *[b"x"] * (MAX_DROPS_PER_TAKE + 5))
    assert q.transport.next_job_id() is None  # bounded: the worker goes on to scan the table
    assert q.transport.pending_messages() == 5
    assert q.transport.next_job_id() is None and q.transport.pending_messages() == 0


def test_no_huey_code_path_can_pickle_or_unpickle(q: Quire) -> None:
    serializer = q.transport.huey.serializer  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        serializer.deserialize(b"anything")
    with pytest.raises(TypeError):
        serializer.serialize({"job": 1})
