"""Operating a team store: ``quire store status`` (schema, live workers per machine, queue, jobs waiting for a
machine), ``quire jobs`` naming a pinned job's machine, and an older Quire refusing a store a newer one upgraded
(exit 6) — the real CLI against the loopback PostgreSQL."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from tests.engines.test_team_cli import answered, run, secret_of

pytestmark = pytest.mark.engines


def execute(url: str, sql: str, *params: object) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql, params)


def add_session(url: str, host: str, heartbeat_at: float) -> None:
    execute(
        url,
        "INSERT INTO worker_sessions (id, host, pid, process_started_at, hosts_worker, started_at, heartbeat_at) "
        "VALUES (%s, %s, 4242, 1.0, 1, %s, %s)",
        f"{host}/4242/1.000/1",
        host,
        heartbeat_at,
        heartbeat_at,
    )


def add_job(url: str, status: str, host: str | None) -> None:
    execute(
        url,
        "INSERT INTO jobs (type, payload, status, recovery, host, created_at, updated_at) "
        "VALUES ('prepare-root', '{}', %s, 'retry', %s, %s, %s)",
        status,
        host,
        time.time(),
        time.time(),
    )


def test_status_and_jobs_say_which_machine_a_job_waits_for(postgres_url: str, tmp_path: Path) -> None:
    secret, local = secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    add_session(postgres_url, "machine-b", time.time())
    add_session(postgres_url, "machine-c", time.time() - 3600)  # its heartbeat went stale: not alive
    add_job(postgres_url, "pending", "machine-a")
    add_job(postgres_url, "pending", "machine-b")
    add_job(postgres_url, "running", None)

    status = answered(run("--store", postgres_url, "store", "status", data_dir=local), secret)
    assert status["engine"] == "postgresql" and status["store"].startswith("postgresql://postgres:***@")
    assert status["schema"]["current"] is True and status["schema"]["last"]
    assert [(w["host"], w["workers"]) for w in status["workers"]] == [("machine-b", 1)]
    assert status["queue"] == {"pending": 2, "running": 1}
    assert status["waiting"] == [
        {"host": "machine-a", "jobs": 1, "worker_running": False},
        {"host": "machine-b", "jobs": 1, "worker_running": True},
    ]
    listed = answered(run("--store", postgres_url, "jobs", data_dir=local), secret)
    assert [j["host"] for j in listed["jobs"]] == ["machine-a", "machine-b", None]


def test_an_older_quire_refuses_a_store_a_newer_one_upgraded(postgres_url: str, tmp_path: Path) -> None:
    secret, local = secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    execute(postgres_url, "INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_from_the_future', 0)")
    for command in (("jobs",), ("base", "list"), ("store", "init")):
        refused = answered(run("--store", postgres_url, *command, data_dir=local), secret, code=6)
        assert refused["error"]["code"] == "schema_mismatch", (command, refused)
        message = refused["error"]["message"]
        assert "this team store was upgraded by a newer Quire (migration 9999_from_the_future)" in message
        assert "upgrade Quire" in message
    status = answered(run("--store", postgres_url, "store", "status", data_dir=local), secret)
    assert status["schema"]["newer"] == ["9999_from_the_future"] and status["schema"]["current"] is False


LAST = "0029_sync_root_host"  # any migration after the baseline: removing its record makes the store older


def test_only_store_upgrade_migrates_a_store_in_use(postgres_url: str, tmp_path: Path) -> None:
    secret, local = secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    answered(run("--store", postgres_url, "base", "create", "kb", "--precision", "fp32", data_dir=local), secret)
    execute(postgres_url, "DELETE FROM schema_migrations WHERE name = %s", LAST)  # as an older Quire left it

    for command in (("base", "list"), ("jobs",), ("store", "init")):
        refused = answered(run("--store", postgres_url, *command, data_dir=local), secret, code=6)
        assert refused["error"]["code"] == "schema_mismatch", (command, refused)
        assert (
            "older schema" in refused["error"]["message"] and "run `quire store upgrade`" in refused["error"]["message"]
        )
    status = answered(run("--store", postgres_url, "store", "status", data_dir=local), secret)
    assert status["schema"]["pending"] == [LAST] and status["schema"]["current"] is False

    upgraded = answered(run("--store", postgres_url, "store", "upgrade", data_dir=local), secret)
    assert upgraded["applied"] == [LAST]
    assert answered(run("--store", postgres_url, "store", "upgrade", data_dir=local), secret)["applied"] == []
    assert [
        b["name"] for b in answered(run("--store", postgres_url, "base", "list", data_dir=local), secret)["bases"]
    ] == ["kb"]


def test_a_store_without_bases_is_still_brought_up_on_opening(postgres_url: str, tmp_path: Path) -> None:
    secret, local = secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    execute(postgres_url, "DELETE FROM schema_migrations WHERE name = %s", LAST)
    assert answered(run("--store", postgres_url, "base", "list", data_dir=local), secret)["bases"] == []
    status = answered(run("--store", postgres_url, "store", "status", data_dir=local), secret)
    assert status["schema"]["current"] is True
