"""Read models of runs: summaries, outcomes and the run listing."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select

from jobs.schema import LIVE_STATUSES, jobs
from knowledge.errors import InvalidInput
from knowledge.folder_runs.ledger import RunRecord, load_run_for, run_counts
from knowledge.library.bases import resolve_base
from knowledge.store.schema_runs import (
    TERMINAL_RUN_STATUSES,
    folder_run_outcomes,
    folder_run_sources,
    folder_runs,
)

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSummary:
    run: RunRecord
    base_name: str
    counts: dict[str, int]
    job_status: str | None
    job_attempt: int | None
    retried_by: int | None = None  # the run that retries this failed one
    cancel_requested: bool = False  # a person asked to cancel it; the attempt executing it ends it

    def as_dict(self) -> dict[str, Any]:
        r = self.run
        return {
            "id": r.id,
            "base": {"id": r.base_id, "name": self.base_name},
            "folder": r.folder,
            "key": r.idempotency_key,
            "status": r.status,
            "approved_by": r.approved_by,
            "job": {"id": r.job_id, "status": self.job_status, "attempt": self.job_attempt},
            "cancel_requested": self.cancel_requested,
            "owner_attempt": r.owner_attempt,
            "size": r.declared_size,
            "walked": r.walked,
            "progress": {"settled": self.counts["settled"], "total": r.declared_size},
            "counts": self.counts,
            "error": r.error,
            "retry_of": r.retry_of,
            "retried_by": self.retried_by,
            "created_at": r.created_at,
            "started_at": r.started_at,
            "finished_at": r.finished_at,
            "reverted_at": r.reverted_at,
            "reverted_by": r.reverted_by,
        }


@dataclass(frozen=True)
class SourceOutcome:
    ordinal: int
    relative_path: str
    size: int
    sha256: str
    disposition: str  # pending until settled
    reason: str | None
    attempt: int | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RunDetail:
    summary: RunSummary
    sources: list[SourceOutcome]

    def as_dict(self) -> dict[str, Any]:
        return {**self.summary.as_dict(), "sources": [s.as_dict() for s in self.sources]}


def _summary(conn: Connection, run: RunRecord) -> RunSummary:
    from knowledge.store.schema import bases

    name = conn.execute(select(bases.c.name).where(bases.c.id == run.base_id)).scalar_one_or_none()
    job = None
    if run.job_id is not None:
        job = conn.execute(
            select(jobs.c.status, jobs.c.attempt, jobs.c.cancel_requested).where(jobs.c.id == run.job_id)
        ).first()
    retried_by = conn.execute(select(folder_runs.c.id).where(folder_runs.c.retry_of == run.id)).scalar_one_or_none()
    return RunSummary(
        run,
        str(name or ""),
        run_counts(conn, run.id, run.declared_size),
        None if job is None else str(job.status),
        None if job is None else int(job.attempt),
        None if retried_by is None else int(retried_by),
        job is not None
        and bool(job.cancel_requested)
        and job.status in LIVE_STATUSES
        and run.status not in TERMINAL_RUN_STATUSES,
    )


def list_runs(
    quire: Quire,
    *,
    folder: str | os.PathLike[str] | None = None,
    base: str | int | None = None,
    limit: int = 200,
    after_id: int = 0,
) -> list[RunSummary]:
    """Runs over one folder (by its resolved path, also after it is gone) or into one base, oldest first."""
    if (folder is None) == (base is None):
        raise InvalidInput("list runs either for a folder or for a knowledge base")
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit must be between 1 and 1000")
    query = select(folder_runs).where(folder_runs.c.id > after_id).order_by(folder_runs.c.id).limit(limit)
    with quire.db.read() as conn:
        if folder is not None:
            query = query.where(folder_runs.c.folder == os.path.realpath(os.path.abspath(os.fspath(folder))))
        else:
            assert base is not None
            query = query.where(folder_runs.c.base_id == resolve_base(conn, base).id)
        return [_summary(conn, RunRecord.from_row(r)) for r in conn.execute(query).all()]


def show_run(quire: Quire, run_id: int) -> RunDetail:
    """A run's status, timestamps, progress and every manifest source's disposition."""
    with quire.db.read() as conn:
        run = load_run_for(conn, run_id)
        rows = conn.execute(
            select(*SOURCE_COLUMNS)
            .outerjoin(folder_run_outcomes, folder_run_outcomes.c.source_id == folder_run_sources.c.id)
            .where(folder_run_sources.c.run_id == run_id)
            .order_by(folder_run_sources.c.ordinal)
        ).all()
        summary = _summary(conn, run)
    return RunDetail(summary, [source_of(r) for r in rows])


# a manifest source with its outcome, if settled (outer-joined): what show_run and the panel's pages read
SOURCE_COLUMNS = (
    folder_run_sources.c.ordinal,
    folder_run_sources.c.relative_path,
    folder_run_sources.c.size,
    folder_run_sources.c.content_sha256,
    folder_run_outcomes.c.disposition,
    folder_run_outcomes.c.reason,
    folder_run_outcomes.c.attempt,
)


def source_of(r: Any) -> SourceOutcome:
    """A row of :data:`SOURCE_COLUMNS` as a source outcome (no outcome yet: ``pending``)."""
    return SourceOutcome(r[0], r[1], r[2], r[3], r[4] or "pending", r[5], r[6])


def summary_of(conn: Connection, run: RunRecord) -> RunSummary:
    """One run's summary inside a read the caller holds."""
    return _summary(conn, run)
