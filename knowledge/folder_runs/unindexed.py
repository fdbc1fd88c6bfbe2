"""Run sources that settled without an item (failed or skipped), for the listings where items are looked for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, func, select

from knowledge.errors import InvalidInput
from knowledge.library.bases import resolve_base
from knowledge.store.schema_runs import folder_run_outcomes, folder_run_sources, folder_runs

if TYPE_CHECKING:
    from knowledge.runtime import Quire

# What an item status means for a run's source that has no item: ``failed`` is something that went wrong,
# ``skipped`` is not read by design (the reason says why); ``already_committed`` names an item, so neither.
UNINDEXED_DISPOSITIONS: dict[str, tuple[str, ...]] = {
    "failed": ("rejected", "quarantined"),
    "skipped": ("skipped", "source_unavailable", "outside_run_root", "excluded", "already_covered"),
}
MOST_PER_PAGE = 10_000


@dataclass(frozen=True)
class UnindexedSource:
    outcome_id: int  # the listing's cursor
    run_id: int
    relative_path: str  # relative to the run's folder
    disposition: str
    reason: str | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def list_unindexed_sources(
    quire: Quire, base: str | int, status: str, *, after_id: int = 0, limit: int = 200
) -> list[UnindexedSource]:
    """The base's run sources whose latest settled outcome is ``status`` (failed or skipped) with no item, in
    outcome order after ``after_id``. A source is its run's folder plus its path, so one that a later run committed
    (or settled otherwise) is left out; a reverted run was undone by a person and no longer speaks for its files."""
    if status not in UNINDEXED_DISPOSITIONS:
        raise InvalidInput(f"run sources are listed as failed or skipped, not {status!r}")
    if not 1 <= limit <= MOST_PER_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MOST_PER_PAGE}")
    with quire.db.read() as conn:
        return _unindexed(conn, resolve_base(conn, base).id, UNINDEXED_DISPOSITIONS[status], after_id, limit)


def _unindexed(
    conn: Connection, base_id: int, dispositions: tuple[str, ...], after_id: int, limit: int
) -> list[UnindexedSource]:
    """Ranks every settled outcome of the base's standing runs (``newest`` = 1 on each source's latest run),
    then keeps one page of the latest ones that settled with one of ``dispositions`` and no item."""
    source_key = folder_runs.c.folder + "/" + folder_run_sources.c.relative_path
    ranked = (
        select(
            folder_run_outcomes.c.id,
            folder_run_outcomes.c.run_id,
            folder_run_sources.c.relative_path,
            folder_run_outcomes.c.disposition,
            folder_run_outcomes.c.reason,
            folder_run_outcomes.c.item_id,
            func.row_number()
            .over(partition_by=source_key, order_by=folder_run_outcomes.c.run_id.desc())
            .label("newest"),
        )
        .join(folder_run_sources, folder_run_sources.c.id == folder_run_outcomes.c.source_id)
        .join(folder_runs, folder_runs.c.id == folder_run_outcomes.c.run_id)
        .where(folder_runs.c.base_id == base_id, folder_runs.c.status != "reverted")
        .subquery()
    )
    rows = conn.execute(
        select(ranked.c.id, ranked.c.run_id, ranked.c.relative_path, ranked.c.disposition, ranked.c.reason)
        .where(
            ranked.c.newest == 1,
            ranked.c.item_id.is_(None),
            ranked.c.disposition.in_(dispositions),
            ranked.c.id > after_id,
        )
        .order_by(ranked.c.id)
        .limit(limit)
    ).all()
    return [UnindexedSource(int(r[0]), int(r[1]), str(r[2]), str(r[3]), r[4]) for r in rows]
