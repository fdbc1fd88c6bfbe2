"""Group revert: a completed (or cancelled) run's committed material goes ``deleting`` with its cleanup, in one
audited transaction."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knowledge.errors import Conflict
from knowledge.folder_runs.ledger import load_run_for, run_containers, size_and_counts, transition
from knowledge.folder_runs.principal import require_person_for_run
from knowledge.library import audit, tree
from knowledge.library.bases import assert_base_writable, load_base
from knowledge.library.ids import ItemId
from knowledge.lifecycle import schedule_delete
from knowledge.principal import Principal
from knowledge.store.schema_runs import REVERTIBLE_RUN_STATUSES

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


# -- revert ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RevertResult:
    run_id: int
    deleting: int
    job_id: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": "reverted", "deleting": self.deleting, "job_id": self.job_id}


def revert_run(quire: Quire, principal: Principal, run_id: int) -> RevertResult:
    """Undo a completed or cancelled run as a group: one audited transaction (its items ``deleting``, cleanup
    queued)."""
    require_person_for_run(principal, "revert")
    with quire.db.write() as conn:
        run = load_run_for(conn, run_id)
        base = load_base(conn, run.base_id)
        assert_base_writable(base, "revert a run")
        if run.status not in REVERTIBLE_RUN_STATUSES:
            hint = "; a failed run is not revertible, start a new run instead" if run.status == "failed" else ""
            raise Conflict(
                f"folder run {run_id} is {run.status}; only a completed or cancelled run can be reverted{hint}"
            )
        roots = [
            c for c in run_containers(conn, run.id) if (item := tree.load_item(conn, c)) and item.status != "deleting"
        ]
        marked: list[ItemId] = []
        job_id: int | None = None
        if roots:
            marked, job_id = schedule_delete(quire.queue, conn, base.id, roots)
        transition(
            conn,
            run.id,
            base.id,
            audit.RUN_REVERTED,
            audit.SYSTEM_ACTOR,  # a transition names the system; the person is its approver
            {
                **size_and_counts(conn, run.id, run.declared_size),
                "deleting": len(marked),
                "approved_by": principal.label,
            },
            values={"status": "reverted", "reverted_at": time.time(), "reverted_by": principal.label},
        )
    return RevertResult(run_id, len(marked), job_id)
