"""What the app does off the main thread at start-up and on every poll (plain functions, run in ``Op``s).

* ``open_and_recover`` opens the data directory (migrating it) or a team store (``app.team_store``), runs
  startup recovery and reports how many items recovery left parked (``indexing_interrupted``), per base —
  before the worker process is started; the first base's query process is spawned before recovery, to load
  while it runs. It reads counts, never the parked items themselves (there may be very many).
* ``poll`` reads, in a few short snapshots, what the window shows live: rows updated since a cursor,
  the child counts of the containers that need them, the base's progress, the job counts, the bases.
* ``reindex_parked`` reindexes parked items, base by base, a bounded page at a time, and reports what each
  base answered.

None of these touch Qt; the window calls them through ``Op`` and applies the result on the main thread.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app import team_store
from app.team_store import TeamStore, open_team_store
from jobs.queue import JobRecord
from jobs.recovery import RecoveryReport
from knowledge import lifecycle, preferences
from knowledge.compose import open_quire
from knowledge.errors import KnowledgeError
from knowledge.ingest import out_of_process_queries
from knowledge.library import Base, bases
from knowledge.lifecycle import BaseProgress, ChangedItems, Changes, WorkTotals, interrupted_counts, interrupted_items
from knowledge.runtime import Quire
from knowledge.search import start_query_encoder


def person() -> str:
    """The identity the GUI acts as (a person, like the CLI in a terminal): on a team store the database role
    that connected, else this machine's user."""
    name = team_store.person_name()
    if name is not None:
        return f"person:{name}"
    try:
        return f"person:{getpass.getuser()}"
    except Exception:
        return "person:unknown"


@dataclass(frozen=True)
class Parked:
    """The items recovery left parked in one base, as the notice needs them: how many (``len``)."""

    count: int

    def __len__(self) -> int:
        return self.count


@dataclass
class StartupResult:
    quire: Quire
    report: RecoveryReport
    parked: dict[int, Parked]  # base id -> the items parked as interrupted there
    bases: list[Base]

    @property
    def parked_count(self) -> int:
        return sum(len(p) for p in self.parked.values())


def open_and_recover(data_dir: Path, store: TeamStore | None = None) -> StartupResult:
    """The app hosts the worker, so its session says so: an app crash's pending jobs are abandoned.

    When opening fails, a read-only diagnosis (damaged tables, a file in the way, no write access) and
    the ways back replace the bare error (a team store says why itself: refused, unreachable, no schema)."""
    try:
        quire = open_team_store(data_dir, store) if store is not None else open_quire(data_dir, hosts_worker=True)
    except Exception as exc:
        if store is not None:
            raise
        from knowledge.portable import explain_open_failure

        problem = explain_open_failure(data_dir)
        if problem is not None:
            raise problem from exc
        raise
    if quire.encoder_factory is None:  # the window never imports torch: queries are encoded in a child
        quire.encoder_factory = out_of_process_queries
    team_store.set_person(quire)
    listed = bases.list_bases(quire.db)
    if listed:  # the base the window shows first: its query process loads the model while recovery runs
        start_query_encoder(quire, listed[0])
    report = quire.recover()
    return StartupResult(quire, report, parked_items(quire), bases.list_bases(quire.db))


def parked_items(quire: Quire) -> dict[int, Parked]:
    return {base_id: Parked(count) for base_id, count in interrupted_counts(quire).items()}


@dataclass
class ReindexOutcome:
    changes: list[Changes] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)  # base id -> the service's message


def reindex_parked(quire: Quire, parked: Mapping[int, object]) -> ReindexOutcome:
    """Reindex what recovery parked in each base of ``parked``, read and reindexed a page at a time."""
    outcome = ReindexOutcome()
    for base_id in parked:
        after = 0
        while page := interrupted_items(quire, base_id, after_id=after):
            after = page[-1].id
            try:
                outcome.changes.append(lifecycle.reindex_items(quire, base_id, [i.id for i in page]))
            except KnowledgeError as exc:
                outcome.refused[base_id] = str(exc)
                break
    return outcome


def on_battery() -> bool | None:
    """Whether the computer runs on battery, where the platform reports it (``None``: no battery, unknown)."""
    try:
        import psutil

        battery = psutil.sensors_battery()
    except Exception:  # not supported here
        return None
    return None if battery is None or battery.power_plugged is None else not battery.power_plugged


@dataclass
class PollResult:
    base_id: int | None
    changed: ChangedItems | None
    summaries: dict[int, dict[str, int]]
    progress: BaseProgress | None
    live_jobs: int
    running: list[JobRecord]
    bases: list[Base]
    checked: list[int]
    existing: set[int]
    seconds: float  # how long the reads took (the window spaces its polls by it)
    work: WorkTotals | None = None  # over every base: the status bar's progress, rate and pause
    at: float = 0.0  # monotonic time of the reads (the rate is measured between polls)


def poll(
    quire: Quire,
    base_id: int | None,
    since: float,
    summary_ids: Sequence[int],
    check_ids: Sequence[int] = (),
) -> PollResult:
    started = time.perf_counter()
    preferences.apply_battery_rule(quire.db, on_battery())  # writes only when the power source switches
    changed = lifecycle.items_changed_since(quire, base_id, since) if base_id is not None else None
    wanted = set(summary_ids)
    if changed is not None:
        wanted.update(i.parent_id for i in changed.items if i.parent_id is not None)
        wanted.update(i.id for i in changed.items if i.is_container)
    return PollResult(
        base_id=base_id,
        changed=changed,
        summaries=lifecycle.child_status_counts(quire, base_id, sorted(wanted)) if base_id is not None else {},
        progress=lifecycle.base_progress(quire, base_id) if base_id is not None else None,
        live_jobs=lifecycle.live_jobs_total(quire),
        running=quire.queue.list(status="running", limit=20),
        bases=bases.list_bases(quire.db),
        checked=list(check_ids),
        existing=lifecycle.existing_ids(quire, check_ids) if check_ids else set(),
        seconds=time.perf_counter() - started,
        work=lifecycle.work_totals(quire),
        at=time.monotonic(),
    )
