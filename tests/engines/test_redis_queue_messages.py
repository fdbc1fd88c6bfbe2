"""Issue 45 item 1 on a team store: whoever holds the queue URL can push anything into the Redis list
``huey.redis.quire``. A pickle pushed there ahead of real wake-ups is never unpickled by a real ``quire worker
--until-idle`` on the store: its marker file never appears, it is dropped with a warning that does not echo
it, and the queued real jobs complete. A queue holder can wake workers, nothing more."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from jobs.transport import job_id_of
from knowledge.compose import open_team_quire
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from tests.conftest import REPO
from tests.knowledge.helpers import make_base, statuses
from tests.support.files import write_tree
from tests.support.pickles import shell_pickle, touching_pickle
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.engines, pytest.mark.model]

QUEUE_KEY = "huey.redis.quire"


def run_worker(url: str, queue_url: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1"}
    env.pop("QUIRE_STORE", None)
    env.pop("QUIRE_QUEUE", None)
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), "--store", url, "--queue", queue_url,
         "--json", "worker", "--until-idle", "--threads", "1", "--nice", "0"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip


def test_a_pickle_pushed_into_the_redis_list_never_runs_in_a_worker(
    postgres_url: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    folder = write_tree(tmp_path / "notes", {"heron.md": "Herons wade in shallow water.", "owl.md": "Owls hunt."})
    touched, shelled = tmp_path / "touched-by-pickle", tmp_path / "shell-ran"
    local = tmp_path / "local"  # one machine: the person's side and the worker share the owned copies
    client = redis.Redis.from_url(redis_server.url)
    quire = open_team_quire(postgres_url, data_dir=local, queue_url=redis_server.url)
    try:
        client.delete(QUEUE_KEY)
        crafted = [touching_pickle(touched), shell_pickle(shelled), b"garbage"]
        for data in crafted:  # pushed first, so popped (brpop: oldest first) before any real wake-up
            client.lpush(QUEUE_KEY, data)
        base = make_base(quire)
        operations.add_items(quire, "kb", [PathInput(folder)])
        assert client.llen(QUEUE_KEY) > len(crafted), "the add pushed no wake-up behind the crafted messages"

        worker = run_worker(postgres_url, redis_server.url, local)

        assert worker.returncode == 0, worker.stderr[-3000:]
        assert not touched.exists() and not shelled.exists()
        assert worker.stderr.count("not a Quire wake-up") == len(crafted), worker.stderr[-3000:]
        assert str(touched) not in worker.stderr and "garbage" not in worker.stderr
        left = client.lrange(QUEUE_KEY, 0, -1)
        assert all(job_id_of(m) is not None for m in left), "a crafted message was left for the next worker"
        done = statuses(quire, base.id)
        assert done["heron.md"] == done["owl.md"] == "completed", done
    finally:
        quire.close()
        client.close()
