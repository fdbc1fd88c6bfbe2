"""Startup recovery parks many interrupted index jobs at once, exactly as it would one by one.

The interrupted state is written directly (jobs ``running`` under a session that does not exist, as a
SIGKILLed worker leaves them); tests/knowledge/test_crash.py does the same with real killed processes.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from sqlalchemy import Connection, insert, text, update

from jobs.queue import JobRecord
from jobs.registry import JobType
from jobs.schema import jobs, worker_sessions
from knowledge.compose import open_quire
from knowledge.library.tree import NewItem, create_item
from knowledge.lifecycle import INTERRUPTED
from knowledge.lifecycle.operations import INDEX_DOCUMENTS
from knowledge.runtime import Quire
from knowledge.store.schema import items
from tests.knowledge.helpers import make_base


def interrupted_folder(quire: Quire, jobs_of: int = 4, per_job: int = 5) -> list[JobRecord]:
    """A folder with two sub-folders whose leaves are spread over index jobs left running by a dead worker."""
    base = make_base(quire)
    job_ids: list[int] = []
    with quire.db.write() as conn:
        root = create_item(conn, NewItem(base.id, "directory", "root", "processing", source_path="/r"))
        subs = [
            create_item(
                conn,
                NewItem(
                    base.id, "directory", f"s{n}", "processing", parent_id=root, root_id=root, relative_path=f"s{n}"
                ),
            )
            for n in range(2)
        ]
        done = create_item(
            conn,
            NewItem(
                base.id, "file", "done.txt", "completed", parent_id=subs[0], root_id=root, relative_path="s0/done.txt"
            ),
        )
        for j in range(jobs_of):
            ids = [
                create_item(
                    conn,
                    NewItem(
                        base.id,
                        "file",
                        f"f{j}-{k}.txt",
                        "processing",
                        parent_id=subs[j % 2],
                        root_id=root,
                        relative_path=f"s{j % 2}/f{j}-{k}.txt",
                    ),
                )
                for k in range(per_job)
            ]
            job = quire.queue.enqueue(conn, INDEX_DOCUMENTS, {"base_id": base.id, "item_ids": [*ids, done]})
            conn.execute(update(items).where(items.c.id.in_(ids)).values(job_id=job.job_id))
            job_ids.append(job.job_id)
        # one leaf was taken over by a later job meanwhile: an interrupted job must leave it alone
        conn.execute(update(items).where(items.c.name == "f0-0.txt").values(job_id=999_999))
        leave_running_under_a_dead_session(conn)
    return [quire.queue.get(i) for i in job_ids]


def leave_running_under_a_dead_session(conn: Connection) -> None:
    now = time.time()
    conn.execute(
        insert(worker_sessions).values(
            id="dead-session",
            host="nowhere",
            pid=1,
            process_started_at=0.0,
            hosts_worker=1,
            started_at=now,
            heartbeat_at=now - 3600,
            ended_at=now - 60,
        )
    )
    conn.execute(update(jobs).values(status="running", lease_owner="dead-session", attempt=1))


def _outcome(quire: Quire) -> tuple[dict[str, tuple[str, int]], list[list[str]]]:
    """Each item's (status, deaths), and which items share a live index job."""
    with quire.db.read() as conn:
        rows = conn.execute(
            text(
                "SELECT coalesce(i.relative_path, i.name), i.status, i.deaths, j.id FROM items i"
                " LEFT JOIN jobs j ON j.id = i.job_id AND j.status = 'pending'"
            )
        ).all()
    by_job: dict[int, list[str]] = {}
    for name, _status, _deaths, job_id in rows:
        if job_id is not None:
            by_job.setdefault(job_id, []).append(name)
    return {r[0]: (r[1], r[2]) for r in rows}, sorted(sorted(g) for g in by_job.values())


def test_the_registered_batch_hook_equals_the_registered_per_job_hook(
    quire: Quire, data_dir: Path, tmp_path: Path
) -> None:
    records = interrupted_folder(quire)
    with quire.db.write() as conn:  # the first leaf of each job was being read when the worker died
        conn.execute(text("UPDATE items SET status = 'reading' WHERE name LIKE 'f%-1.txt'"))
    quire.close()
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    one_by_one, batched = open_quire(copy), open_quire(data_dir)
    try:
        hooks = one_by_one.registry.get(INDEX_DOCUMENTS)
        assert hooks.on_abandon is not None and hooks.on_abandon_batch is not None
        with one_by_one.db.write() as conn:
            for record in records:
                hooks.on_abandon(conn, record)
        batch_hook = batched.registry.get(INDEX_DOCUMENTS).on_abandon_batch
        assert batch_hook is not None
        with batched.db.write() as conn:
            batch_hook(conn, records)
        expected = _outcome(one_by_one)
        assert _outcome(batched) == expected
        states, groups = expected
        assert states["s0/f0-0.txt"] == ("processing", 0)  # taken over by another job: left alone
        assert states["s0/done.txt"] == ("completed", 0)
        assert states["s1/f1-1.txt"] == ("processing", 1)  # in flight: one death, retried alone
        assert ["s1/f1-1.txt"] in groups
        assert sorted(len(g) for g in groups) == [1, 1, 1, 1, 3, 4, 4, 4]
    finally:
        one_by_one.close()
        batched.close()


def test_recovery_retries_every_interrupted_batch_with_the_batch_hook(quire: Quire) -> None:
    """Index batches interrupted before their items were in flight go back as one job each (issue 10:
    nothing is parked that can simply be retried); the leaf "taken over" by a job that does not exist is
    parked by the orphan repair scan."""
    records = interrupted_folder(quire, jobs_of=6)
    report = quire.recover()
    assert sorted(report.cancelled) == sorted(r.id for r in records) and report.hook_errors == 0
    with quire.db.read() as conn:
        parked = conn.execute(text("SELECT name FROM items WHERE error_code = :c"), {"c": INTERRUPTED}).all()
        waiting = conn.execute(
            text(
                "SELECT i.job_id, count(*) FROM items i JOIN jobs j ON j.id = i.job_id"
                " WHERE i.status = 'processing' AND i.type = 'file' AND j.status = 'pending' GROUP BY i.job_id"
            )
        ).all()
    assert [r.name for r in parked] == ["f0-0.txt"]
    assert sorted(n for _job, n in waiting) == [4, 5, 5, 5, 5, 5]
    assert not {j for j, _n in waiting} & {r.id for r in records}


def test_a_failing_batch_hook_falls_back_to_the_per_job_hook(quire: Quire) -> None:
    seen: list[str] = []

    def batch(conn: Connection, records: object) -> None:
        seen.append("batch")
        raise RuntimeError("broken batch hook")

    def one(conn: Connection, record: JobRecord) -> None:
        seen.append(f"one:{record.id}")
        if record.payload.get("bad"):
            raise RuntimeError("broken hook")

    quire.registry.register(JobType("test.batchy", lambda ctx: None, "abandon", on_abandon=one, on_abandon_batch=batch))
    with quire.db.write() as conn:
        ids = [quire.queue.enqueue(conn, "test.batchy", {"bad": n == 1}).job_id for n in range(3)]
        leave_running_under_a_dead_session(conn)
    report = quire.recover()
    assert seen == ["batch"] + [f"one:{i}" for i in ids]
    assert sorted(report.cancelled) == ids and report.hook_errors == 1
    assert {quire.queue.get(i).status for i in ids} == {"cancelled"}
