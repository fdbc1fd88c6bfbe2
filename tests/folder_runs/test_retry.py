"""``quire run retry``: a run a transient fault failed continues under the same key (issue 10, item 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from knowledge import folder_runs
from knowledge.errors import Conflict, Forbidden
from knowledge.folder_runs import execute
from knowledge.folder_runs.ledger import RunRecord, load_run
from knowledge.library import audit
from knowledge.runtime import Quire
from knowledge.store import apsw_dbapi
from tests.conftest import quire_cli
from tests.folder_runs.helpers import AGENT, PERSON, drain, entries, make_base, make_docs, rows, scalar

SOURCES = 6


def _run(quire: Quire, run_id: int) -> RunRecord:
    with quire.db.read() as conn:
        run = load_run(conn, run_id)
    assert run is not None
    return run


def _fail_one_commit_once(monkeypatch: pytest.MonkeyPatch, at_call: int = 3) -> list[int]:
    """The third source's transaction raises a busy-database error once, as a real lock timeout would."""
    calls: list[int] = []
    real = execute.settle_source_in_tx

    def flaky(*args: Any, **kwargs: Any) -> str:
        calls.append(1)
        if len(calls) == at_call:
            raise sa_exc.OperationalError("COMMIT", {}, apsw_dbapi.OperationalError("database is locked"))
        return real(*args, **kwargs)

    monkeypatch.setattr(execute, "settle_source_in_tx", flaky)
    return calls


def _failed_run(quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", SOURCES), key="retry-key")
    _fail_one_commit_once(monkeypatch)
    drain(quire)
    run = _run(quire, started.run_id)
    assert run.status == "failed" and "database" in (run.error or "")
    assert scalar(quire, "SELECT count(*) FROM folder_run_outcomes WHERE run_id = :r", r=started.run_id) == 2
    return started.run_id


def test_retry_completes_the_same_run_with_every_source_committed_once(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _failed_run(quire, tmp_path, monkeypatch)
    job_before = _run(quire, run_id).job_id

    result = folder_runs.retry_run(quire, PERSON, run_id)
    assert result.as_dict() == {"run_id": run_id, "status": "pending", "job_id": job_before, "retry": 1}
    drain(quire)

    run = _run(quire, run_id)
    assert run.status == "completed" and run.error is None and run.job_id == job_before
    assert rows(
        quire, "SELECT disposition, count(*) FROM folder_run_outcomes WHERE run_id = :r GROUP BY 1", r=run_id
    ) == [("committed", SOURCES)]
    assert scalar(quire, "SELECT count(*) FROM ingest_batches WHERE run_id = :r", r=run_id) == SOURCES
    assert scalar(quire, "SELECT count(DISTINCT source_id) FROM ingest_batches WHERE run_id = :r", r=run_id) == SOURCES
    assert scalar(quire, "SELECT count(*) FROM items WHERE run_id = :r AND type = 'file'", r=run_id) == SOURCES
    assert scalar(quire, "SELECT count(*) FROM folder_runs") == 1  # the same run, not a new one
    # the ledger tells the story: failed (retry 0), retried by the person, completed (retry 1)
    log = [(e.action, e.actor, e.payload.get("retry")) for e in entries(quire, run_id)]
    terminal = [x for x in log if x[0] in (audit.RUN_FAILED, audit.RUN_COMPLETED, audit.RUN_RETRIED)]
    assert terminal == [
        (audit.RUN_FAILED, "system", None),
        (audit.RUN_RETRIED, PERSON.label, 1),
        (audit.RUN_COMPLETED, "system", 1),
    ]
    committed = [e for e in entries(quire, run_id) if e.action == audit.BATCH_COMMITTED]
    assert len(committed) == SOURCES


def test_only_a_person_retries_and_only_a_failed_run(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _failed_run(quire, tmp_path, monkeypatch)
    with pytest.raises(Forbidden):
        folder_runs.retry_run(quire, AGENT, run_id)
    assert _run(quire, run_id).status == "failed"
    folder_runs.retry_run(quire, PERSON, run_id)
    with pytest.raises(Conflict, match="only a failed run"):
        folder_runs.retry_run(quire, PERSON, run_id)  # pending again: a second press changes nothing
    drain(quire)
    with pytest.raises(Conflict, match="only a failed run"):
        folder_runs.retry_run(quire, PERSON, run_id)
    assert [e.action for e in entries(quire, run_id)].count(audit.RUN_RETRIED) == 1


def test_the_ledger_allows_exactly_a_retry_backwards(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _failed_run(quire, tmp_path, monkeypatch)
    for sql in (
        "UPDATE folder_runs SET status = 'pending' WHERE id = :r",  # without the retry count
        "UPDATE folder_runs SET status = 'running', retries = retries + 1 WHERE id = :r",  # not to running
        "UPDATE folder_runs SET status = 'pending', retries = retries + 2 WHERE id = :r",
        "UPDATE folder_runs SET retries = retries + 1 WHERE id = :r",
    ):
        with pytest.raises(sa_exc.IntegrityError), quire.db.write() as conn:
            conn.execute(text(sql), {"r": run_id})
    folder_runs.retry_run(quire, PERSON, run_id)
    drain(quire)
    with pytest.raises(sa_exc.IntegrityError), quire.db.write() as conn:  # completed never goes back
        conn.execute(
            text("UPDATE folder_runs SET status = 'pending', retries = retries + 1 WHERE id = :r"), {"r": run_id}
        )
    with pytest.raises(sa_exc.IntegrityError), quire.db.write() as conn:  # one terminal entry per retry
        audit.append(conn, audit.RUN_FAILED, "system", base_id=1, run_id=run_id, attempt=None, payload={"retry": 1})


def test_cli_run_retry(quire: Quire, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = _failed_run(quire, tmp_path, monkeypatch)
    refused = quire_cli("--as-agent", "bot", "run", "retry", str(run_id), data_dir=data_dir)
    assert refused.returncode == 5, refused.stderr
    missing = quire_cli("run", "retry", "999", data_dir=data_dir)
    assert missing.returncode == 3, missing.stderr
    done = quire_cli("--json", "run", "retry", str(run_id), data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["retry"] == 1
    again = quire_cli("run", "retry", str(run_id), data_dir=data_dir)
    assert again.returncode == 4, again.stderr
