"""Real PostgreSQL (pgvector) and Redis on loopback for the team-store tests (tests/support/servers.py), and
``engine_quire``: one Quire per engine for a test file parametrized by engine.

One server of each per test session, started on first use and stopped at the end; every test gets a database
of its own. Tests that need them carry the ``engines`` marker (``make test-engines``; the default ``make
test`` leaves them out, and runs the SQLite half of an engine-parametrized file). When a wheel cannot start its
server on this machine the tests are skipped with the server's own reason — never silently passed — except
where they must run (CI, or ``QUIRE_REQUIRE_SERVERS=1``, which ``make test-engines`` sets): there they fail,
so a run whose servers could not start cannot pass with no engine test run.

A test file runs on both engines by taking ``quire`` from :func:`engine_quire`::

    quire = pytest.fixture(params=ENGINES)(engine_quire)
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from knowledge.runtime import Quire
from tests.support.servers import PostgresServer, RedisServer, ServerUnavailable, start_postgres, start_redis

_databases = itertools.count(1)
STORE_ENV, QUEUE_ENV = "QUIRE_STORE", "QUIRE_QUEUE"  # the CLI's own names (app/cli/base.py)

# the engines a parametrized file runs on: SQLite in `make test`, PostgreSQL in `make test-engines`
ENGINES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.engines)]


def servers_required() -> bool:
    """Whether a server that cannot start fails the tests instead of skipping them (CI; make test-engines)."""
    return any(os.environ.get(name, "").lower() in ("1", "true", "yes") for name in ("CI", "QUIRE_REQUIRE_SERVERS"))


def unavailable(what: str, exc: ServerUnavailable) -> NoReturn:
    """Skip, or fail where the servers are required, with the server's own reason."""
    reason = f"{what} is unavailable on this machine: {exc}"
    if servers_required():
        pytest.fail(f"{reason} (servers are required here: CI or QUIRE_REQUIRE_SERVERS)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        server = start_postgres()
    except ServerUnavailable as exc:
        unavailable("PostgreSQL", exc)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    try:
        server = start_redis()
    except ServerUnavailable as exc:
        unavailable("Redis", exc)
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return postgres_server.create_database(f"quire_test_{next(_databases)}")


def engine_quire(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Quire]:
    """A Quire on the engine of ``request.param``: the data directory, or a fresh team store (with this
    directory as the machine's own). Without a param (a module that parametrizes only some tests, with
    ``@pytest.mark.parametrize("quire", ENGINES, indirect=True)``) it is the data directory.

    On a team store ``QUIRE_STORE`` names it for the test's duration, as a person's shell would: every
    ``quire`` process the test starts (``quire_cli``, a worker) reaches the same store with the same
    arguments it gives on SQLite."""
    from knowledge.compose import open_quire, open_team_quire

    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.delenv(QUEUE_ENV, raising=False)  # wake-ups: workers poll the jobs table
    if getattr(request, "param", "sqlite") == "postgresql":
        url = request.getfixturevalue("postgres_url")
        quire = open_team_quire(url, data_dir=data_dir)
        monkeypatch.setenv(STORE_ENV, url)
    else:
        monkeypatch.delenv(STORE_ENV, raising=False)
        quire = open_quire(data_dir)
    yield quire
    quire.close()


def on_team_store(quire: Quire) -> bool:
    from knowledge.store.postgres import PostgresDatabase

    return isinstance(quire.db, PostgresDatabase)


def second_session(quire: Quire) -> Quire:
    """The same store opened again, as another process would (another session: another worker)."""
    from knowledge.compose import open_quire, open_team_quire
    from knowledge.store.postgres import PostgresDatabase

    if isinstance(quire.db, PostgresDatabase):
        return open_team_quire(quire.db.url, data_dir=quire.data_dir)
    return open_quire(quire.data_dir)
