"""The run ledger: records, counts read under the lock, the manifest, the attempt fence and transitions.

The one writer of a run's rows (``folder_runs``, its manifest ``folder_run_sources``, its ``ingest_batches`` and
``folder_run_outcomes``): starting a run, settling a source, an import's copy of an exported run and the
quarantine of a source that killed its workers all write through the verbs below; which values, and when, is
theirs to decide."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Table, and_, func, insert, select, update

from jobs.errors import Superseded
from jobs.queue import JobId
from jobs.sanitize import sanitize_optional
from knowledge.errors import NotFound
from knowledge.folder_runs.rules import ALREADY_COMMITTED, COMMITTED
from knowledge.library import audit, tree
from knowledge.library.ids import BaseId, ItemId, RunId
from knowledge.store.schema import items
from knowledge.store.schema_runs import (
    DISPOSITIONS,
    folder_run_outcomes,
    folder_run_sources,
    folder_runs,
    ingest_batches,
)

log = logging.getLogger(__name__)


# -- the ledger --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecord:
    id: RunId
    base_id: BaseId
    folder: str
    idempotency_key: str
    approved_by: str
    status: str
    job_id: JobId | None
    owner_attempt: int | None
    declared_size: int
    walked: int
    container_item_id: ItemId | None
    error: str | None
    reverted_by: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    reverted_at: float | None
    retries: int = 0  # in-place retries before migration 0020 (frozen since)
    retry_of: RunId | None = None  # the failed run this run retries

    @classmethod
    def from_row(cls, row: Any) -> RunRecord:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__dataclass_fields__})


def load_run(conn: Connection, run_id: int) -> RunRecord | None:
    row = conn.execute(select(folder_runs).where(folder_runs.c.id == run_id)).first()
    return None if row is None else RunRecord.from_row(row)


def load_run_for(conn: Connection, run_id: int) -> RunRecord:
    """The run a person's request names (show, retry, revert), or ``NotFound`` in the one sentence all say."""
    run = load_run(conn, run_id)
    if run is None:
        raise NotFound(f"folder run {run_id} not found")
    return run


def run_counts(conn: Connection, run_id: int, size: int) -> dict[str, int]:
    return counts_of(settled_dispositions(conn, run_id), size)


def settled_dispositions(conn: Connection, run_id: int) -> dict[str, int]:
    """How many of the run's sources settled with each disposition, read from the ledger."""
    rows = conn.execute(
        select(folder_run_outcomes.c.disposition, func.count())
        .where(folder_run_outcomes.c.run_id == run_id)
        .group_by(folder_run_outcomes.c.disposition)
    ).all()
    return {r[0]: int(r[1]) for r in rows}


def counts_of(dispositions: Mapping[str, int], size: int) -> dict[str, int]:
    """A run's counts (each disposition, then skipped, settled and pending) from its settled dispositions."""
    counts = {d: 0 for d in DISPOSITIONS}
    counts.update(dispositions)
    settled = sum(counts.values())
    counts["skipped"] = settled - counts[COMMITTED] - counts["rejected"] - counts["quarantined"]
    counts["settled"] = settled
    counts["pending"] = size - settled
    return counts


def size_and_counts(conn: Connection, run_id: int, size: int) -> dict[str, Any]:
    """What every audit entry carries about its run: how big it is and how its sources came out."""
    return {"size": size, "counts": run_counts(conn, run_id, size)}


@dataclass(frozen=True)
class ManifestSource:
    id: int
    ordinal: int
    relative_path: str
    size: int
    content_sha256: str


def load_manifest(conn: Connection, run_id: int) -> list[ManifestSource]:
    rows = conn.execute(
        select(
            folder_run_sources.c.id,
            folder_run_sources.c.ordinal,
            folder_run_sources.c.relative_path,
            folder_run_sources.c.size,
            folder_run_sources.c.content_sha256,
        )
        .where(folder_run_sources.c.run_id == run_id)
        .order_by(folder_run_sources.c.ordinal)
    ).all()
    return [ManifestSource(*r) for r in rows]


def settled_sources(conn: Connection, run_id: int) -> dict[int, str]:
    rows = conn.execute(
        select(folder_run_outcomes.c.source_id, folder_run_outcomes.c.disposition).where(
            folder_run_outcomes.c.run_id == run_id
        )
    ).all()
    return {int(r[0]): str(r[1]) for r in rows}


@dataclass(frozen=True)
class EarlierCommit:
    """A source a run's lineage committed: its content and the item that holds it."""

    run_id: int
    sha256: str
    item_id: int


def lineage_commits(conn: Connection, run_id: int | None) -> dict[str, EarlierCommit]:
    """What ``run_id`` and the runs it retried committed, by relative path (the newest run first), whose
    item is still live — the sources a retry of it settles ``already_committed``."""
    found: dict[str, EarlierCommit] = {}
    while run_id is not None:
        rows = conn.execute(
            select(folder_run_sources.c.relative_path, items.c.content_sha256, items.c.id, items.c.run_id)
            .join(folder_run_outcomes, folder_run_outcomes.c.source_id == folder_run_sources.c.id)
            .join(items, items.c.id == folder_run_outcomes.c.item_id)
            .where(
                and_(
                    folder_run_outcomes.c.run_id == run_id,
                    folder_run_outcomes.c.disposition.in_((COMMITTED, ALREADY_COMMITTED)),
                    items.c.status != "deleting",
                    items.c.content_sha256.is_not(None),
                )
            )
        ).all()
        for rel, sha, item_id, owner in rows:
            found.setdefault(str(rel), EarlierCommit(int(owner), str(sha), int(item_id)))
        run = load_run(conn, run_id)
        run_id = None if run is None else run.retry_of  # ids only go down the chain: it ends
    return found


