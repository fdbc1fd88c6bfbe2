"""Cancel: a person stops a pending or running run; it ends ``cancelled``, keeping what it committed.

The request is one audited transaction (``ingest.folder_run.cancel_requested``, the system's entry with the
person as ``approved_by``, as a revert names them). What happens next depends on who holds the run:

* no attempt is executing it (the run is pending, or its job was handed back or is waiting for a retry): the
  job is cancelled and the run moves to ``cancelled`` with its one terminal entry, in that same transaction;
* an attempt is executing it: the job's ``cancel_requested`` is raised (``jobs.queue.JobQueue.request_cancel``)
  and the attempt, which reads that flag in every source's transaction and before every group, stops there
  and files the terminal transition itself — fenced on its stamp like ``completed`` and ``failed``, so a
  superseded attempt cannot file it (``execute.py``). A second request meanwhile files nothing.

A terminal run cannot be cancelled (a conflict). A cancelled run is terminal and may be reverted as a group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knowledge.errors import Conflict
from knowledge.folder_runs.ledger import load_run_for, settle_cancelled, size_and_counts
from knowledge.folder_runs.principal import require_person_for_run
from knowledge.library import audit
from knowledge.principal import Principal
from knowledge.store.schema_runs import CANCELLABLE_RUN_STATUSES

if TYPE_CHECKING:
    from knowledge.runtime import Quire


@dataclass(frozen=True)
class CancelResult:
    run_id: int
    status: str  # "cancelled" (ended now) or "cancelling" (the attempt executing it ends it)
    already_requested: bool = False  # an earlier request stands; this one filed nothing

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "already_requested": self.already_requested}


def cancel_run(quire: Quire, principal: Principal, run_id: int) -> CancelResult:
    """Cancel the pending or running run ``run_id`` (see the module docstring)."""
    require_person_for_run(principal, "cancel")
    with quire.db.write() as conn:
        run = load_run_for(conn, run_id)
        if run.status not in CANCELLABLE_RUN_STATUSES:
            raise Conflict(f"folder run {run_id} is {run.status}; only a pending or running run can be cancelled")
        answer = "not_live" if run.job_id is None else quire.queue.request_cancel(conn, run.job_id)
        if answer == "already_requested":
            return CancelResult(run.id, "cancelling", already_requested=True)
        audit.append(
            conn,
            audit.RUN_CANCEL_REQUESTED,
            audit.SYSTEM_ACTOR,  # a transition names the system; the person is its approver
            base_id=run.base_id,
            run_id=run.id,
            payload={**size_and_counts(conn, run.id, run.declared_size), "approved_by": principal.label},
        )
        if answer == "requested":
            return CancelResult(run.id, "cancelling")
        settle_cancelled(conn, run, None)  # nothing executes it: it ends here
    return CancelResult(run.id, "cancelled")
