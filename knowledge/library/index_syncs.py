"""When a base's derived files (its vector file and keyword index) catch up with a commit: at once, or gathered.

At once, by default: a commit that writes or clears material queues its base's syncs as after-commit hooks
(:func:`knowledge.library.index.sync_file_after_commit`), which run on the committing thread once it committed.

Gathered, inside :func:`gathered`: a job committing many small transactions on one thread (a folder run settles
one source per transaction) would pay each sync's fixed cost per commit, and a keyword index append is a tantivy
commit (its files written and fsynced, merges awaited, the reader reloaded) of 120-170 ms whatever it adds,
measured: two thirds of a 200-document folder run's time. There the hooks only add their base (and the chunk ids
a clear carried) to the gathering, which runs them once ``SYNC_EVERY`` seconds have passed since it last did
and once more when the block ends, however it ends.

What the derived files promise does not move: the database is the truth and both files are stamped; a search
that finds one behind its snapshot syncs it (or answers around it) itself, so a gathered sync only moves who
pays; a crash before a gathered sync loses the deletes it carried, as a crash before an immediate one does —
those documents stay in the keyword index until a rebuild, and search's join to live rows never returns them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from knowledge.store.database import Database

log = logging.getLogger(__name__)

SYNC_EVERY = 2.0  # seconds between a gathering's syncs (and once at its end)
_LOCAL = threading.local()


class Sync(Protocol):
    """A base's sync as an after-commit hook queues it."""

    base_id: int

    def run(self, db: Database) -> None: ...

    def absorb(self, later: Sync) -> None:
        """Take on what a later commit's sync of the same kind and base carries."""


@dataclass
class _Gathering:
    db: Database
    every: float
    last: float = field(default_factory=time.monotonic)
    pending: dict[tuple[type, int], Sync] = field(default_factory=dict)

    def add(self, sync: Sync) -> None:
        held = self.pending.get((type(sync), sync.base_id))
        if held is None:
            self.pending[(type(sync), sync.base_id)] = sync
        else:
            held.absorb(sync)
        if time.monotonic() - self.last >= self.every:
            self.flush()

    def flush(self) -> None:
        syncs = list(self.pending.values())  # in the order first queued: a base's vector file, then its keywords
        self.pending.clear()
        self.last = time.monotonic()
        for sync in syncs:
            try:
                sync.run(self.db)
            except Exception:  # as an after-commit hook's failure: the next search or writer syncs it
                log.exception("a gathered sync of base %s failed; the next search or commit syncs it", sync.base_id)


def gathered_or_run(db: Database, sync: Sync) -> None:
    """The hooks' body: gather ``sync`` if this thread runs inside :func:`gathered` for ``db``, else run it."""
    gathering: _Gathering | None = getattr(_LOCAL, "gathering", None)
    if gathering is not None and gathering.db.path == db.path:
        gathering.add(sync)
    else:
        sync.run(db)


@contextlib.contextmanager
def gathered(db: Database, every: float = SYNC_EVERY) -> Iterator[None]:
    """Inside: this thread's commits' syncs of derived files are gathered and run every ``every`` seconds at
    most, and at the end of the block (nested blocks join the outer one)."""
    if getattr(_LOCAL, "gathering", None) is not None:
        yield
        return
    gathering = _Gathering(db, every)
    _LOCAL.gathering = gathering
    try:
        yield
    finally:
        _LOCAL.gathering = None
        gathering.flush()
