"""Executing a run: dispositions, attribution, hand-back, faults, read entries, and two attempts at once."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from jobs.runtime import Worker
from knowledge import folder_runs
from knowledge.folder_runs import commit, execute
from knowledge.ingest import walk
from knowledge.library import audit
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import wait_until
from tests.folder_runs.helpers import (
    PERSON,
    assert_commit_entries_count_the_ledger,
    chmod_unreadable_check,
    doc_text,
    drain,
    entries,
    make_base,
    make_docs,
    row_counts,
    rows,
    scalar,
)
from tests.support.engine_fixtures import ENGINES, engine_quire, second_session
from tests.support.files import write_tree

quire = pytest.fixture(params=ENGINES)(engine_quire)  # every test here runs on SQLite and on PostgreSQL


def dispositions(quire: Quire, run_id: int) -> dict[str, tuple[str, str | None]]:
    return {s.relative_path: (s.disposition, s.reason) for s in folder_runs.show_run(quire, run_id).sources}


def test_each_source_is_judged_when_it_is_reached(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    outside = write_tree(tmp_path / "outside", {"escape.txt": doc_text(40)})
    folder = write_tree(
        tmp_path / "f",
        {
            "keep.txt": doc_text(1),
            "gone.txt": doc_text(2),
            "changed.txt": doc_text(3),
            "ignored.txt": doc_text(4),
            "moved/escape.txt": doc_text(40),
            "twin-a.txt": doc_text(5),
            "twin-b.txt": doc_text(5),
            "empty.txt": "",
            "locked/inner.txt": doc_text(6),
        },
    )
    started = folder_runs.start_run(quire, PERSON, "kb", folder, key="k")
    # The world changes between the preview and the run reaching each source.
    (folder / "gone.txt").unlink()
    (folder / "changed.txt").write_text("rewritten after the preview\n", encoding="utf-8")
    (folder / ".quireignore").write_text("ignored.txt\n", encoding="utf-8")
    (folder / "moved" / "escape.txt").unlink()
    (folder / "moved").rmdir()
    (folder / "moved").symlink_to(outside)  # its folder now leads out of the run root
    os.chmod(folder / "locked", 0)
    monkeypatch.setattr(walk, "is_readable_dir", chmod_unreadable_check)
    try:
        drain(quire)
    finally:
        os.chmod(folder / "locked", 0o755)

    got = dispositions(quire, started.run_id)
    assert {k: v[0] for k, v in got.items()} == {
        "keep.txt": "committed",
        "gone.txt": "source_unavailable",
        "changed.txt": "source_unavailable",
        "ignored.txt": "excluded",
        "moved/escape.txt": "outside_run_root",
        "twin-a.txt": "committed",
        "twin-b.txt": "already_covered",
        "empty.txt": "skipped",  # by design (issue 12): the items' word, not rejected
        "locked/inner.txt": "source_unavailable",
    }
    assert got["changed.txt"][1] == "its content changed since the preview"
    assert got["ignored.txt"][1] == "excluded by .quireignore"
    assert got["empty.txt"][1] == "empty: file is empty"
    assert got["locked/inner.txt"][1] == "a folder on its path cannot be read"

    summary = folder_runs.show_run(quire, started.run_id).summary
    assert summary.run.status == "completed"
    assert summary.counts["committed"] == 2 and summary.counts["rejected"] == 0 and summary.counts["skipped"] == 7
    log = entries(quire, started.run_id)
    assert [e.action for e in log] == [
        audit.RUN_CREATED,
        audit.RUN_STARTED,
        audit.BATCH_COMMITTED,  # keep.txt
        audit.WALK_UNREADABLE,  # the walk met "locked" (a read entry)
        audit.BATCH_COMMITTED,  # twin-a.txt
        audit.RUN_COMPLETED,
    ]
    completed = log[-1]
    assert completed.payload["counts"]["committed"] == 2 == scalar(quire, "SELECT count(*) FROM ingest_batches")
    assert completed.payload["size"] == 9 and completed.attempt == 1 and completed.actor == audit.SYSTEM_ACTOR
    for entry in log:
        assert "attempt" in entry.payload and "size" in entry.payload and "counts" in entry.payload
        assert not {"item_id", "batch_id", "manifest", "sources", "paths"} & set(entry.payload)
    assert {e.actor for e in log} == {PERSON.label, audit.SYSTEM_ACTOR, "ingest-agent"}
    assert [e.actor for e in log if e.action == audit.BATCH_COMMITTED] == ["ingest-agent", "ingest-agent"]
    assert assert_commit_entries_count_the_ledger(quire, started.run_id) == 2  # skips before them counted
    walked = next(e for e in log if e.action == audit.WALK_UNREADABLE)  # filed before locked/inner.txt settled
    settled_before = scalar(
        quire,
        "SELECT count(*) FROM folder_run_outcomes WHERE run_id = :r AND id < (SELECT o.id FROM folder_run_outcomes o "
        "JOIN folder_run_sources s ON s.id = o.source_id WHERE s.relative_path = 'locked/inner.txt' AND o.run_id = :r)",
        r=started.run_id,
    )
    assert walked.payload["counts"]["settled"] == settled_before > 0

    # Attribution: the ingest agent owns what the run made; the person is only the approver.
    made = rows(quire, "SELECT type, name, status, owner, run_id FROM items ORDER BY id")
    assert made == [
        ("directory", "f", "completed", "ingest-agent", started.run_id),
        ("file", "keep.txt", "completed", "ingest-agent", started.run_id),
        ("file", "twin-a.txt", "completed", "ingest-agent", started.run_id),
    ]
    hits = search(quire, "kb", "marker1x", mode="keyword")
    assert [h.item_name for h in hits] == ["keep.txt"]
    assert quire.queue.get(started.job_id).status == "completed"


def test_a_replayed_job_of_a_terminal_run_writes_nothing(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 3), key="k")
    drain(quire)
    before = {t: n for t, n in row_counts(quire).items() if t != "jobs"}
    items_before = rows(quire, "SELECT id, status, updated_at FROM items ORDER BY id")
    # at-least-once delivery: the same job arrives again after the run already completed
    with quire.db.write() as conn:
        conn.execute(text("UPDATE jobs SET status = 'pending' WHERE id = :j"), {"j": started.job_id})
    drain(quire)
    assert quire.queue.get(started.job_id).attempt == 2
    assert {t: n for t, n in row_counts(quire).items() if t != "jobs"} == before
    assert rows(quire, "SELECT id, status, updated_at FROM items ORDER BY id") == items_before


@pytest.mark.parametrize("how", ["disabled", "missing"])
def test_without_its_ingest_agent_the_run_is_handed_back_unconsumed(quire: Quire, tmp_path: Path, how: str) -> None:
    base = make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 2), key="k")
    with quire.db.write() as conn:
        if how == "disabled":
            conn.execute(text("UPDATE identities SET disabled = 1 WHERE base_id = :b"), {"b": base.id})
        else:
            conn.execute(text("DELETE FROM identities WHERE base_id = :b"), {"b": base.id})
    drain(quire)
    job = quire.queue.get(started.job_id)
    assert (job.status, job.attempt) == ("pending", 0)
    assert "ingest agent" in (job.last_error or "")
    assert folder_runs.show_run(quire, started.run_id).summary.run.status == "pending"
    assert [e.action for e in entries(quire, started.run_id)] == [audit.RUN_CREATED]
    assert scalar(quire, "SELECT count(*) FROM items") == 0

    with quire.db.write() as conn:  # an operator restores the identity; the queued run proceeds
        if how == "disabled":
            conn.execute(text("UPDATE identities SET disabled = 0 WHERE base_id = :b"), {"b": base.id})
        else:
            conn.execute(
                text(
                    "INSERT INTO identities (base_id, name, kind, created_at) "
                    "VALUES (:b, 'ingest-agent', 'ingest_agent', 0)"
                ),
                {"b": base.id},
            )
        conn.execute(text("UPDATE jobs SET available_at = 0 WHERE id = :j"), {"j": started.job_id})
    drain(quire)
    assert folder_runs.show_run(quire, started.run_id).summary.run.status == "completed"
    assert [(e.action, e.attempt) for e in entries(quire, started.run_id) if e.action == audit.RUN_STARTED] == [
        (audit.RUN_STARTED, 1)
    ]


def test_a_tampered_job_payload_is_a_fault_that_fails_the_run(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 2), key="k")
    with quire.db.write() as conn:
        payload = json.loads(
            conn.execute(text("SELECT payload FROM jobs WHERE id = :j"), {"j": started.job_id}).scalar()
        )
        payload["approved_by"] = "person:mallory"
        conn.execute(
            text("UPDATE jobs SET payload = :p WHERE id = :j"), {"p": json.dumps(payload), "j": started.job_id}
        )
    drain(quire)
    run = folder_runs.show_run(quire, started.run_id).summary.run
    assert run.status == "failed" and run.error is not None and "authorization" in run.error
    assert [e.action for e in entries(quire, started.run_id)] == [
        audit.RUN_CREATED,
        audit.RUN_STARTED,
        audit.RUN_FAILED,
    ]
    assert scalar(quire, "SELECT count(*) FROM items") == 0


def test_a_database_fault_mid_run_fails_it_and_keeps_what_was_committed(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 4), key="k")
    real = commit._commit_source
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> str:
        calls["n"] += 1
        if calls["n"] == 3:
            raise sa_exc.OperationalError("INSERT INTO items ...", {}, Exception("disk I/O error"))
        return real(*args, **kwargs)

    monkeypatch.setattr(commit, "_commit_source", flaky)
    drain(quire)
    summary = folder_runs.show_run(quire, started.run_id).summary
    assert summary.run.status == "failed"
    assert summary.run.error == "database error: disk I/O error"
    assert summary.counts["committed"] == 2 and summary.counts["pending"] == 2
    log = entries(quire, started.run_id)
    assert [e.action for e in log].count(audit.BATCH_COMMITTED) == 2
    assert [e.action for e in log if e.action in (audit.RUN_COMPLETED, audit.RUN_FAILED)] == [audit.RUN_FAILED]
    assert log[-1].payload["counts"]["committed"] == 2
    assert "INSERT" not in (summary.run.error or "")  # no SQL, no parameters
    assert scalar(quire, "SELECT count(*) FROM items WHERE type = 'file'") == 2


@pytest.mark.parametrize("rollback", ["fault", "fence"])
def test_read_entries_survive_a_rolled_back_source(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rollback: str
) -> None:
    make_base(quire)
    folder = write_tree(tmp_path / "f", {"locked/inner.txt": doc_text(1), "z.txt": doc_text(2)})
    started = folder_runs.start_run(quire, PERSON, "kb", folder, key="k")
    os.chmod(folder / "locked", 0)
    monkeypatch.setattr(walk, "is_readable_dir", chmod_unreadable_check)
    real_record = commit.record_outcome

    def record_then_lose(conn: Any, ctx: Any, run: Any, source: Any, disposition: str, *a: Any, **kw: Any) -> str:
        result = real_record(conn, ctx, run, source, disposition, *a, **kw)
        if source.relative_path == "locked/inner.txt":
            if rollback == "fault":
                raise sa_exc.OperationalError("INSERT ...", {}, Exception("database disk image is malformed"))
            # another attempt took the run over: the fence, checked right before commit, must refuse
            conn.execute(text("UPDATE folder_runs SET owner_attempt = owner_attempt + 1 WHERE id = :r"), {"r": run.id})
        return result

    monkeypatch.setattr(commit, "record_outcome", record_then_lose)
    try:
        drain(quire)
    finally:
        os.chmod(folder / "locked", 0o755)

    log = entries(quire, started.run_id)
    reads = [e for e in log if e.action == audit.WALK_UNREADABLE]
    assert len(reads) == 1  # the read happened once and is on record once, though its transaction rolled back
    assert reads[0].payload["folders"] == 1 and reads[0].attempt == 1
    assert rows(quire, "SELECT count(*) FROM folder_run_outcomes") == [(0,)]  # the write rolled back with it
    assert audit.BATCH_COMMITTED not in [e.action for e in log]
    run = folder_runs.show_run(quire, started.run_id).summary.run
    if rollback == "fault":
        assert run.status == "failed"
        expected = [audit.RUN_CREATED, audit.RUN_STARTED, audit.WALK_UNREADABLE, audit.RUN_FAILED]
        assert [e.action for e in log] == expected
    else:
        assert run.status == "running" and run.owner_attempt == 1  # the attempt stood down, writing nothing
        assert [e.action for e in log] == [audit.RUN_CREATED, audit.RUN_STARTED, audit.WALK_UNREADABLE]


def test_two_attempts_at_once_only_the_owner_lands(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed's "one attempt drives a run": a slow attempt outlives its lease while a new one finishes."""
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 6), key="k")
    blocked, release = threading.Event(), threading.Event()
    real_settle = execute._settle_source
    slow = Worker(quire.queue, lease_seconds=5.0, poll_interval=0.01)

    def settle(settling: Any, source: Any, **kw: Any) -> str:
        if settling.ctx.attempt == 1 and source.ordinal == 2:
            # From here on attempt 1 is slow: it stops renewing its lease and sits still, so its lease runs
            # out and the queue hands the job to another worker while this handler is still executing.
            slow.renew_leases = False
            blocked.set()
            assert release.wait(120)
        return real_settle(settling, source, **kw)

    monkeypatch.setattr(execute, "_settle_source", settle)
    slow_thread = threading.Thread(target=slow.run, kwargs={"until_idle": True, "timeout": 120})
    slow_thread.start()
    assert blocked.wait(120)
    wait_until(lambda: (quire.queue.get(started.job_id).lease_expires_at or 0) < time.time(), timeout=30)

    other = second_session(quire)  # a second session: another worker
    try:
        fresh = Worker(other.queue, lease_seconds=30, poll_interval=0.01)
        wait_until(lambda: fresh.redeliver_stale_claims() or quire.queue.get(started.job_id).status == "pending")
        fresh.run(until_idle=True, timeout=120)
    finally:
        release.set()
        slow_thread.join(120)
        other.close()

    run = folder_runs.show_run(quire, started.run_id)
    assert (run.summary.run.status, run.summary.run.owner_attempt) == ("completed", 2)
    by_source = rows(
        quire,
        "SELECT s.ordinal, b.attempt FROM ingest_batches b JOIN folder_run_sources s ON s.id = b.source_id "
        "ORDER BY s.ordinal",
    )
    assert by_source == [(0, 1), (1, 1), (2, 2), (3, 2), (4, 2), (5, 2)]
    assert scalar(quire, "SELECT count(*) FROM items WHERE type = 'file'") == 6
    log = [(e.action, e.attempt) for e in entries(quire, started.run_id)]
    assert log == [
        (audit.RUN_CREATED, None),
        (audit.RUN_STARTED, 1),
        (audit.BATCH_COMMITTED, 1),
        (audit.BATCH_COMMITTED, 1),
        (audit.RUN_STARTED, 2),
        *[(audit.BATCH_COMMITTED, 2)] * 4,
        (audit.RUN_COMPLETED, 2),
    ]
    assert slow.completed == 0
    assert quire.queue.get(started.job_id).status == "completed"
