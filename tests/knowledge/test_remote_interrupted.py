"""Seed 001 where its reason applies: an index batch of a base on a remote endpoint, interrupted by a real
SIGKILL while its request hangs, is parked ``failed`` / ``indexing_interrupted``; no request reaches the
endpoint again until a person reindexes. (On the packaged local model the batch resumes by itself:
tests/knowledge/test_deaths.py, tests/knowledge/test_poison.py.)"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from sqlalchemy import text

from knowledge.ingest.embedding import Encoder, default_model_spec
from knowledge.ingest.remote import CallSettings, RemoteConfig
from knowledge.library import bases
from knowledge.lifecycle import INTERRUPTED, operations
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import python_proc, quire_cli
from tests.knowledge.helpers import drain, integrity_ok
from tests.knowledge.test_remote_embedder import Server
from tests.support.files import write_tree


def _files(quire: Quire, base_id: int) -> set[tuple[str, str | None]]:
    with quire.db.read() as conn:
        rows = conn.execute(
            text("SELECT status, error_code FROM items WHERE base_id = :b AND type = 'file'"), {"b": base_id}
        ).all()
    return {(r.status, r.error_code) for r in rows}


def test_a_killed_remote_batch_is_parked_and_the_endpoint_is_not_called_again(
    quire: Quire, data_dir: Path, tmp_path: Path
) -> None:
    server = Server(Encoder(default_model_spec(), precision="fp32"))
    try:
        server.behaviour.mode = "hang"
        config = RemoteConfig(server.url, "minilm", 384, None, CallSettings(timeout=120, max_retries=0))
        base = bases.create_base(
            quire.db, "remote", model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32",
            embedder=config.as_json(),
        )  # fmt: skip
        folder = write_tree(
            tmp_path / "paid", {"a.txt": "Lichens grow on the north side.", "b.txt": "Moss carpets the stones."}
        )
        operations.add_items(quire, base.id, [operations.PathInput(folder)])

        worker = python_proc("-m", "app.cli", "--data-dir", str(data_dir), "worker")
        try:
            with server.behaviour.arrived:  # the batch's request is at the endpoint, unanswered
                assert server.behaviour.arrived.wait_for(lambda: server.behaviour.in_flight == 1, 180)
            assert _files(quire, base.id) == {("embedding", None)}
        finally:
            os.kill(worker.pid, signal.SIGKILL)
            worker.communicate(timeout=30)
        assert worker.returncode == -signal.SIGKILL
        sent = server.behaviour.requests
        server.behaviour.mode = "ok"  # the endpoint is healthy again: only a person's reindex may use it

        restarted = quire_cli("worker", "--until-idle", data_dir=data_dir, timeout=300)
        assert restarted.returncode == 0, restarted.stderr
        assert _files(quire, base.id) == {("failed", INTERRUPTED)}
        assert server.behaviour.requests == sent  # the restart spent nothing at the endpoint
        assert integrity_ok(quire)

        roots = [i.id for i in operations.list_items(quire, base.id)]
        operations.reindex_items(quire, base.id, roots)  # the person's decision
        drain(quire)
        assert _files(quire, base.id) == {("completed", None)}
        assert server.behaviour.requests > sent
        assert len(search(quire, base.id, "lichens", mode="keyword")) == 1
    finally:
        server.close()
