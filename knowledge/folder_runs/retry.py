"""Retry: a failed run is retried as a *new* run linked to it (``retry_of``), never resumed.

The failed run stays exactly as it settled — ``failed``, its one terminal entry, what it committed. The
retry is a request of its own, judged like a start and against the folder as it is now: the person (an
agent is forbidden), the destination, the folder, then a fresh preview. Its manifest keeps the sources the
failed run (or a run it in turn retried) committed whose content is unchanged; execution settles those
``already_committed`` — stored, naming the item that holds them — and ingests the rest. Its key is
``retry-of-<run>`` and a failed run has at most one retry (a unique index): a second press replays the
same new run, and another person's retry is a conflict, never aliased onto it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.errors import Conflict
from knowledge.folder_runs.judging import descendant_cap, judge_destination, visible_folder
from knowledge.folder_runs.ledger import lineage_commits, load_run_for
from knowledge.folder_runs.preview import build_preview
from knowledge.folder_runs.principal import require_person_for_run
from knowledge.folder_runs.start import StartResult, create_or_replay
from knowledge.principal import Principal
from knowledge.store import machine_folders

if TYPE_CHECKING:
    from knowledge.runtime import Quire

RetryResult = StartResult  # created or replayed, with ``retry_of`` set


def retry_key(run_id: int) -> str:
    return f"retry-of-{run_id}"


def retry_run(quire: Quire, principal: Principal, run_id: int) -> RetryResult:
    """Start (or replay) the new run that retries the failed run ``run_id``."""
    require_person_for_run(principal, "retry")
    with quire.db.read() as conn:
        run = load_run_for(conn, run_id)
        if run.status != "failed":
            raise Conflict(f"folder run {run_id} is {run.status}; only a failed run can be retried")
        base = judge_destination(conn, run.base_id)
        cap = descendant_cap(conn)
        earlier = lineage_commits(conn, run.id)
    root = visible_folder(quire, run.folder)
    machine_folders.record_for(quire.db, quire.data_dir, [root])  # a person here retries it: this machine may read it
    plan = build_preview(quire, base, root, cap, committed={rel: c.sha256 for rel, c in earlier.items()})
    return create_or_replay(quire, principal, base, plan, retry_key(run.id), retry_of=run.id)
