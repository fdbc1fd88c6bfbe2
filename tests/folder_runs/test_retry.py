"""``quire run retry``: a failed run is retried as a *new* run linked to it, never resumed (seed 000).

The failed run stays failed with its one terminal entry; the new run (``retry_of``) is judged against the
folder as it is now, and the sources the failed run committed settle ``already_committed`` (stored, and
shown), so nothing is ingested twice. Every transition entry names the system.
"""

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
from tests.folder_runs.helpers import (
    AGENT,
    OTHER_PERSON,
    PERSON,
    doc_text,
    drain,
    entries,
    make_base,
    make_docs,
    rows,
    scalar,
)
from tests.support.engine_fixtures import ENGINES, engine_quire

SOURCES = 6

# the data directory, or a team store for the tests parametrized over ENGINES
quire = pytest.fixture(engine_quire)
TRANSITIONS = (audit.RUN_STARTED, audit.RUN_COMPLETED, audit.RUN_FAILED, audit.RUN_REVERTED)


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


def _failed_run(quire: Quire, folder: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(folder, SOURCES), key="retry-key")
    _fail_one_commit_once(monkeypatch)
    drain(quire)
    monkeypatch.undo()
    run = _run(quire, started.run_id)
    assert run.status == "failed" and "database" in (run.error or "")
    assert scalar(quire, "SELECT count(*) FROM folder_run_outcomes WHERE run_id = :r", r=started.run_id) == 2
    return started.run_id


def _dispositions(quire: Quire, run_id: int) -> dict[str, int]:
    found = rows(quire, "SELECT disposition, count(*) FROM folder_run_outcomes WHERE run_id = :r GROUP BY 1", r=run_id)
    return {str(d): int(n) for d, n in found}


