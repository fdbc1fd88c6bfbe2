"""A split plan: the runs, each within the cap, that together take a folder too large for one run.

The rule, applied from the chosen folder down:

* A folder whose own walk fits the cap (walked exactly as a run over it would walk it: the walk's rules, the
  cap setting, the data directory hidden) is **one run over that folder**.
* A folder over the cap is **split**: each of its sub-folders is planned by this same rule (so a sub-folder
  that is itself over the cap is split in turn), and its own entries — the files, links and excluded
  folders directly in it — form **one run of its own files**, a run over that folder whose manifest is just
  those files. When they are more than the cap, they are taken in chunks of at most ``cap`` entries, in name
  order. So a single folder with more files directly in it than the cap (and no sub-folders) is planned as
  chunks rather than refused: the cap bounds how much one run takes (and one revert undoes), not the shape of
  the folder, and refusing would leave the person no way in but raising the cap.
* A sub-folder, or a chunk of own entries, with no file to read in it is not planned: a run of nothing.
* A split never plans more than :data:`MAX_SPLIT_RUNS` runs (refused with the count: split a sub-folder
  first), and with a cap of 0 no run can take a file, so nothing is planned.

Nothing is counted twice and nothing is left out: every entry of the tree lies below exactly one planned
folder (the deepest one not split) or among exactly one split folder's own entries. Planning only walks; a
file is read (and judged eligible) when the runs start, by :mod:`knowledge.folder_runs.split_start`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knowledge import preferences
from knowledge.folder_runs.judging import descendant_cap, visible_folder
from knowledge.folder_runs.rules import FolderTooLarge
from knowledge.ingest.walk import CapExceeded, Entry, walk

if TYPE_CHECKING:
    from knowledge.runtime import Quire

MAX_SPLIT_RUNS = 100


@dataclass(frozen=True)
class PlannedRun:
    """One run of a plan: over ``folder`` whole, or (``own`` set) over just the files directly in it."""

    folder: str  # absolute
    relative: str  # below the planned folder ("." for the folder itself)
    walked: int  # files and folders the run takes (what the cap counts)
    files: int  # files among them (each judged eligible or not when the run starts)
    own: tuple[str, ...] | None = None  # the names of a split folder's own entries this run takes
    chunk: tuple[int, int] | None = None  # (k, n): the k-th of n chunks of a folder's own entries

    @property
    def label(self) -> str:
        if self.own is None:
            return self.relative
        chunk = "" if self.chunk is None else f", part {self.chunk[0]} of {self.chunk[1]}"
        return f"{self.relative} (its own files{chunk})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "relative": self.relative,
            "label": self.label,
            "walked": self.walked,
            "files": self.files,
            "own_files_only": self.own is not None,
        }


@dataclass(frozen=True)
class SplitPlan:
    folder: str
    cap: int
    over_cap: bool  # False: the folder fits, and the plan is the one run over it
    runs: list[PlannedRun]

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "cap": self.cap,
            "over_cap": self.over_cap,
            "run_count": len(self.runs),
            "runs": [r.as_dict() for r in self.runs],
        }


@dataclass(frozen=True)
class _Walking:
    root: Path
    cap: int
    hidden: list[Path]
    ignore: list[str]


def plan_split(quire: Quire, folder: str | os.PathLike[str]) -> SplitPlan:
    """The runs that would take ``folder`` within the cap (see the module docstring); nothing is written."""
    root = visible_folder(quire, folder)
    with quire.db.read() as conn:
        cap, ignore = descendant_cap(conn), preferences.ignore_patterns(conn)
    walking = _Walking(root, cap, [quire.data_dir], list(ignore))
    runs: list[PlannedRun] = []
    whole = _plan(walking, root, runs)
    return SplitPlan(str(root), cap, over_cap=not whole, runs=runs)


def own_entries(folder: Path, hidden: list[Path], ignore: list[str]) -> list[Entry]:
    """A folder's own entries by the walk's rules (its sub-folders reported, not entered)."""
    return walk(folder, hidden=hidden, ignore=ignore, shallow=True).entries


def _plan(walking: _Walking, folder: Path, runs: list[PlannedRun]) -> bool:
    """Plan ``folder`` into ``runs``; True when it fits as one run."""
    try:
        found = walk(folder, cap=walking.cap, hidden=walking.hidden, ignore=walking.ignore)
    except CapExceeded:
        _plan_split_folder(walking, folder, runs)
        return False
    files = _readable_files(found.entries)
    if files:
        _add(walking, runs, PlannedRun(str(folder), _relative(walking, folder), found.walked, files))
    return True


def _plan_split_folder(walking: _Walking, folder: Path, runs: list[PlannedRun]) -> None:
    if walking.cap < 1:
        raise FolderTooLarge("with a cap of 0 files and folders no run can take a file, so nothing can be split")
    entries = own_entries(folder, walking.hidden, walking.ignore)
    own = [e for e in entries if not (e.kind == "dir" and e.excluded is None)]
    chunks = [own[i : i + walking.cap] for i in range(0, len(own), walking.cap)]
    chunks = [c for c in chunks if _readable_files(c)]
    for k, chunk in enumerate(chunks, start=1):
        numbered = (k, len(chunks)) if len(chunks) > 1 else None
        names = tuple(e.path.name for e in chunk)
        where = _relative(walking, folder)
        _add(walking, runs, PlannedRun(str(folder), where, len(chunk), _readable_files(chunk), names, numbered))
    for entry in entries:
        if entry.kind == "dir" and entry.excluded is None:
            _plan(walking, entry.path, runs)


def _add(walking: _Walking, runs: list[PlannedRun], planned: PlannedRun) -> None:
    if len(runs) >= MAX_SPLIT_RUNS:
        raise FolderTooLarge(
            f"{walking.root} would take more than {MAX_SPLIT_RUNS} runs of at most {walking.cap} files and "
            "folders; start runs over its sub-folders first"
        )
    runs.append(planned)


def _readable_files(entries: list[Entry]) -> int:
    return sum(1 for e in entries if e.kind == "file" and e.excluded is None)


def _relative(walking: _Walking, folder: Path) -> str:
    return folder.relative_to(walking.root).as_posix() if folder != walking.root else "."
