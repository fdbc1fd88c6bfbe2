"""One source's transaction: re-judge, write item and material, batch, outcome and audit, fenced before commit."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, bindparam, select

from jobs.runtime import JobContext
from jobs.sanitize import sanitize_optional
from knowledge.folder_runs.ledger import (
    ManifestSource,
    RunRecord,
    add_batch,
    add_outcome,
    counts_of,
    set_container,
    settled_dispositions,
)
from knowledge.folder_runs.preview import is_covered
from knowledge.folder_runs.principal import ingest_agent
from knowledge.folder_runs.rules import COMMITTED, SourceChanged
from knowledge.folder_runs.source import SourceTools, SourceWork, file_identity
from knowledge.ingest.commit_material import commit_prepared_many
from knowledge.ingest.material import Prepared
from knowledge.ingest.walk import EXCLUDED, OUTSIDE_ROOT, UNAVAILABLE, judge_path
from knowledge.library import audit, tree
from knowledge.library.folders import TreeTop, ensure_folders
from knowledge.library.tree import NewItem, create_item, insert_item
from knowledge.lifecycle.identity import find_live_file, is_stale
from knowledge.lifecycle.scheduling import schedule_reindex
from knowledge.store.database import after_commit
from knowledge.store.schema import items
from knowledge.store.schema_runs import folder_runs

log = logging.getLogger(__name__)


class RunTally:
    """How a run's sources have settled, as this attempt's last committed transaction left them: read from the
    ledger by the first source's transaction, then advanced by each outcome the attempt commits (after commit,
    as :class:`~knowledge.folder_runs.deaths.Flight`'s marks are), instead of counting the run's outcomes again
    in every source's transaction. Only the attempt that owns the run writes its outcomes, and each of its
    transactions is fenced immediately before commit, so counts that a newer attempt made stale never commit.
    The terminal entry still reads its counts from the ledger under the lock: it states what the run holds."""

    def __init__(self, run_id: int, size: int) -> None:
        self.run_id, self.size = run_id, size
        self._committed: dict[str, int] | None = None

    def before(self, conn: Connection) -> dict[str, int]:
        """The dispositions settled before this transaction records its outcome."""
        return settled_dispositions(conn, self.run_id) if self._committed is None else dict(self._committed)

    def settled(self, conn: Connection, before: Mapping[str, int], disposition: str) -> dict[str, int]:
        """This transaction recorded ``disposition``: the dispositions with it, kept once the transaction commits."""
        after = {**before, disposition: before.get(disposition, 0) + 1}
        after_commit(conn, _Tallied(self, after))
        return after

    def payload(self, settled: Mapping[str, int]) -> dict[str, Any]:
        """What every audit entry carries about its run: how big it is and how its sources came out."""
        return {"size": self.size, "counts": counts_of(settled, self.size)}


@dataclass(frozen=True, eq=False)
class _Tallied:
    tally: RunTally
    settled: dict[str, int]

    def __call__(self, _db: object) -> None:
        self.tally._committed = self.settled


@dataclass(frozen=True)
class Settling:
    """What settling one attempt's sources needs: the job's context (its attempt fences every write), the run,
    the tools its base's sources are read and embedded with, the ingest agent that authors the items, and the
    run's counts as the attempt's commits left them."""

    ctx: JobContext
    run: RunRecord
    tools: SourceTools
    agent: str
    tally: RunTally


def settle_source_in_tx(
    conn: Connection,
    settling: Settling,
    source: ManifestSource,
    work: SourceWork | None,
    reads: list[audit.PendingEntry],
    *,
    last_round: bool,
) -> str:
    """Re-judge the source under the write lock and write its outcome (the caller fences and commits)."""
    ctx, run, tools = settling.ctx, settling.run, settling.tools
    root = Path(run.folder)
    before = settling.tally.before(conn)

    def outcome(disposition: str, reason: str | None) -> str:
        _settle(conn, settling, source, before, disposition, reason)
        return disposition

    judged = judge_path(root, source.relative_path, hidden=[tools.quire.data_dir])
    if judged.unreadable_dirs:
        reads.append(
            audit.append(
                conn,
                audit.WALK_UNREADABLE,
                audit.SYSTEM_ACTOR,
                base_id=run.base_id,
                run_id=run.id,
                attempt=ctx.attempt,
                payload={**settling.tally.payload(before), "folders": len(judged.unreadable_dirs)},
            )
        )
    skip = {OUTSIDE_ROOT: "outside_run_root", UNAVAILABLE: "source_unavailable", EXCLUDED: "excluded"}
    if judged.verdict in skip:
        return outcome(skip[judged.verdict], judged.reason)
    stale = work is None or work.ident is None
    if work is not None and work.unavailable is not None:
        return outcome("source_unavailable", work.unavailable)
    if work is not None and work.changed:
        return outcome("source_unavailable", "its content changed since the preview")
    if not stale and work is not None:
        try:
            stale = file_identity(root / source.relative_path) != work.ident
        except OSError:
            stale = True
    if stale:
        if last_round:
            return outcome("source_unavailable", "it kept changing while it was read")
        raise SourceChanged
    assert work is not None and work.sha is not None
    held = find_live_file(conn, run.base_id, str(root / source.relative_path))
    if held is not None:
        return _held_already(conn, settling, source, before, held, work.sha)
    if is_covered(conn, tools.base, work.sha):
        return outcome("already_covered", "the knowledge base already has the same content")
    if work.rejected is not None:
        by_design = tree.terminal_status_for(work.rejected_code or "") == "skipped"  # empty, no text, too large…
        return outcome("skipped" if by_design else "rejected", work.rejected)
    if work.prepared is None:  # it was covered when read and no longer is: read it again
        if last_round:
            return outcome("source_unavailable", "it kept changing while it was read")
        raise SourceChanged
    ingest_agent(tools.quire, run.base_id, conn)  # still there and enabled, judged under the lock
    return _commit_source(conn, settling, source, work.prepared, before)


def _held_already(
    conn: Connection, settling: Settling, source: ManifestSource, before: Mapping[str, int], held: tree.Item, sha: str
) -> str:
    """The source already has a live item (added on its own, a folder's child, an earlier run's): it keeps
    standing for the file (one live item per source) and is read again if its bytes are not what this run
    read; the source settles ``already_covered`` with it."""
    reason = "the knowledge base already has this file"
    if is_stale(held, sha):
        schedule_reindex(settling.tools.quire.queue, conn, settling.run.base_id, [held.id])
        reason += "; it changed, so it is read again"
    _settle(conn, settling, source, before, "already_covered", reason, item_id=held.id)
    return "already_covered"


def record_outcome(
    conn: Connection,
    ctx: JobContext,
    run: RunRecord,
    source: ManifestSource,
    disposition: str,
    reason: str | None,
    *,
    item_id: int | None = None,
    batch_id: int | None = None,
) -> str:
    add_outcome(
        conn,
        run_id=run.id,
        source_id=source.id,
        disposition=disposition,
        reason=sanitize_optional(reason),
        item_id=item_id,
        batch_id=batch_id,
        attempt=ctx.attempt,
        settled_at=time.time(),
    )
    return disposition


def _settle(
    conn: Connection,
    settling: Settling,
    source: ManifestSource,
    before: Mapping[str, int],
    disposition: str,
    reason: str | None,
    *,
    item_id: int | None = None,
    batch_id: int | None = None,
) -> dict[str, int]:
    """Record the source's outcome and advance the run's tally by it (together, so neither goes without the
    other); answer the run's dispositions with it."""
    ctx, run = settling.ctx, settling.run
    record_outcome(conn, ctx, run, source, disposition, reason, item_id=item_id, batch_id=batch_id)
    return settling.tally.settled(conn, before, disposition)