def fence_run(conn: Connection, run_id: int, attempt: int) -> RunRecord:
    """Inside the write transaction: the run is still running and still owned by this attempt."""
    run = load_run(conn, run_id)
    if run is None or run.status != "running" or run.owner_attempt != attempt:
        raise Superseded(f"folder run {run_id}: attempt {attempt} no longer owns the run")
    return run


def run_containers(conn: Connection, run_id: int) -> list[int]:
    rows = conn.execute(
        select(items.c.id).where(
            and_(items.c.run_id == run_id, items.c.parent_id.is_(None), items.c.type == "directory")
        )
    ).all()
    return [int(r.id) for r in rows]


def _reconcile_containers(conn: Connection, run_id: int) -> None:
    """The run is over: its folder items take their children's status, deepest first, its container last
    (they stay in progress while the run executes)."""
    for container in run_containers(conn, run_id):
        rows = conn.execute(
            select(items.c.id, items.c.relative_path).where(  # by root: the items_root index
                and_(items.c.root_id == container, items.c.type == "directory", items.c.id != container)
            )
        ).all()
        for row in sorted(rows, key=lambda r: -str(r.relative_path or "").count("/")):
            tree.reconcile_container(conn, row.id)
        tree.reconcile_container(conn, container)


def settle_failed(conn: Connection, run: RunRecord, attempt: int | None, reason: str) -> dict[str, int]:
    """The failed transition and its one terminal entry, counts read from the ledger under the lock."""
    counts = run_counts(conn, run.id, run.declared_size)
    settle_terminal(conn, run, attempt, counts, error=reason)
    return counts


def settle_cancelled(conn: Connection, run: RunRecord, attempt: int | None) -> dict[str, int]:
    """The cancelled transition (a person's request, honoured) and its one terminal entry, counts read from the
    ledger under the lock; what the run committed stays (a cancelled run may be reverted)."""
    counts = run_counts(conn, run.id, run.declared_size)
    settle_terminal(conn, run, attempt, counts, cancelled=True)
    return counts


_TERMINAL_ACTIONS = {"completed": audit.RUN_COMPLETED, "failed": audit.RUN_FAILED, "cancelled": audit.RUN_CANCELLED}


def settle_terminal(
    conn: Connection,
    run: RunRecord,
    attempt: int | None,
    counts: dict[str, int],
    *,
    error: str | None = None,
    cancelled: bool = False,
) -> None:
    """The one terminal transition (completed, failed with ``error``, or ``cancelled``) and its one audit entry."""
    status = "cancelled" if cancelled else "completed" if error is None else "failed"
    action = _TERMINAL_ACTIONS[status]
    error = sanitize_optional(error)
    now = time.time()
    transition(
        conn,
        run.id,
        run.base_id,
        action,
        audit.SYSTEM_ACTOR,
        {
            "size": run.declared_size,
            "counts": counts,
            **({"retry": run.retries} if run.retries else {}),
            **({} if error is None else {"error": error}),
        },
        attempt=attempt,
        values={"status": status, "error": error, "finished_at": now},
    )
    _reconcile_containers(conn, run.id)


def transition(
    conn: Connection,
    run_id: int,
    base_id: int,
    action: str,
    actor: str,
    payload: dict[str, Any],
    *,
    attempt: int | None = None,
    values: dict[str, Any] | None = None,
) -> None:
    """Move a run (``values`` on its ledger row) and file the audit entry that records it, in the caller's
    transaction: "the run moved" and "we recorded that it moved" commit together or not at all."""
    if values:
        conn.execute(update(folder_runs).where(folder_runs.c.id == run_id).values(**values, updated_at=time.time()))
    audit.append(conn, action, actor, base_id=base_id, run_id=run_id, attempt=attempt, payload=payload)


# -- writing the ledger -------------------------------------------------------------------------


def create_run(conn: Connection, **values: Any) -> RunId:
    """A new run row with ``values``; its id (moves after this go through :func:`transition`)."""
    return RunId(_insert(conn, folder_runs, values))


def add_source(conn: Connection, **values: Any) -> int:
    """One entry of a run's manifest (fixed once written: the database refuses changes)."""
    return _insert(conn, folder_run_sources, values)


def add_batch(conn: Connection, **values: Any) -> int:
    """The ingest batch of one committed source (its item, attempt and time)."""
    return _insert(conn, ingest_batches, values)


def add_outcome(conn: Connection, **values: Any) -> int:
    """How a source settled (one per source: the unique key refuses a second)."""
    return _insert(conn, folder_run_outcomes, values)


def set_container(conn: Connection, run_id: int, container_item_id: int) -> None:
    """The run's directory item, created with its first file."""
    conn.execute(
        update(folder_runs)
        .where(folder_runs.c.id == run_id)
        .values(container_item_id=container_item_id, updated_at=time.time())
    )


def _insert(conn: Connection, table: Table, values: dict[str, Any]) -> int:
    # the Core table, so both engines answer the new id (PostgreSQL's driver has no lastrowid)
    pk = conn.execute(insert(table).values(**values)).inserted_primary_key
    assert pk is not None
    return int(pk[0])
