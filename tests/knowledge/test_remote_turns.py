"""A remote endpoint's rate and concurrency cap hold across processes: two ``quire worker`` processes on one store
against a counting endpoint on 127.0.0.1 never exceed them between them (``knowledge.store.endpoint_turns``).

The endpoint counts the requests in flight and when each arrived. It holds each request until a second one is in
flight (or briefly): processes that each kept only their own count would show two at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge.ingest.remote import CallSettings, RemoteConfig
from knowledge.library import bases
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from knowledge.store import endpoint_turns
from knowledge.store.database import Database
from tests.conftest import python_proc
from tests.support.embedding_server import EmbeddingServer, HashVectors
from tests.support.files import write_tree
from tests.support.worker_runs import finish, index_jobs_overlapped

FILES_PER_BASE = 10
LATENESS = 0.1  # seconds a request may take from its turn to the endpoint's door


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    s = EmbeddingServer(HashVectors())
    yield s
    s.close()


def _remote_bases(quire: Quire, server: EmbeddingServer, tmp_path: Path, **settings: Any) -> list[int]:
    """Two bases on the one endpoint with the same limits, each with its own folder of one-chunk files (so two
    workers each find a base's jobs to run)."""
    config = RemoteConfig(server.url, "hash", 384, None, CallSettings(timeout=60, batch_size=1, **settings))
    made = []
    for name in ("left", "right"):
        base = bases.create_base(
            quire.db, name, model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32", embedder=config.as_json()
        )
        files = {f"note-{n}.txt": f"{name} note number {n} about item {n * 7}.\n" for n in range(FILES_PER_BASE)}
        operations.add_items(quire, base.id, [operations.PathInput(write_tree(tmp_path / name, files))])
        made.append(base.id)
    return made


def _two_workers(data_dir: Path) -> None:
    finish(
        *(
            python_proc("-m", "app.cli", "--data-dir", str(data_dir), "worker", "--until-idle", "--threads", "1")
            for _ in range(2)
        )
    )


def _all_completed(quire: Quire, base_ids: list[int]) -> bool:
    with quire.db.read() as conn:
        found = conn.execute(
            text("SELECT DISTINCT status FROM items WHERE type = 'file' AND base_id IN (:a, :b)"),
            {"a": base_ids[0], "b": base_ids[1]},
        ).scalars()
        return set(found) == {"completed"}


def test_two_workers_never_exceed_the_endpoints_cap_between_them(
    quire: Quire, data_dir: Path, server: EmbeddingServer, tmp_path: Path
) -> None:
    ids = _remote_bases(quire, server, tmp_path, max_concurrency=1, rate_per_second=1000.0, burst=1000)
    server.behaviour.hold_until_in_flight = 2  # a second request in flight is held, so it would be seen
    _two_workers(data_dir)
    assert _all_completed(quire, ids)
    assert server.behaviour.requests >= 2 * FILES_PER_BASE
    assert index_jobs_overlapped(quire.db), "the workers took turns by chance: nothing was shown"
    assert server.behaviour.max_in_flight == 1


def test_two_workers_keep_to_the_endpoints_rate_between_them(
    quire: Quire, data_dir: Path, server: EmbeddingServer, tmp_path: Path
) -> None:
    rate, burst = 8.0, 2
    ids = _remote_bases(quire, server, tmp_path, max_concurrency=4, rate_per_second=rate, burst=burst)
    _two_workers(data_dir)
    assert _all_completed(quire, ids)
    arrivals = sorted(server.behaviour.arrivals)
    assert len(arrivals) >= 2 * FILES_PER_BASE
    assert index_jobs_overlapped(quire.db), "the workers took turns by chance: nothing was shown"
    # any m requests in a row span at least (m - burst) / rate: turns are paced as they are taken, and a request
    # reaches the endpoint a few milliseconds later (LATENESS absorbs that spread). A lower bound only, so a
    # loaded machine cannot fail it; two processes pacing apart would go at twice the rate
    for i, first in enumerate(arrivals):
        for j in range(i + 1, len(arrivals)):
            assert arrivals[j] - first >= (j - i + 1 - burst) / rate - LATENESS, (i, j, arrivals[j] - first)
    assert arrivals[-1] - arrivals[0] >= (len(arrivals) - burst) / rate - LATENESS


# -- the turns themselves, on one store opened twice (two processes' views of one file) ---------------


@pytest.fixture
def two_views(data_dir: Path, quire: Quire) -> Iterator[tuple[Database, Database]]:
    other = Database.in_dir(data_dir)  # the store migrated by ``quire``; a second engine, as another process
    yield quire.db, other
    other.dispose()


def test_slots_are_shared_ended_by_their_holder_and_freed_when_the_holder_died(
    two_views: tuple[Database, Database],
) -> None:
    one, two = two_views
    allowance = endpoint_turns.Allowance("http://127.0.0.1:9/v1/embeddings", 1000.0, 1000, 2, hold=30.0)
    assert endpoint_turns.try_turn(one, allowance, "a", now=100.0) == (0, 0.0)
    assert endpoint_turns.try_turn(two, allowance, "b", now=100.0) == (1, 0.0)
    assert endpoint_turns.try_turn(one, allowance, "c", now=100.0) == (None, -1.0)  # both slots held
    endpoint_turns.end_turn(two, allowance, 0, "b")  # not b's slot: nothing changes
    assert endpoint_turns.try_turn(one, allowance, "c", now=100.0) == (None, -1.0)
    endpoint_turns.end_turn(two, allowance, 1, "b")
    assert endpoint_turns.try_turn(one, allowance, "c", now=100.0) == (1, 0.0)
    # "a" died holding slot 0: its slot is free once its hold has passed, not before
    assert endpoint_turns.try_turn(two, allowance, "d", now=129.0) == (None, -1.0)
    assert endpoint_turns.try_turn(two, allowance, "d", now=130.5)[0] == 0
    other_limits = endpoint_turns.Allowance(allowance.endpoint, 1000.0, 1000, 3, hold=30.0)
    assert endpoint_turns.try_turn(one, other_limits, "e", now=100.0) == (0, 0.0)  # other limits, own turns


def test_the_pace_allows_the_burst_then_one_request_per_interval(two_views: tuple[Database, Database]) -> None:
    one, two = two_views
    allowance = endpoint_turns.Allowance("http://127.0.0.1:9/v1/embeddings", 4.0, 2, 100, hold=30.0)
    assert endpoint_turns.try_turn(one, allowance, "a", now=50.0)[0] is not None
    assert endpoint_turns.try_turn(two, allowance, "b", now=50.0)[0] is not None  # the burst of two
    slot, wait = endpoint_turns.try_turn(one, allowance, "c", now=50.0)
    assert slot is None and wait == pytest.approx(0.25)
    assert endpoint_turns.try_turn(two, allowance, "c", now=50.2)[0] is None
    assert endpoint_turns.try_turn(two, allowance, "c", now=50.25)[0] is not None
    assert endpoint_turns.try_turn(one, allowance, "d", now=60.0)[0] is not None  # saved up again after a pause


def test_a_turn_is_one_short_transaction_and_leaves_no_row_behind(quire: Quire) -> None:
    allowance = endpoint_turns.Allowance("http://127.0.0.1:9/v1/embeddings", 1000.0, 1000, 1, hold=30.0)
    with endpoint_turns.turn(quire.db, allowance):
        assert quire.db.current_write() is None  # not held open across the request
        with quire.db.read() as conn:
            assert conn.execute(text("SELECT count(*) FROM endpoint_slots")).scalar() == 1
    with quire.db.read() as conn:
        assert conn.execute(text("SELECT count(*) FROM endpoint_slots")).scalar() == 0
    assert "127.0.0.1" not in allowance.key  # the endpoint is hashed: no URL in the clear
