"""Workers on several machines share one team store: real ``quire worker`` processes, each with its own host
name (``QUIRE_HOST``: to the store they are different machines), on a real PostgreSQL and Redis.

* Three workers drain one folder: every job is claimed once (``FOR UPDATE SKIP LOCKED``, attempt 1) and
  every item is indexed exactly once — no duplicate chunk, vector or keyword row.
* A worker SIGKILLed while it holds a claim: no other host may take the job while its lease runs (a pid means
  nothing across machines), and once the lease ran out another worker's repair takes it over and the folder
  completes, again without duplicates.

No sleeps stand in for synchronisation: the tests poll the store for a condition, with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from jobs.sessions import STALE_HEARTBEAT_SECONDS
from knowledge.compose import open_team_quire
from knowledge.library.index import fts_table, vec_table
from knowledge.lifecycle import admission, operations
from knowledge.lifecycle.operations import INDEX_BATCH, INDEX_DOCUMENTS, PathInput
from knowledge.runtime import REPAIR_INTERVAL_SETTING, Quire
from knowledge.store import settings
from tests.conftest import REPO, wait_until
from tests.knowledge.helpers import make_base
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.engines, pytest.mark.model]

WORDS = ("amber", "basalt", "cobalt", "dune", "ember", "fjord", "granite", "heather", "indigo", "juniper", "kelp")


def write_folder(root: Path, count: int) -> Path:
    """``count`` short notes, each with a text of its own (identical texts would share one vector)."""
    for n in range(count):
        a, b, c = WORDS[n % len(WORDS)], WORDS[(n // len(WORDS)) % len(WORDS)], WORDS[(n * 7) % len(WORDS)]
        path = root / f"d{n // 100}" / f"note-{n:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"Note {n}: the {a} cliff above the {b} shore, seen past the {c} field, entry {n * 31}.\n")
    return root


@pytest.fixture
def team(postgres_url: str, tmp_path: Path) -> Iterator[Quire]:
    """The store, made by a person's ``store init`` equivalent; the test reads it through this Quire."""
    quire = open_team_quire(postgres_url, data_dir=tmp_path / "person")
    yield quire
    quire.close()


