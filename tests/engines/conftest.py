"""Real PostgreSQL (pgvector) and Redis on loopback for the team-store tests (tests/support/servers.py).

One server of each per test session, started on first use and stopped at the end; every test gets a database
of its own. Tests that need them carry the ``engines`` marker (``make test-engines``; the default ``make
test`` leaves them out). When a wheel cannot start its server on this machine the tests are skipped with the
server's own reason — never silently passed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.support.servers import PostgresServer, RedisServer, ServerUnavailable, start_postgres, start_redis

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        server = start_postgres()
    except ServerUnavailable as exc:
        pytest.skip(f"PostgreSQL is unavailable on this machine: {exc}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    try:
        server = start_redis()
    except ServerUnavailable as exc:
        pytest.skip(f"Redis is unavailable on this machine: {exc}")
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return postgres_server.create_database(f"quire_test_{next(_databases)}")