def test_retry_is_a_new_run_and_what_the_failed_run_committed_settles_already_committed(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_id = _failed_run(quire, tmp_path / "f", monkeypatch)
    old_before = _run(quire, old_id)

    result = folder_runs.retry_run(quire, PERSON, old_id)
    assert result.run_id != old_id and result.retry_of == old_id and result.outcome == "created"
    assert result.job_id != old_before.job_id
    drain(quire)

    new, old = _run(quire, result.run_id), _run(quire, old_id)
    assert new.status == "completed" and new.retry_of == old_id and new.declared_size == SOURCES
    assert (old.status, old.error, old.job_id, old.finished_at) == (
        "failed",
        old_before.error,
        old_before.job_id,
        old_before.finished_at,
    )
    assert _dispositions(quire, old_id) == {"committed": 2}  # the failed run is left as it was
    assert _dispositions(quire, new.id) == {"already_committed": 2, "committed": SOURCES - 2}
    # nothing twice: one item and one batch per file over both runs
    assert scalar(quire, "SELECT count(*) FROM items WHERE type = 'file'") == SOURCES
    assert scalar(quire, "SELECT count(DISTINCT relative_path) FROM items WHERE type = 'file'") == SOURCES
    assert scalar(quire, "SELECT count(*) FROM ingest_batches") == SOURCES
    # an already_committed outcome names the item the earlier run committed
    linked = rows(
        quire,
        "SELECT o.item_id, i.run_id FROM folder_run_outcomes o JOIN items i ON i.id = o.item_id "
        "WHERE o.run_id = :r AND o.disposition = 'already_committed'",
        r=new.id,
    )
    assert len(linked) == 2 and {r[1] for r in linked} == {old_id}

    detail = folder_runs.show_run(quire, new.id)
    shown = [s.disposition for s in detail.sources]
    assert shown.count("already_committed") == 2 and shown.count("committed") == SOURCES - 2
    assert detail.summary.counts["already_committed"] == 2
    assert detail.as_dict()["retry_of"] == old_id
    assert folder_runs.show_run(quire, old_id).as_dict()["retried_by"] == new.id


@pytest.mark.parametrize("quire", ENGINES, indirect=True)  # the database's guards, on both engines
def test_a_failed_run_keeps_exactly_one_terminal_entry_and_transitions_name_the_system(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_id = _failed_run(quire, tmp_path / "f", monkeypatch)
    new_id = folder_runs.retry_run(quire, PERSON, old_id).run_id
    drain(quire)

    old_log = [e.action for e in entries(quire, old_id)]
    assert old_log.count(audit.RUN_FAILED) + old_log.count(audit.RUN_COMPLETED) == 1
    assert audit.RUN_COMPLETED not in old_log
    new_log = entries(quire, new_id)
    assert [e.action for e in new_log].count(audit.RUN_COMPLETED) == 1
    created = [e for e in new_log if e.action == audit.RUN_CREATED]
    assert len(created) == 1 and created[0].actor == PERSON.label and created[0].payload["retry_of"] == old_id
    for entry in entries(quire, old_id) + new_log:
        if entry.action in TRANSITIONS:
            assert entry.actor == audit.SYSTEM_ACTOR, entry
    # the ledger still refuses a second terminal entry for the failed run
    with pytest.raises(sa_exc.IntegrityError), quire.db.write() as conn:
        audit.append(conn, audit.RUN_COMPLETED, "system", base_id=1, run_id=old_id, attempt=None, payload={})


@pytest.mark.parametrize("quire", ENGINES, indirect=True)  # the database's guards, on both engines
def test_statuses_only_move_forward(quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_id = _failed_run(quire, tmp_path / "f", monkeypatch)
    for sql in (
        "UPDATE folder_runs SET status = 'pending' WHERE id = :r",
        "UPDATE folder_runs SET status = 'pending', retries = retries + 1 WHERE id = :r",  # the old retry's move
        "UPDATE folder_runs SET status = 'running' WHERE id = :r",
    ):
        with pytest.raises(sa_exc.IntegrityError), quire.db.write() as conn:
            conn.execute(text(sql), {"r": old_id})
    new_id = folder_runs.retry_run(quire, PERSON, old_id).run_id
    with pytest.raises(sa_exc.IntegrityError), quire.db.write() as conn:  # the link is part of the identity
        conn.execute(text("UPDATE folder_runs SET retry_of = NULL WHERE id = :r"), {"r": new_id})


def test_the_retry_is_judged_against_the_folder_as_it_is_now(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "f"
    old_id = _failed_run(quire, folder, monkeypatch)
    committed = {
        str(r[0])
        for r in rows(
            quire,
            "SELECT s.relative_path FROM folder_run_outcomes o JOIN folder_run_sources s ON s.id = o.source_id "
            "WHERE o.run_id = :r",
            r=old_id,
        )
    }
    gone = next(p for p in sorted(p.name for p in folder.iterdir()) if p not in committed)
    (folder / gone).unlink()
    (folder / "late.txt").write_text(doc_text(90))

    new_id = folder_runs.retry_run(quire, PERSON, old_id).run_id
    drain(quire)

    manifest = {
        str(r[0]) for r in rows(quire, "SELECT relative_path FROM folder_run_sources WHERE run_id = :r", r=new_id)
    }
    assert gone not in manifest and "late.txt" in manifest and committed <= manifest
    assert _dispositions(quire, new_id) == {"already_committed": 2, "committed": SOURCES - 2}
    assert _run(quire, new_id).status == "completed"


def test_only_a_person_retries_only_a_failed_run_and_a_second_press_replays(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_id = _failed_run(quire, tmp_path / "f", monkeypatch)
    with pytest.raises(Forbidden):
        folder_runs.retry_run(quire, AGENT, old_id)
    first = folder_runs.retry_run(quire, PERSON, old_id)
    again = folder_runs.retry_run(quire, PERSON, old_id)  # a double click: the same new run
    assert (again.outcome, again.run_id, again.job_id) == ("replayed", first.run_id, first.job_id)
    with pytest.raises(Conflict):
        folder_runs.retry_run(quire, OTHER_PERSON, old_id)  # another person's retry never adopts this one
    assert scalar(quire, "SELECT count(*) FROM folder_runs") == 2
    drain(quire)
    with pytest.raises(Conflict, match="only a failed run"):
        folder_runs.retry_run(quire, PERSON, first.run_id)  # completed: nothing to retry


def test_run_start_without_a_key_replays_the_same_request(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = make_docs(tmp_path / "f", 3)
    first = folder_runs.start_run(quire, PERSON, "kb", folder)
    again = folder_runs.start_run(quire, PERSON, "kb", folder)
    assert (again.outcome, again.run_id, again.job_id, again.key) == ("replayed", first.run_id, first.job_id, first.key)
    other = folder_runs.start_run(quire, OTHER_PERSON, "kb", folder)  # another actor: another request
    assert other.outcome == "created" and other.run_id != first.run_id
    (folder / "doc999.txt").write_text(doc_text(99))  # another manifest: another request
    changed = folder_runs.start_run(quire, PERSON, "kb", folder)
    assert changed.outcome == "created" and changed.run_id not in (first.run_id, other.run_id)
    assert scalar(quire, "SELECT count(*) FROM folder_runs") == 3


def test_cli_run_start_twice_without_a_key_is_one_run(quire: Quire, data_dir: Path, tmp_path: Path) -> None:
    make_base(quire)
    folder = make_docs(tmp_path / "f", 2)
    one = quire_cli("--json", "run", "start", "kb", str(folder), data_dir=data_dir)
    two = quire_cli("--json", "run", "start", "kb", str(folder), data_dir=data_dir)
    assert one.returncode == 0 and two.returncode == 0, (one.stderr, two.stderr)
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert (a["outcome"], b["outcome"]) == ("created", "replayed") and a["run_id"] == b["run_id"]


def test_cli_run_retry(quire: Quire, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_id = _failed_run(quire, tmp_path / "f", monkeypatch)
    refused = quire_cli("--as-agent", "bot", "run", "retry", str(old_id), data_dir=data_dir)
    assert refused.returncode == 5, refused.stderr
    missing = quire_cli("run", "retry", "999", data_dir=data_dir)
    assert missing.returncode == 3, missing.stderr
    done = quire_cli("--json", "run", "retry", str(old_id), data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["retry_of"] == old_id and answer["run_id"] != old_id and answer["outcome"] == "created"
    shown = quire_cli("run", "show", str(answer["run_id"]), data_dir=data_dir)
    assert f"retry of run {old_id}" in shown.stdout
