"""A graceful stop is not a death: a worker stopped by SIGTERM (what closing the window sends) hands back
the jobs it still runs — ``pending``, its attempt kept, its items back to waiting — and counts no death for
anything in hand. Only an abnormal end (SIGKILL, a crash: tests/knowledge/test_deaths.py) counts one."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from knowledge.runtime import Quire
from tests.conftest import REPO, python_proc, wait_until
from tests.folder_runs.helpers import rows
from tests.knowledge.helpers import make_base, recover_as_a_new_start
from tests.support.bad_parsers import cli_argv
from tests.support.bad_parsers import run_cli as bad_cli
from tests.support.files import write_tree

HANGING = {"QUIRE_PARSE_TIMEOUT": "600", "PYTHONPATH": str(REPO)}  # the parse stays in hand until the stop


def stop_when(data_dir: Path, ready: Callable[[], bool], what: str) -> None:
    """Start a worker, wait until ``ready()``, SIGTERM it: it exits 0 on its own."""
    worker = python_proc(*cli_argv("worker", "--no-watch", data_dir=data_dir)[1:])
    try:
        wait_until(ready, timeout=180, what=what)
        worker.send_signal(signal.SIGTERM)
        _out, err = worker.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        worker.kill()
        raise
    assert worker.returncode == 0, err


def in_hand(quire: Quire, name: str) -> Callable[[], bool]:
    """Whether the item ``name`` is being read now."""
    return lambda: rows(quire, "SELECT status FROM items WHERE name = :n", n=name) == [("reading",)]


def test_two_sigterms_during_a_slow_file_quarantine_nothing(
    quire: Quire, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad_parsers_here: None
) -> None:
    for key, value in HANGING.items():
        monkeypatch.setenv(key, value)
    make_base(quire)
    folder = write_tree(tmp_path / "D", {"slow.hang": "a parse that takes its time"})
    assert bad_cli("add", "kb", str(folder), data_dir=data_dir).returncode == 0
    index_jobs = "SELECT id, status, attempt FROM jobs WHERE type = 'knowledge.index-documents'"
    for stop in (1, 2):
        stop_when(data_dir, in_hand(quire, "slow.hang"), "slow.hang in hand")
        if stop == 1:  # the worker's walk of the folder made the index job
            [(job_id, _status, attempt)] = rows(quire, index_jobs)
            attempt -= 1
        recover_as_a_new_start(quire)  # what the next start's recovery decides
        assert rows(quire, "SELECT status, deaths, error_code FROM items WHERE name = 'slow.hang'") == [
            ("processing", 0, None)
        ]  # handed back waiting: no death, never quarantined
        # the same job, pending again; each claim took a new attempt (the stopped one is fenced out)
        assert rows(quire, index_jobs) == [(job_id, "pending", attempt + stop)]


def test_a_sigterm_during_a_big_add_leaves_the_jobs_as_they_were_grouped(
    quire: Quire, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad_parsers_here: None
) -> None:
    for key, value in HANGING.items():
        monkeypatch.setenv(key, value)
    make_base(quire)
    files = {f"note{n:03}.txt": f"Note {n} about the tides and herons." for n in range(400)}
    folder = write_tree(tmp_path / "D", {"aa-slow.hang": "slow", **files})
    assert bad_cli("add", "kb", str(folder), data_dir=data_dir).returncode == 0
    stop_when(data_dir, in_hand(quire, "aa-slow.hang"), "aa-slow.hang in hand")
    grouped = rows(quire, "SELECT id FROM jobs WHERE type = 'knowledge.index-documents' ORDER BY id")
    assert grouped  # the worker's walk grouped the 401 files (one batch job here)
    recover_as_a_new_start(quire)
    assert rows(quire, "SELECT count(*) FROM items WHERE deaths > 0") == [(0,)]
    assert rows(quire, "SELECT count(*) FROM items WHERE status = 'failed'") == [(0,)]
    unfinished = rows(
        quire, "SELECT id FROM jobs WHERE type = 'knowledge.index-documents' AND status = 'pending' ORDER BY id"
    )
    assert unfinished and set(unfinished) <= set(grouped)  # the same jobs, none split into one-item jobs
    assert rows(quire, "SELECT count(*) FROM jobs WHERE type = 'knowledge.index-documents'") == [(len(grouped),)]


def test_two_sigterms_during_a_folder_runs_slow_source_quarantine_nothing(
    quire: Quire, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad_parsers_here: None
) -> None:
    for key, value in HANGING.items():
        monkeypatch.setenv(key, value)
    make_base(quire)
    folder = write_tree(tmp_path / "R", {"slow.hang": "a parse that takes its time", "quick.txt": "Herons wade."})
    assert bad_cli("run", "start", "kb", str(folder), data_dir=data_dir).returncode == 0
    marked = "SELECT count(*) FROM folder_run_in_flight WHERE attempt IS NOT NULL"
    for _stop in range(2):  # a slow parse is marked in flight once its answer is late: then the run is stopped
        stop_when(data_dir, lambda: rows(quire, marked) == [(1,)], "the slow source in flight")
        assert rows(quire, marked) == [(0,)]  # the stopping attempt cleared its marks
    assert rows(quire, "SELECT sum(deaths) FROM folder_run_in_flight") == [(0,)]
    assert rows(quire, "SELECT count(*) FROM folder_run_outcomes WHERE disposition = 'quarantined'") == [(0,)]
    assert rows(quire, "SELECT status FROM folder_runs") == [("running",)]  # handed back, to go on
