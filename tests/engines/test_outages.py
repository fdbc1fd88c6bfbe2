"""Any server may restart at any moment: real ``quire worker`` processes on a real PostgreSQL and Redis, whose
servers this file stops and starts again (its own pair, not the session's, which other tests share).

* Redis stopped and started again while two workers drain ticks (``tests.support.cli_with_ticks``): the
  workers stay up and find work in the ``jobs`` table meanwhile; every tick completes once (attempt 1, one
  write), and after the restart the wake-ups flow again. The outage is logged once per worker.
* With Redis stopped the CLI still answers (``search``, ``items``, ``jobs``) and ``add`` commits its jobs.
* PostgreSQL restarted while a worker drains: it reconnects and completes every tick.
* PostgreSQL away past the worker's budget (``QUIRE_OUTAGE_SECONDS``): the worker exits 75, not 0.

Recovery times (a server back → the next tick completes) are printed (``-s`` shows them). No sleeps stand in
for synchronisation: the tests poll the store, or a worker's log, with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge.compose import open_team_quire
from knowledge.runtime import Quire
from tests.conftest import REPO, wait_until
from tests.knowledge.helpers import make_base
from tests.support import cli_with_ticks
from tests.support.engine_fixtures import unavailable
from tests.support.servers import PostgresServer, RedisServer, ServerUnavailable, start_postgres, start_redis

pytestmark = pytest.mark.engines


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[PostgresServer]:
    try:
        server = start_postgres()
    except ServerUnavailable as exc:
        unavailable("PostgreSQL", exc)
    yield server
    server.stop()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    try:
        server = start_redis()
    except ServerUnavailable as exc:
        unavailable("Redis", exc)
    yield server
    server.stop()


@pytest.fixture
def store(own_postgres: PostgresServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database on this file's own server, which a test may halt: it is running again afterwards."""
    url = own_postgres.create_database(f"quire_outage_{request.node.name[:40].lower()}")
    yield url
    if own_postgres.halted:
        own_postgres.resume()


