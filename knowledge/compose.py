"""The composition root of the core: a ``Quire`` opened with every room's job types registered.

The CLI, the window's start-up and scripts open Quire through :func:`open_quire` (a data directory) or
:func:`open_team_quire` (a team store), or call :func:`register_job_types` on a ``Quire`` they opened: the one
explicit registration, so each job module is a visible import edge and no room registers another's jobs."""

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