def start_worker(url: str, host: str, tmp_path: Path, *args: str, queue: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1", "QUIRE_HOST": host}
    env.pop("QUIRE_STORE", None)
    env.pop("QUIRE_QUEUE", None)
    where = ["--store", url] + (["--queue", queue] if queue else [])
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "--data-dir", str(tmp_path / host), *where, "--json", "worker",
         "--threads", "1", "--nice", "0", *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def rows(quire: Quire, sql: str, **params: Any) -> list[Any]:
    with quire.db.read() as conn:
        return list(conn.execute(text(sql), params).all())


def assert_indexed_exactly_once(quire: Quire, base_id: int, files: int) -> None:
    leaves = rows(quire, "SELECT status, chunk_count FROM items WHERE base_id = :b AND type = 'file'", b=base_id)
    assert len(leaves) == files and {r.status for r in leaves} == {"completed"}
    per_item = rows(
        quire,
        "SELECT i.id, i.chunk_count, count(c.id) AS n, count(DISTINCT c.ordinal) AS ordinals "
        "FROM items i LEFT JOIN chunks c ON c.item_id = i.id WHERE i.base_id = :b AND i.type = 'file' "
        "GROUP BY i.id, i.chunk_count",
        b=base_id,
    )
    assert all(r.n == r.chunk_count == r.ordinals >= 1 for r in per_item), [r for r in per_item if r.n != r.ordinals]
    chunks = rows(quire, "SELECT count(*) FROM chunks WHERE base_id = :b", b=base_id)[0][0]
    assert rows(quire, f"SELECT count(*) FROM {vec_table(base_id)}")[0][0] == chunks
    assert rows(quire, f"SELECT count(*) FROM {fts_table(base_id)}")[0][0] == chunks
    orphans = f"SELECT count(*) FROM {vec_table(base_id)} v LEFT JOIN chunks c ON c.id = v.rowid WHERE c.id IS NULL"
    assert rows(quire, orphans)[0][0] == 0


def finished(process: subprocess.Popen[str], timeout: float = 400) -> dict[str, Any]:
    stdout, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 0, (process.returncode, stdout, stderr[-3000:])
    return json.loads(stdout)  # type: ignore[no-any-return]


def test_three_workers_drain_a_folder_each_item_once(
    postgres_url: str, redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = 300  # three index jobs of at most 128 leaves, scheduled here: one for each worker
    monkeypatch.setattr(admission, "INDEX_JOB_LEAVES", INDEX_BATCH)  # where leaves are grouped into jobs
    person = open_team_quire(postgres_url, data_dir=tmp_path / "person", queue_url=redis_server.url)
    try:
        base = make_base(person)
        operations.add_items(person, "kb", [PathInput(write_folder(tmp_path / "notes", files))])
        person.run_pinned_here()  # the person's machine walks its folder and uploads it (as `quire add` does)
        scheduled = rows(person, "SELECT count(*) FROM jobs WHERE type = :t AND status = 'pending'", t=INDEX_DOCUMENTS)
        assert scheduled[0][0] == 3, "the walk did not split the folder into three index jobs"
        workers = [
            start_worker(
                postgres_url, f"machine-{n}", tmp_path, "--no-watch", "--timeout", "600", queue=redis_server.url
            )
            for n in range(3)
        ]
        try:
            wait_until(
                lambda: (
                    rows(person, "SELECT count(*) FROM jobs WHERE type = :t", t=INDEX_DOCUMENTS)[0][0] >= 3
                    and not rows(person, "SELECT id FROM jobs WHERE status IN ('pending', 'running')")
                ),
                timeout=600,
                interval=0.05,
                what="every job to settle",
            )
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
        reports = [finished(w) for w in workers]
        assert_indexed_exactly_once(person, base.id, files)
        jobs = rows(person, "SELECT type, status, attempt FROM jobs ORDER BY id")
        assert {(j.status, j.attempt) for j in jobs} == {("completed", 1)}, jobs  # each claimed exactly once
        done = [r["jobs_finished"] for r in reports]
        indexing = [j for j in jobs if j.type == INDEX_DOCUMENTS]  # the walk ran on the person's machine
        assert sum(done) == len(indexing), (done, jobs)
        assert sum(1 for n in done if n) >= 2, done  # the work was shared, not drained by one
    finally:
        person.close()


def test_a_killed_workers_claim_is_taken_over_after_its_lease(team: Quire, postgres_url: str, tmp_path: Path) -> None:
    files, lease = 150, 8.0
    base = make_base(team)
    with team.db.write() as conn:
        settings.put(conn, REPAIR_INTERVAL_SETTING, "0.3")  # the survivor's repair pass runs often
    operations.add_items(team, "kb", [PathInput(write_folder(tmp_path / "notes", files))])
    team.run_pinned_here()  # the walk is this machine's; the index jobs are for any

    doomed = start_worker(postgres_url, "machine-a", tmp_path, "--lease-seconds", str(lease), "--no-watch")
    try:
        claim = wait_until(
            lambda: rows(
                team,
                "SELECT id, attempt, lease_expires_at FROM jobs WHERE type = :t "
                "AND status = 'running' AND lease_owner LIKE 'machine-a/%'",
                t=INDEX_DOCUMENTS,
            ),
            timeout=300,
            interval=0.05,
            what="machine-a to claim an index job",
        )[0]
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=60)
    assert doomed.returncode == -signal.SIGKILL

    # Its pid is dead, but on another machine nobody can know that: until the lease runs out, recovery
    # (here from this test's own host) leaves the claim alone.
    report = team.recover()
    (held,) = rows(team, "SELECT status, attempt, lease_expires_at FROM jobs WHERE id = :j", j=claim.id)
    assert time.time() < held.lease_expires_at, "the lease ran out before recovery could be checked"
    assert claim.id not in report.cancelled and held.status == "running" and held.attempt == claim.attempt

    survivor = start_worker(postgres_url, "machine-b", tmp_path, "--no-watch", "--timeout", "400")
    try:
        wait_until(
            lambda: rows(team, "SELECT status FROM jobs WHERE id = :j AND status != 'running'", j=claim.id),
            timeout=300,
            interval=0.05,
            what="the killed worker's job to be taken over",
        )
        (taken,) = rows(team, "SELECT status, finished_at FROM jobs WHERE id = :j", j=claim.id)
        assert taken.status == "cancelled"  # an index job is abandon-on-crash: its items were requeued
        assert taken.finished_at >= held.lease_expires_at  # not one moment before the lease ran out
        (beat,) = rows(team, "SELECT heartbeat_at FROM worker_sessions WHERE id LIKE 'machine-a/%'")
        # ... and by the lease, not by the dead host's heartbeat going stale (that takes minutes)
        assert taken.finished_at < beat.heartbeat_at + STALE_HEARTBEAT_SECONDS
        wait_until(
            lambda: not rows(team, "SELECT id FROM jobs WHERE status IN ('pending', 'running')"),
            timeout=300,
            interval=0.05,
            what="every job to settle",
        )
    finally:
        survivor.send_signal(signal.SIGTERM)
        out = finished(survivor)
    assert out["jobs_finished"] >= 1
    assert_indexed_exactly_once(team, base.id, files)