class Worker:
    """A ``quire worker`` process (with the tick job type), its stderr read line by line as it comes."""

    def __init__(self, url: str, queue: str | None, host: str, tmp_path: Path, env: dict[str, str] | None = None):
        environment = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1", "QUIRE_HOST": host}
        environment.pop("QUIRE_STORE", None)
        environment.pop("QUIRE_QUEUE", None)
        where = ["--store", url] + (["--queue", queue] if queue else [])
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.cli_with_ticks", "--data-dir", str(tmp_path / host), *where,
             "--json", "worker", "--threads", "1", "--nice", "0", "--no-watch", "--progress-every", "0",
             "--timeout", "600"],
            cwd=REPO, env={**environment, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def up(self) -> bool:
        """True while the process runs; a worker that ended fails the test at once, with its exit code."""
        code = self.process.poll()
        assert code is None, f"the worker exited {code}: {self.log()}"
        return True

    def said(self, words: str) -> int:
        return sum(1 for line in list(self.lines) if words in line)

    def stop(self) -> dict[str, Any]:
        """SIGTERM; the worker must end cleanly (exit 0) with its JSON report."""
        self.process.send_signal(signal.SIGTERM)
        out = self.finish()
        assert self.process.returncode == 0, (self.process.returncode, out, self.log())
        return json.loads(out)  # type: ignore[no-any-return]

    def finish(self, timeout: float = 120) -> str:
        assert self.process.stdout is not None
        self.process.wait(timeout)
        self._reader.join(10)
        return self.process.stdout.read()

    def log(self) -> str:
        return "".join(self.lines)[-4000:]


def person(url: str, tmp_path: Path, queue: str | None) -> Quire:
    quire = open_team_quire(url, data_dir=tmp_path / "person", queue_url=queue)
    cli_with_ticks.register(quire)
    with quire.db.write() as conn:
        conn.exec_driver_sql(cli_with_ticks.TABLE_DDL)
    return quire


def enqueue_ticks(quire: Quire, count: int, work: float) -> list[int]:
    with quire.db.write() as conn:
        return [
            int(quire.queue.enqueue(conn, cli_with_ticks.TICK, {"n": n, "work": work}).job_id) for n in range(count)
        ]


def rows(quire: Quire, sql: str, **params: Any) -> list[Any]:
    with quire.db.read() as conn:
        return list(conn.execute(text(sql), params).all())


def completed(quire: Quire, ids: list[int]) -> int:
    return int(rows(quire, "SELECT count(*) FROM jobs WHERE status = 'completed' AND id = ANY(:i)", i=ids)[0][0])


def first_finish_after(quire: Quire, moment: float) -> float | None:
    """When the first job finished after ``moment`` (wall clock), if one did."""
    sql = "SELECT min(finished_at) FROM jobs WHERE status = 'completed' AND finished_at > :t"
    value = rows(quire, sql, t=moment)[0][0]
    return None if value is None else float(value)


def report(what: str, seconds: float) -> None:
    print(f"\nrecovery after {what}: {seconds:.2f} s from the server back to the next job completing", flush=True)


def test_redis_restarted_mid_drain_two_workers_lose_nothing(
    postgres_url: str, own_redis: RedisServer, tmp_path: Path
) -> None:
    quire = person(postgres_url, tmp_path, own_redis.url)
    workers: list[Worker] = []
    before: list[int] = []
    during: list[int] = []
    after: list[int] = []
    try:
        before = enqueue_ticks(quire, 40, work=0.05)
        workers = [Worker(postgres_url, own_redis.url, f"machine-{n}", tmp_path) for n in range(2)]
        wait_until(lambda: completed(quire, before) >= 8, timeout=120, what="the drain to be under way")

        own_redis.halt()
        wait_until(lambda: all(w.up() and w.said("lost the queue (") for w in workers), timeout=60,
                   what="both workers to notice the queue is away")  # fmt: skip
        during = enqueue_ticks(quire, 20, work=0.05)  # committed; the wake-ups cannot be pushed
        wait_until(lambda: all(w.up() for w in workers) and completed(quire, before + during) == 60, timeout=120,
                   what="every tick to complete with Redis away (the workers poll the table)")  # fmt: skip

        own_redis.resume()
        back = time.time()
        after = enqueue_ticks(quire, 20, work=0.05)
        wait_until(lambda: completed(quire, after) == 20, timeout=120, what="the ticks after the restart")
        report("a Redis restart", first_finish_after(quire, back) - back)  # type: ignore[operator]
        wait_until(lambda: all(w.said("the queue is back") for w in workers), timeout=60,
                   what="both workers to read wake-ups again")  # fmt: skip
        print(f"wake-ups read again by both workers {time.time() - back:.2f} s after Redis came back", flush=True)
        wait_until(lambda: quire.transport.pending_messages() == 0, timeout=60, what="the new wake-ups to be read")
        assert all(w.process.poll() is None for w in workers), [w.log() for w in workers]  # still up
        reports = [w.stop() for w in workers]
    finally:
        for w in workers:
            if w.process.poll() is None:
                w.process.kill()
                w.finish()
        ids = before + during + after
        jobs = rows(quire, "SELECT id, status, attempt FROM jobs WHERE id = ANY(:i)", i=ids)
        writes = rows(quire, "SELECT job_id, attempt FROM tick_writes ORDER BY job_id")
        quire.close()
    assert {(j.status, j.attempt) for j in jobs} == {("completed", 1)} and len(jobs) == 80, jobs  # once each
    assert sorted((w.job_id, w.attempt) for w in writes) == [(j, 1) for j in sorted(ids)]  # one write each
    assert sum(r["jobs_finished"] for r in reports) == 80  # nothing ran twice
    for w in workers:
        assert w.said("lost the queue (") == 1, w.log()  # once per outage, not per retry
        assert "Traceback" not in w.log(), w.log()


def test_with_redis_stopped_the_cli_answers_and_stores_what_it_enqueues(
    postgres_url: str, own_redis: RedisServer, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "anvil.md").write_text("A blacksmith hammers hot iron into horseshoes on a heavy steel anvil.\n")
    quire = person(postgres_url, tmp_path, None)
    try:
        make_base(quire)
    finally:
        quire.close()
    own_redis.halt()
    env = {**os.environ, "PYTHONPATH": str(REPO), "QUIRE_STORE": postgres_url, "QUIRE_QUEUE": own_redis.url}

    def quire_cli(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "--data-dir", str(tmp_path / "person"), "--json", *args],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, (args, done.returncode, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    assert quire_cli("search", "kb", "horseshoes", "--mode", "keyword")["hits"] == []
    added = quire_cli("add", "kb", str(folder))  # enqueues (and runs this machine's walk) with Redis away
    assert [i["type"] for i in added["items"]] == ["directory"]
    files = [i for i in quire_cli("items", "kb")["items"] if i["type"] == "file"]
    assert [i["name"] for i in files] == ["anvil.md"]
    listed = quire_cli("jobs")["jobs"]
    assert any(j["status"] == "pending" and j["type"] == "knowledge.index-documents" for j in listed), listed


def test_postgres_restarted_mid_drain_the_worker_reconnects_and_completes(
    store: str, own_postgres: PostgresServer, own_redis: RedisServer, tmp_path: Path
) -> None:
    quire = person(store, tmp_path, own_redis.url)
    worker: Worker | None = None
    try:
        ids = enqueue_ticks(quire, 40, work=0.1)
        worker = Worker(store, own_redis.url, "machine-a", tmp_path, env={"QUIRE_OUTAGE_SECONDS": "120"})
        wait_until(lambda: completed(quire, ids) >= 5, timeout=120, what="the drain to be under way")

        own_postgres.halt()  # fast: every connection is cut, a tick's included
        wait_until(
            lambda: worker.up() and worker.said("lost the store"),
            timeout=60,
            what="the worker to notice the store is away",
        )
        own_postgres.resume()
        back = time.time()
        wait_until(lambda: first_finish_after(quire, back), timeout=120, what="a tick to complete after the restart")
        report("a PostgreSQL restart", first_finish_after(quire, back) - back)  # type: ignore[operator]
        wait_until(lambda: worker.up() and completed(quire, ids) == 40, timeout=180, what="every tick to complete")
        assert worker.process.poll() is None, worker.log()  # it stayed up
        assert worker.said("lost the store") == 1 and worker.said("the store is back") == 1, worker.log()
        finished = worker.stop()["jobs_finished"]
    finally:
        if worker is not None and worker.process.poll() is None:
            worker.process.kill()
            worker.finish()
    jobs = rows(quire, "SELECT id, status, attempt FROM jobs WHERE id = ANY(:i)", i=ids)
    writes = rows(quire, "SELECT job_id, attempt FROM tick_writes")
    quire.close()
    assert {j.status for j in jobs} == {"completed"} and finished == 40
    final = {j.id: j.attempt for j in jobs}
    # a tick cut off mid-write runs again under a new attempt; its final attempt wrote exactly once
    assert sorted(w.job_id for w in writes if final[w.job_id] == w.attempt) == sorted(ids)
    assert len({(w.job_id, w.attempt) for w in writes}) == len(writes)  # no attempt wrote twice


def test_a_worker_whose_store_stays_away_past_its_budget_exits_75(
    store: str, own_postgres: PostgresServer, tmp_path: Path
) -> None:
    quire = person(store, tmp_path, None)
    try:
        worker = Worker(store, None, "machine-a", tmp_path, env={"QUIRE_OUTAGE_SECONDS": "3"})
        wait_until(lambda: rows(quire, "SELECT id FROM worker_sessions WHERE id LIKE 'machine-a/%'"), timeout=120,
                   what="the worker to start")  # fmt: skip
    finally:
        quire.close()
    own_postgres.halt()
    halted = time.monotonic()
    out = worker.finish(timeout=120)
    assert worker.process.returncode == 75, (worker.process.returncode, out, worker.log())  # EX_TEMPFAIL, never 0
    assert 3 <= time.monotonic() - halted < 60
    assert "stayed unreachable for more than 3 s" in json.loads(out)["error"]["message"]
    assert worker.said("lost the store") == 1, worker.log()
