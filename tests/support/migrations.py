"""A database migrated only part of the way: the state an older Quire left, for testing one migration."""

from __future__ import annotations

from knowledge.store import migrations as mig
from knowledge.store.database import Database


def migrate_before(db: Database, name: str) -> None:
    """Apply every migration that comes before ``name`` (and not ``name`` itself)."""
    saved = list(mig.MIGRATIONS)
    try:
        del mig.MIGRATIONS[[m.name for m in saved].index(name) :]
        mig.migrate(db)
    finally:
        mig.MIGRATIONS[:] = saved
