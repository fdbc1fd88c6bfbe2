"""``quire store status`` on a data directory: the schema against this Quire's migrations, live workers per
machine, the queue's depth and the jobs waiting for a named machine; ``quire jobs`` names a pinned job's
machine and why it waits; a store a newer Quire upgraded is refused on opening (exit 6), but status reads it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from sqlalchemy import insert, text

from jobs.schema import jobs
from jobs.sessions import Session, this_host
from knowledge.runtime import Quire
from tests.conftest import quire_cli


def add_job(quire: Quire, status: str, host: str | None) -> None:
    now = time.time()
    with quire.db.write() as conn:
        conn.execute(
            insert(jobs).values(
                type="tick", payload="{}", status=status, recovery="retry", host=host, created_at=now, updated_at=now
            )
        )


def answer(data_dir: Path, *args: str, code: int = 0) -> dict[str, Any]:
    done = quire_cli("--json", *args, data_dir=data_dir)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return dict(json.loads(done.stdout))


def test_status_answers_schema_workers_queue_and_waiting(quire: Quire, data_dir: Path) -> None:
    worker = Session.for_this_process(hosts_worker=True)
    ended = Session.for_this_process(hosts_worker=True)
    enqueuer = Session.for_this_process(hosts_worker=False)
    with quire.db.write() as conn:
        for session in (worker, ended, enqueuer):
            session.register(conn)
        ended.end(conn)
    add_job(quire, "pending", "machine-a")
    add_job(quire, "pending", None)
    add_job(quire, "running", None)
    add_job(quire, "completed", "machine-a")

    status = answer(data_dir, "store", "status")
    assert status["engine"] == "sqlite"
    assert status["schema"]["current"] is True and status["schema"]["newer"] == []
    assert status["schema"]["pending"] == []
    assert [(w["host"], w["workers"]) for w in status["workers"]] == [(this_host(), 1)]  # not the ended one
    assert status["queue"] == {"pending": 2, "running": 1}
    assert status["waiting"] == [{"host": "machine-a", "jobs": 1, "worker_running": False}]

    shown = quire_cli("store", "status", data_dir=data_dir)
    assert shown.returncode == 0, shown.stderr
    assert f"{this_host()}: 1 worker(s), last heartbeat" in shown.stdout
    assert "machine-a: 1 job(s) (no worker running there)" in shown.stdout
    assert "queue: 2 pending, 1 running" in shown.stdout


def test_jobs_name_the_machine_and_why_a_pinned_job_waits(quire: Quire, data_dir: Path) -> None:
    add_job(quire, "pending", "machine-a")
    add_job(quire, "completed", "machine-b")
    add_job(quire, "pending", None)
    listed = answer(data_dir, "jobs")
    assert [j["host"] for j in listed["jobs"]] == ["machine-a", "machine-b", None]
    shown = quire_cli("jobs", data_dir=data_dir)
    assert shown.returncode == 0, shown.stderr
    first, second, third = shown.stdout.splitlines()
    assert "waiting for a worker on machine-a" in first
    assert "on machine-b" in second and "waiting" not in second
    assert "on machine" not in third


def test_a_store_upgraded_by_a_newer_quire_is_refused_but_status_reads_it(quire: Quire, data_dir: Path) -> None:
    with quire.db.write() as conn:
        conn.execute(text("INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_from_the_future', 0)"))
    quire.close()
    refused = answer(data_dir, "jobs", code=6)
    assert refused["error"]["code"] == "schema_mismatch"
    message = refused["error"]["message"]
    assert "upgraded by a newer Quire (migration 9999_from_the_future); upgrade Quire" in message, message
    status = answer(data_dir, "store", "status")
    assert status["schema"]["newer"] == ["9999_from_the_future"] and status["schema"]["current"] is False
