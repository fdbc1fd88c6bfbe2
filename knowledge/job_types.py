"""The one explicit registration of Quire's job types, made by the composition roots (the CLI, the
window's start-up, scripts): every process that enqueues or runs jobs calls :func:`open_quire` (or
:func:`register_job_types` on a ``Quire`` it opened), so each job module is a visible import edge."""

from __future__ import annotations

from pathlib import Path

from knowledge import folder_runs, lifecycle, portable, sync
from knowledge.runtime import Quire


def register_job_types(quire: Quire) -> None:
    lifecycle.register(quire)
    folder_runs.register(quire)
    portable.register(quire)
    sync.register(quire)


def open_quire(data_dir: Path, *, hosts_worker: bool = False) -> Quire:
    """Open the data directory (migrating it) with every job type registered."""
    quire = Quire.open(data_dir, hosts_worker=hosts_worker)
    register_job_types(quire)
    return quire


def open_team_quire(
    url: str, *, data_dir: Path, queue_url: str | None = None, hosts_worker: bool = False, create: bool = True
) -> Quire:
    """Open a team store (a PostgreSQL URL, migrating it) with every job type registered."""
    quire = Quire.open_team_store(url, data_dir=data_dir, queue_url=queue_url, hosts_worker=hosts_worker, create=create)
    register_job_types(quire)
    return quire
