"""Judging a run's destination and folder, in the seed's order, and the descendant-cap setting."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from knowledge.errors import Conflict, InvalidInput, NotFound
from knowledge.folder_runs.rules import CAP_SETTING, DEFAULT_CAP, FOLDER_NOT_FOUND
from knowledge.ingest import walk as walking
from knowledge.library.bases import (
    Base,
    assert_base_can_run_runtime_operation,
    assert_base_writable,
    assert_endpoint_confirmed,
    resolve_base,
)
from knowledge.principal import require_person
from knowledge.store import settings

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


# -- settings ----------------------------------------------------------------------------------


def descendant_cap(conn: Connection) -> int:
    """The most files and folders a run's folder may have (setting ``folder_runs.max_descendants``)."""
    return max(0, settings.get_int(conn, CAP_SETTING, DEFAULT_CAP))


def set_descendant_cap(quire: Quire, cap: int) -> None:
    require_person("change the folder-run cap")
    if cap < 0:
        raise InvalidInput("the cap must be zero or more")
    with quire.db.write() as conn:
        settings.put(conn, CAP_SETTING, str(int(cap)))


# -- judging the destination and the folder ----------------------------------------------------


def judge_destination(conn: Connection, base_ref: str | int) -> Base:
    """A base that is ``ok`` and not locked; anything else is a conflict (judged before the folder)."""
    try:
        base = resolve_base(conn, base_ref)
    except NotFound:
        raise Conflict(f"the destination {base_ref!r} is not a knowledge base (none has that name or id)") from None
    assert_base_can_run_runtime_operation(base)
    assert_base_writable(base, "add a folder")
    assert_endpoint_confirmed(base)
    return base


def _inside(path: Path, container: Path) -> bool:
    return path == container or container in path.parents


def visible_folder(quire: Quire, folder: str | os.PathLike[str]) -> Path:
    """The folder's resolved path, or ``NotFound`` — the same answer for every way of not seeing it."""
    try:
        real = Path(os.path.realpath(os.path.abspath(os.fspath(folder))))
        info = os.stat(real)
    except (OSError, ValueError):
        raise NotFound(FOLDER_NOT_FOUND) from None
    data_dir = Path(os.path.realpath(quire.data_dir))
    if not stat.S_ISDIR(info.st_mode) or not walking.is_readable_dir(real) or _inside(real, data_dir):
        raise NotFound(FOLDER_NOT_FOUND) from None
    return real
