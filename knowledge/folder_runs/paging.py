"""Bounded reads of one run for a view that stays live: its summary without sources, its sources a page at
a time (keyset by ordinal) and the outcomes filed since a cursor (keyset by outcome id)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, func, select

from knowledge.errors import InvalidInput
from knowledge.folder_runs.ledger import load_run_for
from knowledge.folder_runs.reading import SOURCE_COLUMNS, RunSummary, SourceOutcome, source_of, summary_of
from knowledge.store.schema_runs import folder_run_outcomes, folder_run_sources

if TYPE_CHECKING:
    from knowledge.runtime import Quire

def run_summary(quire: Quire, run_id: int) -> RunSummary:
    """A run's status, timestamps and counts, without its sources (a bounded read however big the run)."""
    with quire.db.read() as conn:
        return summary_of(conn, load_run_for(conn, run_id))


@dataclass(frozen=True)
class SourcesPage:
    """Manifest sources in ordinal order, and the run's newest outcome id when they were read: the outcomes
    after ``cursor`` (:func:`settled_since`) are what settled since this page."""

    sources: list[SourceOutcome]
    cursor: int


def _page_query(run_id: int, after_ordinal: int, limit: int) -> Select[Any]:
    return (
        select(*SOURCE_COLUMNS)
        .outerjoin(folder_run_outcomes, folder_run_outcomes.c.source_id == folder_run_sources.c.id)
        .where(folder_run_sources.c.run_id == run_id, folder_run_sources.c.ordinal > after_ordinal)
        .order_by(folder_run_sources.c.ordinal)
        .limit(limit)
    )


def sources_page(quire: Quire, run_id: int, *, after_ordinal: int = -1, limit: int = 200) -> SourcesPage:
    """Up to ``limit`` of a run's sources with an ordinal above ``after_ordinal``."""
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit must be between 1 and 1000")
    with quire.db.read() as conn:
        load_run_for(conn, run_id)
        rows = conn.execute(_page_query(run_id, after_ordinal, limit)).all()
        cursor = conn.execute(
            select(func.max(folder_run_outcomes.c.id)).where(folder_run_outcomes.c.run_id == run_id)
        ).scalar_one_or_none()
    return SourcesPage([source_of(r) for r in rows], int(cursor or 0))


@dataclass(frozen=True)
class SettledSource:
    outcome_id: int
    source: SourceOutcome


def settled_since(quire: Quire, run_id: int, *, after_id: int = 0, limit: int = 500) -> list[SettledSource]:
    """Up to ``limit`` of a run's outcomes filed after outcome ``after_id``, in filing order. A run's sources
    settle one transaction after another under its one owning attempt, so its outcome ids grow as they commit."""
    if not 1 <= limit <= 5000:
        raise InvalidInput("limit must be between 1 and 5000")
    query = (
        select(*SOURCE_COLUMNS, folder_run_outcomes.c.id)
        .join(folder_run_sources, folder_run_sources.c.id == folder_run_outcomes.c.source_id)
        .where(folder_run_outcomes.c.run_id == run_id, folder_run_outcomes.c.id > after_id)
        .order_by(folder_run_outcomes.c.id)
        .limit(limit)
    )
    with quire.db.read() as conn:
        return [SettledSource(int(r[7]), source_of(r)) for r in conn.execute(query).all()]
