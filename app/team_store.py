"""The window on a team store (PostgreSQL + pgvector, wake-ups over Redis): where it is, how the window's worker
is told, and who the person is there. Qt-free; the dialog that chooses a store is ``app.connect_dialog``.

* A store travels as a :class:`TeamStore` — its URL (a password in it lives in this process's memory only)
  and an optional queue URL. It is shown and remembered only without its password (:attr:`TeamStore.shown`,
  ``knowledge.paths.remember_team_store``); prefer ``~/.pgpass`` or ``PGPASSWORD`` to a password at all.
* The window's worker gets the store through its environment (``QUIRE_STORE``/``QUIRE_QUEUE``), never its
  argv: a process's arguments are readable by every user of the machine, its environment only by its owner.
* On a team store the person is the database role that connected (``Quire.person_name``): items, folder runs
  and audit entries made from the window name that role, as the CLI's do (:func:`set_person`).
* Adding from the window goes the CLI's way: this machine walks the folders it added and uploads their files
  (``Quire.run_pinned_here``) so workers on other machines index the copies, never the person's paths.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from app.cli.base import QUEUE_ENV, STORE_ENV
from knowledge.runtime import Quire
from knowledge.store.postgres import redacted


@dataclass(frozen=True)
class TeamStore:
    url: str  # postgresql://…; its password, if any, never leaves this process but through the worker's env
    queue: str | None = None  # redis://… (None: workers poll the store)

    def __repr__(self) -> str:  # never the password, even in a traceback or a log line
        return f"TeamStore({self.shown!r})"

    @property
    def shown(self) -> str:
        """The store as a person reads it: the URL with its password replaced by ``***``."""
        return redacted(self.url)

    def worker_environment(self) -> dict[str, str]:
        """What the window's worker finds in its environment instead of ``--store``/``--queue``."""
        env = {STORE_ENV: self.url}
        if self.queue:
            env[QUEUE_ENV] = self.queue
        return env

    @classmethod
    def from_environment(cls) -> TeamStore | None:
        """``QUIRE_STORE``/``QUIRE_QUEUE``, as every command reads them (``None``: no team store)."""
        url = os.environ.get(STORE_ENV)
        return cls(url, os.environ.get(QUEUE_ENV) or None) if url else None


WORKER_ENV_KEYS = (STORE_ENV, QUEUE_ENV)


def open_team_store(data_dir: os.PathLike[str], store: TeamStore) -> Quire:
    """Open the store as the window does: it hosts a worker; a database without Quire's schema is refused
    (``quire store init`` creates it) rather than given one."""
    from pathlib import Path

    from knowledge.compose import open_team_quire

    return open_team_quire(store.url, data_dir=Path(data_dir), queue_url=store.queue, hosts_worker=True, create=False)


_person: list[str] = []  # the store's name for the person at this window, once a store is open


def set_person(quire: Quire) -> None:
    """Learn who the person is on this store (a team store's role; else this machine's user)."""
    _person[:] = [quire.person_name()]


def person_name() -> str | None:
    return _person[0] if _person else None


def upload_here(quire: Quire) -> int:
    """On a team store, walk the folders just added on this machine and upload their files (the jobs pinned
    here), as ``quire add`` does; nothing on a data directory. Returns the jobs run."""
    return quire.run_pinned_here()


def check_store(data_dir: os.PathLike[str], store: TeamStore) -> str:
    """Open the store once and close it — reached, the login accepted, the schema there, the queue answering —
    before a window leaves what it has for it; the store as shown, or the store's own refusal raised."""
    from pathlib import Path

    from knowledge.compose import open_team_quire

    quire = open_team_quire(store.url, data_dir=Path(data_dir), queue_url=store.queue, create=False)
    quire.close()
    return store.shown
