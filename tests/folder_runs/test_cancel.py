"""Cancel: a person stops a run (``quire run cancel``); it ends ``cancelled`` within seconds, keeps what it
committed (searchable, revertible as a group) and leaves nothing in flight; the request and the transition are
audited; a pending run is cancelled at once and a terminal one cannot be."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge import folder_runs
from knowledge.errors import Conflict, Forbidden
from knowledge.folder_runs import execute
from knowledge.library import audit
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import python_proc, quire_cli, wait_until
from tests.folder_runs.helpers import AGENT, PERSON, drain, entries, make_base, make_docs, rows, scalar
from tests.support.engine_fixtures import engine_quire

SOURCES = 400  # enough that the worker is still at it when the cancel lands (groups of 128)

# the data directory, or a team store: the CLI and the worker reach it through QUIRE_STORE
quire = pytest.fixture(engine_quire)


def cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return quire_cli("--json", *args, data_dir=data_dir)


def ok(*args: str, data_dir: Path) -> Any:
    result = cli(*args, data_dir=data_dir)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)


def refused(code: int, *args: str, data_dir: Path) -> dict[str, Any]:
    result = cli(*args, data_dir=data_dir)
    assert result.returncode == code, (args, result.returncode, result.stdout, result.stderr)
    error: dict[str, Any] = json.loads(result.stdout)["error"]
    return error


def status(quire: Quire, run_id: int) -> str:
    return str(scalar(quire, "SELECT status FROM folder_runs WHERE id = :r", r=run_id))


def committed(quire: Quire, run_id: int) -> int:
    sql = "SELECT count(*) FROM folder_run_outcomes WHERE run_id = :r AND disposition = 'committed'"
    return int(scalar(quire, sql, r=run_id))


def still_in_flight(quire: Quire, run_id: int) -> int:
    sql = "SELECT count(*) FROM folder_run_in_flight WHERE run_id = :r AND attempt IS NOT NULL"
    return int(scalar(quire, sql, r=run_id))


def committed_markers(quire: Quire, run_id: int) -> list[str]:
    """The marker word of every source the run committed (``doc007.txt`` → ``marker7x``)."""
    paths = rows(
        quire,
        "SELECT s.relative_path FROM folder_run_sources s JOIN folder_run_outcomes o ON o.source_id = s.id "
        "WHERE o.run_id = :r AND o.disposition = 'committed' ORDER BY s.ordinal",
        r=run_id,
    )
    return [f"marker{int(str(p[0])[3:6])}x" for p in paths]


def live_files(quire: Quire) -> int:
    return int(scalar(quire, "SELECT count(*) FROM items WHERE type = 'file' AND status != 'deleting'"))


@pytest.mark.parametrize("quire", ["sqlite", pytest.param("postgresql", marks=pytest.mark.engines)], indirect=True)
def test_a_running_run_cancelled_with_the_cli_ends_cancelled_within_seconds(
    quire: Quire, data_dir: Path, tmp_path: Path
) -> None:
    make_base(quire)
    folder_runs.set_descendant_cap(quire, 1000)
    run_id = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "folder", SOURCES), key="k").run_id
    worker = python_proc("-m", "app.cli", "--data-dir", str(data_dir), "worker", "--until-idle", "--nice", "0")
    try:
        wait_until(lambda: committed(quire, run_id) >= 1, timeout=300, what="the worker's first commit")
        asked = time.monotonic()
        answer = ok("run", "cancel", str(run_id), data_dir=data_dir)
        answered = time.monotonic() - asked
        assert answer == {"run_id": run_id, "status": "cancelling", "already_requested": False}
        wait_until(lambda: status(quire, run_id) != "running", timeout=60, what="the run ending after the cancel")
        latency = time.monotonic() - asked
        _out, err = worker.communicate(timeout=120)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, err
    assert latency < 60

    shown = ok("run", "show", str(run_id), data_dir=data_dir)
    assert (shown["status"], shown["job"]["status"], shown["cancel_requested"]) == ("cancelled", "cancelled", False)
    kept = shown["counts"]["committed"]
    assert 1 <= kept < SOURCES and shown["counts"]["pending"] == SOURCES - shown["counts"]["settled"] > 0
    assert still_in_flight(quire, run_id) == 0  # stopped, not killed: nothing is left marked in flight
    markers = committed_markers(quire, run_id)
    assert live_files(quire) == kept == len(markers)
    for marker in (markers[0], markers[-1]):  # what it committed stays searchable
        assert [h.item_name for h in search(quire, "kb", marker, mode="keyword")], marker

    log = entries(quire, run_id)
    assert [e.action for e in log[-2:]] == [audit.RUN_CANCEL_REQUESTED, audit.RUN_CANCELLED]
    assert [e.action for e in log].count(audit.BATCH_COMMITTED) == kept  # none filed after the request
    request, ended = log[-2:]
    measured = {
        "command_seconds": answered,  # `quire run cancel` from its start to its answer (a process start-up)
        "request_to_cancelled_seconds": ended.at - request.at,  # the worker stopping after the request committed
        "command_to_cancelled_seconds": latency,
    }
    print(json.dumps({**{k: round(v, 2) for k, v in measured.items()}, "committed": kept}))
    assert request.actor == ended.actor == audit.SYSTEM_ACTOR and request.payload["approved_by"].startswith("person:")
    assert ended.attempt == 1 and ended.payload["counts"]["committed"] == kept  # the attempt that stopped it
    assert [e.action for e in log].count(audit.RUN_COMPLETED) == 0

    reverted = ok("run", "revert", str(run_id), data_dir=data_dir)
    assert reverted["status"] == "reverted" and reverted["deleting"] >= kept
    assert live_files(quire) == 0
    assert search(quire, "kb", markers[0], mode="keyword") == []
    ok("worker", "--until-idle", "--nice", "0", data_dir=data_dir)  # the cleanup the revert queued
    assert scalar(quire, "SELECT count(*) FROM items") == 0


def test_a_pending_run_is_cancelled_at_once_and_no_worker_ever_runs_it(data_dir: Path, tmp_path: Path) -> None:
    ok("base", "create", "kb", data_dir=data_dir)
    run_id = ok("run", "start", "kb", str(make_docs(tmp_path / "folder", 3)), data_dir=data_dir)["run_id"]
    assert refused(5, "--as-agent", "helper", "run", "cancel", str(run_id), data_dir=data_dir)["code"] == "forbidden"
    assert refused(3, "run", "cancel", "999", data_dir=data_dir)["message"] == "folder run 999 not found"

    answer = ok("run", "cancel", str(run_id), data_dir=data_dir)
    assert answer == {"run_id": run_id, "status": "cancelled", "already_requested": False}
    ok("worker", "--until-idle", "--nice", "0", data_dir=data_dir)

    shown = ok("run", "show", str(run_id), data_dir=data_dir)
    assert (shown["status"], shown["job"]["status"], shown["counts"]["pending"]) == ("cancelled", "cancelled", 3)
    trail = ok("audit", "--run", str(run_id), data_dir=data_dir)["entries"]
    assert [(e["action"], e["attempt"]) for e in trail] == [
        (audit.RUN_CREATED, None),
        (audit.RUN_CANCEL_REQUESTED, None),
        (audit.RUN_CANCELLED, None),
    ]
    again = refused(4, "run", "cancel", str(run_id), data_dir=data_dir)
    assert again["message"] == f"folder run {run_id} is cancelled; only a pending or running run can be cancelled"
    assert ok("run", "revert", str(run_id), data_dir=data_dir)["deleting"] == 0  # nothing committed, still revertible
    assert len(ok("audit", "--run", str(run_id), data_dir=data_dir)["entries"]) == 4


def test_a_finished_run_cannot_be_cancelled(quire: Quire, data_dir: Path, tmp_path: Path) -> None:
    make_base(quire)
    run_id = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "folder", 2), key="k").run_id
    drain(quire)
    assert status(quire, run_id) == "completed"
    before = [e.action for e in entries(quire, run_id)]
    with pytest.raises(Conflict, match="is completed; only a pending or running run can be cancelled"):
        folder_runs.cancel_run(quire, PERSON, run_id)
    assert refused(4, "run", "cancel", str(run_id), data_dir=data_dir)["code"] == "conflict"
    with pytest.raises(Forbidden):
        folder_runs.cancel_run(quire, AGENT, run_id)
    assert [e.action for e in entries(quire, run_id)] == before and status(quire, run_id) == "completed"


def test_the_attempt_stops_at_the_next_source_and_a_second_request_files_nothing(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_base(quire)
    run_id = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "folder", 12), key="k").run_id
    real_settle = execute._settle_source
    answers: list[folder_runs.CancelResult] = []

    def settle(settling: Any, source: Any, **kw: Any) -> str:
        disposition = real_settle(settling, source, **kw)
        if source.ordinal == 4:  # a person cancels right after the fifth source committed, and presses again
            answers.extend(folder_runs.cancel_run(quire, PERSON, run_id) for _ in range(2))
            assert folder_runs.show_run(quire, run_id).summary.cancel_requested
        return disposition

    monkeypatch.setattr(execute, "_settle_source", settle)
    drain(quire)

    assert [(a.status, a.already_requested) for a in answers] == [("cancelling", False), ("cancelling", True)]
    summary = folder_runs.show_run(quire, run_id).summary
    assert (summary.run.status, summary.job_status, summary.cancel_requested) == ("cancelled", "cancelled", False)
    assert (summary.counts["committed"], summary.counts["pending"]) == (5, 7)
    assert still_in_flight(quire, run_id) == 0
    log = [(e.action, e.attempt) for e in entries(quire, run_id)]
    assert log == [
        (audit.RUN_CREATED, None),
        (audit.RUN_STARTED, 1),
        *[(audit.BATCH_COMMITTED, 1)] * 5,
        (audit.RUN_CANCEL_REQUESTED, None),
        (audit.RUN_CANCELLED, 1),
    ]
    quire.recover()  # the run settled itself: the stranded-run scan leaves it be (never turns it failed)
    assert status(quire, run_id) == "cancelled" and entries(quire, run_id)[-1].action == audit.RUN_CANCELLED

    folder_runs.revert_run(quire, PERSON, run_id)
    drain(quire)
    assert status(quire, run_id) == "reverted" and live_files(quire) == 0


def test_a_run_handed_back_to_the_queue_is_cancelled_at_once(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Running, but no attempt executing it (its job waits in the queue): the request ends it itself."""
    base = make_base(quire)
    run_id = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "folder", 4), key="k").run_id
    real_settle = execute._settle_source

    def settle(settling: Any, source: Any, **kw: Any) -> str:
        if source.ordinal == 2:  # an operator suspends the ingest agent: the job is handed back
            with quire.db.write() as conn:
                conn.execute(text("UPDATE identities SET disabled = 1 WHERE base_id = :b"), {"b": base.id})
        return real_settle(settling, source, **kw)

    monkeypatch.setattr(execute, "_settle_source", settle)
    drain(quire)
    summary = folder_runs.show_run(quire, run_id).summary
    assert (summary.run.status, summary.job_status, summary.counts["committed"]) == ("running", "pending", 2)

    assert folder_runs.cancel_run(quire, PERSON, run_id).status == "cancelled"
    summary = folder_runs.show_run(quire, run_id).summary
    assert (summary.run.status, summary.job_status, summary.counts["committed"]) == ("cancelled", "cancelled", 2)
    ended = entries(quire, run_id)[-1]
    assert (ended.action, ended.attempt, ended.payload["counts"]["committed"]) == (audit.RUN_CANCELLED, None, 2)
    with quire.db.write() as conn:
        conn.execute(text("UPDATE identities SET disabled = 0 WHERE base_id = :b"), {"b": base.id})
    drain(quire)  # nothing is left to run it
    assert entries(quire, run_id)[-1].action == audit.RUN_CANCELLED and live_files(quire) == 2
