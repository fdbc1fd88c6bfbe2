"""Retry: a person continues a failed run under the same key, its bound job reopened, in one audited transaction.

A run a transient fault settled ``failed`` (a busy database, a full disk freed since) is not lost: the
retry moves it ``failed → pending`` (the one backwards move the ledger allows, and only together with
``retries + 1``), reopens the run's own bound job and files ``ingest.folder_run.retried`` — one
transaction. The job's attempt counter carries on, so the run's owner stamp still only goes up and the
next attempt enters the run as any attempt does (``started``, then one source per transaction). What
earlier attempts committed stays committed: the walk reports it ``already_committed`` and writes nothing
for it. Each retry may end in its own one terminal entry (the entries carry ``retry``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knowledge.errors import Conflict, NotFound
from knowledge.folder_runs.ledger import load_run, size_and_counts, transition
from knowledge.folder_runs.principal import require_person_for_run
from knowledge.library import audit
from knowledge.library.bases import assert_base_writable, load_base
from knowledge.principal import Principal

if TYPE_CHECKING:
    from knowledge.runtime import Quire


@dataclass(frozen=True)
class RetryResult:
    run_id: int
    job_id: int
    retry: int

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": "pending", "job_id": self.job_id, "retry": self.retry}


def retry_run(quire: Quire, principal: Principal, run_id: int) -> RetryResult:
    """Continue a failed run: failed → pending, its job reopened, ``retried`` filed (one transaction)."""
    require_person_for_run(principal, "retry")
    with quire.db.write() as conn:
        run = load_run(conn, run_id)
        if run is None:
            raise NotFound(f"folder run {run_id} not found")
        base = load_base(conn, run.base_id)
        assert_base_writable(base, "retry a run")
        if run.status != "failed":
            raise Conflict(f"folder run {run_id} is {run.status}; only a failed run can be retried")
        if run.job_id is None or not quire.queue.reopen(conn, run.job_id):
            raise Conflict(f"folder run {run_id}: its job is still live; wait for it to end")
        retry = run.retries + 1
        transition(
            conn,
            run.id,
            base.id,
            audit.RUN_RETRIED,
            principal.label,
            {**size_and_counts(conn, run.id, run.declared_size), "retry": retry, "previous_error": run.error},
            values={"status": "pending", "retries": retry, "error": None, "finished_at": None},
        )
    return RetryResult(run.id, run.job_id, retry)
