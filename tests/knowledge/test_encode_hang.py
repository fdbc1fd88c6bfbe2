"""A local encoder call that hangs is bounded (``knowledge.ingest.encode_watch``): past its limit the worker
process ends on its own, recovery counts one death for the items in flight, and the second death
quarantines the culprit while its innocent batch neighbour is indexed.

Real worker processes (``quire worker``) whose encoder is the real model, except that a text holding
``HANG`` never comes back (``tests.support.cli_with_hanging_encoder``). Nothing here kills them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import text

from knowledge.lifecycle import QUARANTINED, operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import REPO
from tests.knowledge.helpers import integrity_ok, make_base
from tests.support.files import write_tree

LIMIT_SECONDS = 15  # the watch's limit for this test (no per-text share): an innocent call takes well under


def _worker(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """``quire worker --until-idle`` with the hanging encoder; it must end by itself (the timeout only stops
    a test whose watch failed: an unbounded hang would never end)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "QUIRE_ENCODE_TIMEOUT": str(LIMIT_SECONDS),
        "QUIRE_ENCODE_SECONDS_PER_TEXT": "0",
    }
    argv = [sys.executable, "-m", "tests.support.cli_with_hanging_encoder", "--data-dir", str(data_dir)]
    return subprocess.run(
        [*argv, "worker", "--until-idle", "--no-watch", "--threads", "1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT_SECONDS + 420,
    )


def _rows(quire: Quire) -> dict[str, tuple[str, int, str | None]]:
    with quire.db.read() as conn:
        rows = conn.execute(text("SELECT name, status, deaths, error_code FROM items WHERE type = 'file'")).all()
    return {str(r.name): (str(r.status), int(r.deaths), r.error_code) for r in rows}


def _ended_by_the_watch(run: subprocess.CompletedProcess[str]) -> None:
    assert run.returncode == 1, run.stderr[-3000:]
    assert "Timeout (0:00:1" in run.stderr  # faulthandler's stack dump, at the limit (armed for what was left)
    assert "in encode_documents" in run.stderr  # the stuck frame is named


def test_a_hanging_encode_ends_the_worker_counts_deaths_and_quarantines_the_culprit(
    quire: Quire, data_dir: Path, tmp_path: Path
) -> None:
    make_base(quire)
    folder = write_tree(
        tmp_path / "D", {"a.txt": "Otters HANG the encoder, always.", "b.txt": "Herons wade in the shallows."}
    )
    operations.add_items(quire, "kb", [PathInput(folder)])

    _ended_by_the_watch(_worker(data_dir))  # one batch of both: stuck with both in flight
    assert {name: row[1] for name, row in _rows(quire).items()} == {"a.txt": 0, "b.txt": 0}  # not counted yet

    second = _worker(data_dir)  # recovery counts one death each and retries each alone; a.txt hangs again
    assert '"recovery"' not in second.stdout  # it never reached its normal end
    _ended_by_the_watch(second)
    assert _rows(quire)["a.txt"][:2] == ("embedding", 1)

    last = _worker(data_dir)  # recovery counts the second death: quarantined, and nothing is left to hang
    assert last.returncode == 0, last.stderr[-3000:]

    rows = _rows(quire)
    assert rows["a.txt"] == ("failed", 2, QUARANTINED)
    assert rows["b.txt"] == ("completed", 0, None)  # its commit cleared its one death
    stuck = {i.name: i for i in operations.list_items(quire, "kb", flat=True)}["a.txt"]
    assert stuck.error_message == "the worker stopped twice while indexing this file"  # code + message, no path
    assert len(search(quire, "kb", "herons", mode="keyword")) == 1
    assert integrity_ok(quire)
