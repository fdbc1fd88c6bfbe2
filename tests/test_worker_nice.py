"""The worker's priority: the ``worker.nice`` preference by default, ``QUIRE_WORKER_NICE`` over it (the test
suite sets 0 for every worker it starts), ``--nice`` over both; a value that is not a number is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.sessions import worker_hosting_ids
from knowledge.compose import open_quire
from tests.conftest import REPO, quire_cli, wait_until

NICE_ENV = "QUIRE_WORKER_NICE"


def niceness_of_a_running_worker(data_dir: Path, env: dict[str, str], *args: str) -> int:
    """Start ``quire worker`` with ``env``, wait until it hosts work (its priority is set before it opens the
    store), and answer how much nicer than this process it runs."""
    quire = open_quire(data_dir)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), "worker", "--no-watch", *args],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def hosting() -> bool:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            with quire.db.read() as conn:
                return any(f"/{proc.pid}/" in s for s in worker_hosting_ids(conn))

        wait_until(hosting, timeout=120, what="the worker to host work")
        return os.getpriority(os.PRIO_PROCESS, proc.pid) - os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        quire.close()


def test_the_default_is_the_preference(data_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != NICE_ENV}
    assert niceness_of_a_running_worker(data_dir, env) == 10  # worker.nice's default


def test_the_variable_overrides_the_preference_and_the_flag_overrides_both(data_dir: Path) -> None:
    assert niceness_of_a_running_worker(data_dir, {**os.environ, NICE_ENV: "3"}) == 3
    assert niceness_of_a_running_worker(data_dir, {**os.environ, NICE_ENV: "3"}, "--nice", "5") == 5


@pytest.mark.parametrize("value", ["lots", "25"])
def test_a_bad_value_is_refused(data_dir: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(NICE_ENV, value)
    done = quire_cli("--json", "worker", "--until-idle", data_dir=data_dir)
    assert done.returncode == 2, done.stdout + done.stderr
    assert NICE_ENV in json.loads(done.stdout)["error"]["message"]