def _commit_source(
    conn: Connection, settling: Settling, source: ManifestSource, p: Prepared, before: Mapping[str, int]
) -> str:
    """Item, search material, owned-copy records, batch, outcome and its audit entry: one transaction."""
    ctx, run, agent = settling.ctx, settling.run, settling.agent
    container = _ensure_container(conn, ctx, run, agent)
    # the file hangs where it lies in the folder: its sub-folders are items too, made with their first file
    placed = ensure_folders(conn, TreeTop(run.base_id, container, run.folder, agent, run.id), source.relative_path)
    if placed.created:
        tree.attach_job(conn, placed.created, ctx.job_id)
    path = Path(run.folder) / source.relative_path
    item = insert_item(
        conn,
        NewItem(
            run.base_id,
            "file",
            path.name,
            "processing",
            parent_id=placed.parent_id,
            root_id=container,
            source_path=str(path),
            relative_path=source.relative_path,
            owner=agent,
            run_id=run.id,
        ),
    )
    p.item = item
    tools = settling.tools
    commit_prepared_many(conn, tools.quire.blobs_dir, tools.base, [p], time.time(), new_items=True)
    _reconcile_folders(conn, placed.parent_id, container)
    batch_id = add_batch(
        conn, run_id=run.id, source_id=source.id, item_id=item.id, attempt=ctx.attempt, created_at=time.time()
    )
    settled = _settle(conn, settling, source, before, COMMITTED, None, item_id=item.id, batch_id=batch_id)
    audit.append(
        conn,
        audit.BATCH_COMMITTED,
        agent,
        base_id=run.base_id,
        run_id=run.id,
        attempt=ctx.attempt,
        payload=settling.tally.payload(settled),
    )
    return COMMITTED


def _reconcile_folders(conn: Connection, folder: int, container: int) -> None:
    """The file's sub-folders, up to (not including) the run's container, follow their files while the run goes
    on, so a folder's progress moves; the container stays in progress until the run ends."""
    while folder != container:
        above = tree.reconcile_container(conn, folder)  # its parent when its status changed, else None
        if above is None:
            return
        folder = above


_CONTAINER = (
    select(folder_runs.c.container_item_id, items.c.status)
    .select_from(folder_runs.outerjoin(items, items.c.id == folder_runs.c.container_item_id))
    .where(folder_runs.c.id == bindparam("run_id"))
)


def _ensure_container(conn: Connection, ctx: JobContext, run: RunRecord, agent: str) -> int:
    """The run's directory item (named after the folder), created with its first file."""
    row = conn.execute(_CONTAINER, {"run_id": run.id}).one()  # one statement per source: the id and its state
    if row.container_item_id is not None and row.status is not None and row.status != "deleting":
        return int(row.container_item_id)
    folder = Path(run.folder)
    container = create_item(
        conn,
        NewItem(
            run.base_id,
            "directory",
            folder.name or str(folder),
            "processing",
            source_path=str(folder),
            owner=agent,
            run_id=run.id,
        ),
    )
    tree.attach_job(conn, [container], ctx.job_id)
    set_container(conn, run.id, container)
    return container
