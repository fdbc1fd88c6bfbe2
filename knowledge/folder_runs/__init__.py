"""Folder runs: previewed, idempotent, fenced, audited, revertible bulk ingest of one local folder.

Only a person starts or reverts a run; nothing is written before a preview the person saw, and every write
is fenced and audited. The contract, in order of use:

Preview and start (the caller's thread)
* :func:`preview` walks the folder through :mod:`knowledge.ingest.walk` (the same visibility rules adding a
  folder uses), refusing — never truncating — a folder with more descendants than the cap setting
  (200 by default), and says for every file whether it is eligible and, if not, why.
* :func:`start_run` judges in a fixed order: the principal (an agent is forbidden), the destination
  (a missing, failed or locked base is a conflict, judged *before* the folder is looked at), the folder
  (absent, not a directory, unreadable, or inside the app's data directory all answer the one same
  "folder not found"), then the preview is re-run. The ledger row, its immutable manifest (path, size,
  content fingerprint), the queued job and the ``ingest.folder_run.created`` entry commit in **one**
  transaction. An idempotency key names at most one run: the same folder, payload and actor replay
  the original run and job ids (judged against the folder as it is now: a manifest source that was
  removed, moved out or excluded refuses the replay); anything else is a conflict. Without a key, the
  key is derived from base, folder, actor and manifest, so repeating the same command replays its run.
* A folder over the cap can be taken in one gesture: :func:`plan_split` plans one run per sub-folder (split
  again where a sub-folder is over the cap; a split folder's own files are a run of their own, chunked by the
  cap), and :func:`start_split` starts them all in one transaction — every run or none.

Execution (``knowledge.folder-run``, recovery ``retry``: a dead worker's claim is handed back by
startup recovery or the stale-claim lease and the next attempt resumes the run)
* Every write goes through ``ctx.write()`` (fenced on the queue attempt) *and* is fenced on the run's
  own stamp, ``folder_runs.owner_attempt``: entering a pending run stamps the attempt, a newer attempt
  resuming a running run takes it over (each entering attempt files one ``started`` entry), an older
  one stands down without writing.
* One source per transaction. Reading, parsing, chunking and embedding happen outside any transaction,
  a group of sources at a time (:mod:`knowledge.folder_runs.group`: one parse request and one encoder call
  for the group; the next group is prepared and this one settled while a group is embedded);
  inside its transaction the source is re-judged (the walk's rules along its path, still the bytes that
  were read, coverage by the base), everything is written (item, chunks, vectors, keyword entries, owned-copy
  records, ingest batch, outcome, ``ingest.batch.committed``), and immediately before commit the run is
  checked to be still ``running`` and still owned by this attempt — SQLite's write lock, taken by
  ``BEGIN IMMEDIATE`` for the whole transaction, is the run's row lock. Otherwise the whole source
  rolls back; only its *read* entries (the walk meeting a folder it could not read) are filed again in a
  separate transaction, because the read happened either way.
* A source settles once (unique outcome per source): ``committed`` or a skip —
  ``source_unavailable``, ``outside_run_root``, ``excluded``, ``already_covered`` — or ``rejected``
  (unparseable: terminal, with a sanitized reason). A re-walk reports what earlier attempts committed as
  ``already_committed`` and writes nothing for it. A fault (database error, invariant violation,
  authorization failure, malformed payload) settles the run ``failed``.
* Exactly one terminal entry: the terminal transition is guarded on the stamp, its counts are read from
  the ledger in that same transaction, and a run that is already terminal is left alone — a replayed job
  of a terminal run writes nothing at all.
* Attribution: transitions (started, completed, failed, cancelled, reverted) name the ``system``; the base's
  ingest-agent identity owns and authors the items (a missing or disabled identity hands the job back to
  the queue without consuming the attempt); the person appears only as ``approved_by`` (manifest rows,
  job payload, the revert and cancel-request entries' payloads) and as the actor of the ``created`` entry,
  the request they made.

Cancel: :func:`cancel_run` files ``ingest.folder_run.cancel_requested``; a run no attempt is executing ends
``cancelled`` in that transaction, a running one is stopped by its attempt at the next source's transaction or
group (the job's ``cancel_requested``), which files the fenced terminal ``ingest.folder_run.cancelled``. What it
committed stays; a terminal run cannot be cancelled.

Revert: :func:`revert_run` marks everything a completed (or cancelled) run committed ``deleting``, enqueues its
``delete-subtree`` cleanup, moves the run to ``reverted`` and files ``ingest.folder_run.reverted`` — one
transaction. A failed run is not revertible and never resumed: :func:`retry_run` starts a *new* run linked
to it (``retry_of``, at most one per failed run), judged against the folder as it is now; the sources the
failed run committed settle ``already_committed`` in it (stored, naming the item), the rest are ingested.
The failed run stays failed with its one terminal entry; statuses only move forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.registry import JobType
from knowledge.folder_runs.cancel import CancelResult, cancel_run
from knowledge.folder_runs.deaths import release_marks
from knowledge.folder_runs.execute import execute_run
from knowledge.folder_runs.judging import descendant_cap, set_descendant_cap, visible_folder
from knowledge.folder_runs.ledger import add_batch, add_outcome, add_source, create_run
from knowledge.folder_runs.paging import SettledSource, SourcesPage, run_summary, settled_since, sources_page
from knowledge.folder_runs.preview import Preview, PreviewEntry, preview
from knowledge.folder_runs.reading import RunDetail, RunSummary, SourceOutcome, list_runs, show_run
from knowledge.folder_runs.repair import repair_stranded_runs
from knowledge.folder_runs.retry import RetryResult, retry_run
from knowledge.folder_runs.revert import RevertResult, revert_run
from knowledge.folder_runs.rules import (
    CAP_SETTING,
    DEFAULT_CAP,
    FOLDER_NOT_FOUND,
    JOB_MAX_ATTEMPTS,
    JOB_TYPE,
    FolderTooLarge,
    RunFault,
)
from knowledge.folder_runs.split import FittingFolder, Split, fitting_subfolders
from knowledge.folder_runs.split_plan import MAX_SPLIT_RUNS, PlannedRun, SplitPlan, plan_split
from knowledge.folder_runs.split_start import SplitStart, start_split
from knowledge.folder_runs.start import StartResult, derived_key, request_fingerprint, start_run
from knowledge.folder_runs.unindexed import UNINDEXED_DISPOSITIONS, UnindexedSource, list_unindexed_sources
from knowledge.principal import Principal
from knowledge.store.schema_runs import CANCELLABLE_RUN_STATUSES, REVERTIBLE_RUN_STATUSES

if TYPE_CHECKING:
    from knowledge.runtime import Quire

__all__ = [
    "CANCELLABLE_RUN_STATUSES",
    "CAP_SETTING",
    "DEFAULT_CAP",
    "FOLDER_NOT_FOUND",
    "JOB_TYPE",
    "MAX_SPLIT_RUNS",
    "REVERTIBLE_RUN_STATUSES",
    "UNINDEXED_DISPOSITIONS",
    "CancelResult",
    "FittingFolder",
    "FolderTooLarge",
    "PlannedRun",
    "Preview",
    "PreviewEntry",
    "Principal",
    "RetryResult",
    "RevertResult",
    "RunDetail",
    "RunFault",
    "RunSummary",
    "SettledSource",
    "SourceOutcome",
    "SourcesPage",
    "Split",
    "SplitPlan",
    "SplitStart",
    "StartResult",
    "UnindexedSource",
    "add_batch",
    "add_outcome",
    "add_source",
    "cancel_run",
    "create_run",
    "derived_key",
    "descendant_cap",
    "fitting_subfolders",
    "list_runs",
    "list_unindexed_sources",
    "plan_split",
    "preview",
    "register",
    "request_fingerprint",
    "retry_run",
    "revert_run",
    "run_summary",
    "set_descendant_cap",
    "settled_since",
    "show_run",
    "sources_page",
    "start_run",
    "start_split",
    "visible_folder",
]


def register(quire: Quire) -> None:
    """Add the ``knowledge.folder-run`` job type and the stranded-run repair scan to this process."""
    quire.registry.register(
        JobType(
            JOB_TYPE,
            lambda ctx: execute_run(quire, ctx),
            "retry",
            max_attempts=JOB_MAX_ATTEMPTS,
            pinned=True,
            on_release=release_marks,  # a graceful stop hands the run back with no death for its sources
        )
    )
    quire.registry.add_repair_scan(repair_stranded_runs)
