"""The loopback servers themselves: PostgreSQL with pgvector, Redis, both behind a password."""

from __future__ import annotations

import psycopg
import pytest
import redis

from tests.support.servers import PostgresServer, RedisServer

pytestmark = pytest.mark.engines


def test_postgres_has_pgvector_with_hnsw_on_cosine(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert row is not None and tuple(int(p) for p in row[0].split(".")[:2]) >= (0, 8)
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, e vector(3))")
        conn.execute("CREATE INDEX ON t USING hnsw (e vector_cosine_ops)")
        conn.execute("INSERT INTO t VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.9,0.1,0]')")
        conn.execute("SET enable_seqscan = off")  # the HNSW index answers, not a scan
        plan = " ".join(r[0] for r in conn.execute("EXPLAIN SELECT id FROM t ORDER BY e <=> '[1,0,0]' LIMIT 2"))
        ids = [r[0] for r in conn.execute("SELECT id FROM t ORDER BY e <=> '[1,0,0]' LIMIT 2")]
    assert "t_e_idx" in plan
    assert ids == [1, 3]


def test_postgres_refuses_a_wrong_password(postgres_server: PostgresServer) -> None:
    wrong = postgres_server.url.replace(postgres_server.password, "not-the-password")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong, connect_timeout=5).close()


def test_each_test_gets_its_own_database(postgres_server: PostgresServer) -> None:
    first, second = postgres_server.create_database("iso_a"), postgres_server.create_database("iso_b")
    with psycopg.connect(first, autocommit=True) as conn:
        conn.execute("CREATE TABLE only_here (x int)")
    with psycopg.connect(second, autocommit=True) as conn:
        found = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'only_here'").fetchone()
    assert found == (0,)


def test_redis_needs_its_password(redis_server: RedisServer) -> None:
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=redis_server.port).ping()
    client = redis.Redis.from_url(redis_server.url)
    client.lpush("q", b"1")
    assert client.rpop("q") == b"1"
    assert redis_server.process.poll() is None
