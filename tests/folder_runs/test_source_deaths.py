"""A source whose processing killed the worker twice settles ``quarantined`` and the run goes on (real
``quire worker`` processes SIGKILLed while one source's parse hangs; the other sources commit). Only the
source being worked on is in flight at a kill: its group's sources read before it, and those after it, count
no death."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge import folder_runs
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import REPO, python_proc, wait_until
from tests.folder_runs.helpers import doc_text, make_base, make_docs, scalar
from tests.knowledge.helpers import integrity_ok
from tests.support.bad_parsers import cli_argv
from tests.support.bad_parsers import run_cli as bad_cli
from tests.support.files import write_tree

ENV = {
    "QUIRE_PARSE_TIMEOUT": "600",  # the hanging parse stays in flight until the kill
    "PYTHONPATH": str(REPO),
}


def _stuck(quire: Quire) -> tuple[int | None, int]:
    """(attempt that has stuck.hang in flight, its deaths) — (None, 0) before it was marked."""
    with quire.db.read() as conn:
        row = conn.execute(
            text(
                "SELECT f.attempt, f.deaths FROM folder_run_in_flight f JOIN folder_run_sources s"
                " ON s.id = f.source_id WHERE s.relative_path = 'stuck.hang'"
            )
        ).first()
    return (None, 0) if row is None else (row.attempt, int(row.deaths))


def _in_flight_under_owner(quire: Quire, deaths: int) -> bool:
    """The source is in flight under the attempt that owns the run, with ``deaths`` counted. Read together: the
    next attempt counts the last one's death on entry before it marks the source again, and a look between the
    two sees the old attempt's mark with the new count."""
    attempt, counted = _stuck(quire)
    owner = scalar(quire, "SELECT owner_attempt FROM folder_runs")
    return attempt is not None and counted == deaths and owner == attempt


def _marks(quire: Quire) -> dict[str, tuple[int | None, int]]:
    """Every source's (attempt that has it in flight, deaths), by path."""
    with quire.db.read() as conn:
        rows = conn.execute(
            text(
                "SELECT s.relative_path, f.attempt, f.deaths FROM folder_run_in_flight f"
                " JOIN folder_run_sources s ON s.id = f.source_id"
            )
        ).all()
    return {str(r.relative_path): (r.attempt, int(r.deaths)) for r in rows}


def test_a_source_that_kills_the_worker_twice_is_quarantined_and_the_run_completes(
    quire: Quire,
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    bad_parsers_here: None,
) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    make_base(quire)
    folder = make_docs(tmp_path / "folder", 5)
    write_tree(folder, {"stuck.hang": "this parse never ends", "zz-after.txt": doc_text(40)})
    started = bad_cli("--json", "run", "start", "kb", str(folder), "--key", "deaths", data_dir=data_dir)
    assert started.returncode == 0, started.stderr
    run_id = json.loads(started.stdout)["run_id"]

    for deaths_before in (0, 1):
        worker = python_proc(*cli_argv("worker", data_dir=data_dir)[1:])
        try:  # in flight under the run's owning attempt with the deaths counted so far (the parse hangs: it stays)
            wait_until(lambda d=deaths_before: _in_flight_under_owner(quire, d), timeout=420)
        finally:
            os.kill(worker.pid, signal.SIGKILL)
            worker.communicate(timeout=30)
        assert worker.returncode == -signal.SIGKILL
        # the five sources read before it (one group with it) and the one after it are not in flight
        assert {path for path, (at, _d) in _marks(quire).items() if at is not None} == {"stuck.hang"}

    last = bad_cli("worker", "--until-idle", data_dir=data_dir, timeout=600)
    assert last.returncode == 0, last.stderr
    detail = folder_runs.show_run(quire, run_id)
    got = {s.relative_path: s.disposition for s in detail.sources}
    assert detail.summary.run.status == "completed"
    assert got.pop("stuck.hang") == "quarantined"
    assert set(got.values()) == {"committed"} and len(got) == 6  # every other source, also the one after it
    assert detail.summary.counts["quarantined"] == 1
    assert len(search(quire, "kb", "marker40x", mode="keyword")) == 1
    assert {path: d for path, (_at, d) in _marks(quire).items() if d} == {"stuck.hang": 2}  # no collateral death
    assert integrity_ok(quire)
