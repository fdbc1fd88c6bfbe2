"""The ledger itself: tables match their description, stranded runs are repaired, mid-run hand-back resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from knowledge import folder_runs
from knowledge.folder_runs import execute
from knowledge.library import audit
from knowledge.runtime import Quire
from knowledge.store.schema_runs import metadata
from tests.folder_runs.helpers import PERSON, drain, entries, make_base, make_docs, rows


def test_the_table_descriptions_match_the_migrated_tables(quire: Quire) -> None:
    with quire.db.read() as conn:
        for table in metadata.sorted_tables:
            columns = [r[1] for r in conn.execute(text(f"PRAGMA table_info({table.name})")).all()]
            assert columns == [c.name for c in table.columns], table.name


def test_a_run_whose_job_was_cancelled_is_settled_failed_by_the_repair_scan(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 2), key="k")
    with quire.db.write() as conn:
        quire.queue.cancel(conn, [started.job_id])
    assert quire.recover().repaired == 1  # like the other scans, it reports what it repaired
    assert quire.recover().repaired == 0  # a second start finds nothing left to do
    run = folder_runs.show_run(quire, started.run_id).summary.run
    assert run.status == "failed" and run.error == "its job ended without settling the run"
    assert [e.action for e in entries(quire, started.run_id)] == [audit.RUN_CREATED, audit.RUN_FAILED]


def test_an_identity_disabled_mid_run_hands_the_job_back_and_the_same_attempt_resumes(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 4), key="k")
    real_settle = execute._settle_source
    seen: list[int] = []

    def settle(settling: Any, source: Any, **kw: Any) -> str:
        if source.ordinal == 2 and not seen:  # its group was prepared; sources 0 and 1 have committed
            seen.append(source.ordinal)
            with quire.db.write() as conn:  # an operator suspends the agent while the run is under way
                conn.execute(text("UPDATE identities SET disabled = 1 WHERE base_id = :b"), {"b": base.id})
        return real_settle(settling, source, **kw)

    monkeypatch.setattr(execute, "_settle_source", settle)
    drain(quire)
    job = quire.queue.get(started.job_id)
    assert (job.status, job.attempt) == ("pending", 0)  # handed back, the attempt not consumed
    summary = folder_runs.show_run(quire, started.run_id).summary
    assert (summary.run.status, summary.counts["committed"]) == ("running", 2)

    with quire.db.write() as conn:
        conn.execute(text("UPDATE identities SET disabled = 0 WHERE base_id = :b"), {"b": base.id})
        conn.execute(text("UPDATE jobs SET available_at = 0 WHERE id = :j"), {"j": started.job_id})
    drain(quire)
    summary = folder_runs.show_run(quire, started.run_id).summary
    assert (summary.run.status, summary.counts["committed"]) == ("completed", 4)
    log = [(e.action, e.attempt) for e in entries(quire, started.run_id)]
    assert log.count((audit.RUN_STARTED, 1)) == 1 and (audit.RUN_COMPLETED, 1) in log
    assert rows(quire, "SELECT DISTINCT attempt FROM ingest_batches") == [(1,)]


def test_a_job_that_is_not_bound_to_the_run_is_refused_before_it_writes(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    started = folder_runs.start_run(quire, PERSON, "kb", make_docs(tmp_path / "f", 2), key="k")
    with quire.db.write() as conn:
        conn.execute(text("UPDATE jobs SET available_at = 9e12 WHERE id = :j"), {"j": started.job_id})  # hold it
        payload = {"run_id": started.run_id, "base_id": 1, "approved_by": PERSON.label}
        rogue = quire.queue.enqueue(conn, folder_runs.JOB_TYPE, payload, base_id=1).job_id
    drain(quire)
    assert quire.queue.get(rogue).result == {"run_id": started.run_id, "refused": "this job is not bound to the run"}
    assert folder_runs.show_run(quire, started.run_id).summary.run.status == "pending"
    assert [e.action for e in entries(quire, started.run_id)] == [audit.RUN_CREATED]
    assert rows(quire, "SELECT count(*) FROM items") == [(0,)]
