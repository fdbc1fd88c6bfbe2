"""Jobs across processes on a team store: the wake-ups travel through a real Redis (huey's RedisHuey), pushed
only after the enqueuing transaction committed, and a worker in another process indexes the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.compose import open_team_quire
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.search import search
from tests.conftest import python_proc
from tests.knowledge.helpers import make_base, material_counts, statuses
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.engines, pytest.mark.model]


class _RolledBack(Exception):
    pass


def test_a_worker_in_another_process_indexes_through_redis(
    postgres_url: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "anvil.md").write_text("A blacksmith hammers hot iron into horseshoes on a heavy steel anvil.")
    (folder / "saffron.md").write_text("Saffron is the dried stigma of the crocus flower, prized in paella.")
    local = tmp_path / "local"  # one machine here: the CLI side and the worker share the owned copies
    quire = open_team_quire(postgres_url, data_dir=local, queue_url=redis_server.url)
    try:
        quire.transport.huey.flush()  # type: ignore[attr-defined]
        base = make_base(quire)
        with pytest.raises(_RolledBack), quire.db.write() as conn:  # a rolled-back enqueue pushes nothing
            quire.queue.enqueue(conn, "knowledge.prepare-root", {"item_id": 0}, base_id=base.id)
            raise _RolledBack
        assert quire.transport.pending_messages() == 0
        operations.add_items(quire, "kb", [PathInput(folder)])
        assert quire.transport.pending_messages() >= 1  # the committed add's wake-up is on Redis
        worker = python_proc("-m", "tests.support.team_worker", postgres_url, redis_server.url, str(local))
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err[-2000:]
        assert int(out.split("finished ")[-1]) >= 2  # prepare-root and index-documents ran over there
        assert quire.transport.pending_messages() == 0  # the other process consumed the wake-ups
        done = statuses(quire, base.id)
        assert done["anvil.md"] == done["saffron.md"] == "completed", done
        assert material_counts(quire, base.id)["vectors"] >= 2
        assert [h.item_name for h in search(quire, "kb", "horseshoes", mode="keyword")] == ["anvil.md"]
    finally:
        quire.close()
