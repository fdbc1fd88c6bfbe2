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

from pathlib import Path
from typing import TYPE_CHECKING

from knowledge import preferences
from knowledge.errors import Conflict
from knowledge.folder_runs.judging import descendant_cap, judge_destination, visible_folder
from knowledge.folder_runs.ledger import lineage_commits, load_manifest, load_run_for
from knowledge.folder_runs.preview import Preview, build_preview, preview_of_walk
from knowledge.folder_runs.principal import require_person_for_run
from knowledge.folder_runs.rules import FolderTooLarge
from knowledge.folder_runs.split_plan import own_entries
from knowledge.folder_runs.start import StartResult, create_or_replay
from knowledge.ingest.walk import Walk
from knowledge.library import audit
from knowledge.library.bases import Base
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
    committed = {rel: c.sha256 for rel, c in earlier.items()}
    try:
        plan = build_preview(quire, base, root, cap, committed=committed)
    except FolderTooLarge:
        if not _split_started(quire, run.id):
            raise
        plan = _own_files_again(quire, base, run.id, root, cap, committed)
    return create_or_replay(quire, principal, base, plan, retry_key(run.id), retry_of=run.id)


def _split_started(quire: Quire, run_id: int) -> bool:
    created = audit.list_entries(quire.db, run_id=run_id, actions=[audit.RUN_CREATED], limit=1)
    return bool(created and created[0].payload.get("split_of"))


def _own_files_again(
    quire: Quire, base: Base, run_id: int, root: Path, cap: int, committed: dict[str, str]
) -> Preview:
    """A split took a folder over the cap as its own files (in chunks of at most the cap) apart from its
    sub-folders: its retry takes the same files again, as they are now, never the whole folder."""
    with quire.db.read() as conn:
        names = {m.relative_path for m in load_manifest(conn, run_id)}
        ignore, limit = preferences.ignore_patterns(conn), preferences.max_file_bytes(conn)
    entries = [e for e in own_entries(root, [quire.data_dir], ignore) if e.relative in names]
    return preview_of_walk(quire, base, root, cap, Walk(root, entries=entries, walked=len(entries)), limit, committed)
