"""Job types and the hooks recovery calls. Handlers are registered under explicit, stable names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Connection

from jobs.errors import UnknownJobType

if TYPE_CHECKING:
    from jobs.record import JobRecord

Recovery = Literal["abandon", "retry"]
# A handler takes the job's ``jobs.context.JobContext``, a repair scan the ``jobs.queue.JobQueue`` and a limit.
# Named here in words only: the queue reads this registry and the context reads the queue, so an import of
# either would close an import cycle.
Handler = Callable[[Any], Any]
AbandonHook = Callable[[Connection, "JobRecord"], None]
AbandonBatchHook = Callable[[Connection, "Sequence[JobRecord]"], None]
RepairScan = Callable[[Any, int], int]


@dataclass(frozen=True)
class JobType:
    name: str
    handler: Handler
    recovery: Recovery
    # Runs inside recovery's write transaction when an interrupted `abandon` job is cancelled.
    on_abandon: AbandonHook | None = None
    # Optional: the same for many jobs of this type at once (one recovery page), so that thousands of
    # interrupted jobs cost a few statements, not a few per job. Must do exactly what ``on_abandon``
    # does for each record; if it raises, recovery falls back to ``on_abandon`` job by job.
    on_abandon_batch: AbandonBatchHook | None = None
    max_attempts: int = 5
    # Runs inside a stopping worker's write transaction when it hands a job it still runs back (a graceful
    # stop, never a crash): undo what marks the attempt's work in hand, so that nothing counts as a death.
    on_release: AbandonHook | None = None
    # Reads files of the machine that asked for it (a folder's walk, a sync scan): on a store shared by
    # many machines it is pinned to the enqueuing host (``jobs.host``) and only that host's workers claim it.
    pinned: bool = False


@dataclass
class Registry:
    types: dict[str, JobType] = field(default_factory=dict)
    repair_scans: list[RepairScan] = field(default_factory=list)

    def register(self, job_type: JobType) -> None:
        self.types[job_type.name] = job_type

    def add_repair_scan(self, scan: RepairScan) -> None:
        self.repair_scans.append(scan)

    def get(self, name: str) -> JobType:
        try:
            return self.types[name]
        except KeyError:
            raise UnknownJobType(f"no handler registered for job type {name!r}") from None
