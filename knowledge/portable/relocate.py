"""Imported bases keep their source paths; this says which are not on this machine and re-points them.

``relocate_base`` rewrites the prefix of every item's ``source_path`` in one write transaction (one
UPDATE statement), so reindex reads from the new folder location. Folder-run records keep the folder
they ran on (their identity is immutable by design). An imported path is someone else's word
(``items.source_unverified``): reindex reads only the owned copy until a person relocates it here,
which vouches for the items it re-points (and only those).
"""

from __future__ import annotations

import os
from pathlib import Path

from knowledge.errors import InvalidInput
from knowledge.library import tree
from knowledge.library.bases import assert_base_writable, resolve_base
from knowledge.principal import require_person
from knowledge.runtime import Quire
from knowledge.store import machine_folders

NOT_ON_THIS_MACHINE = "not on this machine"
NOT_VERIFIED = "original not verified"


def source_presence(source_path: str | None, unverified: bool = False) -> str | None:
    """``None`` for notes; "original not verified" for an imported path nobody vouched for (never looked
    at); "present", or "not on this machine" when the original is not where it was."""
    if source_path is None:
        return None
    if unverified:
        return NOT_VERIFIED
    return "present" if os.path.exists(source_path) else NOT_ON_THIS_MACHINE


def relocate_base(quire: Quire, base_ref: str | int, old_prefix: str, new_prefix: str) -> int:
    """Point items whose source lies under ``old_prefix`` at the same place under ``new_prefix``."""
    require_person("relocate a knowledge base")
    old = _clean(old_prefix)
    new = _clean(new_prefix)
    if old == new:
        raise InvalidInput("the old and new locations are the same")
    machine_folders.record_for(quire.db, quire.data_dir, [new])  # a person here vouches for the new location
    with quire.db.write() as conn:
        base = resolve_base(conn, base_ref)
        assert_base_writable(base)
        return tree.relocate_sources(conn, base.id, old, new, os.sep)


def _clean(prefix: str) -> str:
    if not prefix.strip():
        raise InvalidInput("a location is needed")
    path = str(Path(prefix).expanduser())
    if not os.path.isabs(path):
        raise InvalidInput(f"{prefix!r} is not an absolute path")
    return path.rstrip(os.sep) or os.sep
