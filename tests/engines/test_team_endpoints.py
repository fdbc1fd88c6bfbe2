"""A remote embedder on a team store: each machine sends texts (and the key it holds) only to an endpoint and key
variable a person on it confirmed, and the endpoint's cap holds across machines.

Real PostgreSQL on loopback, real ``quire`` processes, each machine with its own data directory and
``QUIRE_HOST``; the endpoints are counting servers on 127.0.0.1 (one the team chose, one a stranger's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge.compose import open_team_quire
from knowledge.store.database import Database
from knowledge.store.postgres import PostgresDatabase
from tests.conftest import REPO
from tests.support.embedding_server import EmbeddingServer, HashVectors
from tests.support.files import write_tree
from tests.support.worker_runs import finish, index_jobs_overlapped

pytestmark = pytest.mark.engines

KEY_VARIABLE, KEY = "TEAM_EMBED_KEY", "team-key-0123456789abcdef"
FILES = 8


@pytest.fixture
def endpoint() -> Iterator[EmbeddingServer]:
    s = EmbeddingServer(HashVectors())
    s.behaviour.require_key = KEY
    yield s
    s.close()


@pytest.fixture
def stranger() -> Iterator[EmbeddingServer]:
    s = EmbeddingServer(HashVectors())
    yield s
    s.close()


@pytest.fixture
def store(postgres_url: str, tmp_path: Path) -> str:
    """A team store made (migrated) by its first admin; the machines below then only open it."""
    open_team_quire(postgres_url, data_dir=tmp_path / "data-admin").close()
    return postgres_url


class Machine:
    """A person's machine: ``quire`` commands with its own data directory and host name, on the team store."""

    def __init__(self, url: str, tmp_path: Path, host: str) -> None:
        self.data_dir = tmp_path / f"data-{host}"
        self.env = {
            **os.environ, "PYTHONPATH": str(REPO), "QUIRE_STORE": url, "QUIRE_HOST": host, KEY_VARIABLE: KEY,
        }  # fmt: skip
        self.env.pop("QUIRE_QUEUE", None)

    def args(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "app.cli", "--data-dir", str(self.data_dir), "--json", *args]

    def run(self, *args: str, ok: bool = True) -> dict[str, Any]:
        done = subprocess.run(self.args(*args), cwd=REPO, env=self.env, capture_output=True, text=True, timeout=300)
        assert (done.returncode == 0) == ok, (args, done.returncode, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else {}  # type: ignore[no-any-return]

    def worker(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.args("worker", "--until-idle", "--threads", "1", "--nice", "0", "--no-watch", "--timeout", "300"),
            cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip


def _create_remote_base(machine: Machine, name: str, server: EmbeddingServer, **limits: str) -> None:
    extra = [arg for option, value in limits.items() for arg in (f"--{option}", value)]
    machine.run(
        "base", "create", name, "--embedder", "http", "--endpoint", server.url, "--model", "hash",
        "--dimensions", "384", "--api-key-env", KEY_VARIABLE, *extra,
    )  # fmt: skip


def _statuses(db: Database, base: str) -> dict[str, str]:
    with db.read() as conn:
        rows = conn.execute(
            text(
                "SELECT i.name, i.status || coalesce(' ' || i.error_message, '') FROM items i "
                "JOIN bases b ON b.id = i.base_id WHERE b.name = :b AND i.type = 'file'"
            ),
            {"b": base},
        ).all()
    return {str(r[0]): str(r[1]) for r in rows}


def _edit_embedder(db: Database, base: str, edit: Callable[[dict[str, Any]], None]) -> None:
    """What any writer of the team store can do to a base's row: change its stored embedder."""
    with db.write() as conn:
        embedder = json.loads(
            str(conn.execute(text("SELECT embedder FROM bases WHERE name = :b"), {"b": base}).scalar())
        )
        edit(embedder)
        conn.execute(text("UPDATE bases SET embedder = :e WHERE name = :b"), {"e": json.dumps(embedder), "b": base})


def _re_point(db: Database, base: str, **changes: str) -> None:
    """Another endpoint, another key variable."""
    _edit_embedder(db, base, lambda embedder: embedder.update(changes))


def _one_text_per_request(db: Database, base: str) -> None:
    """Many requests per index job (the CLI has no option for it; the stored settings do)."""
    _edit_embedder(db, base, lambda embedder: embedder["settings"].update(batch_size=1))


def test_a_machine_sends_texts_and_its_key_only_where_a_person_on_it_confirmed(
    store: str, tmp_path: Path, endpoint: EmbeddingServer, stranger: EmbeddingServer
) -> None:
    alice, bob = Machine(store, tmp_path, "alice"), Machine(store, tmp_path, "bob")
    _create_remote_base(alice, "team", endpoint)  # alice chose it: confirmed on alice's machine
    folder = write_tree(tmp_path / "bob-notes", {f"n{k}.txt": f"bob's note {k} on the pump" for k in range(3)})
    bob.run("add", "team", str(folder))
    finish(bob.worker())  # bob's worker: nobody on bob's machine confirmed the endpoint
    db = PostgresDatabase(store)
    try:
        failed = _statuses(db, "team")
        assert len(failed) == 3 and all("no one on this machine confirmed" in s for s in failed.values()), failed
        assert endpoint.behaviour.requests == 0  # nothing left bob's machine

        bob.run("base", "confirm-endpoint", "team")
        bob.run("reindex", "team", "--failed")
        finish(bob.worker())
        assert set(_statuses(db, "team").values()) == {"completed"}, _statuses(db, "team")
        assert endpoint.behaviour.requests >= 1 and set(endpoint.behaviour.auth_seen) == {f"Bearer {KEY}"}

        _re_point(db, "team", endpoint=stranger.url)  # a writer re-points the base at a stranger's server
        for machine in (alice, bob):
            refused = machine.run("search", "team", "pump", "--mode", "vector", ok=False)
            assert refused["error"]["code"] == "endpoint_needs_confirming", refused
        _re_point(db, "team", endpoint=endpoint.url, api_key_env="HOME")  # or names another secret to send
        refused = bob.run("search", "team", "pump", "--mode", "vector", ok=False)
        assert refused["error"]["code"] == "endpoint_needs_confirming", refused
        assert stranger.behaviour.requests == 0  # no text and no key ever reached the stranger
        assert all(seen == f"Bearer {KEY}" for seen in endpoint.behaviour.auth_seen)
    finally:
        db.dispose()


def test_two_machines_workers_never_exceed_the_endpoints_cap_between_them(
    store: str, tmp_path: Path, endpoint: EmbeddingServer
) -> None:
    alice, bob = Machine(store, tmp_path, "alice"), Machine(store, tmp_path, "bob")
    db = PostgresDatabase(store)
    try:
        for name in ("left", "right"):
            _create_remote_base(alice, name, endpoint, concurrency="1", rate="1000")
            bob.run("base", "confirm-endpoint", name)
            _one_text_per_request(db, name)
    finally:
        db.dispose()
    for machine, name in ((alice, "left"), (bob, "right")):
        notes = {f"n{k}.txt": f"{name} note {k} about valve {k * 3}." for k in range(FILES)}
        machine.run("add", name, str(write_tree(tmp_path / f"{name}-notes", notes)))
    endpoint.behaviour.hold_until_in_flight = 2  # a second request in flight is held, so it would be seen
    finish(alice.worker(), bob.worker())
    quire = open_team_quire(store, data_dir=tmp_path / "data-check")
    try:
        for name in ("left", "right"):
            assert set(_statuses(quire.db, name).values()) == {"completed"}, _statuses(quire.db, name)
        overlapped = index_jobs_overlapped(quire.db)
    finally:
        quire.close()
    assert overlapped, "the machines took turns by chance: nothing was shown"
    assert endpoint.behaviour.requests >= 2 * FILES
    assert endpoint.behaviour.max_in_flight == 1
