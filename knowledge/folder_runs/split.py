"""Where a folder too large for one run could be split: the sub-folders a run could each take.

A preview refused for the cap answers with this (the window lists them), so a person can start several runs
instead of raising the cap. Each candidate is walked with the very rules (and cap) a run over that sub-folder
would use, so a folder listed here is one ``start_run`` accepts as it stands.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from knowledge.folder_runs.judging import descendant_cap, visible_folder
from knowledge.ingest import walk

if TYPE_CHECKING:
    from knowledge.runtime import Quire


@dataclass(frozen=True)
class FittingFolder:
    path: str  # absolute
    relative: str  # below the folder that was too large
    walked: int  # files and folders a run over it would walk


@dataclass(frozen=True)
class Split:
    """Where a too-large folder could be split: sub-folders that fit, and how far the search went."""

    folder: str
    cap: int
    fitting: list[FittingFolder]
    complete: bool  # False when ``max_walks`` stopped the search before every branch was judged


def fitting_subfolders(quire: Quire, folder: str | os.PathLike[str], *, max_walks: int = 64) -> Split:
    """Sub-folders of ``folder`` that a run could each take, breadth first, descending into those too large.

    Each candidate is walked as a run over it would walk it (``knowledge.ingest.walk`` with the cap setting and
    the data directory hidden), stopping at ``cap + 1``: bounded by ``max_walks`` walks of ``cap + 1``.
    """
    root = visible_folder(quire, folder)
    with quire.db.read() as conn:
        cap = descendant_cap(conn)
    pending: deque[Path] = deque([root])
    fitting: list[FittingFolder] = []
    walks = 0
    while pending and walks < max_walks:
        for child in _subfolders(pending.popleft(), quire.data_dir):
            if walks >= max_walks:
                break
            walks += 1
            try:
                found = walk.walk(child, cap=cap, hidden=[quire.data_dir])
            except walk.CapExceeded:
                pending.append(child)
                continue
            fitting.append(FittingFolder(str(child), child.relative_to(root).as_posix(), found.walked))
    return Split(str(root), cap, fitting, complete=not pending)


def _subfolders(directory: Path, data_dir: Path) -> list[Path]:
    """Real (not linked), readable sub-folders a run could be started on, by name."""
    hidden = Path(os.path.realpath(data_dir))
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        path = Path(entry.path)
        if entry.name in walk.SKIPPED_DIRS or not entry.is_dir(follow_symlinks=False):
            continue
        real = Path(os.path.realpath(path))
        if real == hidden or hidden in real.parents or not walk.is_readable_dir(path):
            continue
        found.append(path)
    return found
